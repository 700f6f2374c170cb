package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/coordinator/txn"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// The transaction APIs. A client's transaction version is read from the
// versions it sends (Kafka 4.x's rule): EndTxn v5+, TxnOffsetCommit v5+ and
// Produce v12+ are transaction version 2 (KIP-890: the epoch is bumped at
// every end, partitions and the offsets partition are added implicitly);
// lower versions are version 1 (no bump; the client adds partitions itself
// with AddPartitionsToTxn v0-v3 and AddOffsetsToTxn). The version travels
// in the request layer's requests (transaction_version) to the
// coordinator, which ends each transaction by the rule of its EndTxn.

func init() {
	register(kmsg.InitProducerID, 0, 5, handleInitProducerID)
	// v4+ is what brokers send each other (verify-only batches of many
	// transactions); clients send v0-v3, one transaction, to add the
	// partitions they are about to produce to.
	register(kmsg.AddPartitionsToTxn, 0, 3, handleAddPartitionsToTxn)
	register(kmsg.AddOffsetsToTxn, 0, 4, handleAddOffsetsToTxn)
	register(kmsg.EndTxn, 0, 5, handleEndTxn)
	// v6 names topics by id.
	register(kmsg.TxnOffsetCommit, 0, 5, handleTxnOffsetCommit)
	register(kmsg.DescribeTransactions, 0, 0, handleDescribeTransactions)
	register(kmsg.ListTransactions, 0, 2, handleListTransactions)
	register(kmsg.DescribeProducers, 0, 0, handleDescribeProducers)
}

// The first versions of EndTxn and TxnOffsetCommit that are transaction
// version 2. (The versions that know PRODUCER_FENCED and
// TRANSACTION_ABORTABLE: codes.go.)
const (
	txnVersion2SinceEndTxn       = 5
	txnVersion2SinceOffsetCommit = 5
)

// clientTxnVersion is the transaction version of a request at version v of
// an API whose version 2 starts at since.
func clientTxnVersion(v, since int16) int32 {
	if v >= since {
		return 2
	}
	return 1
}

func handleInitProducerID(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.InitProducerIDRequest)
	resp := kmsg.NewPtrInitProducerIDResponse()
	preq := &pb.InitProducerIdRequest{TransactionTimeoutMs: req.TransactionTimeoutMillis, ProducerId: -1, ProducerEpoch: -1}
	if req.TransactionalID != nil {
		if *req.TransactionalID == "" {
			// Kafka: null is an idempotent producer, empty is a mistake
			// (the request layer knows only empty, for none).
			resp.ErrorCode = code(pb.ErrorCode_INVALID_REQUEST)
			return resp, nil
		}
		preq.TransactionalId = *req.TransactionalID
	}
	if req.Version >= 3 {
		// KIP-360: a producer re-initialising names its id and epoch.
		preq.ProducerId, preq.ProducerEpoch = req.ProducerID, int32(req.ProducerEpoch)
	}
	presp, err := c.H.InitProducerId(ctx, preq)
	if err != nil {
		resp.ErrorCode, _ = splitCode(err)
		return resp, nil
	}
	resp.ErrorCode = answerCode(kmsg.InitProducerID, req.Version, presp.ErrorCode)
	resp.ProducerID, resp.ProducerEpoch = presp.ProducerId, int16(presp.ProducerEpoch)
	return resp, nil
}

