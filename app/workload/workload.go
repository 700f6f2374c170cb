// Package workload is the exactly-once workload behind `strand verify`:
// transactional producers writing unique values to a source topic (some
// transactions aborted on purpose), a consume-transform-produce stage
// copying the source to a sink topic through TransactSession, a live
// read_committed reader, drills injected while it all runs, and at the end
// a read-back of every partition with both isolation levels. It records
// everything as a verify.History and lets verify.Check judge it.
package workload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strand-io/strand/app/drill"
	"github.com/strand-io/strand/app/verify"
	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Config sets up one run.
type Config struct {
	Bootstrap []string
	// Duration is how long producers keep starting transactions; drills are
	// spread over it. The run then drains the stage and reads back, so it
	// takes longer than Duration.
	Duration time.Duration
	// Producers is the number of transactional producers (default 3),
	// StageWorkers the number of consume-transform-produce workers (default
	// 2, 0 for none: set NoStage).
	Producers, StageWorkers int
	NoStage                 bool
	// Partitions per topic (default 6).
	Partitions int32
	// TxnMaxRecords bounds a producer transaction's size (default 8);
	// AbortRate is the fraction of producer transactions aborted on
	// purpose (0: none; the CLI's default is 0.2).
	TxnMaxRecords int
	AbortRate     float64
	// RunID makes topic names, values and transactional ids unique to the
	// run (default: the start time).
	RunID string
	// Drills are run in order, spread over Duration; Repeat cycles through
	// them until Duration ends (the soak).
	Drills []string
	Repeat bool
	Target drill.Target
	// DrillEnv tunes drill timing (Down, Cut, SettleTimeout); Admin, Target,
	// Topics, BusiestTxnID and Logf are filled in.
	DrillEnv drill.Env
	// Out receives progress and drill lines; ProgressEvery is the period
	// of progress lines (default 5 s).
	Out           io.Writer
	ProgressEvery time.Duration
	// ClientOpts are added to every client (for tests: a dialer, a logger).
	ClientOpts []client.Opt
	// Protocol is the front door of the data path: ProtocolGRPC (the
	// default: the SDK over gRPC) or ProtocolKafka (franz-go through the
	// Kafka listeners at KafkaBootstrap, dialled with KafkaDial when set).
	// The administration and the drills use the SDK either way.
	Protocol       string
	KafkaBootstrap []string
	KafkaDial      func(ctx context.Context, network, host string) (net.Conn, error)
	// KafkaOpts are added to every franz-go client (the TLS and SASL
	// settings of the Kafka listeners: kgo.DialTLSConfig, kgo.SASL).
	KafkaOpts []kgo.Opt
	// TransactionTimeout of the workload's producers (default 15 s), so a
	// transaction a dead client left open is aborted soon.
	TransactionTimeout time.Duration
	// EarlyAbortShare is the share of the deliberate aborts made right
	// after the records are handed to the client, before they are sent
	// (default 0.5; negative: none).
	EarlyAbortShare float64
	// ZombieFenceRate is the fraction of producer transactions whose
	// producer is fenced on purpose by a new incarnation while the
	// transaction is open (default 0.02; negative: none). Producers are
	// always fenced so when their epoch reaches the end of its range.
	ZombieFenceRate float64
	// HangGrace is how long the end of the run waits for the last
	// transactions to end before a partition whose last stable offset is
	// still below its high watermark counts as hanging (default the
	// transaction timeout + 30 s: a transaction a dead client left open
	// ends by the coordinator's timeout).
	HangGrace time.Duration
	Seed      uint64
	// TxnPause is each producer's mean pause between two transactions
	// (0: none, as fast as the cluster goes). A simulation on virtual
	// time needs it: there, work takes no time, so an unpaced producer
	// runs as many transactions as the CPU allows.
	TxnPause time.Duration
}

