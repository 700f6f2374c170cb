package memnet

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/memberlist"
)

// GossipNet is an in-memory network for hashicorp/memberlist: each member
// gets a GossipTransport at an "IP:port" address (memberlist advertises an
// IP, so use fake ones such as 127.0.0.1:1, 127.0.0.2:1; nothing is bound
// and nothing is looked up). Packets are delivered asynchronously through a
// bounded queue and dropped when the target is gone, cut off or its queue
// is full, so a sender never blocks; streams are buffered full-duplex
// in-memory connections with deadlines, and a dial to a gone or cut-off
// member fails at once with "connection refused".
type GossipNet struct {
	mu      sync.Mutex
	members map[string]*GossipTransport
	// cut holds the unordered pairs of addresses that cannot reach each
	// other; isolated the addresses that reach no one.
	cut      map[[2]string]bool
	isolated map[string]bool
	conns    map[*gossipConn]struct{}
	// PacketQueue is the number of packets a member's inbox holds before
	// further packets to it are dropped (0: 1024). Set before Transport.
	PacketQueue int
}

// NewGossipNet returns an empty network.
func NewGossipNet() *GossipNet {
	return &GossipNet{
		members:  map[string]*GossipTransport{},
		cut:      map[[2]string]bool{},
		isolated: map[string]bool{},
		conns:    map[*gossipConn]struct{}{},
	}
}

// canonGossipAddr parses "IP:port" into memberlist's spelling of it (the
// form it dials and writes to).
func canonGossipAddr(addr string) (string, net.IP, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", nil, 0, err
	}
	ip := net.ParseIP(h)
	if ip == nil {
		return "", nil, 0, fmt.Errorf("memnet: gossip address %q: host is not an IP", addr)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 {
		return "", nil, 0, fmt.Errorf("memnet: gossip address %q: bad port", addr)
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(port)), ip, port, nil
}

// Transport attaches a member at addr ("IP:port") and returns its
// transport (memberlist.Config.Transport). An address whose previous
// transport was shut down can be taken again (a restarted member).
func (n *GossipNet) Transport(addr string) (*GossipTransport, error) {
	a, ip, port, err := canonGossipAddr(addr)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.members[a]; ok {
		return nil, fmt.Errorf("memnet: gossip address %s in use", a)
	}
	q := n.PacketQueue
	if q <= 0 {
		q = 1024
	}
	t := &GossipTransport{
		net:      n,
		addr:     a,
		ip:       ip,
		port:     port,
		packetCh: make(chan *memberlist.Packet, q),
		streamCh: make(chan net.Conn, 64),
		conns:    map[*gossipConn]struct{}{},
	}
	n.members[a] = t
	return t, nil
}

func gossipPair(a, b string) [2]string {
	if b < a {
		a, b = b, a
	}
	return [2]string{a, b}
}

// blocked reports whether from cannot reach to. n.mu held.
func (n *GossipNet) blocked(from, to string) bool {
	return n.isolated[from] || n.isolated[to] || n.cut[gossipPair(from, to)]
}

// Cut stops all traffic between a and b (both ways): packets are dropped,
// dials refused, and the streams open between them broken.
func (n *GossipNet) Cut(a, b string) {
	a, _, _, _ = canonGossipAddr(a)
	b, _, _, _ = canonGossipAddr(b)
	n.mu.Lock()
	n.cut[gossipPair(a, b)] = true
	broken := n.brokenLocked()
	n.mu.Unlock()
	closeGossipConns(broken)
}

// Isolate cuts addr off from every member until Heal.
func (n *GossipNet) Isolate(addr string) {
	addr, _, _, _ = canonGossipAddr(addr)
	n.mu.Lock()
	n.isolated[addr] = true
	broken := n.brokenLocked()
	n.mu.Unlock()
	closeGossipConns(broken)
}

// Heal restores every link Cut or Isolate took away.
func (n *GossipNet) Heal() {
	n.mu.Lock()
	n.cut = map[[2]string]bool{}
	n.isolated = map[string]bool{}
	n.mu.Unlock()
}

// brokenLocked removes and returns the open streams that now cross a cut
// link. n.mu held.
func (n *GossipNet) brokenLocked() []*gossipConn {
	var out []*gossipConn
	for c := range n.conns {
		if n.blocked(c.local.s, c.remote.s) {
			out = append(out, c)
		}
	}
	return out
}

func closeGossipConns(cs []*gossipConn) {
	for _, c := range cs {
		_ = c.Close()
	}
}

// GossipTransport is one member's memberlist.NodeAwareTransport on a
// GossipNet.
type GossipTransport struct {
	net      *GossipNet
	addr     string
	ip       net.IP
	port     int
	packetCh chan *memberlist.Packet
	streamCh chan net.Conn

	// guarded by net.mu
	closed bool
	conns  map[*gossipConn]struct{}
}

