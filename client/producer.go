package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// Promise is called once per record with its outcome. On success the
// record's Partition, Offset, ProducerID and ProducerEpoch are set.
type Promise func(*Record, error)

// Producer writes records. With idempotence (the default) every batch
// carries the producer id, epoch and a per-partition sequence assigned when
// the batch is first sent and kept on every retry, so the broker drops
// duplicates; up to max.in.flight.requests.per.connection requests are in
// flight per broker and order is kept per partition.
type Producer struct {
	cfg  config
	cl   *cluster
	part Partitioner

	mu       sync.Mutex
	parts    map[TopicPartition]*ppart
	sinks    map[int32]*sink
	bufs     batchBufs // buffers of acknowledged batches, for new ones
	bufUsed  int
	bufFreed chan struct{}
	pending  int // records not yet completed
	idle     chan struct{}
	flushing int
	closed   bool

	// idempotence
	pid       int64
	epoch     int16
	pidState  pidState
	pidErr    error
	resetting bool // a new producer id is needed once nothing is in flight

	nextExpiry time.Time // no batch reaches delivery.timeout.ms before (see expireLocked)
	drainFrom  int       // where drain's next round starts in the partition order

	txn *txnState

	compMu   sync.Mutex
	compQ    []completion
	compCh   chan struct{}
	compStop chan struct{}
	compDone chan struct{}

	wake   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type pidState int

const (
	pidNone pidState = iota
	pidFetching
	pidReady
)

// ppart is one partition's queue.
//
// window holds the batches sent and not yet retired, in sequence order: a
// batch retires once it and every batch before it are acknowledged. At most
// max.in.flight batches are in the window, so a batch retried after newer
// ones were acknowledged is still among the broker's last five and is
// recognised as a duplicate rather than written twice.
type ppart struct {
	tp       TopicPartition
	queued   []*pbatch // closed batches to send: retries first (in sequence order), then new ones
	open     *pbatch   // the batch accepting records
	window   []*pbatch
	inflight []*pbatch // sent, unanswered
	nextSeq  int32
	// blocked: something failed; send nothing until every batch in flight
	// is answered, then renumber (if a batch definitely failed) and go on.
	blocked bool
	// renumberFrom is the sequence of the earliest batch that definitely
	// failed since the last unblock (-1 none): batches after it move down.
	renumberFrom int32
	// lastBytes and lastCount size the next batch's buffers like the
	// previous one's, so a busy partition's batch is allocated once.
	lastBytes, lastCount int
	// growCap is how big the open batch may grow while it could not be
	// sent anyway (batch.max.size, capped by the topic's limit); at most
	// batch.size means it does not grow.
	growCap int
	// ackedPID is the producer id under which a batch of this partition
	// was last acknowledged (-1 none). Until one is, the partition sends one
	// batch at a time: a leader that does not know a producer id accepts
	// its batches at any sequence (KIP-360), so a later batch sent while
	// the first is retried would be written ahead of it.
	ackedPID int64
}

// pbatch is a batch of records for one partition.
type pbatch struct {
	tp       TopicPartition
	recs     []*Record
	proms    []Promise
	b        *record.Builder
	size     int
	created  time.Time
	full     bool
	seq      int32 // -1 until first sent
	pid      int64 // the producer id stamped on the batch (-1 until first sent)
	bytes    []byte
	attempts int
	retryAt  time.Time
	sentOnce bool
	acked    bool
	inWindow bool
	broker   int32
	lastErr  error
}

func (b *pbatch) count() int32 { return int32(len(b.recs)) }

// NewProducer returns a producer; no connection is made until it is used.
// Options that contradict each other are refused with an error saying why
// (Fatal: enable.idempotence requires acks=all, …).
func NewProducer(opts ...Opt) (*Producer, error) {
	cfg := newConfig(opts)
	if err := cfg.validateProducer(); err != nil {
		return nil, err
	}
	p := &Producer{cfg: cfg, parts: map[TopicPartition]*ppart{}, sinks: map[int32]*sink{}, wake: make(chan struct{}, 1),
		bufFreed: make(chan struct{}), idle: make(chan struct{}), pid: -1, epoch: -1}
	close(p.idle)
	// A batch's buffer is sized like its predecessor plus 1/16 (record.Builder).
	p.bufs.limit = 2*max(cfg.batchSize, cfg.batchMaxSize) + record.HeaderSize
	p.cl = newCluster(&p.cfg)
	p.part = cfg.partitioner
	if p.part == nil {
		p.part = NewDefaultPartitioner()
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if cfg.transactionalID != "" {
		p.txn = newTxnState()
	}
	p.compCh, p.compStop, p.compDone = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	go p.promiser()
	p.wg.Add(1)
	go p.run()
	return p, nil
}

func (p *Producer) idempotent() bool { return p.cfg.idempotence == IdempotenceOn }

func (p *Producer) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Produce buffers rec for sending and calls promise (which may be nil)
// with the outcome, on the producer's promise goroutine (one at a time, in
// the order the records of a partition were written). It blocks only to
// look up the topic or when buffer.memory is full, for at most
// max.block.ms or delivery.timeout.ms, whichever is shorter, or until ctx
// ends; ctx has no say once the record is buffered.
//
// The promise's error is nil once the record is acknowledged, or:
//   - a broker error the SDK does not retry (MESSAGE_TOO_LARGE, also for a
//     record over max.request.size, INVALID_RECORD, CORRUPT_MESSAGE after
//     Retries ran out, INVALID_PRODUCER_EPOCH, …), or the last retriable
//     one once Retries ran out;
//   - ErrDeliveryTimeout (which matches context.DeadlineExceeded) when the
//     record was not acknowledged within delivery.timeout.ms, wrapping the
//     last broker error it was retried for (NOT_LEADER_OR_FOLLOWER,
//     NOT_ENOUGH_REPLICAS, UNKNOWN_TOPIC_OR_PARTITION for a topic that does
//     not exist, …); Indefinite reports whether it may have been written;
//   - while waiting for the topic or for buffer space: ctx's error, or a
//     max.block.ms error that matches context.DeadlineExceeded, wrapping
//     the last metadata error; a topic error that is not retriable
//     (INVALID_TOPIC_EXCEPTION, …) at once;
//   - in a transaction: ErrProducerFenced; an error wrapping ErrAbortable
//     once the transaction must be aborted; ErrAborted for records still
//     buffered when AbortTransaction was called; a plain error before
//     InitTransactions or outside a transaction;
//   - ErrClosed once the producer is closed.
func (p *Producer) Produce(ctx context.Context, rec *Record, promise Promise) {
	if promise == nil {
		promise = func(*Record, error) {}
	}
	if err := p.produce(ctx, rec, promise); err != nil {
		promise(rec, err)
	}
}

func (p *Producer) produce(ctx context.Context, rec *Record, promise Promise) error {
	if rec.Topic == "" {
		return errors.New("strand: record has no topic")
	}
	// max.block.ms bounds the two waits below together, and so does
	// delivery.timeout.ms: a record still waiting for its topic's metadata
	// or for buffer space when it could no longer be delivered in time
	// fails then (with ErrDeliveryTimeout) rather than at max.block.ms.
	// Their context is made only when one of them blocks: a timer per
	// record was a few allocations and a good part of this function's cost.
	now := time.Now()
	var bctx context.Context
	cancel := context.CancelFunc(func() {})
	defer func() { cancel() }()
	blockCtx := func() context.Context {
		if bctx == nil {
			d, cause := p.cfg.maxBlock, maxBlockExpired(p.cfg.maxBlock)
			if p.cfg.deliveryTimeout < d {
				d, cause = p.cfg.deliveryTimeout, ErrDeliveryTimeout
			}
			bctx, cancel = context.WithDeadlineCause(ctx, now.Add(d), cause)
		}
		return bctx
	}
	ti := p.cl.knownTopic(rec.Topic)
	if ti == nil {
		var err error
		if ti, err = p.cl.waitTopic(blockCtx(), rec.Topic); err != nil {
			return err
		}
	}
	n := len(ti.partitions)
	if rec.Timestamp.IsZero() {
		rec.Timestamp = now
		if p.cfg.clock != clock.Real {
			rec.Timestamp = p.cfg.clock.Now()
		} else if bctx != nil {
			rec.Timestamp = time.Now() // after waiting for the topic
		}
	}
	w := rec.toWire()
	size := w.EncodedSize() + 8
	if size+record.HeaderSize > p.cfg.maxRequestSize {
		return errs.New(pb.ErrorCode_MESSAGE_TOO_LARGE, "the record is %d bytes when serialized, larger than max.request.size=%d", size, p.cfg.maxRequestSize)
	}
	p.mu.Lock()
	for p.bufUsed+size > p.cfg.bufferMemory && !p.closed {
		ch := p.bufFreed
		p.mu.Unlock()
		bc := blockCtx()
		select {
		case <-ch:
		case <-bc.Done():
			return fmt.Errorf("strand: waiting for room in buffer.memory (%d bytes): %w", p.cfg.bufferMemory, context.Cause(bc))
		}
		p.mu.Lock()
	}
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if p.txn != nil {
		if err := p.txn.checkProduce(); err != nil {
			return err
		}
	}
	part := p.part.Partition(rec, n)
	pp, err := p.ppartLocked(rec, part, n)
	if err != nil {
		return err
	}
	// Keyless records spread over several partitions move on when a batch
	// reaches batch.size (sticky partitioning) rather than grow it: a
	// partition with a full window would otherwise keep them longest.
	sticky := rec.Key == nil && p.cfg.partitioner == nil
	growCap := p.growCap(ti)
	if sticky && n > 1 {
		growCap = p.cfg.batchSize
	}
	pp.growCap = growCap
	if b := pp.open; b != nil && b.size > 0 && b.size+size > p.cfg.batchSize && !p.mayGrowLocked(pp, b.size+size) {
		p.closeOpen(pp)
		if sticky {
			// Sticky partitioning moves on when a batch fills.
			p.part.OnNewBatch(rec.Topic, n)
			if pp, err = p.ppartLocked(rec, p.part.Partition(rec, n), n); err != nil {
				return err
			}
			pp.growCap = growCap
			if b := pp.open; b != nil && b.size > 0 && b.size+size > p.cfg.batchSize && !p.mayGrowLocked(pp, b.size+size) {
				p.closeOpen(pp)
			}
		}
	}
	p.appendLocked(pp, rec, promise, w, size)
	if p.txn != nil {
		p.txn.addPartition(pp.tp)
	}
	return nil
}

// knownTopic is the cached metadata of a topic with partitions, or nil
// (then waitTopic looks it up).
func (c *cluster) knownTopic(name string) *topicInfo {
	c.mu.Lock()
	ti := c.topics[name]
	c.mu.Unlock()
	if ti == nil || ti.err != nil || len(ti.partitions) == 0 {
		return nil
	}
	return ti
}

func (p *Producer) ppartLocked(rec *Record, part int32, n int) (*ppart, error) {
	if part < 0 || int(part) >= n {
		return nil, errs.New(pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "partition %d out of range for %s (%d partitions)", part, rec.Topic, n)
	}
	rec.Partition = part
	tp := TopicPartition{rec.Topic, part}
	pp := p.parts[tp]
	if pp == nil {
		pp = &ppart{tp: tp, renumberFrom: -1, ackedPID: -1}
		p.parts[tp] = pp
	}
	return pp, nil
}

// growCap is how far a batch of topic ti may grow past batch.size:
// batch.max.size, within max.request.size and 90 % of the topic's
// max.message.bytes (compression may add a little to incompressible
// data). A topic whose limit is unknown gets no growth.
func (p *Producer) growCap(ti *topicInfo) int {
	c := min(p.cfg.batchMaxSize, p.cfg.maxRequestSize-record.HeaderSize)
	if ti.maxMessageBytes <= 0 || p.cfg.batchSize == 0 { // unknown limit; batching off
		return p.cfg.batchSize
	}
	c = min(c, ti.maxMessageBytes/10*9-record.HeaderSize)
	return max(c, p.cfg.batchSize)
}

// mayGrowLocked reports whether pp's open batch may take records up to
// size bytes rather than close: it is within growCap, and the batch could
// not be sent now anyway (batches queued ahead of it, the partition
// blocked, or max.in.flight batches out).
func (p *Producer) mayGrowLocked(pp *ppart, size int) bool {
	return size <= pp.growCap && p.windowFullLocked(pp)
}

// windowFullLocked: a batch closed now would wait.
func (p *Producer) windowFullLocked(pp *ppart) bool {
	return len(pp.queued) > 0 || pp.blocked || len(pp.window) >= p.cfg.maxInFlight
}

func (p *Producer) appendLocked(pp *ppart, rec *Record, promise Promise, w record.Record, size int) {
	if pp.open == nil {
		opts := record.BatchOptions{Compression: p.cfg.compression, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, PartitionLeaderEpoch: -1}
		bld := record.NewBuilder(opts)
		// Like the previous batch, but not a lone large record's size.
		hint := p.cfg.batchSize
		if pp.lastCount > 1 {
			hint = max(hint, pp.growCap)
		}
		size := min(pp.lastBytes, hint+record.HeaderSize)
		bld.SizeHint(size)
		if buf := p.bufs.get(size + size/16); buf != nil {
			bld.SetBuffer(buf)
		}
		pp.open = &pbatch{tp: pp.tp, b: bld, created: p.cfg.clock.Now(), seq: -1, pid: -1}
		if pp.lastCount > 1 {
			pp.open.recs = make([]*Record, 0, pp.lastCount)
			pp.open.proms = make([]Promise, 0, pp.lastCount)
		}
	}
	b := pp.open
	b.b.Append(w)
	b.recs = append(b.recs, rec)
	b.proms = append(b.proms, promise)
	b.size += size
	p.bufUsed += size
	if p.pending == 0 {
		p.idle = make(chan struct{})
	}
	p.pending++
	if b.size >= p.cfg.batchSize && (b.size >= pp.growCap || !p.windowFullLocked(pp)) {
		p.closeOpen(pp)
	}
	if b.full || p.cfg.linger == 0 || len(b.recs) == 1 {
		p.kick()
	}
}

func (p *Producer) closeOpen(pp *ppart) {
	if pp.open == nil {
		return
	}
	pp.open.full = true
	pp.lastBytes, pp.lastCount = pp.open.b.EstimatedSize(), len(pp.open.recs)
	pp.queued = append(pp.queued, pp.open)
	pp.open = nil
	p.kick()
}

// ProduceSync produces recs and waits for every outcome, without lingering.
// Each record's error is one Produce's promise could get (see Produce). If
// ctx ends first, it returns then: the records without an outcome yet fail
// with ctx's error (context.DeadlineExceeded or context.Canceled), marked
// Indefinite, since they may still be written.
func (p *Producer) ProduceSync(ctx context.Context, recs ...*Record) ProduceResults {
	res := make(ProduceResults, len(recs))
	var mu sync.Mutex // guards res and returned
	returned := false
	left := len(recs)
	all := make(chan struct{})
	if left == 0 {
		close(all)
	}
	p.mu.Lock()
	p.flushing++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.flushing--
		p.mu.Unlock()
	}()
	for i, r := range recs {
		p.Produce(ctx, r, func(r *Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if returned {
				return
			}
			res[i] = ProduceResult{Record: r, Err: err}
			if left--; left == 0 {
				close(all)
			}
		})
	}
	p.kick()
	select {
	case <-all:
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	returned = true
	for i, r := range res {
		if r.Record == nil {
			res[i] = ProduceResult{Record: recs[i], Err: &indefiniteError{fmt.Errorf("strand: no outcome before the context ended: %w", expired(ctx, nil))}}
		}
	}
	return res
}

// ProduceResult is one record's outcome.
type ProduceResult struct {
	Record *Record
	Err    error
}

// ProduceResults are the outcomes of ProduceSync.
type ProduceResults []ProduceResult

// FirstErr returns the first error, if any.
func (rs ProduceResults) FirstErr() error {
	for _, r := range rs {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// Flush sends everything buffered without lingering and waits until every
// record so far has its outcome (its promise has run), or ctx ends. It
// returns nil, or ctx's error; records' failures go to their promises.
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	p.flushing++
	idle := p.idle
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.flushing--
		p.mu.Unlock()
	}()
	p.kick()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close flushes (for at most delivery.timeout.ms or until ctx ends), then
// fails whatever is left with ErrClosed and releases connections. It
// returns Flush's error: nil, ctx's, or context.DeadlineExceeded when
// delivery.timeout.ms passed first. Closing twice returns nil.
func (p *Producer) Close(ctx context.Context) error {
	fctx, cancel := context.WithTimeout(ctx, p.cfg.deliveryTimeout)
	err := p.Flush(fctx)
	cancel()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.bufFreed)
	p.bufFreed = make(chan struct{})
	for _, pp := range p.parts {
		if pp.open != nil {
			p.closeOpen(pp)
		}
		for _, b := range pp.queued {
			p.completeLocked(b, -1, ErrClosed)
		}
		pp.queued = nil
	}
	sinks := p.sinks
	p.mu.Unlock()
	for _, s := range sinks {
		s.stop(2 * time.Second)
	}
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	for _, pp := range p.parts {
		for _, b := range pp.inflight {
			p.completeLocked(b, -1, ErrClosed)
		}
		pp.inflight = nil
	}
	p.mu.Unlock()
	close(p.compStop)
	<-p.compDone
	p.cl.close()
	return err
}

type completion struct {
	b     *pbatch
	base  int64
	err   error
	pid   int64
	epoch int16
}

// completeLocked queues a batch's outcome for its promises, which run in
// order on the promise goroutine (never under the producer's lock, so a
// promise may produce again).
func (p *Producer) completeLocked(b *pbatch, base int64, err error) {
	p.bufUsed -= b.size
	close(p.bufFreed)
	p.bufFreed = make(chan struct{})
	p.compMu.Lock()
	p.compQ = append(p.compQ, completion{b: b, base: base, err: err, pid: p.pid, epoch: p.epoch})
	p.compMu.Unlock()
	select {
	case p.compCh <- struct{}{}:
	default:
	}
}

// promiser runs promises, then marks their records done.
func (p *Producer) promiser() {
	defer close(p.compDone)
	for {
		p.compMu.Lock()
		q := p.compQ
		p.compQ = nil
		p.compMu.Unlock()
		if len(q) == 0 {
			select {
			case <-p.compCh:
				continue
			case <-p.compStop:
				p.compMu.Lock()
				empty := len(p.compQ) == 0
				p.compMu.Unlock()
				if empty {
					return
				}
				continue
			}
		}
		for _, c := range q {
			for i, r := range c.b.recs {
				if c.err == nil {
					// base -1: acks=0, or a duplicate whose offset the broker
					// no longer knows; every record's offset is unknown, as
					// in Kafka's RecordMetadata.
					r.Offset = -1
					if c.base >= 0 {
						r.Offset = c.base + int64(i)
					}
					r.ProducerID, r.ProducerEpoch = c.pid, c.epoch
				}
				c.b.proms[i](r, c.err)
			}
			p.mu.Lock()
			p.pending -= len(c.b.recs)
			if p.pending == 0 {
				close(p.idle)
			}
			if c.err == nil && p.txn != nil {
				p.txn.acked(len(c.b.recs))
			}
			p.mu.Unlock()
		}
	}
}

func (p *Producer) run() {
	defer p.wg.Done()
	timer := p.cfg.clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := p.drain()
		if next <= 0 {
			next = time.Hour
		}
		if !timer.Stop() {
			select {
			case <-timer.C():
			default:
			}
		}
		timer.Reset(next)
		select {
		case <-p.ctx.Done():
			return
		case <-p.wake:
		case <-timer.C():
		}
	}
}

// drain sends whatever is ready, one batch per partition per request, and
// returns when it next needs to look (linger, backoff).
func (p *Producer) drain() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0
	}
	now := p.cfg.clock.Now()
	wait := time.Duration(0)
	soon := func(d time.Duration) {
		if d > 0 && (wait == 0 || d < wait) {
			wait = d
		}
	}
	p.expireLocked(now)
	if p.idempotent() {
		if p.resetting && p.totalInflight() == 0 {
			p.pidState = pidNone
		}
		if p.pidState != pidReady {
			if p.pidState == pidNone && p.pending > 0 && p.txn == nil {
				p.pidState = pidFetching
				go p.initProducerID()
			}
			return 100 * time.Millisecond
		}
	}
	if p.txn != nil && !p.txn.canSend() {
		p.failAllLocked(p.txn.fatalErr())
		return 0
	}
	needMeta := false
	keys := make([]TopicPartition, 0, len(p.parts))
	for tp := range p.parts {
		keys = append(keys, tp)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Topic != keys[j].Topic {
			return keys[i].Topic < keys[j].Topic
		}
		return keys[i].Partition < keys[j].Partition
	})
	// One batch per partition per request, but as many requests as the
	// windows allow: rounds go on until a round sends nothing. (With one
	// round per wake-up, each answer sent just one batch, and a window
	// that once emptied never filled again until the application produced
	// more: a Flush or a transaction's commit drained at half speed.)
	for {
		byBroker := map[int32][]*pbatch{}
		reqBytes := map[int32]int{}
		// Each round starts one partition further on: when max.request.size
		// leaves some partitions for the next request, the first ones in
		// the order do not take every request (Kafka's drainIndex).
		start := 0
		if len(keys) > 0 {
			start = p.drainFrom % len(keys)
		}
		for i := range keys {
			tp := keys[(start+i)%len(keys)]
			pp := p.parts[tp]
			if pp.blocked && len(pp.inflight) == 0 {
				p.renumberLocked(pp)
				pp.blocked = false
			}
			if pp.blocked || p.resetting {
				continue
			}
			var head *pbatch
			if len(pp.queued) > 0 {
				head = pp.queued[0]
			} else if b := pp.open; b != nil {
				// Due: lingered enough, flushed, or full. A due batch
				// that could not be sent yet (the window is full) stays
				// open and takes more records; the answer that frees a
				// place in the window sends it.
				due := b.created.Add(p.cfg.linger)
				ready := p.flushing > 0 || !now.Before(due) || b.size >= p.cfg.batchSize
				switch {
				case !ready:
					soon(due.Sub(now))
				case !p.windowFullLocked(pp):
					p.closeOpen(pp)
					head = pp.queued[0]
				}
			}
			if head == nil {
				continue
			}
			if !head.inWindow && len(pp.window) >= p.cfg.maxInFlight {
				continue
			}
			if !head.inWindow && len(pp.window) > 0 && p.idempotent() && pp.ackedPID != p.pid {
				continue // the first batch under this producer id goes alone
			}
			if now.Before(head.retryAt) {
				soon(head.retryAt.Sub(now))
				continue
			}
			leader, _ := p.cl.leader(tp)
			if leader < 0 {
				needMeta = true
				soon(p.cfg.retryBackoff)
				continue
			}
			if len(pp.inflight) > 0 && pp.inflight[0].broker != leader {
				continue // let the old leader answer first
			}
			// A request stays within max.request.size (its first batch
			// always goes); the next round takes what did not fit.
			if len(byBroker[leader]) > 0 && reqBytes[leader]+head.size+record.HeaderSize > p.cfg.maxRequestSize {
				continue
			}
			s := p.sinkLocked(leader)
			if !s.canSend(len(byBroker[leader]) > 0) {
				continue
			}
			if err := p.prepareLocked(pp, head); err != nil {
				pp.queued = pp.queued[1:]
				p.completeLocked(head, -1, err)
				continue
			}
			pp.queued = pp.queued[1:]
			head.broker = leader
			head.sentOnce = true
			head.attempts++
			if !head.inWindow {
				head.inWindow = true
				pp.window = append(pp.window, head)
			}
			pp.inflight = append(pp.inflight, head)
			byBroker[leader] = append(byBroker[leader], head)
			reqBytes[leader] += head.size + record.HeaderSize
		}
		if len(byBroker) == 0 {
			break
		}
		p.drainFrom++
		for id, bs := range byBroker {
			p.sinks[id].send(bs)
		}
	}
	if needMeta {
		go p.refreshMeta()
	}
	return wait
}

