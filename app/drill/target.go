// Package drill injects faults into a running cluster for `strand verify`:
// kill -9 a node, pause it past its session timeout, cut it off the
// network, restart everything. A Target knows how to do each to one kind of
// deployment: the docker compose cluster (through the Docker CLI) or the
// local process cluster of `make run` (by PID).
package drill

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrUnsupported: the target cannot do this fault.
var ErrUnsupported = errors.New("not supported by this target")

// Target acts on the nodes of one deployment. A target that cannot do a
// fault returns ErrUnsupported (the drill is then reported as skipped).
type Target interface {
	Name() string
	Nodes() []int32
	// Kill stops a node as kill -9 does; Start starts it again.
	Kill(ctx context.Context, id int32) error
	Start(ctx context.Context, id int32) error
	// Stop stops a node gracefully (SIGTERM, docker stop): its controlled
	// shutdown moves its leaderships at once. It returns once the node is
	// down; Start starts it again.
	Stop(ctx context.Context, id int32) error
	Pause(ctx context.Context, id int32) error
	Resume(ctx context.Context, id int32) error
	Isolate(ctx context.Context, id int32) error
	Heal(ctx context.Context, id int32) error
	// HoldFollowerFetch makes node id, the leader of topic/partition, serve
	// its followers nothing of that partition appended from now on, for d
	// (it ends by itself); ReleaseFollowerFetch ends it early. Real
	// deployments need the node's testing fault endpoint
	// (STRAND_TESTING_FAULTS=1).
	HoldFollowerFetch(ctx context.Context, id int32, topic string, partition int32, d time.Duration) error
	ReleaseFollowerFetch(ctx context.Context, id int32, topic string, partition int32) error
}

// Compose drives the docker compose cluster of deploy/docker-compose.yml:
// containers strand-node1..N on the network strand-net, metrics listeners
// published on the host.
type Compose struct {
	N         int
	Network   string
	Container func(id int32) string
	// Metrics is the host address of a node's metrics listener (the
	// testing fault endpoint is there).
	Metrics func(id int32) string
	// HTTPTLS, when set, is the TLS configuration for the metrics
	// listeners (HTTP:SSL in listener.security.protocol.map): the fault
	// endpoint is then called over https with it.
	HTTPTLS *tls.Config
}

// NewCompose returns the target for the standard compose file.
func NewCompose() *Compose {
	return &Compose{N: 3, Network: "strand-net", Container: func(id int32) string { return fmt.Sprintf("strand-node%d", id) },
		Metrics: func(id int32) string {
			// The compose file's STRAND_NODE<N>_METRICS_PORT, default N9095.
			if p := os.Getenv(fmt.Sprintf("STRAND_NODE%d_METRICS_PORT", id)); p != "" {
				return "127.0.0.1:" + p
			}
			return fmt.Sprintf("127.0.0.1:%d9095", id)
		}}
}

// Detect reports whether the compose cluster's first container runs.
func (c *Compose) Detect(ctx context.Context) bool {
	out, err := exec.CommandContext(ctx, "docker", "ps", "--format", "{{.Names}}").Output()
	return err == nil && bytes.Contains(out, []byte(c.Container(1)))
}

func (c *Compose) Name() string { return "docker compose" }

func (c *Compose) Nodes() []int32 {
	var out []int32
	for i := 1; i <= c.N; i++ {
		out = append(out, int32(i))
	}
	return out
}

