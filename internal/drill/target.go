// Package drill injects faults into a running cluster for `strand verify`:
// kill -9 a node, pause it past its session timeout, cut it off the
// network, restart everything. A Target knows how to do each to one kind of
// deployment: the docker compose cluster (through the Docker CLI) or the
// local process cluster of `make run` (by PID).
package drill

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

// Target acts on the nodes of one deployment.
type Target interface {
	Name() string
	Nodes() []int32
	Kill(ctx context.Context, id int32) error
	Start(ctx context.Context, id int32) error
	Pause(ctx context.Context, id int32) error
	Resume(ctx context.Context, id int32) error
	Isolate(ctx context.Context, id int32) error
	Heal(ctx context.Context, id int32) error
}

// Compose drives the docker compose cluster of deploy/docker-compose.yml:
// containers strand-node1..N on the network strand-net.
type Compose struct {
	N         int
	Network   string
	Container func(id int32) string
}

// NewCompose returns the target for the standard compose file.
func NewCompose() *Compose {
	return &Compose{N: 3, Network: "strand-net", Container: func(id int32) string { return fmt.Sprintf("strand-node%d", id) }}
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

func (p *Process) Pause(ctx context.Context, id int32) error  { return p.signal(id, syscall.SIGSTOP) }
func (p *Process) Resume(ctx context.Context, id int32) error { return p.signal(id, syscall.SIGCONT) }

// Isolate is not possible for processes sharing 127.0.0.1.
func (p *Process) Isolate(ctx context.Context, id int32) error { return ErrUnsupported }
func (p *Process) Heal(ctx context.Context, id int32) error    { return ErrUnsupported }
