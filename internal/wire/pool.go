// Package wire holds the gRPC plumbing shared by every role: a pool of
// client connections by address, and the helpers that map Strand errors to
// gRPC status and back.
package wire

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
)

// DialFunc dials a connection (the fault layer plugs in here).
type DialFunc func(ctx context.Context, addr string) (net.Conn, error)

// MaxMessageSize bounds gRPC messages in both directions (requests carry up
// to many MiB of batches; message.max.bytes is checked per batch).
const MaxMessageSize = 64 << 20

// WindowSize is the HTTP/2 flow-control window of every stream and
// connection, on both ends. gRPC's default (64 KiB, grown by BDP
// estimation) costs, on loopback where the estimate never grows, a PING
// and its ack per burst of data and a WINDOW_UPDATE per 16 KiB received:
// about two extra socket writes per replicated batch on each node. A fixed
// window turns the estimation off; 4 MiB keeps a window update per MiB.
const WindowSize = 4 << 20

// TransportBufferSize is the size of each connection's read and write
// buffer on both ends (gRPC's default is 32 KiB). The producer's batches
// grow to 256 KiB (batch.max.size) and fetch answers carry as much, so a
// 32 KiB buffer cut every such message into eight or more read and write
// system calls, and as many wake-ups of the goroutines behind them.
// Alternating runs at 1 KiB, fresh process clusters: 256 KiB buffers won
// all six pairs, +24 % records/s and -18 % CPU per MiB on average; 1 MiB
// gave no more (docs/BENCHMARKS.md). gRPC takes the read buffer from a
// pool only while bytes wait in it, and servers share write buffers
// between flushes (api.ServerOptions), so a broker's idle client
// connections hold no buffer. A client connection (to another broker, or
// the SDK's to each broker) keeps its 256 KiB write buffer.
const TransportBufferSize = 256 << 10

// Pool keeps one client connection per address.
type Pool struct {
	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	opts   []grpc.DialOption
	closed bool
}

// ErrPoolClosed is Get's error once the pool is closed.
var ErrPoolClosed = errors.New("the connection pool is closed (the node is stopping)")

// NewPool returns a pool; dial may be nil.
func NewPool(dial DialFunc, extra ...grpc.DialOption) *Pool {
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize)),
		grpc.WithInitialWindowSize(WindowSize), grpc.WithInitialConnWindowSize(WindowSize),
		grpc.WithReadBufferSize(TransportBufferSize), grpc.WithWriteBufferSize(TransportBufferSize),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}, MinConnectTimeout: 2 * time.Second}),
	}
	if dial != nil {
		opts = append(opts, grpc.WithContextDialer(dial))
	}
	opts = append(opts, extra...)
	return &Pool{conns: map[string]*grpc.ClientConn{}, opts: opts}
}

// Get returns the connection to addr, creating it lazily. Once the pool
// is closed it creates none (a caller still running as its node stops
// would leave one open for ever) and returns ErrPoolClosed.
func (p *Pool) Get(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrPoolClosed
	}
	if c := p.conns[addr]; c != nil {
		return c, nil
	}
	c, err := grpc.NewClient("passthrough:///"+addr, p.opts...)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = c
	return c, nil
}

// Drop closes and forgets the connection to addr.
func (p *Pool) Drop(addr string) {
	p.mu.Lock()
	c := p.conns[addr]
	delete(p.conns, addr)
	p.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// Close closes every connection.
func (p *Pool) Close() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[string]*grpc.ClientConn{}
	p.closed = true
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}
