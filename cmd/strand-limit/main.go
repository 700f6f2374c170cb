//go:build linux

// Command strand-limit is the project's bare replication baseline: the
// least a replicated log must do to take records from one producer and hold
// them on three replicas, with nothing else (no protocol, no index, no
// idempotence, no metadata). `make bench-compare` runs it beside Strand at
// the batch sizes Strand sends and prints Strand as a fraction of it.
//
// A producer, a leader and followers are separate OS processes (this binary
// runs itself again with a role argument) on loopback TCP:
//
//	producer --frame--> leader --same bytes--> follower 1, follower 2
//	producer <--ack---- leader <--ack--------- follower 1, follower 2
//
// A frame is a 16-byte header (payload length u32, CRC-32C u32, base
// offset u64, little-endian) and a payload of one batch of records. The
// producer keeps at most -window batches unacknowledged. The leader takes
// what one read(2) returns as a group: it stamps each complete frame's
// offset and CRC, writes the group to every follower, then appends it to
// its own segment files (and, with -fsync, fdatasyncs them). Followers
// check each frame's CRC, append the group, fdatasync with -fsync, and ack
// their log end. The leader acks the producer cumulatively once its own log
// and every follower hold a batch (acks=all). Segments roll at -segment
// bytes and only the newest -retain are kept (size retention), so runs
// without fsync measure the page cache rather than disk writeback.
//
// Each process measures getrusage CPU over its timed phase. The
// orchestrator checks that every replica wrote exactly the bytes the
// producer had acknowledged and prints one JSON object.
//
// Usage: strand-limit [-batch 64k] [-duration 10s] [-window 5] [-fsync] ...
// (strand-limit -h lists the flags).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout))
}

// dispatch runs a role if the first argument names one, else the
// orchestrator.
func dispatch(args []string, out io.Writer) int {
	if len(args) > 0 {
		var err error
		switch args[0] {
		case "producer":
			err = runProducer(args[1:], out)
		case "leader":
			err = runLeader(args[1:], out)
		case "follower":
			err = runFollower(args[1:], out)
		default:
			return orchestrate(args, out)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "strand-limit %s: %v\n", args[0], err)
			return 1
		}
		return 0
	}
	return orchestrate(args, out)
}

// Summary is the orchestrator's JSON result.
type Summary struct {
	Batch        int     `json:"batch_bytes"`
	RecordSize   int     `json:"record_bytes"`
	Window       int     `json:"window"`
	Followers    int     `json:"followers"`
	Fsync        bool    `json:"fsync"`
	Batches      int64   `json:"batches"`
	PayloadBytes int64   `json:"payload_bytes"`
	Seconds      float64 `json:"seconds"`
	MBps         float64 `json:"mb_s"` // 10^6 bytes of payload per second
	RecordsPerS  float64 `json:"records_s"`
	P50AckMs     float64 `json:"p50_ack_ms"`
	P99AckMs     float64 `json:"p99_ack_ms"`
	CPUProducer  float64 `json:"cpu_producer_s"`
	CPULeader    float64 `json:"cpu_leader_s"`
	CPUFollowers float64 `json:"cpu_followers_s"`
	// BrokerCPUPerGB is leader + followers CPU seconds per 10^9 bytes of
	// payload, the figure comparable with Strand's three brokers.
	BrokerCPUPerGB   float64 `json:"broker_cpu_s_per_gb"`
	ProducerCPUPerGB float64 `json:"producer_cpu_s_per_gb"`
	FramesPerGroup   float64 `json:"leader_frames_per_group"`
	FsyncMsLeader    float64 `json:"leader_fsync_ms_avg,omitempty"`
	DataDir          string  `json:"data_dir,omitempty"` // with -keep
}

