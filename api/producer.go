package api

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/config"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/replication"
)

type producerService struct {
	pb.UnimplementedProducerServer
	d *Deps
}

// Produce appends the requests of one stream in arrival order and answers
// each when it is complete (see producer.proto).
//
// At most ProduceMaxInFlight requests of a stream are in flight: read and
// not yet answered, an answer counting until the stream has taken it
// (Send returned). At the bound the stream is not read until an answer
// goes out, so a client that sends faster than it is answered, or never
// reads its answers, is held back by gRPC's flow control (the client's
// Send blocks) instead of growing a goroutine and an answer per request
// here. (A Kafka broker reads nothing more from a connection until its
// request is answered; a stream pipelines a few.)
func (s *producerService) Produce(stream pb.Producer_ProduceServer) error {
	ctx := stream.Context()
	limit := s.d.ProduceMaxInFlight
	if limit <= 0 {
		limit = DefaultProduceMaxInFlight
	}
	// slots holds one token per request in flight; the sender takes the
	// token back once the answer is on the stream. out never blocks: it
	// has room for every request in flight.
	slots := make(chan struct{}, limit)
	out := make(chan *pb.ProduceResponse, limit)
	sendErr := make(chan error, 1)
	go func() {
		var err error
		for r := range out {
			if err == nil {
				err = stream.Send(r)
			}
			<-slots
		}
		sendErr <- err
	}()
	var wg sync.WaitGroup
	m := s.d.Metrics
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		req, err := stream.Recv()
		if err != nil {
			break // EOF or cancellation: the client is done with the stream
		}
		start := time.Now()
		resp, waits := s.handle(ctx, req)
		if req.Acks == 0 && resp != nil && allOK(resp) {
			<-slots
			m.observe("Produce", start)
			continue
		}
		if len(waits) == 0 {
			out <- resp
			m.observe("Produce", start)
			continue
		}
		timeout := time.Duration(req.TimeoutMs) * time.Millisecond
		if timeout <= 0 {
			timeout = 30 * time.Second
		}
		m.waiting(1) // in the produce purgatory until its waits end
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { m.waiting(-1); m.observe("Produce", start) }()
			wctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			for i, a := range waits {
				if a == nil {
					continue
				}
				if err := a.Wait(wctx); err != nil {
					r := resp.Partitions[i]
					r.ErrorCode, r.ErrorMessage = errs.Split(err)
				}
			}
			out <- resp
		}()
	}
	wg.Wait()
	close(out)
	return <-sendErr
}

func allOK(r *pb.ProduceResponse) bool {
	for _, p := range r.Partitions {
		if p.ErrorCode != pb.ErrorCode_NONE {
			return false
		}
	}
	return true
}

