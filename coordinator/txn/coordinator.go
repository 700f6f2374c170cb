package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/coordinator"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/wire"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/replication"
)

// Config tunes the coordinator (Kafka's names).
type Config struct {
	NodeID int32
	Topic  coordinator.InternalTopic
	// MaxTimeout is transaction.max.timeout.ms.
	MaxTimeout time.Duration
	// AbortTimedOutInterval is transaction.abort.timed.out.transaction.cleanup.interval.ms.
	AbortTimedOutInterval time.Duration
	// RemoveExpiredInterval is transaction.remove.expired.transaction.cleanup.interval.ms.
	RemoveExpiredInterval time.Duration
	// IDExpiration is transactional.id.expiration.ms.
	IDExpiration time.Duration
	// WriteTimeout bounds how long a request waits for its log write to
	// replicate before it is answered retriably (the write carries on).
	WriteTimeout time.Duration
	// FirstEpoch is the epoch a new transactional id's first InitProducerId
	// answers (Kafka: 0). Only drills and tests set it, to drive producers
	// across the end of their epochs in a few transactions.
	FirstEpoch int16
	Logger     *slog.Logger
	// MaxOpenPerPrincipal is transaction.max.open.per.principal (0: no
	// cap): open_cap.go.
	MaxOpenPerPrincipal int
	// LoadHold is how long a producer's or partition leader's request for
	// a partition this coordinator is still loading waits for the load
	// before it is answered COORDINATOR_LOAD_IN_PROGRESS (0: at once, as
	// Kafka answers). Right after a failover the load is usually done
	// within a few fetches; a client told to retry backs off for up to
	// retry.backoff.max.ms (1 s) instead.
	LoadHold time.Duration
}

// DefaultConfig is Kafka's defaults.
func DefaultConfig(nodeID int32) Config {
	return Config{NodeID: nodeID, Topic: coordinator.DefaultTransactionTopic(), MaxTimeout: 15 * time.Minute,
		AbortTimedOutInterval: 10 * time.Second, RemoveExpiredInterval: time.Hour, IDExpiration: 7 * 24 * time.Hour, WriteTimeout: 10 * time.Second,
		LoadHold: 2 * time.Second}
}

