// Package memnet is an in-memory network for tests and simulation: a
// listener registers at a string address, and a dial to that address
// returns one end of a full-duplex connection whose other end the
// listener accepts. No socket is opened. Connections are buffered (a
// write does not wait for the reader unless the buffer is full) and honour
// read and write deadlines, as gRPC and Raft expect of a net.Conn.
package memnet

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// bufSize bounds the bytes buffered one way on a connection; a writer
// beyond it waits for the reader (back-pressure, as a socket buffer gives).
const bufSize = 256 << 10

// Addr is an address on a Network.
type Addr string

// Network names the address family ("memnet").
func (Addr) Network() string  { return "memnet" }
func (a Addr) String() string { return string(a) }

// Network is a set of listeners reachable by address.
type Network struct {
	mu        sync.Mutex
	listeners map[string]*Listener
	nextPort  int
}

// New returns an empty network.
func New() *Network { return &Network{listeners: map[string]*Listener{}, nextPort: 40000} }

// Listen registers a listener at addr (host:port form). A port of 0 picks
// an unused one; the listener's Addr tells which. An address already
// listened on is refused (EADDRINUSE).
func (n *Network) Listen(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: "memnet", Addr: Addr(addr), Err: err}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if port == "0" {
		for {
			n.nextPort++
			addr = net.JoinHostPort(host, strconv.Itoa(n.nextPort))
			if n.listeners[addr] == nil {
				break
			}
		}
	}
	if n.listeners[addr] != nil {
		return nil, &net.OpError{Op: "listen", Net: "memnet", Addr: Addr(addr), Err: os.NewSyscallError("bind", syscall.EADDRINUSE)}
	}
	l := &Listener{net: n, addr: Addr(addr), conns: make(chan net.Conn, 64), done: make(chan struct{})}
	n.listeners[addr] = l
	return l, nil
}

// Dial connects to the listener at addr. With nobody listening there the
// dial is refused: a *net.OpError wrapping ECONNREFUSED.
func (n *Network) Dial(ctx context.Context, addr string) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, &net.OpError{Op: "dial", Net: "memnet", Addr: Addr(addr), Err: err}
	}
	n.mu.Lock()
	l := n.listeners[addr]
	n.nextPort++
	local := Addr("memnet:" + strconv.Itoa(n.nextPort))
	n.mu.Unlock()
	refused := &net.OpError{Op: "dial", Net: "memnet", Addr: Addr(addr), Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	if l == nil {
		return nil, refused
	}
	a, b := newPipe(local, l.addr)
	select {
	case l.conns <- b:
		return a, nil
	case <-l.done:
		return nil, refused
	case <-ctx.Done():
		return nil, &net.OpError{Op: "dial", Net: "memnet", Addr: Addr(addr), Err: ctx.Err()}
	}
}

// Listener accepts the connections dialled to its address.
type Listener struct {
	net   *Network
	addr  Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// Accept waits for the next connection; after Close it returns an error
// wrapping net.ErrClosed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: "memnet", Addr: l.addr, Err: net.ErrClosed}
	default:
	}
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: "memnet", Addr: l.addr, Err: net.ErrClosed}
	}
}

// Close stops listening: the address is free again, Accept returns
// net.ErrClosed and connections dialled but not yet accepted are closed.
func (l *Listener) Close() error {
	l.once.Do(func() {
		l.net.mu.Lock()
		if l.net.listeners[string(l.addr)] == l {
			delete(l.net.listeners, string(l.addr))
		}
		close(l.done)
		l.net.mu.Unlock()
		for {
			select {
			case c := <-l.conns:
				c.Close()
			default:
				return
			}
		}
	})
	return nil
}

// Addr is the address the listener is registered at.
func (l *Listener) Addr() net.Addr { return l.addr }

// buffer carries bytes one way. wake is closed (and replaced) on every
// change, so a waiter re-checks its condition.
type buffer struct {
	mu         sync.Mutex
	data       []byte
	wake       chan struct{}
	rClosed    bool // the reading end closed its conn
	wClosed    bool // the writing end closed its conn
	rDeadline  time.Time
	wDeadline  time.Time
	rDeadlined bool // rDeadline is set
	wDeadlined bool
}

