// Package fakebroker is an in-memory broker for SDK tests: a real gRPC
// server on a loopback port that speaks the broker's client protocol
// (metadata, produce, fetch, offsets, groups, transactions, admin) as a
// one-node cluster that leads every partition and coordinates every group
// and transactional id. It keeps what it is sent in memory, with the
// idempotent producer's sequence checks and five-batch duplicate window,
// and serves it back to fetches.
//
// A test steers it: Refuse makes one RPC answer an error code every time;
// Intercept replaces (or delays, or blocks) the answers of a unary RPC;
// ControlProduce refuses, holds or drops single produce requests. It
// inspects what arrived with Calls, Batches, Values and ProduceRequests.
//
// What it does not model: replication (the high watermark is the log
// end), transaction markers and the last stable offset (which is the high
// watermark), rebalances with more than one member, and configs.
//
// It imports only the protocol and record packages, never the client, so
// the client's own tests can use it.
package fakebroker

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// NodeID is the fake's broker id; it leads everything.
const NodeID = 1

// RefusalMessage is the message of every refusal Refuse asks for (except
// a topic's in Metadata, see Refuse). It does not name the code: the code
// travels beside it.
const RefusalMessage = "refused by the fake broker"

// Topic is a topic the broker has from the start.
type Topic struct {
	Name       string
	Partitions int32 // 1 if 0
	// MaxMessageBytes is the topic's max.message.bytes as Metadata
	// announces it (0: not announced).
	MaxMessageBytes int32
}

// InterceptFunc answers the n-th call (from 1) of a unary RPC in the
// broker's place: a nil response and error let the broker answer it. It
// may block (honouring ctx) to delay or withhold the answer.
type InterceptFunc func(ctx context.Context, n int, req any) (resp any, err error)

// Broker is the fake. Its methods are safe for concurrent use.
type Broker struct {
	pb.UnimplementedMetadataServer
	pb.UnimplementedProducerServer
	pb.UnimplementedTransactionsServer
	pb.UnimplementedConsumerServer
	pb.UnimplementedGroupsServer
	pb.UnimplementedAdminServer

	addr string
	srv  *grpc.Server

	refusals atomic.Int64
	ctlMu    sync.Mutex // one produce request at a time past the ProduceControl

	mu         sync.Mutex
	topics     map[string]*topic
	order      []string // topic names in creation order
	refuse     map[string]pb.ErrorCode
	onRefusal  func(n int64)
	intercepts map[string]InterceptFunc
	calls      map[string]int
	produceCtl ProduceControl
	requests   []ProduceRequest
	outOfOrder int
	nextPID    int64
	txns       map[string]*txnState
	offsets    map[string]map[tp]int64 // group -> committed offsets
	changed    chan struct{}           // closed (and replaced) on every append
}

type tp struct {
	topic     string
	partition int32
}

type topic struct {
	maxMessageBytes int32
	parts           []*partition
}

type txnState struct {
	pid   int64
	epoch int32
}

// Listen starts a broker with the given topics on a loopback port; it
// serves until Close.
func Listen(topics ...Topic) (*Broker, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Broker{
		addr:       lis.Addr().String(),
		topics:     map[string]*topic{},
		refuse:     map[string]pb.ErrorCode{},
		intercepts: map[string]InterceptFunc{},
		calls:      map[string]int{},
		txns:       map[string]*txnState{},
		offsets:    map[string]map[tp]int64{},
		changed:    make(chan struct{}),
		nextPID:    1,
	}
	for _, t := range topics {
		b.addTopicLocked(t)
	}
	b.srv = grpc.NewServer(grpc.UnaryInterceptor(b.intercept), grpc.StreamInterceptor(b.countStream))
	pb.RegisterMetadataServer(b.srv, b)
	pb.RegisterProducerServer(b.srv, b)
	pb.RegisterTransactionsServer(b.srv, b)
	pb.RegisterConsumerServer(b.srv, b)
	pb.RegisterGroupsServer(b.srv, b)
	pb.RegisterAdminServer(b.srv, b)
	go b.srv.Serve(lis) // ends when Close stops the server
	return b, nil
}

// Start is Listen for a test: the broker is closed when the test ends.
func Start(t testing.TB, topics ...Topic) *Broker {
	t.Helper()
	b, err := Listen(topics...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// Addr is the broker's address, for the client's bootstrap.
func (b *Broker) Addr() string { return b.addr }

// Close stops the server, cutting every call and stream.
func (b *Broker) Close() { b.srv.Stop() }

// AddTopic creates a topic (as CreateTopics does).
func (b *Broker) AddTopic(t Topic) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.addTopicLocked(t)
}

func (b *Broker) addTopicLocked(t Topic) {
	if _, ok := b.topics[t.Name]; ok {
		return
	}
	n := max(t.Partitions, 1)
	tt := &topic{maxMessageBytes: t.MaxMessageBytes}
	for i := int32(0); i < n; i++ {
		tt.parts = append(tt.parts, &partition{producers: map[int64]*producerState{}})
	}
	b.topics[t.Name] = tt
	b.order = append(b.order, t.Name)
}

// Refuse makes every answer of rpc carry code, where rpc's answer carries
// codes (per partition, per topic, per key or for the whole response, as
// the real broker places them). rpc is one of: Metadata (the error of
// each topic asked for; its message names the code, as the broker's did
// before it was taught not to, so that the client is seen not to repeat
// it), FindCoordinator, InitProducerId, EndTxn, Produce, Fetch (each
// partition's error), FetchTop (the response's), ListOffsets, JoinGroup,
// SyncGroup, OffsetCommit, OffsetFetch, TxnOffsetCommit, CreateTopics,
// DeleteTopics, DescribeConfigs, IncrementalAlterConfigs,
// ListTransactions, DescribeTransactions, DescribeProducers,
// AbortTransaction. pb.ErrorCode_NONE lifts the refusal.
func (b *Broker) Refuse(rpc string, code pb.ErrorCode) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if code == pb.ErrorCode_NONE {
		delete(b.refuse, rpc)
		return
	}
	b.refuse[rpc] = code
}

