package api

import (
	"context"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/internal/wire"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// StartupGate keeps a starting node from answering clients. Until Open,
// every client RPC is refused with BROKER_NOT_AVAILABLE (retriable) and a
// message saying what the node waits for, as a status error made by
// wire.StatusError (gRPC code UNAVAILABLE); the SDK retries it within its
// timeouts. A Kafka broker does the same by not enabling request handling
// before its broker is registered, unfenced and caught up with metadata:
// answered early, a request sees an image without this broker (CreateTopics
// found "available brokers: 0").
//
// The gate stands on the client listeners only. What other nodes send
// arrives on the inter-broker listener (listeners.go), which has no gate:
// the node needs it to become ready and its peers need it to make
// progress. The health service passes (it says NOT_SERVING meanwhile).
//
// The gate opens once: like Kafka, a node that was ready keeps serving if
// it is fenced later (its requests then fail request by request).
type StartupGate struct {
	open atomic.Bool
	why  func() string
}

// NewStartupGate returns a closed gate; why gives the message of the
// refusals (what the node is waiting for).
func NewStartupGate(why func() string) *StartupGate {
	return &StartupGate{why: why}
}

// Open lets client requests in, for good.
func (g *StartupGate) Open() { g.open.Store(true) }

// IsOpen reports whether client requests are served.
func (g *StartupGate) IsOpen() bool { return g.open.Load() }

// Interceptors are the server options that enforce the gate; unary runs
// after extra (so a test can hold or refuse chosen RPCs before it).
func (g *StartupGate) Interceptors(extra ...grpc.UnaryServerInterceptor) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(append(extra[:len(extra):len(extra)], g.unary)...),
		grpc.ChainStreamInterceptor(g.stream),
	}
}

func (g *StartupGate) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := g.admit(info.FullMethod, req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (g *StartupGate) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := g.admit(info.FullMethod, nil); err != nil {
		return err
	}
	return handler(srv, ss)
}

// admit is the gate: nil lets the call in. req is nil for streams.
func (g *StartupGate) admit(method string, req any) error {
	if g.open.Load() || isHealth(method) {
		return nil
	}
	if planted.On(planted.ServeBeforeReady) {
		return nil // the bug put back: a client is answered before the node is ready
	}
	return g.refusal()
}

func (g *StartupGate) refusal() error {
	return wire.StatusError(codes.Unavailable, errs.New(pb.ErrorCode_BROKER_NOT_AVAILABLE, "%s", g.why()))
}

// isHealth reports whether a call is the health service's.
func isHealth(method string) bool {
	service := strings.TrimPrefix(method, "/")
	if i := strings.LastIndexByte(service, '/'); i >= 0 {
		service = service[:i]
	}
	return service == healthpb.Health_ServiceDesc.ServiceName
}