// Coordinator is the transaction coordinator of the __transaction_state
// partitions this broker leads.
type Coordinator struct {
	cfg  Config
	repl *replication.Manager
	pids *coordinator.ProducerIDManager
	clk  clock.Clock
	lg   *slog.Logger

	mu    sync.Mutex
	parts map[int32]*owned

	markers *markerSender
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// owned is one partition of the transaction log this broker leads.
type owned struct {
	id     int32
	p      *broker.Partition
	epoch  int32 // the coordinator epoch: the partition's leader epoch
	loaded bool
	// loadedCh is closed when loaded becomes true.
	loadedCh chan struct{}
	txns     map[string]*Metadata
	ctx      context.Context
	cancel   context.CancelFunc
}

// New returns a coordinator; Start registers it for leadership changes.
func New(cfg Config, repl *replication.Manager, pids *coordinator.ProducerIDManager, pool *wire.Pool, clk clock.Clock) *Coordinator {
	if clk == nil {
		clk = clock.Real
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{cfg: cfg, repl: repl, pids: pids, clk: clk, lg: lg.With("component", "txn-coordinator"), parts: map[int32]*owned{}, ctx: ctx, cancel: cancel}
	c.markers = newMarkerSender(c, pool)
	return c
}

// Start begins serving and the timeout/expiry scans.
func (c *Coordinator) Start() {
	c.repl.AddLeaderListener(c.cfg.Topic.Name, c)
	c.markers.start()
	c.wg.Add(1)
	go c.scanLoop()
}

// Stop stops everything and waits.
func (c *Coordinator) Stop() {
	c.cancel()
	c.markers.stop()
	c.wg.Wait()
}

// now is the coordinator's time in ms.
func (c *Coordinator) now() int64 { return c.clk.Now().UnixMilli() }

// BecameLeader starts loading a transaction log partition.
func (c *Coordinator) BecameLeader(p *broker.Partition, leaderEpoch int32) {
	ctx, cancel := context.WithCancel(c.ctx)
	o := &owned{id: p.Key.Partition, p: p, epoch: leaderEpoch, txns: map[string]*Metadata{}, ctx: ctx, cancel: cancel, loadedCh: make(chan struct{})}
	c.mu.Lock()
	if old := c.parts[o.id]; old != nil {
		old.cancel()
	}
	c.parts[o.id] = o
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.load(o)
	}()
}

// StoppedLeading drops a partition's state; its requests get NOT_COORDINATOR.
func (c *Coordinator) StoppedLeading(partition int32) {
	c.mu.Lock()
	if o := c.parts[partition]; o != nil {
		o.cancel()
		delete(c.parts, partition)
		for _, m := range o.txns {
			if m.pending != nil {
				m.finish()
			}
		}
	}
	c.mu.Unlock()
}

// load reads the partition from its start to its end, rebuilds every
// transactional id, and finishes what was left half done: a PREPARE_* gets
// its markers sent again, a PREPARE_EPOCH_FENCE its abort.
func (c *Coordinator) load(o *owned) {
	start := time.Now()
	var txns map[string]*Metadata
	for o.ctx.Err() == nil {
		var err error
		txns, err = replayLog(o.p.Log, func(msg string, args ...any) {
			c.lg.Warn(msg, append([]any{"partition", o.id}, args...)...)
		})
		if err == nil {
			break
		}
		c.lg.Warn("loading transaction log partition failed; retrying", "partition", o.id, "err", err)
		c.sleep(o.ctx, 200*time.Millisecond)
	}
	if !c.awaitCommitted(o) {
		return
	}
	c.mu.Lock()
	if c.parts[o.id] != o || o.ctx.Err() != nil {
		c.mu.Unlock()
		return
	}
	o.txns, o.loaded = txns, true
	close(o.loadedCh)
	loaded := len(txns) // requests may add ids as soon as the lock is released
	var resume []*Metadata
	for _, m := range txns {
		if m.State.IsPrepare() || m.State == PrepareEpochFence {
			resume = append(resume, m)
		}
	}
	c.mu.Unlock()
	c.lg.Info("loaded transaction log partition", "partition", o.id, "coordinatorEpoch", o.epoch, "transactionalIds", loaded, "resuming", len(resume), "took", time.Since(start).Round(time.Millisecond))
	for _, m := range resume {
		if m.State == PrepareEpochFence {
			c.background(o, m.TransactionalID, Request{Kind: KindResumeFence})
			continue
		}
		c.mu.Lock()
		c.sendMarkersLocked(o, m)
		c.mu.Unlock()
	}
}

// awaitCommitted waits, before a loaded partition is served, until its
// high watermark reaches the log end the load read to: a new leader's log
// may end with records the previous coordinator wrote and never had
// acknowledged, and a follower that lacks them can still be elected after
// this node, which loses them. Answers given from such a record would
// outlive it: a partition leader told its partition is already in a
// transaction appends its batch, and once the record naming that
// partition is gone no marker ever ends the batch (a hanging
// transaction). Kafka's coordinator serves what it loaded at once; this
// one serves only state the ISR has. Usually the HW is there already, or
// gets there with the followers' next fetch. It returns false when the
// partition is no longer this coordinator's.
func (c *Coordinator) awaitCommitted(o *owned) bool {
	end := o.p.Log.LogEndOffset()
	if end == 0 || o.p.HighWatermark() >= end {
		return o.ctx.Err() == nil
	}
	c.lg.Info("waiting for the ISR to have the loaded transaction log before serving it", "partition", o.id, "hw", o.p.HighWatermark(), "logEnd", end)
	return o.p.WaitForHW(o.ctx, end-1, o.epoch) == nil
}

// sleep waits d on the coordinator's clock, or until ctx ends.
func (c *Coordinator) sleep(ctx context.Context, d time.Duration) {
	t := c.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-ctx.Done():
	}
}

// replayLog rebuilds the transactional ids of a transaction log partition:
// the last record of an id is its state, and a tombstone (an expired id)
// forgets it. Only the last record of each id matters, so a compacted log
// (older records of an id gone, and a tombstone gone once the id's earlier
// records are) gives the same ids as the whole history. warn reports a
// record it cannot read and skips; a value a newer binary wrote
// (NewerVersionError) fails the load instead, which the loader retries
// and logs until the node runs a binary that reads it.
func replayLog(l *storage.Log, warn func(msg string, args ...any)) (map[string]*Metadata, error) {
	txns := map[string]*Metadata{}
	var newer error
	err := readLog(l, func(key, value []byte) {
		if newer != nil {
			return
		}
		id, err := DecodeKey(key)
		if err != nil {
			warn("skipping unreadable transaction log key", "err", err)
			return
		}
		v, err := DecodeValue(value)
		var nv *NewerVersionError
		if errors.As(err, &nv) {
			newer = fmt.Errorf("transactional id %q: %w", id, err)
			return
		}
		if err != nil {
			warn("skipping unreadable transaction log value", "transactionalId", id, "err", err)
			return
		}
		if v == nil {
			delete(txns, id)
			return
		}
		txns[id] = fromValue(id, v)
	})
	if err == nil && newer != nil {
		return nil, newer
	}
	return txns, err
}

