package api

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"

	"github.com/strand-io/strand/internal/rpc"
)

// ServerOptions are the options of every gRPC server a node runs: message
// size limits, fixed flow-control windows (rpc.WindowSize: no BDP pings,
// few WINDOW_UPDATEs), 256 KiB transport buffers (rpc.TransportBufferSize), the non-zeroing buffer pool (bufpool.go) for
// reading frames, and the codec that returns Fetch read buffers
// (fetchbuf.go).
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(rpc.MaxMessageSize), grpc.MaxSendMsgSize(rpc.MaxMessageSize),
		grpc.InitialWindowSize(rpc.WindowSize), grpc.InitialConnWindowSize(rpc.WindowSize),
		grpc.ReadBufferSize(rpc.TransportBufferSize), grpc.WriteBufferSize(rpc.TransportBufferSize),
		experimental.BufferPool(mem.DefaultBufferPool()),
		grpc.ForceServerCodecV2(newServerCodec()),
	}
}