// handle appends every partition of req (in order) and returns the answer
// and, for acks=all, what to wait for.
func (s *producerService) handle(ctx context.Context, req *pb.ProduceRequest) (*pb.ProduceResponse, []*replication.Append) {
	resp := &pb.ProduceResponse{CorrelationId: req.CorrelationId}
	var waits []*replication.Append
	needWait := false
	for _, pr := range req.Partitions {
		r := &pb.ProducePartitionResponse{Topic: pr.Topic, Partition: pr.Partition, BaseOffset: -1, LogAppendTimeMs: -1, LogStartOffset: -1, CurrentLeaderId: -1, CurrentLeaderEpoch: -1}
		resp.Partitions = append(resp.Partitions, r)
		a, err := s.appendOne(ctx, req, pr)
		waits = append(waits, a)
		if err != nil {
			r.ErrorCode, r.ErrorMessage = errs.Split(err)
			r.RecordErrors = recordErrors(err)
			if p, perr := s.d.Repl.Partition(pr.Topic, pr.Partition); perr == nil {
				l := p.Leadership()
				r.CurrentLeaderId, r.CurrentLeaderEpoch = l.Leader, l.LeaderEpoch
			} else if ip := s.d.Repl.Image().Partition(pr.Topic, pr.Partition); ip != nil {
				r.CurrentLeaderId, r.CurrentLeaderEpoch = ip.Leader, ip.LeaderEpoch
			}
			waits[len(waits)-1] = nil
			continue
		}
		r.BaseOffset = a.Result.FirstOffset
		if p, perr := s.d.Repl.Partition(pr.Topic, pr.Partition); perr == nil {
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

func (s *producerService) appendOne(ctx context.Context, req *pb.ProduceRequest, pr *pb.PartitionRecords) (*replication.Append, error) {
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		return nil, errs.New(pb.ErrorCode_INVALID_REQUIRED_ACKS, "acks must be 0, 1 or -1 (all), got %d", req.Acks)
	}
	if err := checkString("transactional id", req.TransactionalId); err != nil {
		return nil, err
	}
	img := s.d.Repl.Image()
	t := img.Topic(pr.Topic)
	if t == nil {
		return nil, errs.New(pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "topic %q does not exist", pr.Topic)
	}
	if pr.Partition < 0 || int(pr.Partition) >= len(t.Partitions) {
		return nil, errs.New(pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "topic %s has %d partitions, there is no partition %d", pr.Topic, len(t.Partitions), pr.Partition)
	}
	max := int(config.Int(t.Configs, config.MaxMessageBytes, int64(s.d.MessageMaxBytes)))
	policy := s.d.clientPolicy(t.Configs)
	var txnHeader *record.Header
	if len(pr.Records) == 0 {
		return nil, errs.New(pb.ErrorCode_INVALID_RECORD, "no record batch in the request")
	}
	for pos := 0; pos < len(pr.Records); {
		h, err := record.ParseHeader(pr.Records[pos:])
		if err != nil {
			return nil, err
		}
		if h.BatchLength < 0 {
			return nil, errs.New(pb.ErrorCode_CORRUPT_MESSAGE, "negative batchLength %d", h.BatchLength)
		}
		if h.Size() > max {
			return nil, errs.New(pb.ErrorCode_MESSAGE_TOO_LARGE, "batch of %d bytes is larger than max.message.bytes=%d", h.Size(), max)
		}
		if h.Size() > len(pr.Records)-pos {
			return nil, errs.New(pb.ErrorCode_CORRUPT_MESSAGE, "batch of %d bytes is truncated to %d", h.Size(), len(pr.Records)-pos)
		}
		// Kafka's LogValidator: every record of every batch, before any
		// batch is written or the partition joins a transaction.
		if _, err := record.ValidateClient(pr.Records[pos:pos+h.Size()], policy); err != nil {
			return nil, err
		}
		if h.IsTransactional() && !h.IsControl() {
			hh := h
			txnHeader = &hh
		}
		pos += h.Size()
	}
	if txnHeader != nil {
		if err := s.addToTxn(ctx, req.TransactionalId, txnHeader, pr.Topic, pr.Partition); err != nil {
			return nil, err
		}
	}
	a := s.d.Repl.AppendLeader(pr.Topic, pr.Partition, pr.Records, req.Acks)
	if a.Err == nil && !a.Result.Duplicate {
		s.d.Metrics.produced(pr.Topic, pr.Records)
	}
	return a, a.Err
}

// addToTxn makes sure the partition is in the producer's transaction before
// a transactional batch is appended (KIP-890: the partition leader adds it
// itself), so no transactional batch is ever on disk without its
// coordinator knowing. A partition where the producer already has its
// transaction open at this epoch needs nothing.
func (s *producerService) addToTxn(ctx context.Context, txnID string, h *record.Header, topic string, partition int32) error {
	if txnID == "" {
		return errs.New(pb.ErrorCode_INVALID_TXN_STATE, "a transactional batch needs the producer's transactional id")
	}
	if s.d.TxnClient == nil {
		return errs.New(pb.ErrorCode_NOT_ENOUGH_REPLICAS, "node %d cannot reach a transaction coordinator", s.d.NodeID)
	}
	if p, err := s.d.Repl.Partition(topic, partition); err == nil {
		epoch, open := p.Log.ProducerTxn(h.ProducerID)
		if open && epoch == h.ProducerEpoch {
			return nil
		}
		if epoch >= 0 && h.ProducerEpoch < epoch {
			// Kafka checks this before asking the coordinator: a zombie is
			// refused here, coordinator or not.
			return errs.New(pb.ErrorCode_INVALID_PRODUCER_EPOCH, "producerId=%d: batch epoch %d is older than the epoch %d this partition has seen", h.ProducerID, h.ProducerEpoch, epoch)
		}
	}
	vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return addPartitionAnswer(s.d.TxnClient.AddPartition(vctx, txnID, h.ProducerID, h.ProducerEpoch, topic, partition), txnID, topic, partition)
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
func (d *Deps) clientPolicy(cfg map[string]string) record.ClientPolicy {
	clk := d.Clock
	if clk == nil {
		clk = clock.Real
	}
	return record.ClientPolicy{
		NowMs:                clk.Now().UnixMilli(),
		TimestampBeforeMaxMs: d.timestampBeforeMaxMs(cfg),
		TimestampAfterMaxMs:  d.timestampAfterMaxMs(cfg),
	}
}

func (d *Deps) timestampBeforeMaxMs(cfg map[string]string) int64 {
	return config.Int(cfg, config.TimestampBeforeMaxMs, d.TimestampBeforeMaxMs)
}

func (d *Deps) timestampAfterMaxMs(cfg map[string]string) int64 {
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