// failAllLocked fails every batch not yet sent (a fenced producer).
func (p *Producer) failAllLocked(err error) {
	for _, pp := range p.parts {
		if pp.open != nil {
			p.closeOpen(pp)
		}
		for _, b := range pp.queued {
			if b.inWindow {
				removeBatch(&pp.window, b)
				b.inWindow = false
			}
			p.completeLocked(b, -1, err)
		}
		pp.queued = nil
	}
}

func (p *Producer) totalInflight() int {
	n := 0
	for _, pp := range p.parts {
		n += len(pp.inflight)
	}
	return n
}

func (p *Producer) sinkLocked(id int32) *sink {
	s := p.sinks[id]
	if s == nil {
		s = newSink(p, id)
		p.sinks[id] = s
	}
	return s
}

// prepareLocked builds the batch bytes the first time and stamps producer
// fields: the sequence is assigned when a batch is first sent and kept.
func (p *Producer) prepareLocked(pp *ppart, b *pbatch) error {
	if b.bytes == nil {
		out, err := b.b.Build()
		if err != nil {
			return err
		}
		if p.cfg.compression != record.None {
			p.bufs.put(b.b.TakeBuffer()) // the records were compressed out of it
		}
		b.bytes, b.b = out, nil
	}
	if p.idempotent() && b.seq < 0 {
		b.seq = pp.nextSeq
		pp.nextSeq = record.IncrementSequence(pp.nextSeq, b.count())
	}
	if p.idempotent() {
		record.SetProducerFields(b.bytes, p.pid, p.epoch, b.seq, p.txn != nil)
		b.pid = p.pid
	}
	return nil
}

