package api

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"

	"github.com/strand-io/strand/internal/wire"
)

// ServerOptions are the options of every gRPC server a node runs: message
// size limits, fixed flow-control windows (wire.WindowSize: no BDP pings,
// few WINDOW_UPDATEs), 256 KiB transport buffers shared between flushes
// (wire.TransportBufferSize), the non-zeroing buffer pool (bufpool.go) for
// reading frames, and the codec that returns Fetch read buffers
// (fetchbuf.go).
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(wire.MaxMessageSize), grpc.MaxSendMsgSize(wire.MaxMessageSize),
		grpc.InitialWindowSize(wire.WindowSize), grpc.InitialConnWindowSize(wire.WindowSize),
		grpc.ReadBufferSize(wire.TransportBufferSize), grpc.WriteBufferSize(wire.TransportBufferSize),
		// An idle connection holds no buffer: the write buffer goes back to
		// a pool after each flush (the read buffer always does in gRPC
		// 1.85), so a broker's memory follows its busy connections, not
		// all of them.
		grpc.SharedWriteBuffer(true),
		experimental.BufferPool(mem.DefaultBufferPool()),
		grpc.ForceServerCodecV2(newServerCodec()),
	}
}

// HandshakeTimeout bounds how long a new connection may take to send the
// HTTP/2 preface and settings (every gRPC client sends them at once);
// connections.max.idle.ms, when shorter, bounds it instead. gRPC's default
// is 120 s, which let a client that opens sockets and sends nothing hold
// each for two minutes.
const HandshakeTimeout = 10 * time.Second

// KeepaliveMinTime is the shortest interval at which a client may ping a
// node while it has RPCs in flight. A client with none may not ping at
// all (gRPC allows it one ping per two hours). Past two pings too early
// gRPC answers GOAWAY ENHANCE_YOUR_CALM "too_many_pings" and closes the
// connection. Strand's SDK and the nodes' own clients send no keepalive
// pings (fixed windows also turn gRPC's BDP pings off), so they never
// come near it.
const KeepaliveMinTime = 10 * time.Second

// ConnectionOptions are the connection-lifetime options of every gRPC
// server a node runs: a connection with no RPC in flight for maxIdle
// (connections.max.idle.ms) is sent GOAWAY and closed (a client's next
// RPC opens a new one), the handshake is bounded (HandshakeTimeout), and
// the keepalive policy (KeepaliveMinTime) is enforced.
func ConnectionOptions(maxIdle time.Duration) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: maxIdle}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveMinTime, PermitWithoutStream: false}),
		grpc.ConnectionTimeout(min(maxIdle, HandshakeTimeout)),
	}
}

// MaxStreamsPerConnection is how many RPCs one client connection may have
// open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS; a gRPC client
// waits for a free stream past it). Without it the per-stream bounds
// (max.in.flight.requests.per.stream) multiply by however many streams a
// client opens. A Kafka broker serves one request per connection at a
// time; the SDK needs one Produce stream and a long-polling Fetch per
// broker plus its unary calls, far below this. The inter-broker listener
// has no such cap: its callers are the cluster's own nodes.
const MaxStreamsPerConnection = 100

// ClientConnectionOptions are the options a client or external listener
// adds to ConnectionOptions.
func ClientConnectionOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxConcurrentStreams(MaxStreamsPerConnection)}
}
