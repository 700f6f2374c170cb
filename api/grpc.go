package api

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"

	"github.com/strand-io/strand/internal/rpc"
)

// ServerOptions are the options of every gRPC server a node runs: message
// size limits, fixed flow-control windows (rpc.WindowSize: no BDP pings,
// few WINDOW_UPDATEs), 256 KiB transport buffers shared between flushes
// (rpc.TransportBufferSize), the non-zeroing buffer pool (bufpool.go) for
// reading frames, and the codec that returns Fetch read buffers
// (fetchbuf.go).
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(rpc.MaxMessageSize), grpc.MaxSendMsgSize(rpc.MaxMessageSize),
		grpc.InitialWindowSize(rpc.WindowSize), grpc.InitialConnWindowSize(rpc.WindowSize),
		grpc.ReadBufferSize(rpc.TransportBufferSize), grpc.WriteBufferSize(rpc.TransportBufferSize),
		// An idle connection holds no buffer: the write buffer goes back to
		// a pool after each flush (the read buffer always does in gRPC
		// 1.85), so a broker's memory follows its busy connections, not
		// all of them.
		grpc.SharedWriteBuffer(true),
		experimental.BufferPool(mem.DefaultBufferPool()),
		grpc.ForceServerCodecV2(newServerCodec()),
	}
}