// renumberLocked closes the sequence gap a definitely failed batch left:
// the batches after it (none of which can have been written: a leader that
// knows the producer refuses anything past a gap, and one that does not is
// sent only the first batch until it is acknowledged) move down to follow
// what precedes it.
func (p *Producer) renumberLocked(pp *ppart) {
	if !p.idempotent() || pp.renumberFrom < 0 {
		return
	}
	next := pp.renumberFrom
	for _, b := range pp.window {
		if b.seq < 0 || b.acked || seqAfter(pp.renumberFrom, b.seq) {
			continue
		}
		b.seq = next
		next = record.IncrementSequence(next, b.count())
	}
	pp.nextSeq = next
	pp.renumberFrom = -1
}

// restartSequencesLocked numbers every unacknowledged batch from 0 under a
// new producer id (nothing is in flight).
func (p *Producer) restartSequencesLocked(pp *ppart) {
	keep := pp.window[:0]
	next := int32(0)
	for _, b := range pp.window {
		if b.acked {
			b.inWindow = false
			continue
		}
		b.seq = next
		next = record.IncrementSequence(next, b.count())
		keep = append(keep, b)
	}
	pp.window = keep
	pp.nextSeq = next
	pp.renumberFrom = -1
}

func (p *Producer) refreshMeta() {
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.requestTimeout)
	defer cancel()
	if err := p.cl.refresh(ctx, nil); err == nil {
		p.kick()
	}
}

