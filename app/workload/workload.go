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
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strand-io/strand/app/drill"
	"github.com/strand-io/strand/app/verify"
	"github.com/strand-io/strand/client"
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
	r := &run{cfg: cfg, start: time.Now(), stopTx: make(chan struct{}), timeUp: make(chan struct{}), perTxnID: map[string]int{},
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

func (r *run) drillEnv() *drill.Env {
	e := r.cfg.DrillEnv
	e.Admin, e.Target, e.Topics, e.BusiestTxnID = r.admin, r.cfg.Target, r.topics(), r.busiest
	e.Logf = r.logf
	e.Witness, e.KeepOff = r.witness, r.keepOff
	if e.Target == nil {
		e.Target = noTarget{}
	}
	return &e
}

// drills runs the configured drills spaced over the duration, each at
// least once; with Repeat it cycles through them until the duration ends.
func (r *run) drills(ctx context.Context) []drill.Outcome {
	if len(r.cfg.Drills) == 0 || r.cfg.Target == nil {
		return nil
	}
	env := r.drillEnv()
	n := len(r.cfg.Drills)
	// A warm-up before the first drill, then one slot per drill (a soak
	// drills every 15 s).
	gap := r.cfg.Duration / time.Duration(n+1)
	if r.cfg.Repeat {
		gap = min(gap, 15*time.Second)
	}
	var out []drill.Outcome
	next := r.start.Add(min(gap, 10*time.Second))
	for i := 0; ; i++ {
		if i >= n {
			if !r.cfg.Repeat {
				return out
			}
			select {
			case <-r.timeUp:
				return out
			default:
			}
		}
		select {
		case <-ctx.Done():
			return out
		case <-time.After(time.Until(next)):
		}
		name := r.cfg.Drills[i%n]
		r.drillNow.Store(name)
		o := drill.Run(ctx, env, name)
		r.drillNow.Store("")
		r.drillsRun.Add(1)
		out = append(out, o)
		next = time.Now().Add(max(gap-time.Since(o.Start), 2*time.Second))
	}
}

// drainStage waits until the stage group's committed offsets reach the
// end of every source partition.
//
// A partition whose transaction stays open (LSO below HW) holds the stage
// back for good if nobody ends it: past the hang deadline the wait gives
// up (the read-back reports the partition as hanging).
func (r *run) drainStage(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	tps := r.partitions(r.src)
	behind := ""
	for time.Now().Before(deadline) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ends, err := r.admin.ListOffsets(cctx, tps, client.OffsetLatest, client.ReadCommitted)
		var got map[client.TopicPartition]int64
		if err == nil {
			got, err = r.admin.CommittedOffsets(cctx, r.group, tps)
		}
		cancel()
		if err == nil {
			behind = ""
			open := false
			for _, tp := range tps {
				end := ends[tp]
				if end.LastStableOffset < end.HighWatermark {
					behind = fmt.Sprintf("%s has an open transaction (LSO %d < HW %d)", tp, end.LastStableOffset, end.HighWatermark)
					open = true
					break
				}
				if got[tp] < end.LastStableOffset && end.LastStableOffset > 0 {
					// The last records of a partition may be markers only: the
					// stage's position can stop short of the LSO only by them.
					if !r.onlyMarkersFrom(ctx, tp, got[tp], end.LastStableOffset) {
						behind = fmt.Sprintf("%s committed %d of %d", tp, got[tp], end.LastStableOffset)
						break
					}
				}
			}
			if behind == "" {
				return nil
			}
			if open && time.Now().After(r.hangDeadline) {
				return fmt.Errorf("the stage cannot catch up: %s, %s after the producers stopped", behind, r.cfg.HangGrace)
			}
		} else {
			behind = err.Error()
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	return fmt.Errorf("the stage did not catch up within %s: %s", timeout, behind)
}

// onlyMarkersFrom reports whether tp holds no committed data record in
// [from, to): the stage consumed everything.
func (r *run) onlyMarkersFrom(ctx context.Context, tp client.TopicPartition, from, to int64) bool {
	if from < 0 {
		from = 0
	}
	c, err := client.NewConsumer(r.opts(client.Isolation(client.ReadCommitted), client.FetchMaxWait(100*time.Millisecond))...)
	if err != nil {
		return false
	}
	defer c.Close(context.WithoutCancel(ctx))
	c.Assign(map[client.TopicPartition]int64{tp: from})
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	for c.Position(tp) < to {
		recs, err := c.Poll(cctx)
		if err != nil {
			return false
		}
		if len(recs) > 0 {
			return false
		}
	}
	return true
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

// readBack waits for every transaction on the topics to end, then reads
// every partition from the start to its end with both isolation levels,
// and collects the stage group's offsets.
func (r *run) readBack(ctx context.Context) (*verify.History, error) {
	var tps []client.TopicPartition
	for _, t := range r.topics() {
		tps = append(tps, r.partitions(t)...)
	}
	// Transactions left open by a dead client end by the coordinator's
	// timeout: wait HangGrace for them. A partition still open then holds
	// a transaction nobody will end: hanging (History.OpenAtEnd).
	h := &verify.History{SourceTopic: r.src, SinkTopic: r.dst, Transform: verify.TransformRule}
	deadline := r.hangDeadline
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ends, err := r.admin.ListOffsets(cctx, tps, client.OffsetLatest, client.ReadCommitted)
		cancel()
		var open []client.TopicPartition
		if err == nil {
			for _, tp := range tps {
				if ends[tp].LastStableOffset != ends[tp].HighWatermark {
					open = append(open, tp)
				}
			}
			if len(open) == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				return nil, fmt.Errorf("the partitions' ends cannot be read: %w", err)
			}
			for _, tp := range open {
				o := verify.OpenPartition{TP: verify.TP{Topic: tp.Topic, Partition: tp.Partition}, HighWatermark: ends[tp].HighWatermark,
					LastStableOffset: ends[tp].LastStableOffset, Waited: time.Since(r.hangDeadline.Add(-r.cfg.HangGrace)).Seconds(),
					Blocking: r.blocking(ctx, tp, ends[tp].LastStableOffset)}
				r.logf("workload: %s is hanging: LSO %d < HW %d after %.0fs; %s", tp, o.LastStableOffset, o.HighWatermark, o.Waited, o.Blocking)
				h.OpenAtEnd = append(h.OpenAtEnd, o)
			}
			break
		}
		if err := sleep(ctx, time.Second); err != nil {
			return nil, err
		}
	}
	for _, iso := range []client.IsolationLevel{client.ReadCommitted, client.ReadUncommitted} {
		reads, err := r.readAll(ctx, tps, iso)
		if err != nil {
			return nil, err
		}
		h.Reads = append(h.Reads, reads...)
	}
	if r.dst != "" {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		got, err := r.admin.CommittedOffsets(cctx, r.group, r.partitions(r.src))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("group offsets: %w", err)
		}
		for _, tp := range r.partitions(r.src) {
			if off, ok := got[tp]; ok && off >= 0 {
				h.GroupOffsets = append(h.GroupOffsets, verify.TPOffset{TP: verify.TP{Topic: tp.Topic, Partition: tp.Partition}, Offset: off})
			}
		}
	}
	r.mu.Lock()
	h.Txns = append(h.Txns, r.txns...)
	h.Reads = append(h.Reads, r.reads...)
	h.Incarnations = append(h.Incarnations, r.incarnations...)
	h.Spans = append(h.Spans, r.spans...)
	r.mu.Unlock()
	sort.SliceStable(h.Txns, func(i, j int) bool { return h.Txns[i].Begin.Before(h.Txns[j].Begin) })
	return h, nil
}