var _ memberlist.NodeAwareTransport = (*GossipTransport)(nil)

// Addr is the transport's "IP:port".
func (t *GossipTransport) Addr() string { return t.addr }

// FinalAdvertiseAddr returns the transport's own address whatever is
// configured: it is the only address other members can reach it at.
func (t *GossipTransport) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	return t.ip, t.port, nil
}

// WriteTo queues a copy of b for the member at addr. A packet to a member
// that is gone, cut off, or whose inbox is full is dropped silently, as
// UDP would; only a write from a shut-down transport fails.
func (t *GossipTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	now := time.Now()
	a, _, _, err := canonGossipAddr(addr)
	if err != nil {
		return now, err
	}
	n := t.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if t.closed {
		return now, &net.OpError{Op: "write", Net: "memnet", Source: gossipAddr{t.addr}, Addr: gossipAddr{a}, Err: net.ErrClosed}
	}
	dst := n.members[a]
	if dst == nil || dst.closed || n.blocked(t.addr, a) {
		return now, nil
	}
	p := &memberlist.Packet{Buf: bytes.Clone(b), From: gossipAddr{t.addr}, Timestamp: now}
	select {
	case dst.packetCh <- p:
	default:
	}
	return now, nil
}

// WriteToAddress is WriteTo (the node name is not needed).
func (t *GossipTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	return t.WriteTo(b, a.Addr)
}

// PacketCh delivers the packets sent to this member.
func (t *GossipTransport) PacketCh() <-chan *memberlist.Packet { return t.packetCh }

// StreamCh delivers the streams dialled to this member.
func (t *GossipTransport) StreamCh() <-chan net.Conn { return t.streamCh }

// DialTimeout opens a stream to the member at addr; it never waits: a
// member that is gone, cut off or not accepting fails at once with
// connection refused.
func (t *GossipTransport) DialTimeout(addr string, _ time.Duration) (net.Conn, error) {
	a, _, _, err := canonGossipAddr(addr)
	if err != nil {
		return nil, err
	}
	n := t.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if t.closed {
		return nil, &net.OpError{Op: "dial", Net: "memnet", Source: gossipAddr{t.addr}, Addr: gossipAddr{a}, Err: net.ErrClosed}
	}
	dst := n.members[a]
	if dst == nil || dst.closed || n.blocked(t.addr, a) {
		return nil, &net.OpError{Op: "dial", Net: "memnet", Source: gossipAddr{t.addr}, Addr: gossipAddr{a}, Err: syscall.ECONNREFUSED}
	}
	c, s := newGossipConnPair(n, gossipAddr{t.addr}, gossipAddr{a})
	select {
	case dst.streamCh <- s:
	default:
		return nil, &net.OpError{Op: "dial", Net: "memnet", Source: gossipAddr{t.addr}, Addr: gossipAddr{a}, Err: syscall.ECONNREFUSED}
	}
	for _, x := range []*gossipConn{c, s} {
		n.conns[x] = struct{}{}
	}
	t.conns[c] = struct{}{}
	dst.conns[s] = struct{}{}
	return c, nil
}

// DialAddressTimeout is DialTimeout (the node name is not needed).
func (t *GossipTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.DialTimeout(a.Addr, timeout)
}

// Shutdown takes the member off the network: it becomes unreachable, its
// open streams break, and its address can be taken by a new transport.
// The channels stay open (memberlist may still be selecting on them).
func (t *GossipTransport) Shutdown() error {
	n := t.net
	n.mu.Lock()
	if t.closed {
		n.mu.Unlock()
		return nil
	}
	t.closed = true
	if n.members[t.addr] == t {
		delete(n.members, t.addr)
	}
	var cs []*gossipConn
	for c := range t.conns {
		cs = append(cs, c)
	}
	n.mu.Unlock()
	closeGossipConns(cs)
	return nil
}

// gossipAddr is a net.Addr on a GossipNet.
type gossipAddr struct{ s string }

func (a gossipAddr) Network() string { return "memnet" }
func (a gossipAddr) String() string  { return a.s }

// gossipHalf is one direction of a stream: an unbounded byte buffer, so a
// writer never waits for its reader.
type gossipHalf struct {
	mu sync.Mutex
	b  bytes.Buffer
	// eof: the writer closed (reads drain then see io.EOF); gone: the
	// reader closed (writes fail).
	eof, gone bool
	// changed is closed (and replaced) whenever data arrives or a side
	// closes, waking blocked readers.
	changed chan struct{}
}

func newGossipHalf() *gossipHalf { return &gossipHalf{changed: make(chan struct{})} }

