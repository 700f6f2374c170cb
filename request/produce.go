package request

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/config"
	"github.com/strand-io/strand/internal/planted"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/replication"
)

// ProduceWait is what a produce request still waits for once appended:
// the acks=all (or flush.messages=1) conditions of its partitions.
type ProduceWait struct {
	resp    *pb.ProduceResponse
	waits   []*replication.Append
	timeout time.Duration
}

// Wait waits (at most the request's timeout_ms, 30 s when it has none)
// for every append of the request and writes the failures into the
// response Produce returned: a partition whose wait ended in an error is
// answered that error. The response is complete once Wait returns.
func (w *ProduceWait) Wait(ctx context.Context) {
	wctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	for i, a := range w.waits {
		if a == nil {
			continue
		}
		if err := a.Wait(wctx); err != nil {
			r := w.resp.Partitions[i]
			r.ErrorCode, r.ErrorMessage = errs.Split(err)
		}
	}
}

// Produce appends every partition of req, in order, and returns the
// answer and, when some partition's acks condition is not met yet (acks
// -1), what to wait for before the answer is complete (nil when it is).
// Each partition's batches are validated first (Kafka's LogValidator:
// record.ValidateClient with the topic's timestamp bounds, the batch
// size against max.message.bytes); a refused partition is answered its
// error and, for an invalid record, which records. Requests of one
// producer must be called in the order they were sent: the partition's
// sequence checks see them in that order.
func (h *Handler) Produce(ctx context.Context, req *pb.ProduceRequest) (*pb.ProduceResponse, *ProduceWait) {
	resp, waits := h.handle(ctx, req)
	if waits == nil {
		return resp, nil
	}
	timeout := time.Duration(req.TimeoutMs) * time.Millisecond
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return resp, &ProduceWait{resp: resp, waits: waits, timeout: timeout}
}

// AllOK reports whether every partition of a produce answer succeeded (an
// acks=0 request so answered is not answered at all).
func AllOK(r *pb.ProduceResponse) bool {
	for _, p := range r.Partitions {
		if p.ErrorCode != pb.ErrorCode_NONE {
			return false
		}
	}
	return true
}

// handle appends every partition of req (in order) and returns the answer
// and, for acks=all, what to wait for.
func (h *Handler) handle(ctx context.Context, req *pb.ProduceRequest) (*pb.ProduceResponse, []*replication.Append) {
	resp := &pb.ProduceResponse{CorrelationId: req.CorrelationId}
	var waits []*replication.Append
	needWait := false
	// Kafka's handleProduceRequest: a transactional producer needs Write
	// on its transactional id (else the whole request is refused), and
	// every topic Write (else its partitions are). Since Kafka 3.0 an
	// idempotent produce needs nothing more: IdempotentWrite is checked
	// at InitProducerId.
	az := h.authz(ctx, "Produce")
	var txnDenied error
	if req.TransactionalId != "" && checkString("transactional id", req.TransactionalId) == nil && !az.txnID(authz.OpWrite, req.TransactionalId) {
		txnDenied = txnIDDenied(authz.OpWrite, req.TransactionalId)
	}
	for _, pr := range req.Partitions {
		r := &pb.ProducePartitionResponse{Topic: pr.Topic, Partition: pr.Partition, BaseOffset: -1, LogAppendTimeMs: -1, LogStartOffset: -1, CurrentLeaderId: -1, CurrentLeaderEpoch: -1}
		resp.Partitions = append(resp.Partitions, r)
		if err := firstErr(txnDenied, h.produceDenied(az, pr.Topic)); err != nil {
			// Nothing about the partition is told (it may not exist).
			r.ErrorCode, r.ErrorMessage = errs.Split(err)
			waits = append(waits, nil)
			continue
		}
		a, err := h.appendOne(ctx, req, pr)
		waits = append(waits, a)
		if err != nil {
			r.ErrorCode, r.ErrorMessage = errs.Split(err)
			r.RecordErrors = recordErrors(err)
			if p, perr := h.Repl.Partition(pr.Topic, pr.Partition); perr == nil {
				l := p.Leadership()
				r.CurrentLeaderId, r.CurrentLeaderEpoch = l.Leader, l.LeaderEpoch
			} else if ip := h.Repl.Image().Partition(pr.Topic, pr.Partition); ip != nil {
				r.CurrentLeaderId, r.CurrentLeaderEpoch = ip.Leader, ip.LeaderEpoch
			}
			waits[len(waits)-1] = nil
			continue
		}
		r.BaseOffset = a.Result.FirstOffset
		if p, perr := h.Repl.Partition(pr.Topic, pr.Partition); perr == nil {
			r.LogStartOffset = p.Log.LogStartOffset()
		}
		if a.NeedsWait() {
			needWait = true
		} else {
			waits[len(waits)-1] = nil
		}
	}
	if !needWait {
		return resp, nil
	}
	return resp, waits
}

// produceDenied is the refusal of a produce to a topic the principal may
// not Write (nil when it may).
func (h *Handler) produceDenied(az *authorizer, topic string) error {
	if planted.On(planted.AuthzSkipProduceTopicWrite) || az.topic(authz.OpWrite, topic) {
		return nil
	}
	return topicDenied(authz.OpWrite, topic)
}