// readAll reads tps from the start to their end (LSO or HW) with iso.
func (r *run) readAll(ctx context.Context, tps []client.TopicPartition, iso client.IsolationLevel) ([]verify.Read, error) {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	ends, err := r.admin.ListOffsets(cctx, tps, client.OffsetLatest, iso)
	if err != nil {
		return nil, err
	}
	c, err := client.NewConsumer(r.opts(client.Isolation(iso), client.FetchMaxWait(100*time.Millisecond))...)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	assign := map[client.TopicPartition]int64{}
	for _, tp := range tps {
		assign[tp] = client.OffsetEarliest
	}
	c.Assign(assign)
	name := map[client.IsolationLevel]string{client.ReadCommitted: "final-rc", client.ReadUncommitted: "final-ru"}[iso]
	var out []verify.Read
	for {
		done := true
		for _, tp := range tps {
			end := ends[tp].HighWatermark
			if iso == client.ReadCommitted {
				end = ends[tp].LastStableOffset
			}
			if c.Position(tp) < end {
				done = false
			}
		}
		if done {
			return out, nil
		}
		recs, err := c.Poll(cctx)
		if err != nil {
			if cctx.Err() != nil {
				return nil, fmt.Errorf("%s read-back did not finish: %w", name, err)
			}
			continue
		}
		for _, rec := range recs {
			out = append(out, verify.Read{Reader: name, ReadCommitted: iso == client.ReadCommitted, Final: true,
				TP: verify.TP{Topic: rec.Topic, Partition: rec.Partition}, Offset: rec.Offset, Value: string(rec.Value)})
		}
	}
}

