package node

import (
	"context"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/metadata"
	"github.com/strand-io/strand/quota"
)

// setQuotas hands the image's client quotas to the quota manager.
func (n *Node) setQuotas(img *metadata.Image) {
	q := make(map[quota.Entity]quota.Values, len(img.ClientQuotas))
	for e, vals := range img.ClientQuotas {
		v := make(quota.Values, len(vals))
		for k, x := range vals {
			v[k] = x
		}
		q[e] = v
	}
	n.quotas.Set(q)
}

// testingSessionOptions are the TEST-ONLY interceptors that put f's
// session into each call's context.
func testingSessionOptions(f func(context.Context) (auth.Session, bool)) []grpc.ServerOption {
	if f == nil {
		return nil
	}
	with := func(ctx context.Context) context.Context {
		if s, ok := f(ctx); ok {
			return auth.NewContext(ctx, s)
		}
		return ctx
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			return h(with(ctx), req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return h(srv, sessionStream{ss, with(ss.Context())})
		}),
	}
}

type sessionStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s sessionStream) Context() context.Context { return s.ctx }