func (h *Handler) appendOne(ctx context.Context, req *pb.ProduceRequest, pr *pb.PartitionRecords) (*replication.Append, error) {
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		return nil, errs.New(pb.ErrorCode_INVALID_REQUIRED_ACKS, "acks must be 0, 1 or -1 (all), got %d", req.Acks)
	}
	if err := checkString("transactional id", req.TransactionalId); err != nil {
		return nil, err
	}
	img := h.Repl.Image()
	t := img.Topic(pr.Topic)
	if t == nil {
		return nil, errs.New(pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "topic %q does not exist", pr.Topic)
	}
	if pr.TopicId != "" && pr.TopicId != t.ID {
		// Named by an id that is no longer this name's (checked again
		// where the partition is written).
		return nil, errs.New(pb.ErrorCode_UNKNOWN_TOPIC_ID, "no topic %q has id %s", pr.Topic, pr.TopicId)
	}
	if pr.Partition < 0 || int(pr.Partition) >= len(t.Partitions) {
		return nil, errs.New(pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "topic %s has %d partitions, there is no partition %d", pr.Topic, len(t.Partitions), pr.Partition)
	}
	if err := internalAppendError(pr.Topic); err != nil {
		return nil, err
	}
	max := int(config.Int(t.Configs, config.MaxMessageBytes, int64(h.MessageMaxBytes)))
	policy := h.clientPolicy(t.Configs)
	var txnHeader *record.Header
	if len(pr.Records) == 0 {
		return nil, errs.New(pb.ErrorCode_INVALID_RECORD, "no record batch in the request")
	}
	for pos := 0; pos < len(pr.Records); {
		bh, err := record.ParseHeader(pr.Records[pos:])
		if err != nil {
			return nil, err
		}
		if bh.BatchLength < 0 {
			return nil, errs.New(pb.ErrorCode_CORRUPT_MESSAGE, "negative batchLength %d", bh.BatchLength)
		}
		if bh.Size() > max {
			return nil, errs.New(pb.ErrorCode_MESSAGE_TOO_LARGE, "batch of %d bytes is larger than max.message.bytes=%d", bh.Size(), max)
		}
		if bh.Size() > len(pr.Records)-pos {
			return nil, errs.New(pb.ErrorCode_CORRUPT_MESSAGE, "batch of %d bytes is truncated to %d", bh.Size(), len(pr.Records)-pos)
		}
		// Kafka's LogValidator: every record of every batch, before any
		// batch is written or the partition joins a transaction.
		if bh.IsControl() && planted.On(planted.ClientMarkersAccepted) {
			// A client's marker, taken as the coordinator's would be
			// (ValidateClient refuses every control batch).
			if _, err := record.Validate(pr.Records[pos : pos+bh.Size()]); err != nil {
				return nil, err
			}
		} else if _, err := record.ValidateClient(pr.Records[pos:pos+bh.Size()], policy); err != nil {
			return nil, err
		}
		if bh.IsTransactional() && !bh.IsControl() {
			hh := bh
			txnHeader = &hh
		}
		pos += bh.Size()
	}
	var guard *storage.VerificationGuard
	if txnHeader != nil {
		var err error
		if guard, err = h.addToTxn(ctx, req.TransactionalId, txnHeader, pr.Topic, pr.Partition, req.TransactionVersion); err != nil {
			return nil, err
		}
	}
	a := h.Repl.AppendLeaderVerified(pr.Topic, pr.TopicId, pr.Partition, pr.Records, req.Acks, guard)
	if a.Err == nil && !a.Result.Duplicate {
		h.produced(pr.Topic, pr.Records)
	}
	return a, a.Err
}