// readLog feeds every record of a transaction log partition to fn. A
// compacted log has gaps between offsets; each batch says where the next
// one starts.
func readLog(l *storage.Log, fn func(key, value []byte)) error {
	offset := l.LogStartOffset()
	end := l.LogEndOffset()
	for offset < end {
		res, err := l.Read(offset, 4<<20, end, true)
		if err != nil {
			return err
		}
		if len(res.Records) == 0 {
			// No batch in [offset, end): the cleaner removed the log's
			// last batches, leaving their offsets a gap.
			return nil
		}
		for it := record.NewIter(res.Records); it.Next(); {
			h := it.Header()
			offset = h.NextOffset()
			if h.IsControl() {
				continue
			}
			_, recs, err := record.Decode(it.Batch())
			if err != nil {
				return err
			}
			for _, r := range recs {
				fn(r.Key, r.Value)
			}
		}
	}
	return nil
}

// partitionOf is the transaction log partition of id, by the topic's
// partition count in this broker's metadata, as the locator maps it.
func (c *Coordinator) partitionOf(id string) int32 {
	var img *metadata.Image
	if c.repl != nil {
		img = c.repl.Image()
	}
	return c.cfg.Topic.PartitionOf(img, id)
}

// awaitLoad holds a request for id while its partition is this
// coordinator's and still loading, for at most LoadHold or until ctx
// ends; the request then runs and finds the partition loaded, or answers
// COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR as it stands.
func (c *Coordinator) awaitLoad(ctx context.Context, id string) {
	if c.cfg.LoadHold <= 0 {
		return
	}
	part := c.partitionOf(id)
	c.mu.Lock()
	o := c.parts[part]
	c.mu.Unlock()
	if o == nil || o.loadedCh == nil {
		return
	}
	select {
	case <-o.loadedCh:
		return
	default:
	}
	t := c.clk.NewTimer(c.cfg.LoadHold)
	defer t.Stop()
	select {
	case <-o.loadedCh:
	case <-o.ctx.Done():
	case <-ctx.Done():
	case <-t.C():
	}
}

// ownerLocked returns the loaded partition that coordinates id.
func (c *Coordinator) ownerLocked(id string) (*owned, error) {
	part := c.partitionOf(id)
	o := c.parts[part]
	if o == nil {
		return nil, errs.New(pb.ErrorCode_NOT_COORDINATOR, "broker %d is not the coordinator of %q (%s-%d)", c.cfg.NodeID, id, c.cfg.Topic.Name, part)
	}
	if !o.loaded {
		return nil, errs.New(pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS, "%s-%d is still loading", c.cfg.Topic.Name, part)
	}
	return o, nil
}

// write appends t for m and waits for the ISR; then applies it and runs
// after (with c.mu held). If replication takes longer than WriteTimeout
// the caller gets a retriable error while the wait goes on in the
// background (m stays pending, so no other change can slip in).
func (c *Coordinator) write(o *owned, m *Metadata, t *transition, after func()) error {
	batch, err := logBatch(m.TransactionalID, t.value(), c.now())
	if err != nil {
		c.abandon(m)
		return err
	}
	return c.appendWait(o, m, batch, after)
}

