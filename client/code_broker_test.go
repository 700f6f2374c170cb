package client

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// codeBroker is a one-node cluster in a test: it leads the one partition
// of topic "t", coordinates every group and transactional id, and answers
// every call successfully except the one named by fail, which it answers
// with code, every time. It counts how often it answered code, so a test
// can tell a call that retried the code until its time was up from one
// that never got that far.
//
// The names of fail: Metadata (the topic's error), FindCoordinator,
// InitProducerId, EndTxn, Produce, Fetch (the partition's error),
// FetchTop (the response's), ListOffsets, JoinGroup, SyncGroup,
// OffsetCommit, OffsetFetch, TxnOffsetCommit, CreateTopics, DeleteTopics,
// DescribeConfigs, IncrementalAlterConfigs, ListTransactions,
// DescribeTransactions, DescribeProducers, AbortTransaction.
type codeBroker struct {
	pb.UnimplementedMetadataServer
	pb.UnimplementedProducerServer
	pb.UnimplementedTransactionsServer
	pb.UnimplementedConsumerServer
	pb.UnimplementedGroupsServer
	pb.UnimplementedAdminServer

	addr string
	fail string
	code pb.ErrorCode

	answered atomic.Int64 // answers carrying code
	// onAnswer, if set, is called with the count after each answer
	// carrying code.
	onAnswer func(n int64)
	mu       sync.Mutex
	epoch    int32 // the producer epoch EndTxn hands out next
}

// codeMessage is the message of every refusal; it does not name the code,
// as a broker's message should not (the code travels beside it).
const codeMessage = "refused by the test broker"

