package workload

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/client"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// The Kafka front door: the workload's producers, stage and readers as
// franz-go clients of the cluster's Kafka listeners. Errors that carry a
// Kafka error code are handed to the workload as the SDK's *client.Error
// of the same code (Strand's codes are Kafka's), so errors.Is(err,
// client.ErrProducerFenced) and the like classify them alike through both
// doors. Records franz-go fails because their transaction is aborting do
// not match client.ErrAborted (see errAbortedMaybeSent).

// kafkaOpts are every franz-go client's options.
func (r *run) kafkaOpts(extra ...kgo.Opt) []kgo.Opt {
	// Requests are retried until franz-go's retry timeout (30 s for most),
	// not a count: with the default 20 tries a coordinator's restart
	// outlasted an AbortTransaction ("unable to dial ... connection
	// refused", which the checker counts as a failed abort).
	o := []kgo.Opt{kgo.SeedBrokers(r.cfg.KafkaBootstrap...), kgo.RetryBackoffFn(kafkaBackoff), kgo.RequestRetries(math.MaxInt32)}
	if r.cfg.KafkaDial != nil {
		o = append(o, kgo.Dialer(r.cfg.KafkaDial))
	}
	o = append(o, r.cfg.KafkaOpts...)
	return append(o, extra...)
}

// kafkaBackoff waits 50 ms before the first retry, doubling up to 1 s.
func kafkaBackoff(tries int) time.Duration {
	return min(50*time.Millisecond<<min(max(tries-1, 0), 5), time.Second)
}

// errAbortedMaybeSent is franz-go's kgo.ErrAborting as the workload sees
// it. It is not the SDK's client.ErrAborted, which promises the record
// was never sent (the workload records such a write Unsent, and the
// checker counts any read of it as Unwritten): franz-go also fails with
// ErrAborting a batch an earlier try of which the broker wrote, when that
// try was answered with a retriable error such as NOT_LEADER_OR_FOLLOWER
// (a leader that appended the batch and lost its leadership before the
// acks came). The write's fate is then unknown, as it is for any record of
// an aborted transaction that was not acknowledged.
var errAbortedMaybeSent = errors.New("the transaction aborted before the record was acknowledged (it may have been written)")

// kafkaErr maps a franz-go error to the SDK's error of the same Kafka
// code (keeping franz-go's error in the chain).
func kafkaErr(err error) error {
	if err == nil {
		return nil
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return fmt.Errorf("%w (franz-go: %w)", &client.Error{Code: pb.ErrorCode(ke.Code), Message: ke.Description}, err)
	}
	if errors.Is(err, kgo.ErrAborting) {
		return fmt.Errorf("%w (franz-go: %w)", errAbortedMaybeSent, err)
	}
	return err
}