func (c *Coordinator) appendWait(o *owned, m *Metadata, batch []byte, after func()) error {
	a := c.repl.AppendLeader(c.cfg.Topic.Name, o.id, batch, -1)
	if a.Err != nil {
		c.abandon(m)
		return mapAppendErr(a.Err)
	}
	ctx, cancel := context.WithTimeout(o.ctx, c.cfg.WriteTimeout)
	err := a.Wait(ctx)
	cancel()
	if err == nil || errors.Is(err, errs.NotEnoughReplicasAfterAppend) {
		c.applied(o, m, after)
		return nil
	}
	if errs.CodeOf(err) == pb.ErrorCode_REQUEST_TIMED_OUT && o.ctx.Err() == nil {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			if err := a.Wait(o.ctx); err == nil || errors.Is(err, errs.NotEnoughReplicasAfterAppend) {
				c.applied(o, m, after)
			} else {
				c.abandon(m)
			}
		}()
		return errs.New(pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, "the transaction log write for %q is not replicated yet", m.TransactionalID)
	}
	c.abandon(m)
	return mapAppendErr(err)
}

func (c *Coordinator) applied(o *owned, m *Metadata, after func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.parts[o.id] != o || m.pending == nil {
		return
	}
	m.apply()
	if after != nil {
		after()
	}
}

func (c *Coordinator) abandon(m *Metadata) {
	c.mu.Lock()
	m.finish()
	c.mu.Unlock()
}

// mapAppendErr turns a transaction-log append error into what clients of
// the coordinator understand (Kafka's mapping).
func mapAppendErr(err error) error {
	switch errs.CodeOf(err) {
	case pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, pb.ErrorCode_KAFKA_STORAGE_ERROR:
		return errs.New(pb.ErrorCode_NOT_COORDINATOR, "the transaction log partition moved: %v", err)
	case pb.ErrorCode_NOT_ENOUGH_REPLICAS, pb.ErrorCode_REQUEST_TIMED_OUT, pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION:
		return errs.New(pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, "the transaction log cannot be written: %v", err)
	}
	return err
}

// waitPending waits up to d for m's transition in flight to finish; c.mu
// is held on entry and exit. It reports whether m is no longer pending.
func (c *Coordinator) waitPending(ctx context.Context, m *Metadata, d time.Duration) bool {
	return c.waitUntil(ctx, m, d, false)
}

// waitSettled is waitPending that also waits, up to d, for a commit or
// abort whose markers are being written to complete. The next
// transaction's first AddPartitionsToTxn usually arrives while the
// previous one is completing: answering CONCURRENT_TRANSACTIONS at once
// costs the producer a whole retry backoff per transaction.
func (c *Coordinator) waitSettled(ctx context.Context, m *Metadata, d time.Duration) bool {
	return c.waitUntil(ctx, m, d, true)
}

func (c *Coordinator) waitUntil(ctx context.Context, m *Metadata, d time.Duration, settled bool) bool {
	busy := func() bool { return m.pending != nil || (settled && m.preparing()) }
	deadline := time.Now().Add(d)
	for busy() {
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return false
		}
		ch := m.waiters
		if m.pending == nil {
			if m.settled == nil {
				m.settled = make(chan struct{})
			}
			ch = m.settled
		}
		c.mu.Unlock()
		t := time.NewTimer(remaining)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		c.mu.Lock()
		if ctx.Err() != nil {
			return !busy()
		}
	}
	return true
}

// sendMarkersLocked starts the markers of a PREPARE_COMMIT/PREPARE_ABORT;
// when every partition has answered, the transaction completes.
func (c *Coordinator) sendMarkersLocked(o *owned, m *Metadata) {
	committed := m.State == PrepareCommit
	job := &markerJob{owner: o, transactionalID: m.TransactionalID, producerID: m.ProducerID, epoch: m.ProducerEpoch,
		committed: committed, coordinatorEpoch: o.epoch, txnVersion: m.TxnVersion, remaining: map[TopicPartition]bool{}}
	for tp := range m.Partitions {
		job.remaining[tp] = true
	}
	if len(job.remaining) == 0 {
		c.wg.Add(1)
		go func() { defer c.wg.Done(); c.complete(job) }()
		return
	}
	c.markers.enqueue(job)
}

// handle runs one request of a producer or partition leader through the
// state machine and carries out its decision.
func (c *Coordinator) handle(ctx context.Context, id string, r Request) (Decision, error) {
	c.awaitLoad(ctx, id)
	c.mu.Lock()
	o, err := c.ownerLocked(id)
	if err != nil {
		c.mu.Unlock()
		return Decision{}, err
	}
	m, d, err := c.decideLocked(ctx, o, id, r, pendingWait)
	if err == nil {
		err = c.openCapLocked(ctx, m, d) // open_cap.go
	}
	if err != nil {
		c.mu.Unlock()
		return Decision{}, err
	}
	return d, c.perform(o, m, d)
}