func docker(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (c *Compose) Kill(ctx context.Context, id int32) error {
	return docker(ctx, "kill", "-s", "SIGKILL", c.Container(id))
}
func (c *Compose) Start(ctx context.Context, id int32) error {
	return docker(ctx, "start", c.Container(id))
}

// Stop is docker stop: SIGTERM, the server's controlled shutdown, then
// SIGKILL after the grace period.
func (c *Compose) Stop(ctx context.Context, id int32) error {
	return docker(ctx, "stop", "-t", "20", c.Container(id))
}
func (c *Compose) HoldFollowerFetch(ctx context.Context, id int32, topic string, partition int32, d time.Duration) error {
	return holdFollowerFetch(ctx, c.HTTPTLS, c.Metrics(id), topic, partition, d)
}
func (c *Compose) ReleaseFollowerFetch(ctx context.Context, id int32, topic string, partition int32) error {
	return releaseFollowerFetch(ctx, c.HTTPTLS, c.Metrics(id), topic, partition)
}
func (c *Compose) Pause(ctx context.Context, id int32) error {
	return docker(ctx, "pause", c.Container(id))
}
func (c *Compose) Resume(ctx context.Context, id int32) error {
	return docker(ctx, "unpause", c.Container(id))
}
func (c *Compose) Isolate(ctx context.Context, id int32) error {
	return docker(ctx, "network", "disconnect", "--force", c.Network, c.Container(id))
}
func (c *Compose) Heal(ctx context.Context, id int32) error {
	return docker(ctx, "network", "connect", "--alias", fmt.Sprintf("node%d", id), c.Network, c.Container(id))
}

// Process drives the local cluster of scripts/run.sh: each node's PID is in
// <dir>/node<N>.pid and its command line in <dir>/node<N>.cmd (NUL
// separated), so a killed node can be started again the same way.
type Process struct {
	Dir string
	N   int
	// HTTPTLS: as Compose's.
	HTTPTLS *tls.Config
}

// Detect reports whether the process cluster's files exist.
func (p *Process) Detect() bool {
	_, err := os.Stat(filepath.Join(p.Dir, "node1.cmd"))
	return err == nil
}

func (p *Process) Name() string { return "process cluster " + p.Dir }

func (p *Process) Nodes() []int32 {
	var out []int32
	for i := 1; i <= p.N; i++ {
		out = append(out, int32(i))
	}
	return out
}

func (p *Process) pid(id int32) (int, error) {
	b, err := os.ReadFile(filepath.Join(p.Dir, fmt.Sprintf("node%d.pid", id)))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

func (p *Process) signal(id int32, sig syscall.Signal) error {
	pid, err := p.pid(id)
	if err != nil {
		return err
	}
	return syscall.Kill(pid, sig)
}

func (p *Process) Kill(ctx context.Context, id int32) error {
	pid, err := p.pid(id)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// Start runs the node's recorded command line again, detached, appending
// to its log.
func (p *Process) Start(ctx context.Context, id int32) error {
	b, err := os.ReadFile(filepath.Join(p.Dir, fmt.Sprintf("node%d.cmd", id)))
	if err != nil {
		return err
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	logf, err := os.OpenFile(filepath.Join(p.Dir, fmt.Sprintf("node%d.log", id)), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(p.Dir, fmt.Sprintf("node%d.pid", id)), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return err
	}
	return cmd.Process.Release()
}

// Stop sends SIGTERM (the server's controlled shutdown) and waits for the
// process to exit, killing it after 30 s.
func (p *Process) Stop(ctx context.Context, id int32) error {
	pid, err := p.pid(id)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for !exited(pid) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return fmt.Errorf("node %d (pid %d) did not stop within 30s; killed", id, pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// exited reports whether pid is gone, reaping it if it is a child of ours
// (a node this process started again), which would otherwise linger as a
// zombie that signal 0 still finds.
func exited(pid int) bool {
	var ws syscall.WaitStatus
	_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

// metrics is a node's metrics listener, from its recorded command line
// (--metrics-listen, else the --listen port + 3, as strand server does).
func (p *Process) metrics(id int32) (string, error) {
	b, err := os.ReadFile(filepath.Join(p.Dir, fmt.Sprintf("node%d.cmd", id)))
	if err != nil {
		return "", err
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	flag := func(name string) string {
		for i, a := range args {
			if a == name && i+1 < len(args) {
				return args[i+1]
			}
			if v, ok := strings.CutPrefix(a, name+"="); ok {
				return v
			}
		}
		return ""
	}
	if m := flag("--metrics-listen"); m != "" {
		return m, nil
	}
	host, port, err := net.SplitHostPort(flag("--listen"))
	if err != nil {
		return "", fmt.Errorf("node %d: no --metrics-listen or --listen in its command line", id)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, strconv.Itoa(n+3)), nil
}

func (p *Process) HoldFollowerFetch(ctx context.Context, id int32, topic string, partition int32, d time.Duration) error {
	addr, err := p.metrics(id)
	if err != nil {
		return err
	}
	return holdFollowerFetch(ctx, p.HTTPTLS, addr, topic, partition, d)
}

func (p *Process) ReleaseFollowerFetch(ctx context.Context, id int32, topic string, partition int32) error {
	addr, err := p.metrics(id)
	if err != nil {
		return err
	}
	return releaseFollowerFetch(ctx, p.HTTPTLS, addr, topic, partition)
}

func (p *Process) Pause(ctx context.Context, id int32) error  { return p.signal(id, syscall.SIGSTOP) }
func (p *Process) Resume(ctx context.Context, id int32) error { return p.signal(id, syscall.SIGCONT) }

// Isolate is not possible for processes sharing 127.0.0.1.
func (p *Process) Isolate(ctx context.Context, id int32) error { return ErrUnsupported }
func (p *Process) Heal(ctx context.Context, id int32) error    { return ErrUnsupported }

// holdFollowerFetch and releaseFollowerFetch call a node's testing fault
// endpoint (node/faults.go). A node started without
// STRAND_TESTING_FAULTS=1 does not serve it (404): ErrUnsupported.
func holdFollowerFetch(ctx context.Context, tc *tls.Config, metrics, topic string, partition int32, d time.Duration) error {
	q := url.Values{"topic": {topic}, "partition": {strconv.Itoa(int(partition))}, "duration": {d.String()}}
	return faultCall(ctx, tc, metrics, "/debug/faults/hold-follower-fetch?"+q.Encode())
}

func releaseFollowerFetch(ctx context.Context, tc *tls.Config, metrics, topic string, partition int32) error {
	q := url.Values{"topic": {topic}, "partition": {strconv.Itoa(int(partition))}}
	return faultCall(ctx, tc, metrics, "/debug/faults/release-follower-fetch?"+q.Encode())
}

// faultCall POSTs to a node's fault endpoint: over https with tc when it
// is set (the metrics listener speaks TLS), else over http.
func faultCall(ctx context.Context, tc *tls.Config, metrics, pathQuery string) error {
	u, hc := "http://"+metrics+pathQuery, http.DefaultClient
	if tc != nil {
		u = "https://" + metrics + pathQuery
		hc = &http.Client{Transport: &http.Transport{TLSClientConfig: tc.Clone()}}
		defer hc.CloseIdleConnections()
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, u, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%w: the node serves no /debug/faults/ endpoint (start it with STRAND_TESTING_FAULTS=1)", ErrUnsupported)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("POST %s: %s: %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
