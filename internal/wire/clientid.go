package wire

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// ClientIDMetadata is the gRPC call metadata key that carries a client's
// client.id, as Kafka's request header does on the Kafka protocol: client
// quotas are resolved by it (entities client-id and user + client-id).
const ClientIDMetadata = "client-id"

// maxClientID bounds what a server takes of the value: Kafka's header
// carries a string of at most 32767 bytes.
const maxClientID = 32767

// ClientIDDialOptions are the interceptors that send id with every call
// of a connection (none for an empty id).
func ClientIDDialOptions(id string) []grpc.DialOption {
	if id == "" {
		return nil
	}
	with := func(ctx context.Context) context.Context {
		return metadata.AppendToOutgoingContext(ctx, ClientIDMetadata, id)
	}
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(with(ctx), method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(with(ctx), desc, cc, method, opts...)
		}),
	}
}

// ClientIDOf is the client id an incoming call carries ("" if none; the
// first value if several; cut at Kafka's 32767 bytes).
func ClientIDOf(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get(ClientIDMetadata)
	if len(v) == 0 {
		return ""
	}
	if len(v[0]) > maxClientID {
		return v[0][:maxClientID]
	}
	return v[0]
}