// decideLocked asks the state machine, giving it what it asks for: a new
// producer id from the controller's block (NeedProducerID; on an unknown
// id the metadata is created with it first, as Kafka does), and, while the
// id is busy with another transition or its markers, up to wait for that
// to finish. c.mu is held on entry and on return (it is released while
// waiting and allocating); err is set when the coordinator moved meanwhile.
func (c *Coordinator) decideLocked(ctx context.Context, o *owned, id string, r Request, wait time.Duration) (*Metadata, Decision, error) {
	r.NewProducerID, r.TransactionalID = -1, id
	deadline := time.Now().Add(wait)
	for {
		m := o.txns[id]
		r.Now = c.now()
		d := Decide(m, r)
		switch {
		case d.NeedProducerID:
			c.mu.Unlock()
			pid, err := c.pids.Next(ctx)
			c.mu.Lock()
			if err != nil {
				return nil, Decision{}, err
			}
			if o2, err := c.ownerLocked(id); err != nil || o2 != o {
				return nil, Decision{}, errs.New(pb.ErrorCode_NOT_COORDINATOR, "coordinator moved while allocating a producer id")
			}
			if cur := o.txns[id]; r.Kind == KindInitProducerId && (cur == nil || cur.State == Dead) {
				m := newMetadata(id, pid, r.TimeoutMs, c.now())
				if c.cfg.FirstEpoch > 0 && c.cfg.FirstEpoch < MaxEpoch {
					m.ProducerEpoch = c.cfg.FirstEpoch - 1
				}
				o.txns[id] = m
			} else {
				r.NewProducerID = pid
			}
			continue
		case d.Busy && m != nil:
			remaining := time.Until(deadline)
			if remaining <= 0 {
				return m, d, nil
			}
			c.waitUntil(ctx, m, remaining, true)
			if o2, err := c.ownerLocked(id); err != nil || o2 != o {
				return nil, Decision{}, errs.New(pb.ErrorCode_NOT_COORDINATOR, "the coordinator of %q moved while waiting", id)
			}
			if ctx.Err() != nil {
				return m, d, nil
			}
			continue
		}
		return m, d, nil
	}
}

// perform carries out a decision: append its transition, wait for the ISR,
// apply it, then send markers if it asks to. c.mu is held on entry and
// released on return. The answer is the decision's, or the write's error.
func (c *Coordinator) perform(o *owned, m *Metadata, d Decision) error {
	if d.Write == nil {
		c.mu.Unlock()
		return d.Err
	}
	if !m.begin(d.Write) {
		c.mu.Unlock()
		return errs.New(pb.ErrorCode_CONCURRENT_TRANSACTIONS, "another change of %q is in progress", m.TransactionalID)
	}
	c.mu.Unlock()
	if d.Write.state == Dead {
		return c.writeTombstone(o, m)
	}
	var after func()
	if d.SendMarkers {
		after = func() { c.afterPrepareLocked(o, m) }
	}
	if err := c.write(o, m, d.Write, after); err != nil {
		return err
	}
	return d.Err
}

// afterPrepareLocked starts the markers of the Prepare* state just applied
// (or, for a PREPARE_EPOCH_FENCE record, the abort that follows it).
func (c *Coordinator) afterPrepareLocked(o *owned, m *Metadata) {
	if m.State == PrepareEpochFence {
		c.background(o, m.TransactionalID, Request{Kind: KindResumeFence})
		return
	}
	c.sendMarkersLocked(o, m)
}

// background runs a request of the coordinator's own (a fence's abort, a
// timeout, markers done, an expiry) apart from the caller.
func (c *Coordinator) background(o *owned, id string, r Request) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := c.own(o, id, r, time.Second); err != nil && errs.CodeOf(err) != pb.ErrorCode_NOT_COORDINATOR {
			c.lg.Warn("transaction coordinator step failed", "transactionalId", id, "step", r.Kind.String(), "err", err)
		}
	}()
}

// own is handle for the coordinator's own requests, on a partition it
// already holds.
func (c *Coordinator) own(o *owned, id string, r Request, wait time.Duration) error {
	c.mu.Lock()
	if c.parts[o.id] != o || o.ctx.Err() != nil {
		c.mu.Unlock()
		return errs.New(pb.ErrorCode_NOT_COORDINATOR, "no longer the coordinator of %q", id)
	}
	m, d, err := c.decideLocked(o.ctx, o, id, r, wait)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	if d.Busy {
		c.mu.Unlock()
		return d.Err
	}
	return c.perform(o, m, d)
}