// initProducerID obtains a producer id and epoch (KIP-360: after a reset,
// a new id), then renumbers every partition from sequence 0.
func (p *Producer) initProducerID() {
	var resp *pb.InitProducerIdResponse
	var err error
	for attempt := 0; p.ctx.Err() == nil; attempt++ {
		err = p.cl.any(p.ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
			var e error
			resp, e = pb.NewTransactionsClient(cc).InitProducerId(ctx, &pb.InitProducerIdRequest{ProducerId: -1, ProducerEpoch: -1})
			return e
		})
		if err == nil {
			err = errs.FromCode(resp.ErrorCode, resp.ErrorMessage)
		}
		if err == nil {
			break
		}
		p.cl.lg.Debug("InitProducerId failed; retrying", "err", err)
		if p.cfg.sleep(p.ctx, backoff(&p.cfg, attempt)) != nil {
			return
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.pidErr = err
		p.pidState = pidNone
		return
	}
	if resp == nil { // closed before the first attempt
		p.pidState = pidNone
		return
	}
	p.pid, p.epoch = resp.ProducerId, int16(resp.ProducerEpoch)
	p.pidState = pidReady
	p.resetting = false
	for _, pp := range p.parts {
		p.restartSequencesLocked(pp)
	}
	p.kick()
}

