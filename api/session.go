package api

import (
	"context"
	"crypto/tls"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/internal/tlsconf"
	"github.com/strand-io/strand/internal/wire"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// SessionInterceptors put the request's auth.Session into its context on
// a gRPC listener (listener is one of the auth.Listener names): the
// principal the connection's verified client certificate maps to
// (ssl.principal.mapping.rules; Mechanism "SSL"), else auth.Anonymous;
// the client's host; whether the connection is TLS; whether the principal
// is a broker (inter.broker.principals). A certificate no mapping rule
// maps is refused (UNAUTHENTICATED), as Kafka fails its authentication.
//
// On the inter-broker listener with SSL, a request from a principal that
// is not a broker's is refused with CLUSTER_AUTHORIZATION_FAILED: the
// Controller service, follower fetches and transaction markers are
// served to the cluster's nodes only.
func SessionInterceptors(sec *tlsconf.Security, listener string) []grpc.ServerOption {
	checkBroker := listener == auth.ListenerInterBroker && sec.Protocol(listener).TLS()
	admit := func(ctx context.Context, method string) (context.Context, error) {
		s, err := SessionOf(ctx, sec, listener)
		if err != nil {
			return nil, status.Errorf(codes.Unauthenticated, "%s: the client certificate proves no principal: %v", method, err)
		}
		if checkBroker && !s.Broker && !planted.On(planted.BrokerPrincipalUnchecked) {
			return nil, wire.StatusError(codes.PermissionDenied, errs.New(pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED,
				"%s: principal %s is not one of inter.broker.principals: the inter-broker listener serves the cluster's nodes only", method, s.Principal))
		}
		// The client id travels beside the session: the SDK sends its
		// client.id with every call (client quotas are resolved by it).
		return auth.WithClientID(auth.NewContext(ctx, s), wire.ClientIDOf(ctx)), nil
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			ctx, err := admit(ctx, info.FullMethod)
			if err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			ctx, err := admit(ss.Context(), info.FullMethod)
			if err != nil {
				return err
			}
			return h(srv, &sessionStream{ServerStream: ss, ctx: ctx})
		}),
	}
}

// SessionOf is the session of the gRPC connection ctx arrived on.
func SessionOf(ctx context.Context, sec *tlsconf.Security, listener string) (auth.Session, error) {
	var addr net.Addr
	var cs *tls.ConnectionState
	if p, ok := peer.FromContext(ctx); ok {
		addr = p.Addr
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			st := ti.State
			cs = &st
		}
	}
	return sec.Session(listener, addr, cs)
}

type sessionStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *sessionStream) Context() context.Context { return s.ctx }