func newBuffer() *buffer { return &buffer{wake: make(chan struct{})} }

func (b *buffer) signal() {
	close(b.wake)
	b.wake = make(chan struct{})
}

// wait unlocks b until it changes or deadline passes; it reports false
// when the deadline has passed. b.mu is held on return.
func (b *buffer) wait(deadline time.Time, set bool) bool {
	if set && !time.Now().Before(deadline) {
		return false
	}
	wake := b.wake
	b.mu.Unlock()
	defer b.mu.Lock()
	if !set {
		<-wake
		return true
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-wake:
	case <-t.C:
	}
	return true // the caller re-checks, the deadline included
}

func (b *buffer) read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		switch {
		case b.rClosed:
			return 0, net.ErrClosed
		case len(b.data) > 0:
			if len(p) == 0 {
				return 0, nil
			}
			k := copy(p, b.data)
			b.data = b.data[k:]
			if len(b.data) == 0 {
				b.data = nil
			}
			b.signal()
			return k, nil
		case b.wClosed:
			return 0, io.EOF
		}
		if !b.wait(b.rDeadline, b.rDeadlined) {
			return 0, os.ErrDeadlineExceeded
		}
	}
}

func (b *buffer) write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for {
		switch {
		case b.wClosed:
			return n, net.ErrClosed
		case b.rClosed:
			return n, io.ErrClosedPipe
		case b.wDeadlined && !time.Now().Before(b.wDeadline):
			return n, os.ErrDeadlineExceeded
		case len(p) == 0:
			return n, nil
		case len(b.data) < bufSize:
			k := min(len(p), bufSize-len(b.data))
			b.data = append(b.data, p[:k]...)
			p = p[k:]
			n += k
			b.signal()
			continue
		}
		if !b.wait(b.wDeadline, b.wDeadlined) {
			return n, os.ErrDeadlineExceeded
		}
	}
}

// conn is one end of a pipe: it reads from in and writes to out.
type conn struct {
	in, out       *buffer
	local, remote Addr
}

func newPipe(dialer, listener Addr) (*conn, *conn) {
	ab, ba := newBuffer(), newBuffer()
	return &conn{in: ba, out: ab, local: dialer, remote: listener}, &conn{in: ab, out: ba, local: listener, remote: dialer}
}

func (c *conn) opErr(op string, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	return &net.OpError{Op: op, Net: "memnet", Source: c.local, Addr: c.remote, Err: err}
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.in.read(p)
	return n, c.opErr("read", err)
}

func (c *conn) Write(p []byte) (int, error) {
	n, err := c.out.write(p)
	return n, c.opErr("write", err)
}

// Close closes both ways: the peer reads what was written before and then
// EOF, and its writes fail.
func (c *conn) Close() error {
	c.in.mu.Lock()
	closed := c.in.rClosed
	c.in.rClosed = true
	c.in.data = nil
	c.in.signal()
	c.in.mu.Unlock()
	c.out.mu.Lock()
	c.out.wClosed = true
	c.out.signal()
	c.out.mu.Unlock()
	if closed {
		return c.opErr("close", net.ErrClosed)
	}
	return nil
}

func (c *conn) LocalAddr() net.Addr  { return c.local }
func (c *conn) RemoteAddr() net.Addr { return c.remote }

func (c *conn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

func (c *conn) SetReadDeadline(t time.Time) error {
	c.in.mu.Lock()
	c.in.rDeadline, c.in.rDeadlined = t, !t.IsZero()
	c.in.signal()
	c.in.mu.Unlock()
	return nil
}

func (c *conn) SetWriteDeadline(t time.Time) error {
	c.out.mu.Lock()
	c.out.wDeadline, c.out.wDeadlined = t, !t.IsZero()
	c.out.signal()
	c.out.mu.Unlock()
	return nil
}

var _ net.Conn = (*conn)(nil)

// IsRefused reports whether err is a refused dial.
func IsRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
