package request_test

import (
	"context"
	"strings"
	"testing"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/request"
)

// TestEdgeChecks: what a request may carry is refused by the request
// layer itself, before anything is looked up: the Handler here has no
// partitions, coordinators or controller (any of them reached would be a
// nil dereference), and each refusal is an answer with its Kafka code,
// not an error.
func TestEdgeChecks(t *testing.T) {
	h := &request.Handler{NodeID: 4, OffsetMetadataMaxBytes: 8}
	ctx := context.Background()
	long := strings.Repeat("g", request.MaxStringBytes+1)
	want := func(what string, got pb.ErrorCode, err error, code pb.ErrorCode) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: error %v, want an answer", what, err)
		} else if got != code {
			t.Errorf("%s: %v, want %v", what, got, code)
		}
	}

	j, err := h.JoinGroup(ctx, &pb.JoinGroupRequest{GroupId: long})
	want("JoinGroup with a long group id", j.GetErrorCode(), err, pb.ErrorCode_INVALID_REQUEST)
	if err == nil && (j.GenerationId != -1 || len(j.MemberId) != 0) {
		t.Errorf("JoinGroup refusal: generation %d member %q, want -1 and none", j.GenerationId, j.MemberId)
	}
	j, err = h.JoinGroup(ctx, &pb.JoinGroupRequest{GroupId: "g", Protocols: []*pb.GroupProtocol{{Name: long}}})
	want("JoinGroup with a long protocol name", j.GetErrorCode(), err, pb.ErrorCode_INVALID_REQUEST)
	s, err := h.SyncGroup(ctx, &pb.SyncGroupRequest{GroupId: "g", MemberId: long})
	want("SyncGroup with a long member id", s.GetErrorCode(), err, pb.ErrorCode_INVALID_REQUEST)
	hb, err := h.Heartbeat(ctx, &pb.HeartbeatRequest{GroupId: "g", GroupInstanceId: long})
	want("Heartbeat with a long instance id", hb.GetErrorCode(), err, pb.ErrorCode_INVALID_REQUEST)
	l, err := h.LeaveGroup(ctx, &pb.LeaveGroupRequest{GroupId: long})
	want("LeaveGroup with a long group id", l.GetErrorCode(), err, pb.ErrorCode_INVALID_REQUEST)
	of, err := h.OffsetFetch(ctx, &pb.OffsetFetchRequest{GroupId: long})
	want("OffsetFetch with a long group id", of.GetErrorCode(), err, pb.ErrorCode_INVALID_REQUEST)

	dg, err := h.DescribeGroups(ctx, &pb.DescribeGroupsRequest{GroupIds: []string{long}})
	if err != nil || len(dg.Groups) != 1 || dg.Groups[0].ErrorCode != pb.ErrorCode_INVALID_REQUEST || dg.Groups[0].CoordinatorId != 4 || len(dg.Groups[0].GroupId) > 64 {
		t.Errorf("DescribeGroups of a long id: %v %v, want one INVALID_REQUEST from node 4 naming the id by its length", dg, err)
	}

	// Offset commits are answered per partition: metadata over
	// offset.metadata.max.bytes is OFFSET_METADATA_TOO_LARGE.
	oc, err := h.OffsetCommit(ctx, &pb.OffsetCommitRequest{GroupId: "g", Offsets: []*pb.PartitionOffset{
		{Topic: "t", Partition: 0, Offset: 1, Metadata: "123456789"}, {Topic: "t", Partition: 1, Offset: 1, Metadata: strings.Repeat("m", 100)}}})
	if err != nil || len(oc.Partitions) != 2 {
		t.Fatalf("OffsetCommit: %v %v", oc, err)
	}
	for _, p := range oc.Partitions {
		if p.ErrorCode != pb.ErrorCode_OFFSET_METADATA_TOO_LARGE {
			t.Errorf("OffsetCommit of %s-%d with long metadata: %v, want OFFSET_METADATA_TOO_LARGE", p.Topic, p.Partition, p.ErrorCode)
		}
	}
	oc, err = h.OffsetCommit(ctx, &pb.OffsetCommitRequest{GroupId: long, Offsets: []*pb.PartitionOffset{{Topic: "t"}}})
	if err != nil || len(oc.Partitions) != 1 || oc.Partitions[0].ErrorCode != pb.ErrorCode_INVALID_REQUEST {
		t.Errorf("OffsetCommit with a long group id: %v %v, want its partition INVALID_REQUEST", oc, err)
	}
	toc, err := h.TxnOffsetCommit(ctx, &pb.TxnOffsetCommitRequest{TransactionalId: "x", GroupId: "g", ProducerEpoch: 40000, Offsets: []*pb.PartitionOffset{{Topic: "t"}}})
	want("TxnOffsetCommit with an epoch over INT16", toc.GetErrorCode(), err, pb.ErrorCode_INVALID_REQUEST)

	// Isolation levels outside Kafka's INT8 enum.
	f, err := h.Fetch(ctx, &pb.FetchRequest{ReplicaId: -1, IsolationLevel: 7})
	want("Fetch with isolation level 7", f.GetErrorCode(), err, pb.ErrorCode_INVALID_REQUEST)
	lo, err := h.ListOffsets(ctx, &pb.ListOffsetsRequest{IsolationLevel: 2, Partitions: []*pb.ListOffsetsPartition{{Topic: "t"}}})
	if err != nil || len(lo.Partitions) != 1 || lo.Partitions[0].ErrorCode != pb.ErrorCode_INVALID_REQUEST || lo.Partitions[0].Offset != -1 {
		t.Errorf("ListOffsets with isolation level 2: %v %v, want its partition INVALID_REQUEST at offset -1", lo, err)
	}

	// Transactions: ids over the string limit, epochs over INT16.
	ip, err := h.InitProducerId(ctx, &pb.InitProducerIdRequest{TransactionalId: long})
	want("InitProducerId with a long transactional id", ip.GetErrorCode(), err, pb.ErrorCode_INVALID_REQUEST)
	if err == nil && (ip.ProducerId != -1 || ip.ProducerEpoch != -1) {
		t.Errorf("InitProducerId refusal names producer %d/%d, want -1/-1", ip.ProducerId, ip.ProducerEpoch)
	}
	et, err := h.EndTxn(ctx, &pb.EndTxnRequest{TransactionalId: "x", ProducerEpoch: 40000})
	want("EndTxn with an epoch over INT16", et.GetErrorCode(), err, pb.ErrorCode_INVALID_REQUEST)
	et, err = h.EndTxn(ctx, &pb.EndTxnRequest{TransactionalId: "x", ProducerId: 3})
	want("EndTxn on a node with no transaction coordinator", et.GetErrorCode(), err, pb.ErrorCode_COORDINATOR_NOT_AVAILABLE)
	at, err := h.AbortTransaction(ctx, &pb.AbortTransactionRequest{Topic: "t", ProducerEpoch: -40000})
	want("AbortTransaction with an epoch under INT16", at.GetErrorCode(), err, pb.ErrorCode_INVALID_REQUEST)

	fc, err := h.FindCoordinator(ctx, &pb.FindCoordinatorRequest{Keys: []string{long}})
	if err != nil || len(fc.Coordinators) != 1 || fc.Coordinators[0].ErrorCode != pb.ErrorCode_INVALID_REQUEST || fc.Coordinators[0].NodeId != -1 {
		t.Errorf("FindCoordinator of a long key: %v %v, want INVALID_REQUEST and node -1", fc, err)
	}

	ct, err := h.CreateTopics(ctx, &pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{{Name: "t", NumPartitions: 1, ReplicationFactor: 1 << 16}}})
	if err != nil || len(ct.Topics) != 1 || ct.Topics[0].ErrorCode != pb.ErrorCode_INVALID_REQUEST {
		t.Errorf("CreateTopics with a replication factor over INT16: %v %v, want INVALID_REQUEST", ct, err)
	}
}

// TestForListener: the copy answers as the listener it was made for and
// leaves the handler it was made from as it was.
func TestForListener(t *testing.T) {
	h := &request.Handler{NodeID: 2}
	for _, l := range []request.Listener{request.ListenerExternal, request.ListenerKafka} {
		c := h.ForListener(l)
		if c.Listener != l || h.Listener != request.ListenerClient || c.NodeID != 2 {
			t.Fatalf("ForListener(%d): copy listener=%d node %d, original listener=%d", l, c.Listener, c.NodeID, h.Listener)
		}
	}
}
