//go:build linux

package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	headerLen = 16      // payload length u32, CRC-32C u32, base offset u64
	maxFrame  = 4 << 20 // largest batch
	bufLen    = 8 << 20 // one read(2) fills at most this: a group
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// replicaResult is what the leader and each follower print.
type replicaResult struct {
	Bytes      int64   `json:"bytes"` // log bytes written (headers included)
	Groups     int64   `json:"groups"`
	Frames     int64   `json:"frames"`
	CPU        float64 `json:"cpu_s"`
	Seconds    float64 `json:"seconds"`
	FsyncMsAvg float64 `json:"fsync_ms_avg,omitempty"`
}

// producerResult is what the producer prints.
type producerResult struct {
	Batches  int64   `json:"batches"` // sent and acknowledged
	Seconds  float64 `json:"seconds"` // first send to last ack
	P50AckMs float64 `json:"p50_ack_ms"`
	P99AckMs float64 `json:"p99_ack_ms"`
	CPU      float64 `json:"cpu_s"`
}

// cpuSeconds is this process's user+system CPU so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// exitAfter ends a role that outlives its deadline (a stuck peer).
func exitAfter(d time.Duration, role string) {
	if d > 0 {
		time.AfterFunc(d, func() {
			fmt.Fprintf(os.Stderr, "strand-limit %s: deadline %v passed\n", role, d)
			os.Exit(3)
		})
	}
}

func emit(out io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, string(b))
	return err
}

// completeFrames returns the length of the complete frames at the start of
// b and their count; an oversized or empty frame is an error.
func completeFrames(b []byte) (end int, frames int, err error) {
	for end+headerLen <= len(b) {
		l := int(binary.LittleEndian.Uint32(b[end:]))
		if l == 0 || l > maxFrame {
			return 0, 0, fmt.Errorf("frame of %d bytes at %d", l, end)
		}
		if end+headerLen+l > len(b) {
			break
		}
		end += headerLen + l
		frames++
	}
	return end, frames, nil
}

// checkFrames verifies the CRC of every frame in b (complete frames only)
// and that base offsets advance by the record count; it returns the next
// expected offset.
func checkFrames(b []byte, next uint64, record int) (uint64, error) {
	for pos := 0; pos < len(b); {
		l := int(binary.LittleEndian.Uint32(b[pos:]))
		if pos+headerLen+l > len(b) {
			return next, fmt.Errorf("torn frame at %d", pos)
		}
		if got, want := crc32.Checksum(b[pos+headerLen:pos+headerLen+l], castagnoli), binary.LittleEndian.Uint32(b[pos+4:]); got != want {
			return next, fmt.Errorf("CRC %08x, header says %08x, frame at offset %d", got, want, next)
		}
		if off := binary.LittleEndian.Uint64(b[pos+8:]); off != next {
			return next, fmt.Errorf("base offset %d, want %d", off, next)
		}
		next += uint64(l / record)
		pos += headerLen + l
	}
	return next, nil
}

// segLog appends to rolling segment files.
type segLog struct {
	dir      string
	segSize  int64
	retain   int
	fsync    bool
	f        *os.File
	fd       int
	cur, pos int64
	segs     []string
	fsyncs   int64
	fsyncDur time.Duration
}

func openLog(dir string, segSize int64, retain int, fsync bool) (*segLog, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &segLog{dir: dir, segSize: segSize, retain: retain, fsync: fsync}, nil
}

func (l *segLog) roll() error {
	if l.f != nil {
		if err := l.f.Close(); err != nil {
			return err
		}
	}
	name := filepath.Join(l.dir, fmt.Sprintf("%020d.log", l.pos))
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	l.f, l.fd, l.cur = f, int(f.Fd()), 0
	l.segs = append(l.segs, name)
	if l.retain > 0 && len(l.segs) > l.retain {
		if err := os.Remove(l.segs[0]); err != nil {
			return err
		}
		l.segs = l.segs[1:]
	}
	return nil
}