// addToTxn makes sure the partition is in the producer's transaction before
// a transactional batch is appended, so no transactional batch is ever on
// disk without its coordinator knowing: under transaction version 2
// (KIP-890) the partition leader adds it itself; a producer below version
// 2 (txnVersion 1: a Kafka client's Produce below v12) added it with
// AddPartitionsToTxn, and the leader only verifies that (Kafka's
// transaction.partition.verification). A partition where the producer
// already has its transaction open at this epoch needs nothing.
//
// The answer can be overtaken: the transaction may end, and its marker
// reach the partition, before the batch is appended. So the partition
// makes a verification guard first (storage.Log.StartTxnVerification),
// which any marker for the producer clears, and the batch is appended
// with it (AppendLeaderVerified): a batch whose transaction ended in
// between is refused INVALID_TXN_STATE instead of opening a transaction
// nobody ends. addToTxn returns that guard (nil when none was needed).
func (h *Handler) addToTxn(ctx context.Context, txnID string, bh *record.Header, topic string, partition int32, txnVersion int32) (*storage.VerificationGuard, error) {
	if txnID == "" {
		return nil, errs.New(pb.ErrorCode_INVALID_TXN_STATE, "a transactional batch needs the producer's transactional id")
	}
	if h.TxnClient == nil {
		return nil, errs.New(pb.ErrorCode_NOT_ENOUGH_REPLICAS, "node %d cannot reach a transaction coordinator", h.NodeID)
	}
	p, err := h.Repl.Partition(topic, partition)
	if err != nil {
		return nil, err
	}
	// Kafka checks the epoch here, before asking the coordinator: a
	// zombie is refused INVALID_PRODUCER_EPOCH, coordinator or not.
	guard, err := p.StartTxnVerification(bh.ProducerID, bh.BaseSequence, bh.ProducerEpoch, txnVersion != 1)
	if err != nil || guard == nil {
		return nil, err
	}
	vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	add := h.TxnClient.AddPartition
	if txnVersion == 1 {
		add = h.TxnClient.Verify
	}
	if err := addPartitionAnswer(add(vctx, txnID, bh.ProducerID, bh.ProducerEpoch, topic, partition), txnID, topic, partition); err != nil {
		if errs.CodeOf(err) != pb.ErrorCode_NOT_ENOUGH_REPLICAS {
			// Refused for good: the verification has nothing left to
			// guard. (A retriable refusal keeps it, and its lowest
			// sequence holds later batches back until the retry.)
			p.Log.DropTxnVerification(bh.ProducerID, guard)
		}
		return nil, err
	}
	if f := txnVerifiedHook.Load(); f != nil {
		(*f)(topic, partition)
	}
	return guard, nil
}

// txnVerifiedHook, when set, runs after the coordinator answered for a
// transactional batch and before the batch is appended: the window in
// which its transaction can end under it. Tests end it there.
var txnVerifiedHook atomic.Pointer[func(topic string, partition int32)]

// SetTxnVerifiedHookForTesting makes f run between a transactional
// batch's verification and its append, until restore is called. f runs on
// the producing request's goroutine; it must not produce to the same
// connection.
func SetTxnVerifiedHookForTesting(f func(topic string, partition int32)) (restore func()) {
	txnVerifiedHook.Store(&f)
	return func() { txnVerifiedHook.Store(nil) }
}

// addPartitionAnswer is what a transactional batch is answered when adding
// its partition to the transaction failed (Kafka's translation): a fenced
// producer sees its epoch refused, and a coordinator that could not add the
// partition yet makes the batch retriable (NOT_ENOUGH_REPLICAS: not written).
func addPartitionAnswer(err error, txnID, topic string, partition int32) error {
	switch errs.CodeOf(err) {
	case pb.ErrorCode_NONE:
		return nil
	case pb.ErrorCode_PRODUCER_FENCED:
		_, msg := errs.Split(err)
		return errs.New(pb.ErrorCode_INVALID_PRODUCER_EPOCH, "%s", msg)
	case pb.ErrorCode_NOT_COORDINATOR, pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS,
		pb.ErrorCode_CONCURRENT_TRANSACTIONS, pb.ErrorCode_NETWORK_EXCEPTION, pb.ErrorCode_REQUEST_TIMED_OUT:
		_, msg := errs.Split(err)
		return errs.New(pb.ErrorCode_NOT_ENOUGH_REPLICAS, "unable to add %s-%d to the transaction of %q yet: %s", topic, partition, txnID, msg)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return errs.New(pb.ErrorCode_NOT_ENOUGH_REPLICAS, "unable to add %s-%d to the transaction of %q yet: %v", topic, partition, txnID, err)
	}
	return err
}

// clientPolicy is what ValidateClient enforces on a produce to a topic
// with these configs.
func (d *Handler) clientPolicy(cfg map[string]string) record.ClientPolicy {
	clk := d.Clock
	if clk == nil {
		clk = clock.Real
	}
	return record.ClientPolicy{
		NowMs:                clk.Now().UnixMilli(),
		TimestampBeforeMaxMs: d.timestampBeforeMaxMs(cfg),
		TimestampAfterMaxMs:  d.timestampAfterMaxMs(cfg),
		Compacted:            d.compacted(cfg),
	}
}

// compacted reports whether a topic with these configs is compacted: its
// cleanup.policy, or the broker's log.cleanup.policy when it sets none,
// merged as the topic's logs merge them.
func (d *Handler) compacted(cfg map[string]string) bool {
	lc, _ := d.Repl.Partitions().LogConfig(cfg)
	return lc.Cleanup.Compact()
}

func (d *Handler) timestampBeforeMaxMs(cfg map[string]string) int64 {
	return config.Int(cfg, config.TimestampBeforeMaxMs, d.TimestampBeforeMaxMs)
}

func (d *Handler) timestampAfterMaxMs(cfg map[string]string) int64 {
	return config.Int(cfg, config.TimestampAfterMaxMs, d.TimestampAfterMaxMs)
}

// recordErrors lists the records a refused batch was refused for.
func recordErrors(err error) []*pb.RecordError {
	var be *record.BatchError
	if !errors.As(err, &be) {
		return nil
	}
	out := make([]*pb.RecordError, 0, len(be.Records))
	for _, re := range be.Records {
		out = append(out, &pb.RecordError{BatchIndex: re.BatchIndex, Message: re.Message})
	}
	return out
}
