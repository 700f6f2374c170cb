package fakebroker

import (
	"context"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// The group coordinator: one member per group, assignments as its leader
// sends them, offsets kept in memory.

func (b *Broker) JoinGroup(ctx context.Context, req *pb.JoinGroupRequest) (*pb.JoinGroupResponse, error) {
	if code := b.refused("JoinGroup"); code != pb.ErrorCode_NONE {
		return &pb.JoinGroupResponse{ErrorCode: code, ErrorMessage: RefusalMessage, GenerationId: -1, MemberId: req.MemberId}, nil
	}
	id := req.MemberId
	if id == "" {
		id = "member-1"
	}
	var meta []byte
	proto := ""
	if len(req.Protocols) > 0 {
		proto, meta = req.Protocols[0].Name, req.Protocols[0].Metadata
	}
	return &pb.JoinGroupResponse{GenerationId: 1, ProtocolName: proto, Leader: id, MemberId: id,
		Members: []*pb.GroupMember{{MemberId: id, GroupInstanceId: req.GroupInstanceId, Metadata: meta}}}, nil
}

func (b *Broker) SyncGroup(ctx context.Context, req *pb.SyncGroupRequest) (*pb.SyncGroupResponse, error) {
	if code := b.refused("SyncGroup"); code != pb.ErrorCode_NONE {
		return &pb.SyncGroupResponse{ErrorCode: code, ErrorMessage: RefusalMessage}, nil
	}
	for _, a := range req.Assignments {
		if a.MemberId == req.MemberId {
			return &pb.SyncGroupResponse{Assignment: a.Assignment}, nil
		}
	}
	return &pb.SyncGroupResponse{}, nil
}

func (b *Broker) Heartbeat(ctx context.Context, req *pb.HeartbeatRequest) (*pb.HeartbeatResponse, error) {
	return &pb.HeartbeatResponse{}, nil
}

func (b *Broker) LeaveGroup(ctx context.Context, req *pb.LeaveGroupRequest) (*pb.LeaveGroupResponse, error) {
	return &pb.LeaveGroupResponse{}, nil
}

func (b *Broker) OffsetCommit(ctx context.Context, req *pb.OffsetCommitRequest) (*pb.OffsetCommitResponse, error) {
	resp := &pb.OffsetCommitResponse{}
	code := b.refused("OffsetCommit")
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, o := range req.Offsets {
		pe := &pb.PartitionError{Topic: o.Topic, Partition: o.Partition}
		if code != pb.ErrorCode_NONE {
			pe.ErrorCode, pe.ErrorMessage = code, RefusalMessage
		} else {
			if b.offsets[req.GroupId] == nil {
				b.offsets[req.GroupId] = map[tp]int64{}
			}
			b.offsets[req.GroupId][tp{o.Topic, o.Partition}] = o.Offset
		}
		resp.Partitions = append(resp.Partitions, pe)
	}
	return resp, nil
}

func (b *Broker) OffsetFetch(ctx context.Context, req *pb.OffsetFetchRequest) (*pb.OffsetFetchResponse, error) {
	if code := b.refused("OffsetFetch"); code != pb.ErrorCode_NONE {
		return &pb.OffsetFetchResponse{ErrorCode: code, ErrorMessage: RefusalMessage}, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	resp := &pb.OffsetFetchResponse{}
	for _, p := range req.Partitions {
		off, ok := b.offsets[req.GroupId][tp{p.Topic, p.Partition}]
		if !ok {
			off = -1
		}
		resp.Partitions = append(resp.Partitions, &pb.OffsetFetchPartition{Topic: p.Topic, Partition: p.Partition, Offset: off, LeaderEpoch: -1})
	}
	return resp, nil
}

// TxnOffsetCommit accepts the offsets (it does not keep them: there are
// no transaction markers to make them visible).
func (b *Broker) TxnOffsetCommit(ctx context.Context, req *pb.TxnOffsetCommitRequest) (*pb.TxnOffsetCommitResponse, error) {
	if code := b.refused("TxnOffsetCommit"); code != pb.ErrorCode_NONE {
		return &pb.TxnOffsetCommitResponse{ErrorCode: code, ErrorMessage: RefusalMessage}, nil
	}
	resp := &pb.TxnOffsetCommitResponse{}
	for _, o := range req.Offsets {
		resp.Partitions = append(resp.Partitions, &pb.PartitionError{Topic: o.Topic, Partition: o.Partition})
	}
	return resp, nil
}

// The transaction coordinator: a producer id per transactional id, whose
// epoch InitProducerId and (transaction protocol v2) every EndTxn bump; a
// fresh producer id for each idempotent producer.

func (b *Broker) InitProducerId(ctx context.Context, req *pb.InitProducerIdRequest) (*pb.InitProducerIdResponse, error) {
	if code := b.refused("InitProducerId"); code != pb.ErrorCode_NONE {
		return &pb.InitProducerIdResponse{ErrorCode: code, ErrorMessage: RefusalMessage, ProducerId: -1, ProducerEpoch: -1}, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if req.TransactionalId == "" {
		pid := b.nextPID
		b.nextPID++
		return &pb.InitProducerIdResponse{ProducerId: pid, ProducerEpoch: 0}, nil
	}
	st := b.txns[req.TransactionalId]
	if st == nil {
		st = &txnState{pid: b.nextPID}
		b.nextPID++
		b.txns[req.TransactionalId] = st
	} else {
		st.epoch++
	}
	return &pb.InitProducerIdResponse{ProducerId: st.pid, ProducerEpoch: st.epoch}, nil
}

func (b *Broker) EndTxn(ctx context.Context, req *pb.EndTxnRequest) (*pb.EndTxnResponse, error) {
	if code := b.refused("EndTxn"); code != pb.ErrorCode_NONE {
		return &pb.EndTxnResponse{ErrorCode: code, ErrorMessage: RefusalMessage}, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.txns[req.TransactionalId]
	if st == nil {
		st = &txnState{pid: req.ProducerId, epoch: req.ProducerEpoch}
		b.txns[req.TransactionalId] = st
	}
	st.epoch++
	return &pb.EndTxnResponse{ProducerId: st.pid, ProducerEpoch: st.epoch}, nil
}

func (b *Broker) ListTransactions(ctx context.Context, req *pb.ListTransactionsRequest) (*pb.ListTransactionsResponse, error) {
	if code := b.refused("ListTransactions"); code != pb.ErrorCode_NONE {
		return &pb.ListTransactionsResponse{ErrorCode: code, CoordinatorId: NodeID}, nil
	}
	return &pb.ListTransactionsResponse{CoordinatorId: NodeID}, nil
}

func (b *Broker) DescribeTransactions(ctx context.Context, req *pb.DescribeTransactionsRequest) (*pb.DescribeTransactionsResponse, error) {
	resp := &pb.DescribeTransactionsResponse{}
	for _, id := range req.TransactionalIds {
		st := &pb.TransactionState{TransactionalId: id, ProducerId: 1, CoordinatorId: NodeID}
		if code := b.refused("DescribeTransactions"); code != pb.ErrorCode_NONE {
			st.ErrorCode, st.ErrorMessage = code, RefusalMessage
		}
		resp.Transactions = append(resp.Transactions, st)
	}
	return resp, nil
}

func (b *Broker) DescribeProducers(ctx context.Context, req *pb.DescribeProducersRequest) (*pb.DescribeProducersResponse, error) {
	resp := &pb.DescribeProducersResponse{}
	for _, p := range req.Partitions {
		pp := &pb.PartitionProducers{Topic: p.Topic, Partition: p.Partition,
			ActiveProducers: []*pb.ProducerState{{ProducerId: 1, ProducerEpoch: 0, LastSequence: 0, CoordinatorEpoch: 0, CurrentTxnStartOffset: 0}}}
		if code := b.refused("DescribeProducers"); code != pb.ErrorCode_NONE {
			pp = &pb.PartitionProducers{Topic: p.Topic, Partition: p.Partition, ErrorCode: code, ErrorMessage: RefusalMessage}
		}
		resp.Partitions = append(resp.Partitions, pp)
	}
	return resp, nil
}

func (b *Broker) AbortTransaction(ctx context.Context, req *pb.AbortTransactionRequest) (*pb.AbortTransactionResponse, error) {
	if code := b.refused("AbortTransaction"); code != pb.ErrorCode_NONE {
		return &pb.AbortTransactionResponse{ErrorCode: code, ErrorMessage: RefusalMessage, MarkerOffset: -1}, nil
	}
	return &pb.AbortTransactionResponse{MarkerOffset: 1}, nil
}

// Admin.

func (b *Broker) CreateTopics(ctx context.Context, req *pb.CreateTopicsRequest) (*pb.CreateTopicsResponse, error) {
	resp := &pb.CreateTopicsResponse{}
	for _, t := range req.Topics {
		r := &pb.CreatableTopicResult{Name: t.Name, NumPartitions: t.NumPartitions, ReplicationFactor: t.ReplicationFactor}
		if code := b.refused("CreateTopics"); code != pb.ErrorCode_NONE {
			r.ErrorCode, r.ErrorMessage = code, RefusalMessage
		} else if !req.ValidateOnly {
			b.AddTopic(Topic{Name: t.Name, Partitions: t.NumPartitions})
		}
		resp.Topics = append(resp.Topics, r)
	}
	return resp, nil
}

// DeleteTopics forgets the topics (a name it does not know is answered
// as deleted).
func (b *Broker) DeleteTopics(ctx context.Context, req *pb.DeleteTopicsRequest) (*pb.DeleteTopicsResponse, error) {
	resp := &pb.DeleteTopicsResponse{}
	for _, n := range req.Names {
		r := &pb.DeletableTopicResult{Name: n}
		if code := b.refused("DeleteTopics"); code != pb.ErrorCode_NONE {
			r.ErrorCode, r.ErrorMessage = code, RefusalMessage
		} else {
			b.mu.Lock()
			if _, ok := b.topics[n]; ok {
				delete(b.topics, n)
				for i, o := range b.order {
					if o == n {
						b.order = append(b.order[:i], b.order[i+1:]...)
						break
					}
				}
			}
			b.mu.Unlock()
		}
		resp.Topics = append(resp.Topics, r)
	}
	return resp, nil
}

func (b *Broker) DescribeConfigs(ctx context.Context, req *pb.DescribeConfigsRequest) (*pb.DescribeConfigsResponse, error) {
	resp := &pb.DescribeConfigsResponse{}
	for _, r := range req.Resources {
		out := &pb.ConfigResourceResult{Type: r.Type, Name: r.Name}
		if code := b.refused("DescribeConfigs"); code != pb.ErrorCode_NONE {
			out.ErrorCode, out.ErrorMessage = code, RefusalMessage
		}
		resp.Results = append(resp.Results, out)
	}
	return resp, nil
}

func (b *Broker) IncrementalAlterConfigs(ctx context.Context, req *pb.IncrementalAlterConfigsRequest) (*pb.IncrementalAlterConfigsResponse, error) {
	if code := b.refused("IncrementalAlterConfigs"); code != pb.ErrorCode_NONE {
		return &pb.IncrementalAlterConfigsResponse{ErrorCode: code, ErrorMessage: RefusalMessage}, nil
	}
	return &pb.IncrementalAlterConfigsResponse{}, nil
}