// handleAddPartitionsToTxn is a transaction version 1 client adding the
// partitions it is about to produce to: the coordinator's client add,
// never the verification partition leaders ask for.
func handleAddPartitionsToTxn(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.AddPartitionsToTxnRequest)
	t := &pb.AddPartitionsToTxnTransaction{TransactionalId: req.TransactionalID, ProducerId: req.ProducerID,
		ProducerEpoch: int32(req.ProducerEpoch), TransactionVersion: 1}
	for _, rt := range req.Topics {
		for _, p := range rt.Partitions {
			t.Partitions = append(t.Partitions, &pb.TopicPartition{Topic: rt.Topic, Partition: p})
		}
	}
	resp := kmsg.NewPtrAddPartitionsToTxnResponse()
	answers := map[topicPartition]int16{}
	presp, err := c.H.AddPartitionsToTxn(ctx, &pb.AddPartitionsToTxnRequest{Transactions: []*pb.AddPartitionsToTxnTransaction{t}})
	failed, _ := splitCode(err)
	if err == nil {
		for _, res := range presp.Results {
			for _, p := range res.Partitions {
				answers[topicPartition{p.Topic, p.Partition}] = answerCode(kmsg.AddPartitionsToTxn, req.Version, p.ErrorCode)
			}
		}
	}
	for _, rt := range req.Topics {
		ot := kmsg.NewAddPartitionsToTxnResponseTopic()
		ot.Topic = rt.Topic
		for _, p := range rt.Partitions {
			op := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			op.Partition = p
			if c, ok := answers[topicPartition{rt.Topic, p}]; ok {
				op.ErrorCode = c
			} else {
				op.ErrorCode = failed
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil
}

type topicPartition struct {
	topic     string
	partition int32
}

func handleAddOffsetsToTxn(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.AddOffsetsToTxnRequest)
	resp := kmsg.NewPtrAddOffsetsToTxnResponse()
	presp, err := c.H.AddOffsetsToTxn(ctx, &pb.AddOffsetsToTxnRequest{TransactionalId: req.TransactionalID, ProducerId: req.ProducerID,
		ProducerEpoch: int32(req.ProducerEpoch), GroupId: req.Group})
	if err != nil {
		resp.ErrorCode, _ = splitCode(err)
		return resp, nil
	}
	resp.ErrorCode = answerCode(kmsg.AddOffsetsToTxn, req.Version, presp.ErrorCode)
	return resp, nil
}

// handleEndTxn: v5+ is transaction version 2 (the epoch is bumped; the
// answer carries the producer id and epoch for the next transaction).
func handleEndTxn(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.EndTxnRequest)
	resp := kmsg.NewPtrEndTxnResponse()
	presp, err := c.H.EndTxn(ctx, &pb.EndTxnRequest{TransactionalId: req.TransactionalID, ProducerId: req.ProducerID,
		ProducerEpoch: int32(req.ProducerEpoch), Committed: req.Commit, TransactionVersion: clientTxnVersion(req.Version, txnVersion2SinceEndTxn)})
	if err != nil {
		resp.ErrorCode, _ = splitCode(err)
		return resp, nil
	}
	resp.ErrorCode = answerCode(kmsg.EndTxn, req.Version, presp.ErrorCode)
	resp.ProducerID, resp.ProducerEpoch = presp.ProducerId, int16(presp.ProducerEpoch)
	return resp, nil
}

