package request

import (
	"context"
	"time"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/coordinator"
	"github.com/strand-io/strand/coordinator/txn"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// The transaction requests: InitProducerId, AddPartitionsToTxn, EndTxn,
// DescribeTransactions and ListTransactions go to the transaction
// coordinator; WriteTxnMarkers, AbortTransaction and DescribeProducers to
// the partitions this broker leads. WriteTxnMarkers and
// AddPartitionsToTxn are what coordinators and partition leaders send
// each other (transaction version 2 clients never send AddPartitionsToTxn):
// a front door serves them only to the cluster's own nodes.

func (h *Handler) noCoordinator() error {
	return errs.New(pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, "node %d runs no transaction coordinator", h.NodeID)
}

// InitProducerId hands out producer ids: from this broker's block without a
// transactional id, from the coordinator with one.
func (h *Handler) InitProducerId(ctx context.Context, req *pb.InitProducerIdRequest) (*pb.InitProducerIdResponse, error) {
	if err := firstErr(checkString("transactional id", req.TransactionalId), checkInt16("producer epoch", req.ProducerEpoch)); err != nil {
		code, msg := errs.Split(err)
		return &pb.InitProducerIdResponse{ErrorCode: code, ErrorMessage: msg, ProducerId: -1, ProducerEpoch: -1}, nil
	}
	if err := h.authorizeInitProducerID(ctx, req.TransactionalId); err != nil {
		code, msg := errs.Split(err)
		return &pb.InitProducerIdResponse{ErrorCode: code, ErrorMessage: msg, ProducerId: -1, ProducerEpoch: -1}, nil
	}
	if req.TransactionalId == "" {
		return h.initIdempotent(ctx, req), nil
	}
	if h.TxnCoord == nil {
		code, msg := errs.Split(h.noCoordinator())
		return &pb.InitProducerIdResponse{ErrorCode: code, ErrorMessage: msg, ProducerId: -1, ProducerEpoch: -1}, nil
	}
	res, err := h.TxnCoord.InitProducerId(ctx, req.TransactionalId, req.TransactionTimeoutMs, req.ProducerId, int16(req.ProducerEpoch))
	if err != nil {
		code, msg := errs.Split(err)
		return &pb.InitProducerIdResponse{ErrorCode: code, ErrorMessage: msg, ProducerId: -1, ProducerEpoch: -1}, nil
	}
	return &pb.InitProducerIdResponse{ProducerId: res.ProducerID, ProducerEpoch: int32(res.Epoch)}, nil
}

// authorizeInitProducerID is Kafka's check of InitProducerId: a
// transactional producer needs Write on its transactional id; an
// idempotent one IdempotentWrite on the cluster or, failing that, Write
// on at least one topic.
func (h *Handler) authorizeInitProducerID(ctx context.Context, txnID string) error {
	az := h.authz(ctx, "InitProducerId")
	if txnID != "" {
		if az.txnID(authz.OpWrite, txnID) {
			return nil
		}
		return txnIDDenied(authz.OpWrite, txnID)
	}
	if az.quietly().cluster(authz.OpIdempotentWrite) || az.anyOf(authz.OpWrite, authz.ResourceTopic) {
		return nil
	}
	return errs.New(pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED, "an idempotent producer needs IdempotentWrite on the cluster or Write on a topic")
}

// InitIdempotent answers InitProducerId without a transactional id.
func (h *Handler) initIdempotent(ctx context.Context, req *pb.InitProducerIdRequest) *pb.InitProducerIdResponse {
	id, err := h.PIDs.Next(ctx)
	if err != nil {
		code, msg := errs.Split(err)
		return &pb.InitProducerIdResponse{ErrorCode: code, ErrorMessage: msg, ProducerId: -1, ProducerEpoch: -1}
	}
	return &pb.InitProducerIdResponse{ProducerId: id, ProducerEpoch: 0}
}

// EndTxn commits or aborts, under the client's transaction version
// (req.TransactionVersion; unset is 2).
func (h *Handler) EndTxn(ctx context.Context, req *pb.EndTxnRequest) (*pb.EndTxnResponse, error) {
	if err := firstErr(checkString("transactional id", req.TransactionalId), checkInt16("producer epoch", req.ProducerEpoch),
		checkInt8("transaction version", req.TransactionVersion)); err != nil {
		code, msg := errs.Split(err)
		return &pb.EndTxnResponse{ErrorCode: code, ErrorMessage: msg, ProducerId: -1, ProducerEpoch: -1}, nil
	}
	if !h.authz(ctx, "EndTxn").txnID(authz.OpWrite, req.TransactionalId) {
		code, msg := errs.Split(txnIDDenied(authz.OpWrite, req.TransactionalId))
		return &pb.EndTxnResponse{ErrorCode: code, ErrorMessage: msg, ProducerId: -1, ProducerEpoch: -1}, nil
	}
	if h.TxnCoord == nil {
		code, msg := errs.Split(h.noCoordinator())
		return &pb.EndTxnResponse{ErrorCode: code, ErrorMessage: msg, ProducerId: -1, ProducerEpoch: -1}, nil
	}
	res, err := h.TxnCoord.EndTxn(ctx, req.TransactionalId, req.ProducerId, int16(req.ProducerEpoch), req.Committed, int16(req.TransactionVersion))
	code, msg := errs.Split(err)
	if err != nil {
		// As Kafka: no producer id or epoch with an error.
		return &pb.EndTxnResponse{ErrorCode: code, ErrorMessage: msg, ProducerId: -1, ProducerEpoch: -1}, nil
	}
	return &pb.EndTxnResponse{ErrorCode: code, ErrorMessage: msg, ProducerId: res.ProducerID, ProducerEpoch: int32(res.Epoch)}, nil
}

// AddPartitionsToTxn adds (or verifies) partitions of transactions: sent
// by partition leaders and group coordinators (the inter-broker listener),
// and by Kafka clients below transaction version 2 for their own
// partitions (the Kafka listener, transaction_version 1). As in
// Kafka, a transaction naming a partition that does not exist adds none:
// that partition is answered UNKNOWN_TOPIC_OR_PARTITION and the others
// OPERATION_NOT_ATTEMPTED.
func (h *Handler) AddPartitionsToTxn(ctx context.Context, req *pb.AddPartitionsToTxnRequest) (*pb.AddPartitionsToTxnResponse, error) {
	resp := &pb.AddPartitionsToTxnResponse{}
	// Kafka's handleAddPartitionsToTxnRequest: what brokers send each
	// other (version 4+: batches, verification) needs ClusterAction on the
	// cluster; a client's own add (versions 0-3, one transaction) Write on
	// the transactional id and on each topic.
	az := h.authz(ctx, "AddPartitionsToTxn")
	brokerForm := fromBroker(ctx) || len(req.Transactions) > 1
	for _, t := range req.Transactions {
		brokerForm = brokerForm || t.VerifyOnly
	}
	var clusterErr error
	if brokerForm && !az.cluster(authz.OpClusterAction) {
		clusterErr = clusterDenied(authz.OpClusterAction)
	}
	for _, t := range req.Transactions {
		r := &pb.AddPartitionsToTxnResult{TransactionalId: shortID(t.TransactionalId)}
		resp.Results = append(resp.Results, r)
		if len(t.Partitions) == 0 {
			continue // nothing to add: no transaction is started for it
		}
		refuse := clusterErr
		if refuse == nil && !brokerForm && !az.txnID(authz.OpWrite, t.TransactionalId) {
			refuse = txnIDDenied(authz.OpWrite, t.TransactionalId)
		}
		if refuse != nil {
			code, msg := errs.Split(refuse)
			for _, p := range t.Partitions {
				r.Partitions = append(r.Partitions, &pb.PartitionError{Topic: p.Topic, Partition: p.Partition, ErrorCode: code, ErrorMessage: msg})
			}
			continue
		}
		missing := h.missingPartitions(t.Partitions)
		if !brokerForm {
			// A topic refused is answered so before its existence is
			// looked at; the others are then not attempted.
			for i, p := range t.Partitions {
				if !az.topic(authz.OpWrite, p.Topic) {
					if missing == nil {
						missing = make([]error, len(t.Partitions))
					}
					missing[i] = topicDenied(authz.OpWrite, p.Topic)
				}
			}
		}
		if len(missing) > 0 {
			for i, p := range t.Partitions {
				pe := &pb.PartitionError{Topic: p.Topic, Partition: p.Partition, ErrorCode: pb.ErrorCode_OPERATION_NOT_ATTEMPTED,
					ErrorMessage: "another partition of the request does not exist; none was added"}
				if missing[i] != nil {
					pe.ErrorCode, pe.ErrorMessage = errs.Split(missing[i])
				}
				r.Partitions = append(r.Partitions, pe)
			}
			continue
		}
		err := firstErr(checkString("transactional id", t.TransactionalId), checkInt16("producer epoch", t.ProducerEpoch),
			checkInt8("transaction version", t.TransactionVersion))
		switch {
		case err != nil:
		case h.TxnCoord == nil:
			err = h.noCoordinator()
		default:
			tps := make([]txn.TopicPartition, len(t.Partitions))
			for i, p := range t.Partitions {
				tps[i] = txn.TopicPartition{Topic: p.Topic, Partition: p.Partition}
			}
			err = h.TxnCoord.AddPartitions(ctx, t.TransactionalId, t.ProducerId, int16(t.ProducerEpoch), t.VerifyOnly, tps, int16(t.TransactionVersion))
		}
		code, msg := errs.Split(err)
		for _, p := range t.Partitions {
			r.Partitions = append(r.Partitions, &pb.PartitionError{Topic: p.Topic, Partition: p.Partition, ErrorCode: code, ErrorMessage: msg})
		}
	}
	return resp, nil
}

// AddOffsetsToTxn adds the __consumer_offsets partition of a group to a
// transaction (a Kafka client below transaction version 2, before its
// TxnOffsetCommit): the client's own add, at transaction version 1.
func (h *Handler) AddOffsetsToTxn(ctx context.Context, req *pb.AddOffsetsToTxnRequest) (*pb.AddOffsetsToTxnResponse, error) {
	err := firstErr(checkStrings("transactional id", req.TransactionalId, "group id", req.GroupId), checkInt16("producer epoch", req.ProducerEpoch))
	switch {
	case err != nil:
	case req.GroupId == "":
		err = errs.New(pb.ErrorCode_INVALID_REQUEST, "AddOffsetsToTxn names the group whose offsets the transaction commits")
	case !h.authz(ctx, "AddOffsetsToTxn").txnID(authz.OpWrite, req.TransactionalId):
		// Kafka: Write on the transactional id, then Read on the group.
		err = txnIDDenied(authz.OpWrite, req.TransactionalId)
	case !h.authz(ctx, "AddOffsetsToTxn").group(authz.OpRead, req.GroupId):
		err = groupDenied(authz.OpRead, req.GroupId)
	case h.TxnCoord == nil:
		err = h.noCoordinator()
	default:
		offsets := h.offsetsTopic()
		tp := txn.TopicPartition{Topic: offsets.Name, Partition: offsets.PartitionOf(h.Repl.Image(), req.GroupId)}
		err = h.TxnCoord.AddPartitions(ctx, req.TransactionalId, req.ProducerId, int16(req.ProducerEpoch), false, []txn.TopicPartition{tp}, 1)
	}
	code, msg := errs.Split(err)
	return &pb.AddOffsetsToTxnResponse{ErrorCode: code, ErrorMessage: msg}, nil
}

// offsetsTopic is __consumer_offsets as the group coordinators partition
// it.
func (h *Handler) offsetsTopic() coordinator.InternalTopic {
	if h.Locator != nil {
		return h.Locator.Topic(pb.CoordinatorType_GROUP)
	}
	return coordinator.DefaultOffsetsTopic()
}

// WriteTxnMarkers appends COMMIT/ABORT markers on partitions this broker
// leads, each waited for until the ISR has it. Only transaction
// coordinators send it, on the inter-broker listener (api/listeners.go). A
// marker names its transactional id, and its coordinator epoch may not be
// above the leader epoch of the __transaction_state partition that
// coordinates that id, as this broker's metadata knows it: a coordinator
// this broker cannot know is current is answered COORDINATOR_NOT_AVAILABLE
// (the coordinator retries once the metadata here has caught up). The
// partition checks the rest (log.ProducerStateManager.CheckMarker): a
// marker only ends an open transaction, and one for a producer with
// nothing open here is answered NONE without a write.
func (h *Handler) WriteTxnMarkers(ctx context.Context, req *pb.WriteTxnMarkersRequest) (*pb.WriteTxnMarkersResponse, error) {
	resp := &pb.WriteTxnMarkersResponse{}
	// Kafka: Alter on the cluster (an administrator's abort) or
	// ClusterAction (a coordinator); the response has no request-wide
	// error, so every partition is refused.
	az := h.authz(ctx, "WriteTxnMarkers")
	var denied error
	if !az.open() && !az.cluster(authz.OpClusterAction) && !az.cluster(authz.OpAlter) {
		denied = clusterDenied(authz.OpClusterAction)
	}
	for _, m := range req.Markers {
		r := &pb.TxnMarkerResult{ProducerId: m.ProducerId}
		resp.Markers = append(resp.Markers, r)
		typ := record.ControlAbort
		if m.Committed {
			typ = record.ControlCommit
		}
		coordEpoch := m.CoordinatorEpoch
		if coordEpoch < 0 {
			coordEpoch = 0
		}
		known := firstErr(denied, checkString("transactional id", m.TransactionalId), checkInt16("producer epoch", m.ProducerEpoch),
			checkInt8("transaction version", m.TransactionVersion))
		if known == nil {
			known = h.knownCoordinator(m.TransactionalId, coordEpoch)
		}
		for _, tp := range m.Partitions {
			err := known
			if err == nil {
				_, err = h.Repl.WriteMarker(ctx, tp.Topic, tp.Partition, m.ProducerId, int16(m.ProducerEpoch), coordEpoch, typ, m.TransactionVersion, 10*time.Second)
			}
			if err == nil && tp.Topic == metadata.InternalOffsetsTopic {
				if h.Groups != nil {
					h.Groups.OnTxnMarker(tp.Partition, m.ProducerId, m.Committed)
				}
			}
			code, msg := errs.Split(err)
			r.Partitions = append(r.Partitions, &pb.PartitionError{Topic: tp.Topic, Partition: tp.Partition, ErrorCode: code, ErrorMessage: msg})
		}
	}
	return resp, nil
}

// knownCoordinator checks a marker's coordinator epoch against the leader
// epoch of the __transaction_state partition of its transactional id in
// this broker's metadata (a coordinator's epoch is that leader epoch when
// it took the partition over).
func (h *Handler) knownCoordinator(transactionalID string, coordEpoch int32) error {
	if transactionalID == "" {
		return errs.New(pb.ErrorCode_INVALID_REQUEST, "a transaction marker names the transactional id its coordinator ends")
	}
	name := metadata.InternalTransactionTopic
	if h.Locator != nil {
		name = h.Locator.Topic(pb.CoordinatorType_TRANSACTION).Name
	}
	img := h.Repl.Image()
	t := img.Topic(name)
	if t == nil || len(t.Partitions) == 0 {
		return errs.New(pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, "%s is not in this broker's metadata yet", name)
	}
	part := coordinator.PartitionFor(transactionalID, int32(len(t.Partitions)))
	p := img.Partition(name, part)
	if p == nil || coordEpoch > p.LeaderEpoch {
		epoch := int32(-1)
		if p != nil {
			epoch = p.LeaderEpoch
		}
		return errs.New(pb.ErrorCode_COORDINATOR_NOT_AVAILABLE,
			"marker for %q from coordinator epoch %d, but %s-%d is at leader epoch %d in this broker's metadata; retry once it has caught up",
			transactionalID, coordEpoch, name, part, epoch)
	}
	return nil
}

// AbortTransaction is the administrator's abort of a hanging transaction
// on one partition this broker leads (`strand transactions abort`,
// kafka-transactions abort): see log.Log.AbortHanging for what it aborts
// and what it refuses. Unlike a marker it is a client request, served on
// the client listeners.
func (h *Handler) AbortTransaction(ctx context.Context, req *pb.AbortTransactionRequest) (*pb.AbortTransactionResponse, error) {
	// Kafka's admin abort is a WriteTxnMarkers to the partition leader,
	// which an administrator may send with Alter on the cluster.
	if err := firstErr(checkInt16("producer epoch", req.ProducerEpoch), h.authorizeCluster(ctx, "AbortTransaction", authz.OpAlter)); err != nil {
		code, msg := errs.Split(err)
		return &pb.AbortTransactionResponse{ErrorCode: code, ErrorMessage: msg, MarkerOffset: -1}, nil
	}
	res, err := h.Repl.AbortHanging(ctx, req.Topic, req.Partition, req.ProducerId, int16(req.ProducerEpoch), req.StartOffset, h.TxnMaxTimeout, 10*time.Second)
	if err == nil && req.Topic == metadata.InternalOffsetsTopic {
		if h.Groups != nil {
			h.Groups.OnTxnMarker(req.Partition, req.ProducerId, false)
		}
	}
	code, msg := errs.Split(err)
	out := &pb.AbortTransactionResponse{ErrorCode: code, ErrorMessage: msg, MarkerOffset: -1}
	if res.Completed != nil {
		out.MarkerOffset = res.Offset
	}
	return out, nil
}

// DescribeTransactions reports transactional ids this broker coordinates.
func (h *Handler) DescribeTransactions(ctx context.Context, req *pb.DescribeTransactionsRequest) (*pb.DescribeTransactionsResponse, error) {
	if h.TxnCoord == nil {
		// Every id asked for is answered, here with why none is known.
		code, msg := errs.Split(h.noCoordinator())
		out := &pb.DescribeTransactionsResponse{}
		for _, id := range req.TransactionalIds {
			out.Transactions = append(out.Transactions, &pb.TransactionState{TransactionalId: shortID(id), ErrorCode: code, ErrorMessage: msg,
				ProducerId: -1, ProducerEpoch: -1, TransactionStartTimeMs: -1, CoordinatorId: h.NodeID})
		}
		return out, nil
	}
	var ids []string
	var long []*pb.TransactionState
	az := h.authz(ctx, "DescribeTransactions")
	for _, id := range req.TransactionalIds {
		if err := checkString("transactional id", id); err != nil {
			code, msg := errs.Split(err)
			long = append(long, &pb.TransactionState{TransactionalId: shortID(id), ErrorCode: code, ErrorMessage: msg})
			continue
		}
		if !az.txnID(authz.OpDescribe, id) {
			// Kafka: the id's error, nothing else about it.
			code, msg := errs.Split(txnIDDenied(authz.OpDescribe, id))
			long = append(long, &pb.TransactionState{TransactionalId: id, ErrorCode: code, ErrorMessage: msg,
				ProducerId: -1, ProducerEpoch: -1, TransactionStartTimeMs: -1, CoordinatorId: h.NodeID})
			continue
		}
		ids = append(ids, id)
	}
	out := &pb.DescribeTransactionsResponse{}
	if len(ids) > 0 {
		out.Transactions = h.TxnCoord.Describe(ids)
	}
	if !az.open() {
		// Kafka shows only the partitions of topics the principal may
		// Describe.
		quiet := az.quietly()
		for _, st := range out.Transactions {
			kept := st.Partitions[:0:0]
			for _, p := range st.Partitions {
				if quiet.topic(authz.OpDescribe, p.Topic) {
					kept = append(kept, p)
				}
			}
			st.Partitions = kept
		}
	}
	out.Transactions = append(out.Transactions, long...)
	return out, nil
}

// ListTransactions lists transactional ids this broker coordinates.
func (h *Handler) ListTransactions(ctx context.Context, req *pb.ListTransactionsRequest) (*pb.ListTransactionsResponse, error) {
	if h.TxnCoord == nil {
		return &pb.ListTransactionsResponse{CoordinatorId: h.NodeID}, nil
	}
	for _, f := range req.StateFilters {
		if err := checkString("state filter", f); err != nil {
			return &pb.ListTransactionsResponse{ErrorCode: pb.ErrorCode_INVALID_REQUEST, CoordinatorId: h.NodeID}, nil
		}
	}
	if checkStrings("transactional id pattern", req.TransactionalIdPattern, "page start", req.AfterTransactionalId) != nil {
		return &pb.ListTransactionsResponse{ErrorCode: pb.ErrorCode_INVALID_REQUEST, CoordinatorId: h.NodeID}, nil
	}
	resp, err := h.TxnCoord.List(req, ListPageBytes)
	az := h.authz(ctx, "ListTransactions")
	if err != nil || resp == nil || az.open() {
		return resp, err
	}
	// Kafka lists only the ids the principal may Describe.
	kept := resp.Transactions[:0:0]
	quiet := az.quietly()
	for _, t := range resp.Transactions {
		if quiet.txnID(authz.OpDescribe, t.TransactionalId) {
			kept = append(kept, t)
		}
	}
	resp.Transactions = kept
	return resp, nil
}

// DescribeProducers lists the active producers of partitions this broker leads.
func (h *Handler) DescribeProducers(ctx context.Context, req *pb.DescribeProducersRequest) (*pb.DescribeProducersResponse, error) {
	resp := &pb.DescribeProducersResponse{}
	az := h.authz(ctx, "DescribeProducers")
	for _, tp := range req.Partitions {
		out := &pb.PartitionProducers{Topic: tp.Topic, Partition: tp.Partition, HighWatermark: -1, LastStableOffset: -1}
		resp.Partitions = append(resp.Partitions, out)
		if !az.topic(authz.OpRead, tp.Topic) {
			// Kafka: Read on the topic, asked before it is looked up.
			out.ErrorCode, out.ErrorMessage = errs.Split(topicDenied(authz.OpRead, tp.Topic))
			continue
		}
		p, err := h.Repl.Partition(tp.Topic, tp.Partition)
		if err == nil && p.Leadership().Role != broker.RoleLeader {
			err = errs.New(pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, "broker %d is not the leader of %s-%d", h.NodeID, tp.Topic, tp.Partition)
		}
		if err != nil {
			out.ErrorCode, out.ErrorMessage = errs.Split(err)
			continue
		}
		out.HighWatermark, out.LastStableOffset = p.HighWatermark(), p.LastStableOffset()
		for _, e := range p.Log.Producers() {
			out.ActiveProducers = append(out.ActiveProducers, &pb.ProducerState{ProducerId: e.ProducerID, ProducerEpoch: int32(e.Epoch),
				LastSequence: e.LastSequence(), LastTimestamp: e.LastTimestamp, CoordinatorEpoch: e.CoordinatorEpoch, CurrentTxnStartOffset: e.CurrentTxnFirstOffset})
		}
	}
	return resp, nil
}