// expireLocked fails batches that waited longer than delivery.timeout.ms
// and are not in flight.
//
// It runs on every drain, and a full buffer holds thousands of queued
// batches, so it looks only once the oldest batch can have expired:
// nextExpiry is the earliest deadline of every batch open, queued or in
// flight at the last look (the only ones that can be queued before a batch
// created since, whose deadline is later still).
func (p *Producer) expireLocked(now time.Time) {
	if now.Before(p.nextExpiry) {
		return
	}
	next := now.Add(p.cfg.deliveryTimeout)
	earliest := func(b *pbatch) {
		if d := b.created.Add(p.cfg.deliveryTimeout); d.Before(next) {
			next = d
		}
	}
	var expired []*pbatch
	for _, pp := range p.parts {
		keep := pp.queued[:0]
		expired = expired[:0]
		for _, b := range pp.queued {
			if now.Sub(b.created) < p.cfg.deliveryTimeout {
				keep = append(keep, b)
				earliest(b)
				continue
			}
			expired = append(expired, b)
		}
		pp.queued = keep
		for _, b := range expired {
			err := deliveryExpired(b, fmt.Sprintf("after %d attempts", b.attempts))
			if b.sentOnce {
				err = &indefiniteError{err}
				p.needResetLocked(err)
			}
			p.dropLocked(pp, b)
			p.completeLocked(b, -1, err)
		}
		for _, b := range pp.inflight {
			earliest(b)
		}
		// The open batch, never sent, can wait past its deadline while
		// the window stays full (a leader gone, a producer id being
		// fetched): it fails like a queued one.
		if b := pp.open; b != nil {
			if now.Sub(b.created) >= p.cfg.deliveryTimeout {
				pp.open = nil
				p.completeLocked(b, -1, deliveryExpired(b, "never sent (the partition's window stayed full)"))
			} else {
				earliest(b)
			}
		}
	}
	p.nextExpiry = next
}

// deliveryExpired is the error of a batch that reached delivery.timeout.ms:
// ErrDeliveryTimeout (so context.DeadlineExceeded) and the last error the
// batch was retried for, both matchable.
func deliveryExpired(b *pbatch, how string) error {
	if b.lastErr == nil {
		return fmt.Errorf("%w: %s, %d records, %s", ErrDeliveryTimeout, b.tp, len(b.recs), how)
	}
	return fmt.Errorf("%w: %s, %d records, %s (last error: %w)", ErrDeliveryTimeout, b.tp, len(b.recs), how, b.lastErr)
}

// needResetLocked: a sent batch is given up without a definite answer
// (err), so its sequence may be taken; the producer continues under a new
// id, or a transaction must abort.
func (p *Producer) needResetLocked(err error) {
	if !p.idempotent() {
		return
	}
	if p.txn != nil {
		p.txn.abortable(fmt.Errorf("a batch of the transaction failed without a definite answer: %w", err))
		return
	}
	p.resetting = true
}