// liveReader follows every partition with read_committed while the
// workload runs; it checks that nothing is visible before its commit.
func (r *run) liveReader(ctx context.Context, stop <-chan struct{}) {
	var c *client.Consumer
	positions := map[client.TopicPartition]int64{}
	var tps []client.TopicPartition
	for _, t := range r.topics() {
		tps = append(tps, r.partitions(t)...)
	}
	for _, tp := range tps {
		positions[tp] = client.OffsetEarliest
	}
	defer func() {
		if c != nil {
			c.Close(context.WithoutCancel(ctx))
		}
	}()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		if c == nil {
			var err error
			c, err = client.NewConsumer(r.opts(client.Isolation(client.ReadCommitted), client.FetchMaxWait(200*time.Millisecond))...)
			if err != nil {
				sleep(ctx, time.Second)
				continue
			}
			c.Assign(positions)
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		recs, err := c.Poll(pctx)
		cancel()
		now := time.Now()
		if len(recs) > 0 {
			r.mu.Lock()
			for _, rec := range recs {
				r.reads = append(r.reads, verify.Read{Reader: "live-rc", ReadCommitted: true, Time: now,
					TP: verify.TP{Topic: rec.Topic, Partition: rec.Partition}, Offset: rec.Offset, Value: string(rec.Value)})
			}
			r.mu.Unlock()
			r.liveReads.Add(int64(len(recs)))
		}
		for _, tp := range tps {
			if p := c.Position(tp); p >= 0 {
				positions[tp] = p
			}
		}
		if err != nil && ctx.Err() == nil && pctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			// Recreate the consumer from its positions after a hard error.
			c.Close(context.WithoutCancel(ctx))
			c = nil
			sleep(ctx, 500*time.Millisecond)
		}
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

// noTarget is the target when none is configured: nothing to drill.
type noTarget struct{}

func (noTarget) Name() string                                { return "none" }
func (noTarget) Nodes() []int32                              { return nil }
func (noTarget) Kill(ctx context.Context, id int32) error    { return drill.ErrUnsupported }
func (noTarget) Start(ctx context.Context, id int32) error   { return drill.ErrUnsupported }
func (noTarget) Pause(ctx context.Context, id int32) error   { return drill.ErrUnsupported }
func (noTarget) Resume(ctx context.Context, id int32) error  { return drill.ErrUnsupported }
func (noTarget) Isolate(ctx context.Context, id int32) error { return drill.ErrUnsupported }
func (noTarget) Heal(ctx context.Context, id int32) error    { return drill.ErrUnsupported }
func (noTarget) Stop(ctx context.Context, id int32) error    { return drill.ErrUnsupported }
func (noTarget) HoldFollowerFetch(ctx context.Context, id int32, topic string, partition int32, d time.Duration) error {
	return drill.ErrUnsupported
}
func (noTarget) ReleaseFollowerFetch(ctx context.Context, id int32, topic string, partition int32) error {
	return drill.ErrUnsupported
}
