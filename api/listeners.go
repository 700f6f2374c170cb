package api

import (
	"context"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/wire"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/request"
)

// A node answers on two kinds of gRPC listener, as a KRaft broker keeps
// its client listeners apart from the controller and inter-broker ones:
//
//   - client listeners (--listen, and --external-listen whose Metadata hands
//     out the external addresses): what clients send. RegisterClient.
//   - the inter-broker listener (--inter-broker-listen): what only other
//     nodes send. RegisterInterBroker.
//
// The inter-broker RPCs are the Controller service (registration,
// heartbeats, AlterPartition, producer-id blocks, the metadata stream,
// the admin requests brokers forward), a follower's Fetch and
// OffsetForLeaderEpoch (replica_id >= 0), WriteTxnMarkers (transaction
// coordinators) and AddPartitionsToTxn (partition leaders and group
// coordinators: in transaction version 2 the SDK never sends it). A client
// listener does not serve them: the Controller service is not registered
// there (UNIMPLEMENTED), the two transaction RPCs answer UNIMPLEMENTED, and
// a Fetch or OffsetForLeaderEpoch in a replica's name is refused with
// CLUSTER_AUTHORIZATION_FAILED (PERMISSION_DENIED). The inter-broker
// listener serves nothing else, and only to the cluster's own addresses
// (PeerFilter). Health answers on both.
//
// What each listener serves is fixed here, by the types it registers,
// not by an interceptor that could be left out.

// RegisterClient installs on s the services a client listener serves.
func RegisterClient(s *grpc.Server, d *Deps) {
	d.defaults()
	if d.Handler == nil {
		return // a controller-only node serves no client
	}
	h := d.handler(d.External)
	pb.RegisterProducerServer(s, &producerService{d: d, h: h})
	pb.RegisterConsumerServer(s, &clientConsumer{consumerService{h: h, d: d}})
	pb.RegisterMetadataServer(s, &metadataService{h: h})
	pb.RegisterAdminServer(s, &adminService{h: h, sasl: d.SASL})
	pb.RegisterTransactionsServer(s, &clientTransactions{transactionsService{h: h}})
	if h.Groups != nil {
		pb.RegisterGroupsServer(s, &groupsService{h: h})
	}
}

// RegisterInterBroker installs on s the services the inter-broker
// listener serves.
func RegisterInterBroker(s *grpc.Server, d *Deps) {
	d.defaults()
	if d.Handler != nil {
		h := d.handler(false)
		pb.RegisterConsumerServer(s, &peerConsumer{s: consumerService{h: h}})
		pb.RegisterTransactionsServer(s, &peerTransactions{s: transactionsService{h: h}})
	}
	if d.Controller != nil {
		pb.RegisterControllerServer(s, &controllerService{d: d})
	}
}

func (d *Deps) defaults() {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
}

// handler is the Handler a listener's services call: a copy of
// d.Handler's for this listener, reading fetches into the pooled buffers
// the server codec returns (fetchbuf.go) and counting into d.Metrics
// unless it was given its own.
func (d *Deps) handler(external bool) *request.Handler {
	l := request.ListenerClient
	if external {
		l = request.ListenerExternal
	}
	h := d.Handler.ForListener(l)
	if h.ReadBuffer == nil {
		h.ReadBuffer = ReadBuffer
	}
	if h.Metrics == nil && d.Metrics != nil {
		h.Metrics = d.Metrics
	}
	return h
}

// interBrokerOnly is the refusal of an inter-broker RPC on a client listener.
func interBrokerOnly(method string) error {
	return status.Errorf(codes.Unimplemented, "%s is sent by other nodes only: it is served on the inter-broker listener, not to clients", method)
}

// replicaRefused is the refusal of a request in a replica's name on a
// client listener.
func replicaRefused(what string, replica int32) error {
	return wire.StatusError(codes.PermissionDenied, errs.New(pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED,
		"%s with replica_id %d is a follower's request: followers send it on the inter-broker listener; a client sends replica_id -1", what, replica))
}

// clientOnly is the refusal of a client RPC on the inter-broker listener.
func clientOnly(what string) error {
	return status.Errorf(codes.Unimplemented, "%s is served on the client listener; the inter-broker listener serves only what other nodes send", what)
}

// clientConsumer is the Consumer service of a client listener: a
// consumer's Fetch and OffsetForLeaderEpoch (replica_id -1), ListOffsets.
type clientConsumer struct{ consumerService }

func (s *clientConsumer) Fetch(ctx context.Context, req *pb.FetchRequest) (*pb.FetchResponse, error) {
	if req.ReplicaId >= 0 {
		return nil, replicaRefused("Fetch", req.ReplicaId)
	}
	return s.consumerService.Fetch(ctx, req)
}

func (s *clientConsumer) OffsetForLeaderEpoch(ctx context.Context, req *pb.OffsetForLeaderEpochRequest) (*pb.OffsetForLeaderEpochResponse, error) {
	if req.ReplicaId >= 0 {
		return nil, replicaRefused("OffsetForLeaderEpoch", req.ReplicaId)
	}
	return s.consumerService.OffsetForLeaderEpoch(ctx, req)
}

// clientTransactions is the Transactions service of a client listener:
// everything but what coordinators and partition leaders send each other.
type clientTransactions struct{ transactionsService }

func (s *clientTransactions) WriteTxnMarkers(context.Context, *pb.WriteTxnMarkersRequest) (*pb.WriteTxnMarkersResponse, error) {
	return nil, interBrokerOnly("WriteTxnMarkers")
}

func (s *clientTransactions) AddPartitionsToTxn(context.Context, *pb.AddPartitionsToTxnRequest) (*pb.AddPartitionsToTxnResponse, error) {
	return nil, interBrokerOnly("AddPartitionsToTxn")
}

// peerConsumer is the Consumer service of the inter-broker listener: a
// follower's Fetch and OffsetForLeaderEpoch.
type peerConsumer struct {
	pb.UnimplementedConsumerServer
	s consumerService
}

func (p *peerConsumer) Fetch(ctx context.Context, req *pb.FetchRequest) (*pb.FetchResponse, error) {
	if req.ReplicaId < 0 {
		return nil, clientOnly("a consumer's Fetch (replica_id -1)")
	}
	return p.s.Fetch(ctx, req)
}

func (p *peerConsumer) OffsetForLeaderEpoch(ctx context.Context, req *pb.OffsetForLeaderEpochRequest) (*pb.OffsetForLeaderEpochResponse, error) {
	if req.ReplicaId < 0 {
		return nil, clientOnly("a consumer's OffsetForLeaderEpoch (replica_id -1)")
	}
	return p.s.OffsetForLeaderEpoch(ctx, req)
}

// peerTransactions is the Transactions service of the inter-broker
// listener: markers from coordinators, and partitions added to
// transactions by partition leaders and group coordinators.
type peerTransactions struct {
	pb.UnimplementedTransactionsServer
	s transactionsService
}

func (p *peerTransactions) WriteTxnMarkers(ctx context.Context, req *pb.WriteTxnMarkersRequest) (*pb.WriteTxnMarkersResponse, error) {
	return p.s.WriteTxnMarkers(ctx, req)
}

func (p *peerTransactions) AddPartitionsToTxn(ctx context.Context, req *pb.AddPartitionsToTxnRequest) (*pb.AddPartitionsToTxnResponse, error) {
	return p.s.AddPartitionsToTxn(ctx, req)
}