func orchestrate(args []string, out io.Writer) int {
	fs := flag.NewFlagSet("strand-limit", flag.ContinueOnError)
	batch := sizeFlag(fs, "batch", 64<<10, "batch payload bytes (k/m suffixes)")
	record := sizeFlag(fs, "record", 1024, "record bytes (a batch holds batch/record records)")
	window := fs.Int("window", 5, "batches the producer keeps unacknowledged")
	duration := fs.Duration("duration", 10*time.Second, "how long the producer sends")
	batches := fs.Int64("batches", 0, "stop after this many batches (0: only -duration)")
	followers := fs.Int("followers", 2, "followers (acks=all waits for all of them)")
	fsync := fs.Bool("fsync", false, "fdatasync every group before it counts as written")
	segment := sizeFlag(fs, "segment", 256<<20, "segment file size")
	retain := fs.Int("retain", 2, "segments kept per replica (0: all)")
	portBase := fs.Int("port-base", 0, "listen on 127.0.0.1:port-base+i (0: ports the kernel picks)")
	parent := fs.String("dir", os.TempDir(), "where the temporary data directory goes")
	keep := fs.Bool("keep", false, "keep the data directory (its path is in the JSON)")
	doSync := fs.Bool("sync", true, "sync(2) before starting, so no earlier dirty data is written back during the run")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *batch <= 0 || *record <= 0 || *batch%*record != 0 || *batch > maxFrame {
		fmt.Fprintf(os.Stderr, "strand-limit: -batch must be a positive multiple of -record, at most %d\n", maxFrame)
		return 2
	}
	if *window < 1 || *followers < 0 {
		fmt.Fprintln(os.Stderr, "strand-limit: -window ≥ 1, -followers ≥ 0")
		return 2
	}
	dir, err := os.MkdirTemp(*parent, "strand-limit-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "strand-limit:", err)
		return 1
	}
	o := &orch{dir: dir, keep: *keep}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	stopSig := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			fmt.Fprintf(os.Stderr, "strand-limit: %v, stopping\n", s)
			o.cleanup(true)
			os.Exit(130)
		case <-stopSig:
		}
	}()
	defer func() {
		signal.Stop(sigs)
		close(stopSig)
		o.cleanup(false)
	}()
	if *doSync {
		syscall.Sync()
	}
	deadline := (*duration + 90*time.Second).String()
	addr := func(i int) string {
		if *portBase == 0 {
			return "127.0.0.1:0"
		}
		return "127.0.0.1:" + strconv.Itoa(*portBase+i)
	}
	common := []string{"-segment", strconv.Itoa(*segment), "-retain", strconv.Itoa(*retain),
		"-fsync=" + strconv.FormatBool(*fsync), "-record", strconv.Itoa(*record), "-deadline", deadline}
	var fAddrs []string
	var fProcs []*child
	for i := 0; i < *followers; i++ {
		c, err := o.start(append([]string{"follower", "-dir", filepath.Join(dir, fmt.Sprintf("follower%d", i+1)), "-listen", addr(1 + i)}, common...))
		if err != nil {
			return o.fail(err)
		}
		a, err := c.listenAddr()
		if err != nil {
			return o.fail(err)
		}
		fAddrs = append(fAddrs, a)
		fProcs = append(fProcs, c)
	}
	lp, err := o.start(append([]string{"leader", "-dir", filepath.Join(dir, "leader"), "-listen", addr(0),
		"-followers", strings.Join(fAddrs, ",")}, common...))
	if err != nil {
		return o.fail(err)
	}
	la, err := lp.listenAddr()
	if err != nil {
		return o.fail(err)
	}
	pp, err := o.start([]string{"producer", "-leader", la, "-batch", strconv.Itoa(*batch), "-record", strconv.Itoa(*record),
		"-window", strconv.Itoa(*window), "-duration", duration.String(), "-batches", strconv.FormatInt(*batches, 10), "-deadline", deadline})
	if err != nil {
		return o.fail(err)
	}
	var pr producerResult
	if err := pp.result(&pr); err != nil {
		return o.fail(fmt.Errorf("producer: %w", err))
	}
	var lr replicaResult
	if err := lp.result(&lr); err != nil {
		return o.fail(fmt.Errorf("leader: %w", err))
	}
	frs := make([]replicaResult, len(fProcs))
	for i, c := range fProcs {
		if err := c.result(&frs[i]); err != nil {
			return o.fail(fmt.Errorf("follower %d: %w", i+1, err))
		}
	}
	for _, c := range o.children {
		if err := c.wait(10 * time.Second); err != nil {
			return o.fail(err)
		}
	}
	// Every replica holds exactly what the producer had acknowledged.
	want := pr.Batches * int64(*batch+headerLen)
	if lr.Bytes != want {
		return o.fail(fmt.Errorf("leader wrote %d bytes, want %d (%d acknowledged batches)", lr.Bytes, want, pr.Batches))
	}
	for i, f := range frs {
		if f.Bytes != want {
			return o.fail(fmt.Errorf("follower %d wrote %d bytes, want %d", i+1, f.Bytes, want))
		}
	}
	s := Summary{Batch: *batch, RecordSize: *record, Window: *window, Followers: *followers, Fsync: *fsync,
		Batches: pr.Batches, PayloadBytes: pr.Batches * int64(*batch), Seconds: pr.Seconds,
		P50AckMs: pr.P50AckMs, P99AckMs: pr.P99AckMs, CPUProducer: pr.CPU, CPULeader: lr.CPU, FsyncMsLeader: lr.FsyncMsAvg}
	for _, f := range frs {
		s.CPUFollowers += f.CPU
	}
	if pr.Seconds > 0 {
		s.MBps = float64(s.PayloadBytes) / 1e6 / pr.Seconds
		s.RecordsPerS = float64(s.PayloadBytes) / float64(*record) / pr.Seconds
	}
	if s.PayloadBytes > 0 {
		gb := float64(s.PayloadBytes) / 1e9
		s.BrokerCPUPerGB = (s.CPULeader + s.CPUFollowers) / gb
		s.ProducerCPUPerGB = s.CPUProducer / gb
	}
	if lr.Groups > 0 {
		s.FramesPerGroup = float64(lr.Frames) / float64(lr.Groups)
	}
	if *keep {
		s.DataDir = dir
	}
	b, _ := json.Marshal(s)
	fmt.Fprintln(out, string(b))
	return 0
}