func (c *Config) defaults() {
	if c.Producers <= 0 {
		c.Producers = 3
	}
	if c.StageWorkers <= 0 && !c.NoStage {
		c.StageWorkers = 2
	}
	if c.NoStage {
		c.StageWorkers = 0
	}
	if c.Protocol == "" {
		c.Protocol = ProtocolGRPC
	}
	if c.Partitions <= 0 {
		c.Partitions = 6
	}
	if c.TxnMaxRecords <= 0 {
		c.TxnMaxRecords = 8
	}
	if c.AbortRate < 0 || c.AbortRate >= 1 {
		c.AbortRate = 0.2
	}
	if c.RunID == "" {
		c.RunID = time.Now().UTC().Format("20060102t150405")
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = 5 * time.Second
	}
	if c.TransactionTimeout <= 0 {
		c.TransactionTimeout = 15 * time.Second
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	switch {
	case c.EarlyAbortShare == 0:
		c.EarlyAbortShare = 0.5
	case c.EarlyAbortShare < 0:
		c.EarlyAbortShare = 0
	}
	switch {
	case c.ZombieFenceRate == 0:
		c.ZombieFenceRate = 0.02
	case c.ZombieFenceRate < 0:
		c.ZombieFenceRate = 0
	}
	if c.HangGrace <= 0 {
		c.HangGrace = c.TransactionTimeout + 30*time.Second
	}
}

// Result is what a run produced.
type Result struct {
	RunID   string            `json:"run_id"`
	Source  string            `json:"source_topic"`
	Sink    string            `json:"sink_topic"`
	Started time.Time         `json:"started"`
	Elapsed float64           `json:"elapsed_seconds"`
	Drills  []drill.Outcome   `json:"drills"`
	Report  verify.Report     `json:"report"`
	History *verify.History   `json:"-"`
	Rates   map[string]string `json:"rates,omitempty"`
	// LongestCommitGap is the longest time without a committed
	// transaction between the first commit and the producers' stop.
	LongestCommitGap    verify.Gap `json:"longest_commit_gap"`
	LongestCommitGapSec float64    `json:"longest_commit_gap_seconds"`
}

// OK reports whether the checker found nothing and every drill that ran
// succeeded.
func (r *Result) OK() bool {
	for _, d := range r.Drills {
		if !d.OK() {
			return false
		}
	}
	return r.Report.OK()
}

// run is one workload's shared state.
type run struct {
	cfg    Config
	src    string
	dst    string
	group  string
	admin  *client.Admin
	start  time.Time
	logMu  sync.Mutex
	quiet  *slog.Logger
	stopTx chan struct{} // closed when producers must stop starting transactions
	timeUp chan struct{} // closed when Duration has passed
	// hangDeadline is when a transaction still open at the end counts as
	// hanging: HangGrace after the producers stopped.
	hangDeadline time.Time

	mu           sync.Mutex
	txns         []verify.Txn
	reads        []verify.Read
	incarnations []verify.Incarnation
	spans        []verify.TxnSpan
	perTxnID     map[string]int // committed transactions per transactional id
	fences       atomic.Int64
	earlyAborts  atomic.Int64
	witnesses    atomic.Int64 // witness transactional ids tried

	// keepMu guards avoid (a source partition producers must not write
	// to, -1 for none: drill.Env.KeepOff) and txnParts (per producer, the
	// source partitions its open transaction writes to, as a bit set).
	keepMu   sync.Mutex
	avoid    int32
	txnParts []uint64

	committed atomic.Int64
	aborted   atomic.Int64
	unknown   atomic.Int64
	records   atomic.Int64 // records of committed producer transactions
	stageTx   atomic.Int64
	liveReads atomic.Int64
	drillsRun atomic.Int64
	drillNow  atomic.Value // string

	// deniedCh is closed by the first authorization failure (denied):
	// the principal lacks an ACL, which no retry mends, so the run stops
	// with deniedErr instead of retrying until its duration is up.
	deniedOnce sync.Once
	deniedCh   chan struct{}
	deniedErr  error
}

// denied reports whether err is an authorization failure (Kafka's
// TOPIC_, GROUP_, CLUSTER_ or TRANSACTIONAL_ID_AUTHORIZATION_FAILED); the
// first one stops the run (Run returns it).
func (r *run) denied(where string, err error) bool {
	switch errs.CodeOf(err) {
	case pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED, pb.ErrorCode_GROUP_AUTHORIZATION_FAILED,
		pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED, pb.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
	default:
		return false
	}
	r.deniedOnce.Do(func() {
		r.deniedErr = fmt.Errorf("%s: %w (the principal lacks an ACL: stopping, no retry mends that)", where, err)
		r.logf("workload: %v", r.deniedErr)
		close(r.deniedCh)
	})
	return true
}

func (r *run) logf(format string, args ...any) {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	fmt.Fprintf(r.cfg.Out, "%s %s\n", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func (r *run) opts(extra ...client.Opt) []client.Opt {
	o := []client.Opt{client.Bootstrap(r.cfg.Bootstrap...), client.Logger(r.quiet)}
	o = append(o, r.cfg.ClientOpts...)
	return append(o, extra...)
}

func (r *run) record(t verify.Txn) {
	r.mu.Lock()
	r.txns = append(r.txns, t)
	if t.Outcome == verify.Committed {
		r.perTxnID[t.Producer]++
	}
	r.mu.Unlock()
	switch t.Outcome {
	case verify.Committed:
		r.committed.Add(1)
		if !t.IsStage() {
			r.records.Add(int64(len(t.Writes)))
		}
	case verify.Aborted:
		r.aborted.Add(1)
	default:
		r.unknown.Add(1)
	}
	if t.IsStage() {
		r.stageTx.Add(1)
	}
	if t.EarlyAbort {
		r.earlyAborts.Add(1)
	}
}

func (r *run) incarnation(in verify.Incarnation) {
	r.mu.Lock()
	r.incarnations = append(r.incarnations, in)
	r.mu.Unlock()
}

func (r *run) busiest() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	best, n := "", -1
	for id, c := range r.perTxnID {
		if c > n || (c == n && id < best) {
			best, n = id, c
		}
	}
	return best
}

// Run runs the workload and the drills, reads everything back and judges
// it. An error means the run could not be completed (the cluster never
// became usable, the read-back could not finish); anomalies are in the
// Result's Report, not errors.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.defaults()
	switch {
	case cfg.Protocol != ProtocolGRPC && cfg.Protocol != ProtocolKafka:
		return nil, fmt.Errorf("workload: protocol %q is neither %q nor %q", cfg.Protocol, ProtocolGRPC, ProtocolKafka)
	case cfg.Protocol == ProtocolKafka && len(cfg.KafkaBootstrap) == 0:
		return nil, errors.New("workload: the kafka protocol needs the Kafka listeners' addresses")
	}
	r := &run{cfg: cfg, start: time.Now(), stopTx: make(chan struct{}), timeUp: make(chan struct{}), deniedCh: make(chan struct{}), perTxnID: map[string]int{},
		avoid: -1, txnParts: make([]uint64, cfg.Producers),
		src: "verify-" + cfg.RunID + "-src", dst: "verify-" + cfg.RunID + "-dst", group: "verify-" + cfg.RunID + "-stage",
		quiet: slog.New(slog.NewTextHandler(io.Discard, nil))}
	r.drillNow.Store("")
	if cfg.NoStage {
		r.dst = ""
	}
	// A short request timeout: a paused node must not hold up the
	// drills' and the read-back's metadata questions for long.
	adm, err := client.NewAdmin(r.opts(client.RequestTimeout(4 * time.Second))...)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	r.admin = adm
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	res := &Result{RunID: cfg.RunID, Source: r.src, Sink: r.dst, Started: r.start}

	// Everything below runs under work; stopping is in stages.
	work, cancelWork := context.WithCancel(ctx)
	defer cancelWork()
	var live, stage, prods, bg sync.WaitGroup
	liveStop, stageStop := make(chan struct{}), make(chan struct{})

	live.Add(2)
	go func() { defer live.Done(); r.liveReader(work, liveStop) }()
	go func() { defer live.Done(); r.protoReader(work, liveStop) }()
	for i := 0; i < cfg.StageWorkers; i++ {
		stage.Add(1)
		go func(i int) { defer stage.Done(); r.stageWorker(work, i, stageStop) }(i)
	}
	for i := 0; i < cfg.Producers; i++ {
		prods.Add(1)
		go func(i int) { defer prods.Done(); r.producer(work, i) }(i)
	}
	progressStop := make(chan struct{})
	bg.Add(1)
	go func() { defer bg.Done(); r.progress(work, progressStop) }()

	// Drills, spread over the duration; producers stop when it ends.
	drillsDone := make(chan []drill.Outcome, 1)
	go func() {
		var out []drill.Outcome
		defer func() { drillsDone <- out }() // also if a target gives up the goroutine
		out = r.drills(work)
	}()
	select {
	case <-time.After(cfg.Duration):
	case <-ctx.Done():
	case <-r.deniedCh:
		cancelWork()
		return nil, fmt.Errorf("workload: %w", r.deniedErr)
	}
	// Every drill runs at least once: the workload goes on until the
	// last one has settled.
	close(r.timeUp)
	res.Drills = <-drillsDone
	var ran []string
	for _, d := range res.Drills {
		if d.Skipped == "" {
			ran = append(ran, d.Drill)
		}
	}
	stoppedAt := time.Now()
	close(r.stopTx)
	r.logf("workload: producers finishing their last transactions")
	prods.Wait()
	// Open transactions have HangGrace from now to end.
	r.hangDeadline = time.Now().Add(cfg.HangGrace)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	// The cluster must be whole before the end-of-run reads.
	env := r.drillEnv()
	if err := env.Settle(ctx); err != nil {
		r.logf("workload: %v (reading back anyway)", err)
	}
	if cfg.StageWorkers > 0 {
		r.logf("workload: waiting for the stage to consume everything committed")
		if err := r.drainStage(ctx, 2*time.Minute); err != nil {
			r.logf("workload: %v", err)
		}
	}
	close(stageStop)
	stage.Wait()
	close(liveStop)
	live.Wait()
	close(progressStop)
	bg.Wait()

	r.logf("workload: waiting for open transactions to end, then reading every partition back")
	h, err := r.readBack(ctx)
	if err != nil {
		return nil, err
	}
	h.Drills = ran
	res.History = h
	res.Report = verify.Check(h)
	if first := verify.FirstCommit(h.Txns); !first.IsZero() {
		res.LongestCommitGap = verify.LongestCommitGap(h.Txns, first, stoppedAt)
		res.LongestCommitGapSec = res.LongestCommitGap.Seconds()
	}
	for i, d := range res.Drills {
		if d.Skipped == "" && !d.Start.IsZero() && !d.End.IsZero() {
			res.Drills[i].CommitGap = verify.LongestCommitGap(h.Txns, d.Start, d.End).Seconds()
		}
	}
	res.Elapsed = time.Since(r.start).Seconds()
	res.Rates = map[string]string{
		"committed_txns_per_sec": fmt.Sprintf("%.1f", float64(r.committed.Load())/cfg.Duration.Seconds()),
		"records_per_sec":        fmt.Sprintf("%.1f", float64(r.records.Load())/cfg.Duration.Seconds()),
	}
	return res, nil
}

// setup waits for the brokers, then creates the topics.
func (r *run) setup(ctx context.Context) error {
	var live int
	deadline := time.Now().Add(2 * time.Minute)
	for {
		md, err := r.admin.Metadata(ctx, false)
		if err == nil {
			live = 0
			for _, b := range md.Brokers {
				if !b.Fenced {
					live++
				}
			}
			want := 1
			if r.cfg.Target != nil {
				want = len(r.cfg.Target.Nodes())
			}
			if live >= want {
				break
			}
			err = fmt.Errorf("%d of %d brokers alive", live, want)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster not ready: %w", err)
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	rf := int32(min(3, live))
	minISR := "1"
	if rf >= 3 {
		minISR = "2"
	}
	for _, t := range []string{r.src, r.dst} {
		if t == "" {
			continue
		}
		err := r.admin.CreateTopic(ctx, client.TopicSpec{Name: t, Partitions: r.cfg.Partitions, ReplicationFactor: rf,
			Configs: map[string]string{"min.insync.replicas": minISR}})
		if err != nil && !errors.Is(err, client.ErrTopicAlreadyExists) {
			return fmt.Errorf("create %s: %w", t, err)
		}
	}
	r.logf("workload: run %s: %d producers, %d stage workers, topics %s → %s (%d partitions, RF %d, min ISR %s)",
		r.cfg.RunID, r.cfg.Producers, r.cfg.StageWorkers, r.src, r.dst, r.cfg.Partitions, rf, minISR)
	return nil
}

func (r *run) topics() []string {
	if r.dst == "" {
		return []string{r.src}
	}
	return []string{r.src, r.dst}
}

func (r *run) partitions(topic string) []client.TopicPartition {
	var tps []client.TopicPartition
	for p := int32(0); p < r.cfg.Partitions; p++ {
		tps = append(tps, client.TopicPartition{Topic: topic, Partition: p})
	}
	return tps
}

// progress prints a line every ProgressEvery.
func (r *run) progress(ctx context.Context, stop <-chan struct{}) {
	t := time.NewTicker(r.cfg.ProgressEvery)
	defer t.Stop()
	lastRec, lastAt := int64(0), time.Now()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rec := r.records.Load()
		now := time.Now()
		rate := float64(rec-lastRec) / now.Sub(lastAt).Seconds()
		lastRec, lastAt = rec, now
		cur := r.drillNow.Load().(string)
		if cur != "" {
			cur = ", now: " + cur
		}
		drills := fmt.Sprintf("%d/%d", r.drillsRun.Load(), len(r.cfg.Drills))
		if r.cfg.Repeat {
			drills = fmt.Sprintf("%d (cycling through %d)", r.drillsRun.Load(), len(r.cfg.Drills))
		}
		r.logf("progress: %.0fs, %.0f committed records/s, txns committed %d aborted %d (%d early) unknown %d (stage %d), fences %d, live reads %d, drills %s%s",
			now.Sub(r.start).Seconds(), rate, r.committed.Load(), r.aborted.Load(), r.earlyAborts.Load(), r.unknown.Load(), r.stageTx.Load(),
			r.fences.Load(), r.liveReads.Load(), drills, cur)
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// rng returns a generator for worker i, reproducible from the seed.
func (r *run) rng(kind uint64, i int) *rand.Rand {
	return rand.New(rand.NewPCG(r.cfg.Seed, kind<<32|uint64(i)))
}