// startCodeBroker serves b on a loopback port until the test ends.
func startCodeBroker(t testing.TB, b *codeBroker) {
	t.Helper()
	stop, err := serveCodeBroker(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
}

// serveCodeBroker serves b on a loopback port until stop is called.
func serveCodeBroker(b *codeBroker) (stop func(), err error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b.addr = lis.Addr().String()
	srv := grpc.NewServer()
	pb.RegisterMetadataServer(srv, b)
	pb.RegisterProducerServer(srv, b)
	pb.RegisterTransactionsServer(srv, b)
	pb.RegisterConsumerServer(srv, b)
	pb.RegisterGroupsServer(srv, b)
	pb.RegisterAdminServer(srv, b)
	go srv.Serve(lis)
	return srv.Stop, nil
}

// refuse reports whether the call named rpc is the failing one, and
// counts the answer.
func (b *codeBroker) refuse(rpc string) bool {
	if b.fail != rpc {
		return false
	}
	n := b.answered.Add(1)
	if b.onAnswer != nil {
		b.onAnswer(n)
	}
	return true
}

func (b *codeBroker) Metadata(ctx context.Context, req *pb.MetadataRequest) (*pb.MetadataResponse, error) {
	resp := &pb.MetadataResponse{ClusterId: "c", ControllerId: 1, Brokers: []*pb.BrokerInfo{{NodeId: 1, Address: b.addr}}}
	names := req.Topics
	if len(names) == 0 {
		names = []string{"t"}
	}
	for _, n := range names {
		if n == "t" && !b.refuse("Metadata") {
			resp.Topics = append(resp.Topics, &pb.TopicMetadata{Name: n, MaxMessageBytes: 1 << 20,
				Partitions: []*pb.PartitionMetadata{{Partition: 0, LeaderId: 1, Replicas: []int32{1}, Isr: []int32{1}}}})
			continue
		}
		code := b.code
		if n != "t" {
			code = pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION
		}
		// As the real broker answered an unknown topic before issue 16:
		// the message repeats the code's name.
		resp.Topics = append(resp.Topics, &pb.TopicMetadata{Name: n, ErrorCode: code, ErrorMessage: code.String() + ": topic \"" + n + "\" refused by the test broker"})
	}
	return resp, nil
}

func (b *codeBroker) FindCoordinator(ctx context.Context, req *pb.FindCoordinatorRequest) (*pb.FindCoordinatorResponse, error) {
	resp := &pb.FindCoordinatorResponse{}
	for _, k := range req.Keys {
		co := &pb.Coordinator{Key: k, NodeId: 1, Address: b.addr}
		if b.refuse("FindCoordinator") {
			co = &pb.Coordinator{Key: k, NodeId: -1, ErrorCode: b.code, ErrorMessage: codeMessage}
		}
		resp.Coordinators = append(resp.Coordinators, co)
	}
	return resp, nil
}

func (b *codeBroker) InitProducerId(ctx context.Context, req *pb.InitProducerIdRequest) (*pb.InitProducerIdResponse, error) {
	if b.refuse("InitProducerId") {
		return &pb.InitProducerIdResponse{ErrorCode: b.code, ErrorMessage: codeMessage, ProducerId: -1, ProducerEpoch: -1}, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.epoch = 1
	return &pb.InitProducerIdResponse{ProducerId: 1, ProducerEpoch: 0}, nil
}

func (b *codeBroker) EndTxn(ctx context.Context, req *pb.EndTxnRequest) (*pb.EndTxnResponse, error) {
	if b.refuse("EndTxn") {
		return &pb.EndTxnResponse{ErrorCode: b.code, ErrorMessage: codeMessage}, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.epoch
	b.epoch++
	return &pb.EndTxnResponse{ProducerId: 1, ProducerEpoch: e}, nil
}

func (b *codeBroker) Produce(stream pb.Producer_ProduceServer) error {
	next := int64(0)
	for {
		r, err := stream.Recv()
		if err != nil {
			return err
		}
		resp := &pb.ProduceResponse{CorrelationId: r.CorrelationId}
		for _, p := range r.Partitions {
			pr := &pb.ProducePartitionResponse{Topic: p.Topic, Partition: p.Partition, BaseOffset: -1}
			if b.refuse("Produce") {
				pr.ErrorCode, pr.ErrorMessage = b.code, codeMessage
			} else {
				h, err := record.ParseHeader(p.Records)
				if err != nil {
					return err
				}
				pr.BaseOffset = next
				next += int64(h.RecordCount)
			}
			resp.Partitions = append(resp.Partitions, pr)
		}
		if r.Acks == 0 {
			continue
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

func (b *codeBroker) Fetch(ctx context.Context, req *pb.FetchRequest) (*pb.FetchResponse, error) {
	if b.refuse("FetchTop") {
		return &pb.FetchResponse{ErrorCode: b.code, ErrorMessage: codeMessage}, nil
	}
	resp := &pb.FetchResponse{}
	refused := false
	for _, p := range req.Partitions {
		pr := &pb.FetchPartitionResponse{Topic: p.Topic, Partition: p.Partition, HighWatermark: 0, LastStableOffset: 0, LogStartOffset: 0, LogEndOffset: 0}
		if b.refuse("Fetch") {
			pr.ErrorCode, pr.ErrorMessage, pr.HighWatermark, pr.LastStableOffset, pr.LogStartOffset = b.code, codeMessage, -1, -1, -1
			refused = true
		}
		resp.Partitions = append(resp.Partitions, pr)
	}
	if !refused {
		// Nothing to read: wait as a broker does (fetch.max.wait.ms).
		t := time.NewTimer(time.Duration(req.MaxWaitMs) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return resp, nil
}

func (b *codeBroker) ListOffsets(ctx context.Context, req *pb.ListOffsetsRequest) (*pb.ListOffsetsResponse, error) {
	resp := &pb.ListOffsetsResponse{}
	for _, p := range req.Partitions {
		pr := &pb.ListOffsetsPartitionResponse{Topic: p.Topic, Partition: p.Partition, Offset: 0, Timestamp: -1}
		if b.refuse("ListOffsets") {
			pr = &pb.ListOffsetsPartitionResponse{Topic: p.Topic, Partition: p.Partition, ErrorCode: b.code, ErrorMessage: codeMessage, Offset: -1, Timestamp: -1}
		}
		resp.Partitions = append(resp.Partitions, pr)
	}
	return resp, nil
}

func (b *codeBroker) JoinGroup(ctx context.Context, req *pb.JoinGroupRequest) (*pb.JoinGroupResponse, error) {
	if b.refuse("JoinGroup") {
		return &pb.JoinGroupResponse{ErrorCode: b.code, ErrorMessage: codeMessage, GenerationId: -1, MemberId: req.MemberId}, nil
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

func (b *codeBroker) SyncGroup(ctx context.Context, req *pb.SyncGroupRequest) (*pb.SyncGroupResponse, error) {
	if b.refuse("SyncGroup") {
		return &pb.SyncGroupResponse{ErrorCode: b.code, ErrorMessage: codeMessage}, nil
	}
	for _, a := range req.Assignments {
		if a.MemberId == req.MemberId {
			return &pb.SyncGroupResponse{Assignment: a.Assignment}, nil
		}
	}
	return &pb.SyncGroupResponse{}, nil
}

func (b *codeBroker) Heartbeat(ctx context.Context, req *pb.HeartbeatRequest) (*pb.HeartbeatResponse, error) {
	return &pb.HeartbeatResponse{}, nil
}

func (b *codeBroker) LeaveGroup(ctx context.Context, req *pb.LeaveGroupRequest) (*pb.LeaveGroupResponse, error) {
	return &pb.LeaveGroupResponse{}, nil
}

func (b *codeBroker) OffsetCommit(ctx context.Context, req *pb.OffsetCommitRequest) (*pb.OffsetCommitResponse, error) {
	resp := &pb.OffsetCommitResponse{}
	refused := b.refuse("OffsetCommit")
	for _, o := range req.Offsets {
		pe := &pb.PartitionError{Topic: o.Topic, Partition: o.Partition}
		if refused {
			pe.ErrorCode, pe.ErrorMessage = b.code, codeMessage
		}
		resp.Partitions = append(resp.Partitions, pe)
	}
	return resp, nil
}

func (b *codeBroker) OffsetFetch(ctx context.Context, req *pb.OffsetFetchRequest) (*pb.OffsetFetchResponse, error) {
	if b.refuse("OffsetFetch") {
		return &pb.OffsetFetchResponse{ErrorCode: b.code, ErrorMessage: codeMessage}, nil
	}
	resp := &pb.OffsetFetchResponse{}
	for _, p := range req.Partitions {
		resp.Partitions = append(resp.Partitions, &pb.OffsetFetchPartition{Topic: p.Topic, Partition: p.Partition, Offset: -1, LeaderEpoch: -1})
	}
	return resp, nil
}

func (b *codeBroker) TxnOffsetCommit(ctx context.Context, req *pb.TxnOffsetCommitRequest) (*pb.TxnOffsetCommitResponse, error) {
	if b.refuse("TxnOffsetCommit") {
		return &pb.TxnOffsetCommitResponse{ErrorCode: b.code, ErrorMessage: codeMessage}, nil
	}
	resp := &pb.TxnOffsetCommitResponse{}
	for _, o := range req.Offsets {
		resp.Partitions = append(resp.Partitions, &pb.PartitionError{Topic: o.Topic, Partition: o.Partition})
	}
	return resp, nil
}

func (b *codeBroker) CreateTopics(ctx context.Context, req *pb.CreateTopicsRequest) (*pb.CreateTopicsResponse, error) {
	resp := &pb.CreateTopicsResponse{}
	for _, t := range req.Topics {
		r := &pb.CreatableTopicResult{Name: t.Name, NumPartitions: t.NumPartitions, ReplicationFactor: t.ReplicationFactor}
		if b.refuse("CreateTopics") {
			r.ErrorCode, r.ErrorMessage = b.code, codeMessage
		}
		resp.Topics = append(resp.Topics, r)
	}
	return resp, nil
}

func (b *codeBroker) DeleteTopics(ctx context.Context, req *pb.DeleteTopicsRequest) (*pb.DeleteTopicsResponse, error) {
	resp := &pb.DeleteTopicsResponse{}
	for _, n := range req.Names {
		r := &pb.DeletableTopicResult{Name: n}
		if b.refuse("DeleteTopics") {
			r.ErrorCode, r.ErrorMessage = b.code, codeMessage
		}
		resp.Topics = append(resp.Topics, r)
	}
	return resp, nil
}

func (b *codeBroker) DescribeConfigs(ctx context.Context, req *pb.DescribeConfigsRequest) (*pb.DescribeConfigsResponse, error) {
	resp := &pb.DescribeConfigsResponse{}
	for _, r := range req.Resources {
		out := &pb.ConfigResourceResult{Type: r.Type, Name: r.Name}
		if b.refuse("DescribeConfigs") {
			out.ErrorCode, out.ErrorMessage = b.code, codeMessage
		}
		resp.Results = append(resp.Results, out)
	}
	return resp, nil
}

func (b *codeBroker) IncrementalAlterConfigs(ctx context.Context, req *pb.IncrementalAlterConfigsRequest) (*pb.IncrementalAlterConfigsResponse, error) {
	if b.refuse("IncrementalAlterConfigs") {
		return &pb.IncrementalAlterConfigsResponse{ErrorCode: b.code, ErrorMessage: codeMessage}, nil
	}
	return &pb.IncrementalAlterConfigsResponse{}, nil
}

func (b *codeBroker) ListTransactions(ctx context.Context, req *pb.ListTransactionsRequest) (*pb.ListTransactionsResponse, error) {
	if b.refuse("ListTransactions") {
		return &pb.ListTransactionsResponse{ErrorCode: b.code, CoordinatorId: 1}, nil
	}
	return &pb.ListTransactionsResponse{CoordinatorId: 1}, nil
}

func (b *codeBroker) DescribeTransactions(ctx context.Context, req *pb.DescribeTransactionsRequest) (*pb.DescribeTransactionsResponse, error) {
	resp := &pb.DescribeTransactionsResponse{}
	for _, id := range req.TransactionalIds {
		st := &pb.TransactionState{TransactionalId: id, ProducerId: 1, CoordinatorId: 1}
		if b.refuse("DescribeTransactions") {
			st.ErrorCode, st.ErrorMessage = b.code, codeMessage
		}
		resp.Transactions = append(resp.Transactions, st)
	}
	return resp, nil
}

func (b *codeBroker) DescribeProducers(ctx context.Context, req *pb.DescribeProducersRequest) (*pb.DescribeProducersResponse, error) {
	resp := &pb.DescribeProducersResponse{}
	for _, tp := range req.Partitions {
		pp := &pb.PartitionProducers{Topic: tp.Topic, Partition: tp.Partition,
			ActiveProducers: []*pb.ProducerState{{ProducerId: 1, ProducerEpoch: 0, LastSequence: 0, CoordinatorEpoch: 0, CurrentTxnStartOffset: 0}}}
		if b.refuse("DescribeProducers") {
			pp = &pb.PartitionProducers{Topic: tp.Topic, Partition: tp.Partition, ErrorCode: b.code, ErrorMessage: codeMessage}
		}
		resp.Partitions = append(resp.Partitions, pp)
	}
	return resp, nil
}

func (b *codeBroker) AbortTransaction(ctx context.Context, req *pb.AbortTransactionRequest) (*pb.AbortTransactionResponse, error) {
	if b.refuse("AbortTransaction") {
		return &pb.AbortTransactionResponse{ErrorCode: b.code, ErrorMessage: codeMessage, MarkerOffset: -1}, nil
	}
	return &pb.AbortTransactionResponse{MarkerOffset: 1}, nil
}
