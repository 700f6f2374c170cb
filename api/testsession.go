package api

import (
	"context"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/internal/auth"
)

// TestSessionOptions, TEST-ONLY: server options whose interceptors put s
// into every request's context (unary and stream), as the listener's
// authentication will once it has one. node.Config.TestSession
// installs them on the client listener; a server never does.
func TestSessionOptions(s auth.Session) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			return h(auth.NewContext(ctx, s), req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return h(srv, &sessionStream{ServerStream: ss, ctx: auth.NewContext(ss.Context(), s)})
		}),
	}
}