func toKgo(rec *client.Record) *kgo.Record {
	out := &kgo.Record{Topic: rec.Topic, Partition: rec.Partition, Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp}
	for _, h := range rec.Headers {
		out.Headers = append(out.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return out
}

func fromKgo(rec *kgo.Record) *client.Record {
	out := &client.Record{Topic: rec.Topic, Partition: rec.Partition, Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp,
		Offset: rec.Offset, LeaderEpoch: rec.LeaderEpoch, ProducerID: rec.ProducerID, ProducerEpoch: rec.ProducerEpoch,
		Transactional: rec.Attrs.IsTransactional()}
	for _, h := range rec.Headers {
		out.Headers = append(out.Headers, client.Header{Key: h.Key, Value: h.Value})
	}
	return out
}

// kafkaProducer is a franz-go transactional producer as a txnProducer.
type kafkaProducer struct {
	cl  *kgo.Client
	pid pidCache
	// unconfirmed: a commit got no answer (see CommitTransaction).
	unconfirmed bool
}

func (r *run) newKafkaProducer(ctx context.Context, id string) (*kafkaProducer, error) {
	cl, err := kgo.NewClient(r.kafkaOpts(kgo.TransactionalID(id), kgo.TransactionTimeout(r.cfg.TransactionTimeout),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(2*time.Millisecond), kgo.RecordDeliveryTimeout(opTimeout))...)
	if err != nil {
		return nil, err
	}
	// franz-go initializes the producer id when first needed; the
	// workload's incarnation starts (and fences the one before) now.
	pid, _, err := cl.ProducerID(ctx)
	if err == nil && pid < 0 {
		// franz-go goes on without a producer id when the cluster does
		// not offer InitProducerId; a transactional producer cannot.
		err = errors.New("the Kafka listener handed out no producer id (InitProducerId)")
	}
	if err != nil {
		cl.Close()
		return nil, kafkaErr(err)
	}
	k := &kafkaProducer{cl: cl}
	k.pid.load(cl)
	return k, nil
}

func (p *kafkaProducer) BeginTransaction() error { return kafkaErr(p.cl.BeginTransaction()) }

func (p *kafkaProducer) Produce(ctx context.Context, rec *client.Record, promise client.Promise) {
	p.cl.Produce(ctx, toKgo(rec), kgoPromise(rec, promise))
}

// kgoPromise is franz-go's produce callback for an SDK promise: the
// record as the broker placed it, or the error as the SDK's.
func kgoPromise(rec *client.Record, promise client.Promise) func(*kgo.Record, error) {
	return func(got *kgo.Record, err error) {
		if promise == nil {
			return
		}
		if err != nil {
			promise(rec, kafkaErr(err))
			return
		}
		promise(fromKgo(got), nil)
	}
}

func (p *kafkaProducer) ProduceSync(ctx context.Context, recs ...*client.Record) client.ProduceResults {
	return produceSync(ctx, p.Produce, recs)
}

// produceSync produces recs with produce and waits for every promise.
func produceSync(ctx context.Context, produce func(context.Context, *client.Record, client.Promise), recs []*client.Record) client.ProduceResults {
	out := make(client.ProduceResults, len(recs))
	var wg sync.WaitGroup
	for i, rec := range recs {
		wg.Add(1)
		produce(ctx, rec, func(got *client.Record, err error) {
			defer wg.Done()
			out[i] = client.ProduceResult{Record: got, Err: err}
		})
	}
	wg.Wait()
	return out
}

// CommitTransaction commits. An EndTxn that got no answer (a network
// error, not a Kafka error code) leaves the outcome unknown, and franz-go
// cannot send the commit again: the producer answers
// client.ErrCommitOutcomeUnknown from then on, and the workload records
// the transaction Unknown and replaces the producer.
func (p *kafkaProducer) CommitTransaction(ctx context.Context) error {
	if p.unconfirmed {
		return fmt.Errorf("%w (franz-go cannot send a commit whose outcome is unconfirmed again)", client.ErrCommitOutcomeUnknown)
	}
	if err := p.cl.Flush(ctx); err != nil {
		return err
	}
	err := p.cl.EndTransaction(ctx, kgo.TryCommit)
	if err != nil && !isKafkaCode(err) && ctx.Err() == nil {
		p.unconfirmed = true
		return fmt.Errorf("%w (franz-go: %w)", client.ErrCommitOutcomeUnknown, err)
	}
	return kafkaErr(err)
}

// AbortTransaction aborts. An EndTxn that got no answer (the coordinator
// restarting) is sent again until ctx ends: franz-go then aborts by
// reinitializing the producer id, which fences the transaction; a
// coordinator that is away for a few seconds must not make an abort fail.
func (p *kafkaProducer) AbortTransaction(ctx context.Context) error {
	if err := p.cl.AbortBufferedRecords(ctx); err != nil {
		return err
	}
	for tries := 1; ; tries++ {
		err := p.cl.EndTransaction(ctx, kgo.TryAbort)
		if err == nil || isKafkaCode(err) || ctx.Err() != nil {
			return kafkaErr(err)
		}
		if sleep(ctx, kafkaBackoff(tries)) != nil {
			return kafkaErr(err)
		}
	}
}

// isKafkaCode reports whether err carries a Kafka error code (an answer).
func isKafkaCode(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke)
}

func (p *kafkaProducer) ProducerID() (int64, int16) { return p.pid.load(p.cl) }

// pidCache keeps the last producer id and epoch a franz-go client had.
// franz-go answers ProducerID with an error, not the id, while its
// producer id is in a failed state (after an error that the transaction
// must abort on): the records of that transaction were written under the
// last id it had, which is what the workload records.
type pidCache struct {
	mu    sync.Mutex
	id    int64
	epoch int16
	known bool
}

// load is the client's current producer id and epoch, else the last
// known (-1, -1 when none was ever known).
func (c *pidCache) load(cl *kgo.Client) (int64, int16) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	id, epoch, err := cl.ProducerID(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil && id >= 0 {
		c.id, c.epoch, c.known = id, epoch, true
	}
	if !c.known {
		return -1, -1
	}
	return c.id, c.epoch
}

func (p *kafkaProducer) Close(context.Context) error {
	p.cl.Close()
	return nil
}

// kafkaSession is a franz-go GroupTransactSession as a stageSession.
// franz-go's End(TryCommit) commits whatever records succeeded, leaving
// it to the caller to abort when one failed (a record failed before it
// was sent takes nothing else down with it); the stageSession contract is
// the SDK's, where a failed record makes End abort, so the session counts
// its failed records.
type kafkaSession struct {
	s      *kgo.GroupTransactSession
	pid    pidCache
	failed atomic.Int64 // records of the open transaction that failed
}

func (r *run) newKafkaSession(_ context.Context, name string) (*kafkaSession, error) {
	s, err := kgo.NewGroupTransactSession(r.kafkaOpts(kgo.TransactionalID(name), kgo.TransactionTimeout(r.cfg.TransactionTimeout),
		kgo.ConsumerGroup(r.group), kgo.ConsumeTopics(r.src), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(500*time.Millisecond), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(2*time.Millisecond), kgo.RecordDeliveryTimeout(opTimeout))...)
	if err != nil {
		return nil, err
	}
	return &kafkaSession{s: s}, nil
}

func (k *kafkaSession) Poll(ctx context.Context) ([]*client.Record, error) {
	fs := k.s.PollRecords(ctx, 64)
	var out []*client.Record
	fs.EachRecord(func(rec *kgo.Record) { out = append(out, fromKgo(rec)) })
	if len(out) == 0 {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, kafkaErr(fs.Err0())
	}
	return out, nil
}

func (k *kafkaSession) Begin() error {
	k.failed.Store(0)
	return kafkaErr(k.s.Begin())
}

func (k *kafkaSession) Produce(ctx context.Context, rec *client.Record, promise client.Promise) {
	done := kgoPromise(rec, promise)
	k.s.Produce(ctx, toKgo(rec), func(got *kgo.Record, err error) {
		if err != nil {
			k.failed.Add(1)
		}
		done(got, err)
	})
}

// End ends the transaction; a commit becomes an abort when a record of it
// failed. The flush first has every record's promise called.
func (k *kafkaSession) End(ctx context.Context, action client.EndAction) (bool, error) {
	if action == client.TryCommit {
		if err := k.s.Client().Flush(ctx); err != nil {
			return false, kafkaErr(err)
		}
		if k.failed.Load() > 0 {
			action = client.TryAbort
		}
	}
	committed, err := k.s.End(ctx, kgo.TransactionEndTry(action))
	return committed, kafkaErr(err)
}

func (k *kafkaSession) ProducerID() (int64, int16) { return k.pid.load(k.s.Client()) }

func (k *kafkaSession) Positions() map[client.TopicPartition]int64 {
	out := map[client.TopicPartition]int64{}
	for topic, parts := range k.s.Client().UncommittedOffsets() {
		for p, eo := range parts {
			out[client.TopicPartition{Topic: topic, Partition: p}] = eo.Offset
		}
	}
	return out
}

func (k *kafkaSession) Close(context.Context) error {
	k.s.Close()
	return nil
}

// kafkaReader is a franz-go direct consumer as a recordReader. It keeps
// the transaction markers franz-go reads (and hands out none of them) to
// know its position: the workload reads a partition up to its end, which
// may be a marker.
type kafkaReader struct {
	r       *run
	iso     kgo.IsolationLevel
	maxWait time.Duration

	cl      *kgo.Client
	want    map[client.TopicPartition]int64 // the assignment, until started
	started bool
	pos     map[client.TopicPartition]int64
}

func (r *run) newKafkaReader(iso client.IsolationLevel, maxWait time.Duration) (*kafkaReader, error) {
	k := &kafkaReader{r: r, iso: kgo.ReadUncommitted(), maxWait: maxWait, pos: map[client.TopicPartition]int64{}}
	if iso == client.ReadCommitted {
		k.iso = kgo.ReadCommitted()
	}
	return k, nil
}

// Assign sets the partitions to read and where to start; the first Poll
// starts reading them (an OffsetEarliest start is resolved to the log
// start offset first, so the position is known before anything is read).
func (k *kafkaReader) Assign(parts map[client.TopicPartition]int64) {
	if k.cl != nil {
		k.cl.Close()
		k.cl = nil
	}
	k.started, k.want, k.pos = false, map[client.TopicPartition]int64{}, map[client.TopicPartition]int64{}
	for tp, off := range parts {
		k.want[tp] = off
		if off >= 0 {
			k.pos[tp] = off
		}
	}
}

// start resolves the earliest starts and begins consuming. A failure
// (a leader being elected) is returned after a pause, so a caller that
// polls again at once does not spin.
func (k *kafkaReader) start(ctx context.Context) error {
	if k.cl == nil {
		cl, err := kgo.NewClient(k.r.kafkaOpts(kgo.FetchIsolationLevel(k.iso), kgo.KeepControlRecords(), kgo.FetchMaxWait(k.maxWait))...)
		if err != nil {
			return err
		}
		k.cl = cl
	}
	var earliest []client.TopicPartition
	for tp, off := range k.want {
		if off < 0 {
			earliest = append(earliest, tp)
		}
	}
	if len(earliest) > 0 {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		starts, err := listStarts(lctx, k.cl, earliest)
		cancel()
		if err != nil {
			sleep(ctx, 200*time.Millisecond)
			return err
		}
		for tp, off := range starts {
			k.pos[tp] = off
		}
	}
	consume := map[string]map[int32]kgo.Offset{}
	for tp := range k.want {
		if consume[tp.Topic] == nil {
			consume[tp.Topic] = map[int32]kgo.Offset{}
		}
		consume[tp.Topic][tp.Partition] = kgo.NewOffset().At(k.pos[tp])
	}
	k.cl.AddConsumePartitions(consume)
	k.started = true
	return nil
}

// listStarts asks the leaders for the log start offset of tps.
func listStarts(ctx context.Context, cl *kgo.Client, tps []client.TopicPartition) (map[client.TopicPartition]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	byTopic := map[string]int{}
	for _, tp := range tps {
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[tp.Topic] = i
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = tp.Topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition, p.Timestamp, p.CurrentLeaderEpoch = tp.Partition, -2, -1 // -2: earliest
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, kafkaErr(err)
	}
	out := map[client.TopicPartition]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("log start of %s[%d]: %w", t.Topic, p.Partition, kafkaErr(err))
			}
			out[client.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.Offset
		}
	}
	if len(out) != len(tps) {
		return nil, fmt.Errorf("log start offsets: %d of %d partitions answered", len(out), len(tps))
	}
	return out, nil
}