// append writes b with write(2) and, with fsync, fdatasyncs it.
func (l *segLog) append(b []byte) error {
	if l.f == nil || (l.cur > 0 && l.cur+int64(len(b)) > l.segSize) {
		if err := l.roll(); err != nil {
			return err
		}
	}
	for w := b; len(w) > 0; {
		n, err := syscall.Write(l.fd, w)
		if err != nil {
			if err == syscall.EINTR {
				continue
			}
			return err
		}
		w = w[n:]
	}
	l.cur += int64(len(b))
	l.pos += int64(len(b))
	if l.fsync {
		t := time.Now()
		if err := syscall.Fdatasync(l.fd); err != nil {
			return err
		}
		l.fsyncDur += time.Since(t)
		l.fsyncs++
	}
	return nil
}

func (l *segLog) close() error {
	if l.f == nil {
		return nil
	}
	return l.f.Close()
}

func (l *segLog) fsyncMsAvg() float64 {
	if l.fsyncs == 0 {
		return 0
	}
	return float64(l.fsyncDur) / float64(l.fsyncs) / float64(time.Millisecond)
}

type replicaFlags struct {
	dir, listen     string
	segment, retain int
	record          int
	fsync           bool
	deadline        time.Duration
	followers       string
	fs              *flag.FlagSet
	segLog          *segLog
	cpu0            float64
	t0              time.Time
	groups, nframes int64
}

func parseReplica(role string, args []string) (*replicaFlags, error) {
	r := &replicaFlags{fs: flag.NewFlagSet(role, flag.ContinueOnError)}
	r.fs.StringVar(&r.dir, "dir", "", "log directory")
	r.fs.StringVar(&r.listen, "listen", "127.0.0.1:0", "listen address")
	r.fs.IntVar(&r.segment, "segment", 256<<20, "segment bytes")
	r.fs.IntVar(&r.retain, "retain", 2, "segments kept")
	r.fs.IntVar(&r.record, "record", 1024, "record bytes")
	r.fs.BoolVar(&r.fsync, "fsync", false, "fdatasync each group")
	r.fs.DurationVar(&r.deadline, "deadline", 0, "exit after this long")
	if role == "leader" {
		r.fs.StringVar(&r.followers, "followers", "", "follower addresses, comma-separated")
	}
	if err := r.fs.Parse(args); err != nil {
		return nil, err
	}
	if r.dir == "" {
		return nil, errors.New("-dir is required")
	}
	exitAfter(r.deadline, role)
	var err error
	r.segLog, err = openLog(r.dir, int64(r.segment), r.retain, r.fsync)
	return r, err
}

func (r *replicaFlags) result() replicaResult {
	return replicaResult{Bytes: r.segLog.pos, Groups: r.groups, Frames: r.nframes, CPU: cpuSeconds() - r.cpu0,
		Seconds: time.Since(r.t0).Seconds(), FsyncMsAvg: r.segLog.fsyncMsAvg()}
}

func listen(addr string, out io.Writer) (net.Conn, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	if _, err := fmt.Fprintf(out, "LISTEN %s\n", ln.Addr()); err != nil {
		return nil, err
	}
	return ln.Accept()
}

