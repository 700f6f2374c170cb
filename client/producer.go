package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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

	// refreshing is set while a metadata refresh runs (or waits out its
	// backoff); lastRefresh is when the last one ended, in Unix nanos.
	refreshing  atomic.Bool
	lastRefresh atomic.Int64

	mu       sync.Mutex
	parts    map[TopicPartition]*ppart
	partKeys []TopicPartition // parts' keys in order (drain's; kept sorted on insert)
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
	// coords caches the coordinators coordinatorCall found (transactions.go).
	coords coordCache

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
	// leaderLost: the last attempt failed because broker is gone or no
	// longer leads the partition. While such a batch waits out its
	// backoff, the sender looks the leader up every retry.backoff.ms and
	// sends it at once to a new one (KIP-951).
	leaderLost bool
	// movedAt is attempts when the batch was last sent to a new leader:
	// its backoff grows from there, since the failures at the old one say
	// nothing of the new.
	movedAt int
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
//     InitTransactions or outside a transaction. Any other failure of a
//     record in an open transaction, one of the above included, makes
//     the transaction abortable: CommitTransaction then fails with
//     ErrAbortable and commits nothing;
//   - ErrClosed once the producer is closed.
func (p *Producer) Produce(ctx context.Context, rec *Record, promise Promise) {
	if promise == nil {
		promise = func(*Record, error) {}
	}
	if err := p.produce(ctx, rec, promise); err != nil {
		var se txnStateError
		if p.txn != nil && !errors.As(err, &se) {
			// As Kafka's producer does, a record that fails before it is
			// sent (its topic unknown in time, too large, no room in the
			// buffer, no such partition) dooms the open transaction: a
			// commit would leave it out.
			p.txn.produceFailed(err)
		}
		promise(rec, err)
	}
}

// txnStateError is the transaction's state refusing a record (no
// transaction open, it is ending, it is already doomed, the producer is
// fenced): Produce hands it over as it is, and it dooms nothing.
type txnStateError struct{ error }

func (e txnStateError) Unwrap() error { return e.error }

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
			return txnStateError{err}
		}
	}
	part := p.part.Partition(rec, n)
	pp, err := p.ppartLocked(rec, part, n)
	if err != nil {
		return err
	}
	pp.growCap = p.growCap(ti)
	if b := pp.open; b != nil && b.size > 0 && b.size+size > p.cfg.batchSize && !p.mayGrowLocked(pp, b.size+size) {
		p.closeOpen(pp)
	}
	p.appendLocked(pp, rec, promise, w, size)
	// Keyless records spread over several partitions stay on the sticky
	// partition for a window of batch.max.size batches, so that its
	// batches grow while its window is full as one partition's do
	// (DefaultPartitioner's doc: moving on at every full 16 KiB batch cost
	// the brokers a batch per 16 KiB).
	if dp, ok := p.part.(*DefaultPartitioner); ok && rec.Key == nil && p.cfg.partitioner == nil && n > 1 {
		dp.Appended(rec.Topic, n, size, max(pp.growCap, p.cfg.batchSize)*max(p.cfg.maxInFlight, 1))
	}
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
		i, _ := slices.BinarySearchFunc(p.partKeys, tp, compareTP)
		p.partKeys = slices.Insert(p.partKeys, i, tp)
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

// compareTP orders partitions by topic, then partition number.
func compareTP(a, b TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}