// orch owns the children and the data directory.
type orch struct {
	mu       sync.Mutex
	dir      string
	keep     bool
	children []*child
	cleaned  bool
	once     sync.Once // a second caller waits for the first to finish
}

type child struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan error
	name  string
}

func (o *orch) start(args []string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cleaned {
		return nil, errors.New("stopping")
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, lines: make(chan string, 4), done: make(chan error, 1), name: args[0]}
	o.children = append(o.children, c)
	go func() { // owned by the child: ends when its stdout closes
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		c.done <- cmd.Wait()
	}()
	return c, nil
}

func (c *child) line(timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case l, ok := <-c.lines:
		if !ok {
			return "", fmt.Errorf("%s exited without output", c.name)
		}
		return l, nil
	case <-t.C:
		return "", fmt.Errorf("%s: no output within %v", c.name, timeout)
	}
}

func (c *child) listenAddr() (string, error) {
	l, err := c.line(30 * time.Second)
	if err != nil {
		return "", err
	}
	a, ok := strings.CutPrefix(l, "LISTEN ")
	if !ok {
		return "", fmt.Errorf("%s: unexpected %q", c.name, l)
	}
	return a, nil
}

func (c *child) result(v any) error {
	l, err := c.line(10 * time.Minute) // each child has its own, shorter, deadline
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(l), v)
}

func (c *child) wait(timeout time.Duration) error {
	for range c.lines { // drain: the reader closes lines before it waits
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-c.done:
		c.done <- err // for cleanup
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		return nil
	case <-t.C:
		return fmt.Errorf("%s did not exit within %v", c.name, timeout)
	}
}

func (o *orch) fail(err error) int {
	fmt.Fprintln(os.Stderr, "strand-limit:", err)
	return 1
}

// cleanup kills exactly the children it started and removes the data
// directory (unless -keep and not interrupted).
func (o *orch) cleanup(interrupted bool) {
	o.once.Do(func() { o.stopAll(interrupted) })
}

func (o *orch) stopAll(interrupted bool) {
	o.mu.Lock()
	o.cleaned = true
	children := o.children
	o.mu.Unlock()
	for _, c := range children {
		select {
		case err := <-c.done:
			c.done <- err
			continue
		default:
		}
		_ = c.cmd.Process.Kill()
		go func() { // drain so the reader can reach Wait
			for range c.lines {
			}
		}()
		select {
		case err := <-c.done:
			c.done <- err
		case <-time.After(5 * time.Second):
		}
	}
	if !o.keep || interrupted {
		_ = os.RemoveAll(o.dir)
	}
}

// sizeFlag is an int flag that takes k and m suffixes (powers of 1024).
func sizeFlag(fs *flag.FlagSet, name string, def int, usage string) *int {
	v := def
	fs.Func(name, fmt.Sprintf("%s (default %d)", usage, def), func(s string) error {
		n, err := parseSize(s)
		v = n
		return err
	})
	return &v
}

func parseSize(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(strings.ToLower(s), "k"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(strings.ToLower(s), "m"):
		mult, s = 1<<20, s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

// quantile of sorted durations, in ms.
func quantileMs(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	if !sort.SliceIsSorted(d, func(i, j int) bool { return d[i] < d[j] }) {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	}
	i := int(q*float64(len(d))+0.999999) - 1
	i = max(0, min(i, len(d)-1))
	return float64(d[i]) / float64(time.Millisecond)
}