func (k *kafkaReader) Poll(ctx context.Context) ([]*client.Record, error) {
	if !k.started {
		if err := k.start(ctx); err != nil {
			return nil, err
		}
	}
	fctx, cancel := context.WithTimeout(ctx, k.maxWait+time.Second)
	defer cancel()
	fs := k.cl.PollFetches(fctx)
	var out []*client.Record
	fs.EachRecord(func(rec *kgo.Record) {
		tp := client.TopicPartition{Topic: rec.Topic, Partition: rec.Partition}
		k.pos[tp] = rec.Offset + 1
		if !rec.Attrs.IsControl() {
			out = append(out, fromKgo(rec))
		}
	})
	if len(out) > 0 {
		return out, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var firstErr error
	fs.EachError(func(_ string, _ int32, err error) {
		if firstErr == nil && !errors.Is(err, context.DeadlineExceeded) {
			firstErr = kafkaErr(err)
		}
	})
	if firstErr != nil {
		sleep(ctx, 100*time.Millisecond) // a caller that polls again at once does not spin
	}
	return nil, firstErr
}

func (k *kafkaReader) Position(tp client.TopicPartition) int64 {
	if off, ok := k.pos[tp]; ok {
		return off
	}
	return -1
}

func (k *kafkaReader) Close(context.Context) error {
	if k.cl != nil {
		k.cl.Close()
	}
	return nil
}