// OnRefusal sets a function called, with the running count, after each
// answer that carried a refused code.
func (b *Broker) OnRefusal(fn func(n int64)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.onRefusal = fn
}

// Refusals counts the answers that carried a refused code.
func (b *Broker) Refusals() int64 { return b.refusals.Load() }

// refused reports the code rpc must answer now (NONE: none), counting it.
func (b *Broker) refused(rpc string) pb.ErrorCode {
	b.mu.Lock()
	code, ok := b.refuse[rpc]
	fn := b.onRefusal
	b.mu.Unlock()
	if !ok {
		return pb.ErrorCode_NONE
	}
	n := b.refusals.Add(1)
	if fn != nil {
		fn(n)
	}
	return code
}

// Intercept answers the calls of the unary RPC named rpc (its gRPC method
// name, e.g. "InitProducerId") with fn first; nil removes it.
func (b *Broker) Intercept(rpc string, fn InterceptFunc) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if fn == nil {
		delete(b.intercepts, rpc)
		return
	}
	b.intercepts[rpc] = fn
}

// Calls counts the calls of rpc (its gRPC method name; for Produce, the
// streams opened) the broker took.
func (b *Broker) Calls(rpc string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[rpc]
}

func methodName(full string) string { return full[strings.LastIndexByte(full, '/')+1:] }

func (b *Broker) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	name := methodName(info.FullMethod)
	b.mu.Lock()
	b.calls[name]++
	n := b.calls[name]
	fn := b.intercepts[name]
	b.mu.Unlock()
	if fn != nil {
		resp, err := fn(ctx, n, req)
		if resp != nil || err != nil {
			return resp, err
		}
	}
	return handler(ctx, req)
}

func (b *Broker) countStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	b.mu.Lock()
	b.calls[methodName(info.FullMethod)]++
	b.mu.Unlock()
	return handler(srv, ss)
}

// partitionLocked returns a partition or nil.
func (b *Broker) partitionLocked(name string, p int32) *partition {
	t := b.topics[name]
	if t == nil || p < 0 || int(p) >= len(t.parts) {
		return nil
	}
	return t.parts[p]
}

// Metadata answers the topics asked for (all of them if none).
func (b *Broker) Metadata(ctx context.Context, req *pb.MetadataRequest) (*pb.MetadataResponse, error) {
	resp := &pb.MetadataResponse{ClusterId: "fake", ControllerId: NodeID, Brokers: []*pb.BrokerInfo{{NodeId: NodeID, Address: b.addr}}}
	b.mu.Lock()
	names := req.Topics
	if len(names) == 0 {
		names = append([]string(nil), b.order...)
	}
	b.mu.Unlock()
	for _, n := range names {
		b.mu.Lock()
		t := b.topics[n]
		var tm *pb.TopicMetadata
		if t != nil {
			tm = &pb.TopicMetadata{Name: n, MaxMessageBytes: t.maxMessageBytes}
			for i := range t.parts {
				tm.Partitions = append(tm.Partitions, &pb.PartitionMetadata{Partition: int32(i), LeaderId: NodeID, Replicas: []int32{NodeID}, Isr: []int32{NodeID}})
			}
		}
		b.mu.Unlock()
		code := pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION
		if t != nil {
			if code = b.refused("Metadata"); code == pb.ErrorCode_NONE {
				resp.Topics = append(resp.Topics, tm)
				continue
			}
		}
		// As the real broker used to answer an unknown topic (it now says
		// only that the topic does not exist): the message repeats the
		// code's name.
		resp.Topics = append(resp.Topics, &pb.TopicMetadata{Name: n, ErrorCode: code, ErrorMessage: code.String() + ": topic \"" + n + "\" " + RefusalMessage})
	}
	return resp, nil
}

// FindCoordinator names this broker for every key.
func (b *Broker) FindCoordinator(ctx context.Context, req *pb.FindCoordinatorRequest) (*pb.FindCoordinatorResponse, error) {
	resp := &pb.FindCoordinatorResponse{}
	for _, k := range req.Keys {
		co := &pb.Coordinator{Key: k, NodeId: NodeID, Address: b.addr}
		if code := b.refused("FindCoordinator"); code != pb.ErrorCode_NONE {
			co = &pb.Coordinator{Key: k, NodeId: -1, ErrorCode: code, ErrorMessage: RefusalMessage}
		}
		resp.Coordinators = append(resp.Coordinators, co)
	}
	return resp, nil
}