// complete writes COMPLETE_COMMIT / COMPLETE_ABORT once every marker is
// written, retrying while the transaction log cannot be written.
func (c *Coordinator) complete(job *markerJob) {
	o := job.owner
	r := Request{Kind: KindMarkersDone, ProducerID: job.producerID, Epoch: job.epoch}
	for attempt := 0; o.ctx.Err() == nil; attempt++ {
		err := c.own(o, job.transactionalID, r, time.Second)
		if err == nil {
			c.lg.Debug("transaction completed", "transactionalId", job.transactionalID, "committed", job.committed)
			return
		}
		if errs.CodeOf(err) == pb.ErrorCode_NOT_COORDINATOR {
			return
		}
		c.sleep(o.ctx, time.Duration(min(attempt+1, 10))*100*time.Millisecond)
	}
}

// scanLoop aborts timed-out transactions and expires idle ids.
func (c *Coordinator) scanLoop() {
	defer c.wg.Done()
	abortT := c.clk.NewTicker(c.cfg.AbortTimedOutInterval)
	defer abortT.Stop()
	expireT := c.clk.NewTicker(c.cfg.RemoveExpiredInterval)
	defer expireT.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-abortT.C():
			c.AbortTimedOut()
		case <-expireT.C():
			c.RemoveExpired()
		}
	}
}

// scan runs a coordinator request of kind on every id of every loaded
// partition the state machine would act on now.
func (c *Coordinator) scan(r Request, log func(m *Metadata)) {
	type due struct {
		o  *owned
		id string
	}
	var todo []due
	c.mu.Lock()
	for _, o := range c.parts {
		if !o.loaded {
			continue
		}
		for id, m := range o.txns {
			r.Now = c.now()
			if d := Decide(m, r); d.Write != nil || d.NeedProducerID {
				log(m)
				todo = append(todo, due{o, id})
			}
		}
	}
	c.mu.Unlock()
	for _, t := range todo {
		c.background(t.o, t.id, r)
	}
}

// AbortTimedOut aborts, with an epoch bump, every transaction open longer
// than its transaction.timeout.ms.
func (c *Coordinator) AbortTimedOut() {
	c.scan(Request{Kind: KindTimeout}, func(m *Metadata) {
		c.lg.Info("aborting timed-out transaction", "transactionalId", m.TransactionalID, "producerId", m.ProducerID,
			"age", time.Duration(c.now()-m.StartTimeMs)*time.Millisecond, "timeoutMs", m.TimeoutMs)
	})
}

// RemoveExpired forgets ids idle past transactional.id.expiration.ms (never
// one with a transaction open), writing a tombstone for each.
func (c *Coordinator) RemoveExpired() {
	c.scan(Request{Kind: KindExpire, ExpirationMs: c.cfg.IDExpiration.Milliseconds()}, func(m *Metadata) {
		c.lg.Info("expiring transactional id", "transactionalId", m.TransactionalID, "idleFor", time.Duration(c.now()-m.LastUpdateMs)*time.Millisecond)
	})
}

// writeTombstone appends the tombstone of an expired id (its DEAD
// transition, already begun) and forgets it once replicated.
func (c *Coordinator) writeTombstone(o *owned, m *Metadata) error {
	id := m.TransactionalID
	batch, err := logBatch(id, nil, c.now())
	if err != nil {
		c.abandon(m)
		return err
	}
	return c.appendWait(o, m, batch, func() {
		if o.txns[id] == m {
			delete(o.txns, id)
		}
	})
}

// logBatch is the batch the coordinator appends for one change of id: its
// new state, or with v nil its tombstone (the id expired).
func logBatch(id string, v *pb.TransactionLogValue, nowMs int64) ([]byte, error) {
	var value []byte
	if v != nil {
		var err error
		if value, err = EncodeValue(v); err != nil {
			return nil, err
		}
	}
	return record.Build(record.BatchOptions{ProducerID: record.NoProducerID, ProducerEpoch: record.NoProducerEpoch, BaseSequence: record.NoSequence, PartitionLeaderEpoch: -1},
		[]record.Record{{Key: EncodeKey(id), Value: value, Timestamp: nowMs}})
}