// runFollower: accept the leader, append each group, ack the log end.
func runFollower(args []string, out io.Writer) error {
	r, err := parseReplica("follower", args)
	if err != nil {
		return err
	}
	c, err := listen(r.listen, out)
	if err != nil {
		return err
	}
	defer c.Close()
	r.cpu0, r.t0 = cpuSeconds(), time.Now()
	buf := make([]byte, bufLen)
	ack := make([]byte, 8)
	n := 0
	var next uint64
	for {
		m, rerr := c.Read(buf[n:])
		n += m
		if m > 0 {
			end, frames, err := completeFrames(buf[:n])
			if err != nil {
				return err
			}
			if end > 0 {
				if next, err = checkFrames(buf[:end], next, r.record); err != nil {
					return err
				}
				if err := r.segLog.append(buf[:end]); err != nil {
					return err
				}
				r.groups++
				r.nframes += int64(frames)
				binary.LittleEndian.PutUint64(ack, uint64(r.segLog.pos))
				if _, err := c.Write(ack); err != nil {
					return err
				}
				n = copy(buf, buf[end:n])
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	if n != 0 {
		return fmt.Errorf("%d bytes of a torn frame at the end", n)
	}
	res := r.result()
	if err := r.segLog.close(); err != nil {
		return err
	}
	return emit(out, res)
}

// runLeader: connect to the followers, accept the producer, stamp and
// forward each group, append it, ack the producer once all replicas have it.
func runLeader(args []string, out io.Writer) error {
	r, err := parseReplica("leader", args)
	if err != nil {
		return err
	}
	var fconns []*net.TCPConn
	for _, a := range strings.Split(r.followers, ",") {
		if a == "" {
			continue
		}
		c, err := net.Dial("tcp", a)
		if err != nil {
			return err
		}
		defer c.Close()
		fconns = append(fconns, c.(*net.TCPConn))
	}
	pc, err := listen(r.listen, out)
	if err != nil {
		return err
	}
	defer pc.Close()
	r.cpu0, r.t0 = cpuSeconds(), time.Now()

	var own atomic.Int64
	fends := make([]atomic.Int64, len(fconns))
	notify := make(chan struct{}, 1)
	poke := func() {
		select {
		case notify <- struct{}{}:
		default:
		}
	}
	errc := make(chan error, len(fconns)+1)
	var readers sync.WaitGroup
	for i, c := range fconns {
		readers.Add(1)
		go func() { // one per follower: ends at the follower's EOF
			defer readers.Done()
			b := make([]byte, 8)
			for {
				if _, err := io.ReadFull(c, b); err != nil {
					if err != io.EOF {
						errc <- fmt.Errorf("follower %d: %w", i+1, err)
					}
					return
				}
				fends[i].Store(int64(binary.LittleEndian.Uint64(b)))
				poke()
			}
		}()
	}
	ackerDone := make(chan struct{})
	go func() { // the acker: the only writer to the producer; ends when notify closes
		defer close(ackerDone)
		b := make([]byte, 8)
		var acked int64
		for range notify {
			m := own.Load()
			for i := range fends {
				m = min(m, fends[i].Load())
			}
			if m > acked {
				acked = m
				binary.LittleEndian.PutUint64(b, uint64(m))
				if _, err := pc.Write(b); err != nil {
					errc <- fmt.Errorf("ack: %w", err)
					return
				}
			}
		}
	}()

	buf := make([]byte, bufLen)
	n := 0
	var offset uint64
	var loopErr error
	for {
		m, rerr := pc.Read(buf[n:])
		n += m
		if m > 0 {
			end, frames, err := completeFrames(buf[:n])
			if err != nil {
				loopErr = err
				break
			}
			if end > 0 {
				g := buf[:end]
				for pos := 0; pos < end; {
					l := int(binary.LittleEndian.Uint32(g[pos:]))
					binary.LittleEndian.PutUint32(g[pos+4:], crc32.Checksum(g[pos+headerLen:pos+headerLen+l], castagnoli))
					binary.LittleEndian.PutUint64(g[pos+8:], offset)
					offset += uint64(l / r.record)
					pos += headerLen + l
				}
				for _, c := range fconns { // forward first, so the followers work while this one writes
					if _, err := c.Write(g); err != nil {
						loopErr = err
						break
					}
				}
				if loopErr != nil {
					break
				}
				if err := r.segLog.append(g); err != nil {
					loopErr = err
					break
				}
				own.Store(r.segLog.pos)
				poke()
				r.groups++
				r.nframes += int64(frames)
				n = copy(buf, buf[end:n])
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			loopErr = rerr
			break
		}
	}
	// The producer closes only after its last ack, so every ack has gone.
	for _, c := range fconns {
		_ = c.CloseWrite()
	}
	readers.Wait()
	close(notify)
	<-ackerDone
	select {
	case err := <-errc:
		if loopErr == nil {
			loopErr = err
		}
	default:
	}
	if loopErr == nil && n != 0 {
		loopErr = fmt.Errorf("%d bytes of a torn frame at the end", n)
	}
	if loopErr != nil {
		return loopErr
	}
	res := r.result()
	if err := r.segLog.close(); err != nil {
		return err
	}
	return emit(out, res)
}

// runProducer: send batches with at most -window unacknowledged, for
// -duration or -batches, then wait for every ack.
func runProducer(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("producer", flag.ContinueOnError)
	leader := fs.String("leader", "", "leader address")
	batch := fs.Int("batch", 64<<10, "batch payload bytes")
	fs.Int("record", 1024, "record bytes (accepted for symmetry; the producer sends whole batches)")
	window := fs.Int("window", 5, "batches unacknowledged at most")
	duration := fs.Duration("duration", 10*time.Second, "send for this long")
	batches := fs.Int64("batches", 0, "stop after this many batches (0: no limit)")
	deadline := fs.Duration("deadline", 0, "exit after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	exitAfter(*deadline, "producer")
	// Records of pseudo-random bytes, built once; the header's CRC and
	// offset are the leader's to stamp.
	frame := make([]byte, headerLen+*batch)
	binary.LittleEndian.PutUint32(frame, uint32(*batch))
	rng := rand.New(rand.NewPCG(1, 2))
	for i := headerLen; i+8 <= len(frame); i += 8 {
		binary.LittleEndian.PutUint64(frame[i:], rng.Uint64())
	}
	c, err := net.Dial("tcp", *leader)
	if err != nil {
		return err
	}
	conn := c.(*net.TCPConn)
	defer conn.Close()
	cpu0 := cpuSeconds()

	frameLen := int64(len(frame))
	sem := make(chan struct{}, *window)
	sent := make(chan time.Time, *window+1) // send times, in order
	var (
		mu      sync.Mutex
		lats    []time.Duration
		lastAck time.Time
	)
	ackErr := make(chan error, 1)
	go func() { // the ack reader: ends at the leader's EOF
		b := make([]byte, 8)
		var acked int64
		for {
			if _, err := io.ReadFull(conn, b); err != nil {
				if err == io.EOF {
					err = nil
				}
				ackErr <- err
				return
			}
			to := int64(binary.LittleEndian.Uint64(b))
			now := time.Now()
			for acked+frameLen <= to {
				t := <-sent
				mu.Lock()
				lats = append(lats, now.Sub(t))
				lastAck = now
				mu.Unlock()
				acked += frameLen
				<-sem
			}
		}
	}()
	start := time.Now()
	stop := start.Add(*duration)
	var n int64
	for (*batches == 0 || n < *batches) && time.Now().Before(stop) {
		select {
		case sem <- struct{}{}:
		case err := <-ackErr:
			return fmt.Errorf("acks ended early: %v", err)
		}
		sent <- time.Now()
		if _, err := conn.Write(frame); err != nil {
			return err
		}
		n++
	}
	// Wait for the last acks: the window fills once they are all in.
	drain := time.NewTimer(60 * time.Second)
	defer drain.Stop()
	for i := 0; i < *window; i++ {
		select {
		case sem <- struct{}{}:
		case err := <-ackErr:
			return fmt.Errorf("acks ended early: %v", err)
		case <-drain.C:
			return errors.New("the last acks did not arrive within 60 s")
		}
	}
	if err := conn.CloseWrite(); err != nil {
		return err
	}
	if err := <-ackErr; err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	res := producerResult{Batches: n, Seconds: lastAck.Sub(start).Seconds(), CPU: cpuSeconds() - cpu0,
		P50AckMs: quantileMs(lats, 0.50), P99AckMs: quantileMs(lats, 0.99)}
	if int64(len(lats)) != n {
		return fmt.Errorf("%d acks for %d batches", len(lats), n)
	}
	return emit(out, res)
}