// handleTxnOffsetCommit: v5+ is transaction version 2 (the group's
// offsets partition is added to the transaction); below, AddOffsetsToTxn
// must have added it.
func handleTxnOffsetCommit(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.TxnOffsetCommitRequest)
	preq := &pb.TxnOffsetCommitRequest{TransactionalId: req.TransactionalID, GroupId: req.Group, ProducerId: req.ProducerID,
		ProducerEpoch: int32(req.ProducerEpoch), GenerationId: -1, TransactionVersion: clientTxnVersion(req.Version, txnVersion2SinceOffsetCommit)}
	if req.Version >= 3 {
		preq.GenerationId, preq.MemberId = req.Generation, req.MemberID
		if req.InstanceID != nil {
			preq.GroupInstanceId = *req.InstanceID
		}
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			o := &pb.PartitionOffset{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: -1}
			if req.Version >= 2 {
				o.LeaderEpoch = p.LeaderEpoch
			}
			if p.Metadata != nil {
				o.Metadata = *p.Metadata
			}
			preq.Offsets = append(preq.Offsets, o)
		}
	}
	var failed int16
	answers := map[topicPartition]int16{}
	if c.H.Groups == nil {
		failed = code(pb.ErrorCode_COORDINATOR_NOT_AVAILABLE)
	} else if presp, err := c.H.TxnOffsetCommit(ctx, preq); err != nil {
		failed, _ = splitCode(err)
	} else {
		failed = answerCode(kmsg.TxnOffsetCommit, req.Version, presp.ErrorCode)
		for _, p := range presp.Partitions {
			answers[topicPartition{p.Topic, p.Partition}] = answerCode(kmsg.TxnOffsetCommit, req.Version, p.ErrorCode)
		}
	}
	resp := kmsg.NewPtrTxnOffsetCommitResponse()
	for _, t := range req.Topics {
		ot := kmsg.NewTxnOffsetCommitResponseTopic()
		ot.Topic = t.Topic
		for _, p := range t.Partitions {
			op := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			op.Partition = p.Partition
			if c, ok := answers[topicPartition{t.Topic, p.Partition}]; ok {
				op.ErrorCode = c
			} else {
				op.ErrorCode = failed
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil
}

func handleDescribeTransactions(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.DescribeTransactionsRequest)
	resp := kmsg.NewPtrDescribeTransactionsResponse()
	presp, err := c.H.DescribeTransactions(ctx, &pb.DescribeTransactionsRequest{TransactionalIds: req.TransactionalIDs})
	if err != nil {
		failed, _ := splitCode(err)
		for _, id := range req.TransactionalIDs {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.ErrorCode, st.TransactionalID, st.ProducerID, st.ProducerEpoch, st.StartTimestamp = failed, id, -1, -1, -1
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		return resp, nil
	}
	for _, t := range presp.Transactions {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.ErrorCode, st.TransactionalID, st.State = code(t.ErrorCode), t.TransactionalId, t.State
		st.TimeoutMillis, st.StartTimestamp = t.TransactionTimeoutMs, t.TransactionStartTimeMs
		st.ProducerID, st.ProducerEpoch = t.ProducerId, int16(t.ProducerEpoch)
		byTopic := map[string]int{}
		for _, tp := range t.Partitions {
			i, ok := byTopic[tp.Topic]
			if !ok {
				i = len(st.Topics)
				byTopic[tp.Topic] = i
				ot := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				ot.Topic = tp.Topic
				st.Topics = append(st.Topics, ot)
			}
			st.Topics[i].Partitions = append(st.Topics[i].Partitions, tp.Partition)
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}

// handleListTransactions lists every page the request layer answers (Kafka's
// answer is not paged). State filters Strand does not know are reported and
// left out of the filter, as Kafka does.
func handleListTransactions(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.ListTransactionsRequest)
	resp := kmsg.NewPtrListTransactionsResponse()
	preq := &pb.ListTransactionsRequest{ProducerIdFilters: req.ProducerIDFilters, DurationFilterMs: -1}
	for _, s := range req.StateFilters {
		if _, ok := txn.ParseState(s); ok {
			preq.StateFilters = append(preq.StateFilters, s)
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, s)
		}
	}
	if req.Version >= 1 {
		preq.DurationFilterMs = req.DurationFilterMillis
	}
	if req.Version >= 2 && req.TransactionalIDPattern != nil {
		preq.TransactionalIdPattern = *req.TransactionalIDPattern
	}
	for {
		if err := ctx.Err(); err != nil {
			resp.ErrorCode, _ = splitCode(err)
			return resp, nil
		}
		presp, err := c.H.ListTransactions(ctx, preq)
		if err != nil {
			resp.ErrorCode, _ = splitCode(err)
			return resp, nil
		}
		if presp.ErrorCode != pb.ErrorCode_NONE {
			resp.ErrorCode = code(presp.ErrorCode)
		}
		for _, l := range presp.Transactions {
			ts := kmsg.NewListTransactionsResponseTransactionState()
			ts.TransactionalID, ts.ProducerID, ts.TransactionState = l.TransactionalId, l.ProducerId, l.State
			resp.TransactionStates = append(resp.TransactionStates, ts)
		}
		if !presp.More || len(presp.Transactions) == 0 {
			return resp, nil
		}
		preq.AfterTransactionalId = presp.Transactions[len(presp.Transactions)-1].TransactionalId
	}
}

func handleDescribeProducers(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.DescribeProducersRequest)
	preq := &pb.DescribeProducersRequest{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			preq.Partitions = append(preq.Partitions, &pb.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	presp, err := c.H.DescribeProducers(ctx, preq)
	failed, failedMsg := splitCode(err)
	answers := map[topicPartition]*pb.PartitionProducers{}
	if err == nil {
		for _, p := range presp.Partitions {
			answers[topicPartition{p.Topic, p.Partition}] = p
		}
	}
	resp := kmsg.NewPtrDescribeProducersResponse()
	for _, t := range req.Topics {
		ot := kmsg.NewDescribeProducersResponseTopic()
		ot.Topic = t.Topic
		for _, p := range t.Partitions {
			op := kmsg.NewDescribeProducersResponseTopicPartition()
			op.Partition = p
			a := answers[topicPartition{t.Topic, p}]
			if a == nil {
				op.ErrorCode, op.ErrorMessage = failed, failedMsg
				ot.Partitions = append(ot.Partitions, op)
				continue
			}
			op.ErrorCode, op.ErrorMessage = code(a.ErrorCode), errMsg(a.ErrorMessage)
			for _, s := range a.ActiveProducers {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = s.ProducerId, s.ProducerEpoch, s.LastSequence
				ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = s.LastTimestamp, s.CoordinatorEpoch, s.CurrentTxnStartOffset
				op.ActiveProducers = append(op.ActiveProducers, ap)
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil
}