// wake is called with h.mu held.
func (h *gossipHalf) wake() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// gossipDeadline is a settable deadline: expired() is a channel closed
// once it passes. The channel is kept while the deadline is moved (so a
// Read already waiting sees a deadline set after it started) and replaced
// only once it has been closed.
type gossipDeadline struct {
	mu    sync.Mutex
	gen   uint64
	timer *time.Timer
	done  chan struct{}
}

func newGossipDeadline() *gossipDeadline { return &gossipDeadline{done: make(chan struct{})} }

func (d *gossipDeadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	if gossipPast(d.done) {
		d.done = make(chan struct{})
	}
	if t.IsZero() {
		return
	}
	dur := time.Until(t)
	if dur <= 0 {
		close(d.done)
		return
	}
	gen := d.gen
	d.timer = time.AfterFunc(dur, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		// A timer stopped too late must not fire a deadline set since.
		if d.gen == gen && !gossipPast(d.done) {
			close(d.done)
		}
	})
}

func (d *gossipDeadline) expired() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.done
}

func gossipPast(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// gossipConn is one end of an in-memory stream.
type gossipConn struct {
	net           *GossipNet
	local, remote gossipAddr
	in, out       *gossipHalf
	rd, wd        *gossipDeadline
	closeOnce     sync.Once
	closed        chan struct{}
	peer          *gossipConn
}

func newGossipConnPair(n *GossipNet, a, b gossipAddr) (*gossipConn, *gossipConn) {
	ab, ba := newGossipHalf(), newGossipHalf()
	ca := &gossipConn{net: n, local: a, remote: b, in: ba, out: ab, rd: newGossipDeadline(), wd: newGossipDeadline(), closed: make(chan struct{})}
	cb := &gossipConn{net: n, local: b, remote: a, in: ab, out: ba, rd: newGossipDeadline(), wd: newGossipDeadline(), closed: make(chan struct{})}
	ca.peer, cb.peer = cb, ca
	return ca, cb
}

func (c *gossipConn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "memnet", Source: c.local, Addr: c.remote, Err: err}
}

func (c *gossipConn) Read(p []byte) (int, error) {
	for {
		h := c.in
		h.mu.Lock()
		if gossipPast(c.closed) {
			h.mu.Unlock()
			return 0, c.opErr("read", net.ErrClosed)
		}
		if h.b.Len() > 0 {
			n, _ := h.b.Read(p)
			h.mu.Unlock()
			return n, nil
		}
		if h.eof {
			h.mu.Unlock()
			return 0, io.EOF
		}
		if len(p) == 0 {
			h.mu.Unlock()
			return 0, nil
		}
		changed := h.changed
		h.mu.Unlock()
		dl := c.rd.expired()
		if gossipPast(dl) {
			return 0, c.opErr("read", os.ErrDeadlineExceeded)
		}
		select {
		case <-changed:
		case <-dl:
		case <-c.closed:
		}
	}
}

func (c *gossipConn) Write(p []byte) (int, error) {
	if gossipPast(c.closed) {
		return 0, c.opErr("write", net.ErrClosed)
	}
	if gossipPast(c.wd.expired()) {
		return 0, c.opErr("write", os.ErrDeadlineExceeded)
	}
	h := c.out
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gone {
		return 0, c.opErr("write", syscall.EPIPE)
	}
	if h.eof {
		return 0, c.opErr("write", net.ErrClosed)
	}
	h.b.Write(p)
	h.wake()
	return len(p), nil
}

// Close ends both directions: the peer reads what was written then
// io.EOF, and its writes fail.
func (c *gossipConn) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		close(c.closed)
		c.out.mu.Lock()
		c.out.eof = true
		c.out.wake()
		c.out.mu.Unlock()
		c.in.mu.Lock()
		c.in.gone = true
		c.in.b.Reset()
		c.in.wake()
		c.in.mu.Unlock()
		n := c.net
		n.mu.Lock()
		delete(n.conns, c)
		for _, t := range []*GossipTransport{n.members[c.local.s], n.members[c.remote.s]} {
			if t != nil {
				delete(t.conns, c)
			}
		}
		n.mu.Unlock()
	})
	if !first {
		return c.opErr("close", net.ErrClosed)
	}
	return nil
}

func (c *gossipConn) LocalAddr() net.Addr  { return c.local }
func (c *gossipConn) RemoteAddr() net.Addr { return c.remote }

func (c *gossipConn) SetDeadline(t time.Time) error {
	c.rd.set(t)
	c.wd.set(t)
	return nil
}
func (c *gossipConn) SetReadDeadline(t time.Time) error  { c.rd.set(t); return nil }
func (c *gossipConn) SetWriteDeadline(t time.Time) error { c.wd.set(t); return nil }
