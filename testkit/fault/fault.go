// Package fault is the switchboard that node-to-node and client
// connections go through in tests and drills: links between named
// endpoints can be cut (both directions) or delayed, a node can be
// isolated, which also closes the connections it already has, and a node
// can be held (paused): its connections stay open but carry nothing until
// it is released, when everything written meanwhile arrives late, in order.
package fault

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// Network tracks endpoints (by name and address) and the links between them.
type Network struct {
	mu    sync.Mutex
	owner map[string]string // address -> endpoint name
	cut   map[[2]string]bool
	delay map[[2]string]time.Duration
	// held: endpoints whose links carry nothing until the channel closes.
	held  map[string]chan struct{}
	conns map[*Conn]struct{}
	// refused counts the dials refused on a cut link, per link.
	refused map[[2]string]int
	dialer  net.Dialer
	// under, when set, makes the connections instead of TCP (SetTransport).
	under func(ctx context.Context, addr string) (net.Conn, error)
}

// NewNetwork returns a network with every link up.
func NewNetwork() *Network {
	return &Network{owner: map[string]string{}, cut: map[[2]string]bool{}, delay: map[[2]string]time.Duration{}, held: map[string]chan struct{}{}, conns: map[*Conn]struct{}{}, refused: map[[2]string]int{}}
}

// Register says that addr belongs to endpoint name.
func (n *Network) Register(name, addr string) {
	n.mu.Lock()
	n.owner[addr] = name
	n.mu.Unlock()
}

// SetTransport makes dials through the network use dial (an in-memory
// network, say) instead of TCP. Call it before the first dial.
func (n *Network) SetTransport(dial func(ctx context.Context, addr string) (net.Conn, error)) {
	n.mu.Lock()
	n.under = dial
	n.mu.Unlock()
}

func key(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

// Cut breaks the link between a and b, closing its open connections.
func (n *Network) Cut(a, b string) {
	n.mu.Lock()
	n.cut[key(a, b)] = true
	var doomed []*Conn
	for c := range n.conns {
		if key(c.from, c.to) == key(a, b) {
			doomed = append(doomed, c)
		}
	}
	n.mu.Unlock()
	for _, c := range doomed {
		c.cut()
	}
}

// Isolate cuts every link of name (to every endpoint known or dialled so far).
func (n *Network) Isolate(name string) {
	n.mu.Lock()
	peers := map[string]bool{}
	for _, o := range n.owner {
		peers[o] = true
	}
	for c := range n.conns {
		peers[c.from], peers[c.to] = true, true
	}
	n.mu.Unlock()
	for p := range peers {
		if p != name {
			n.Cut(name, p)
		}
	}
	n.mu.Lock()
	n.cut[key(name, "*")] = true
	n.mu.Unlock()
}

// Heal restores every link of name.
func (n *Network) Heal(name string) {
	n.mu.Lock()
	for k := range n.cut {
		if k[0] == name || k[1] == name {
			delete(n.cut, k)
		}
	}
	n.mu.Unlock()
}

// HealAll restores every link, removes every delay and releases every
// held endpoint.
func (n *Network) HealAll() {
	n.mu.Lock()
	n.cut = map[[2]string]bool{}
	n.delay = map[[2]string]time.Duration{}
	for name, ch := range n.held {
		close(ch)
		delete(n.held, name)
	}
	n.mu.Unlock()
}

// Hold pauses every link of name as a stopped process or a stalled VM
// does: connections stay open and dials succeed, but what is written to
// or from name is buffered (up to a socket's buffers, then writers wait)
// until Release, so requests and answers in flight arrive late, all at
// once and in order, even those whose writer has closed the connection
// since (where Isolate closes the connections and the peers see errors at
// once).
func (n *Network) Hold(name string) {
	n.mu.Lock()
	if n.held[name] == nil {
		n.held[name] = make(chan struct{})
	}
	n.mu.Unlock()
}

// Release ends Hold: what waited is written.
func (n *Network) Release(name string) {
	n.mu.Lock()
	if ch := n.held[name]; ch != nil {
		close(ch)
		delete(n.held, name)
	}
	n.mu.Unlock()
}

// SetDelay delays every write on the link between a and b by d.
func (n *Network) SetDelay(a, b string, d time.Duration) {
	n.mu.Lock()
	if d <= 0 {
		delete(n.delay, key(a, b))
	} else {
		n.delay[key(a, b)] = d
	}
	n.mu.Unlock()
}

func (n *Network) isCut(a, b string) bool {
	return n.cut[key(a, b)] || n.cut[key(a, "*")] || n.cut[key(b, "*")]
}

// Dial connects from endpoint `from` to addr unless the link is cut.
func (n *Network) Dial(ctx context.Context, from, addr string) (net.Conn, error) {
	n.mu.Lock()
	to, ok := n.owner[addr]
	if !ok {
		to = addr
	}
	if n.isCut(from, to) {
		n.refused[key(from, to)]++
		n.mu.Unlock()
		return nil, fmt.Errorf("dial %s from %s: link cut (fault injected)", addr, from)
	}
	under := n.under
	n.mu.Unlock()
	var raw net.Conn
	var err error
	if under != nil {
		raw, err = under(ctx, addr)
	} else {
		raw, err = n.dialer.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	c := &Conn{Conn: raw, net: n, from: from, to: to, closed: make(chan struct{}), broken: make(chan struct{})}
	n.mu.Lock()
	if n.isCut(from, to) {
		n.mu.Unlock()
		raw.Close()
		return nil, fmt.Errorf("dial %s from %s: link cut (fault injected)", addr, from)
	}
	n.conns[c] = struct{}{}
	n.mu.Unlock()
	return c, nil
}

// Refused counts the dials between a and b (either way) refused because
// the link was cut: a test waits on it to know a component tried the link.
func (n *Network) Refused(a, b string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.refused[key(a, b)]
}

// Dialer returns a dial function for endpoint from.
func (n *Network) Dialer(from string) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) { return n.Dial(ctx, from, addr) }
}

// heldBufferMax is how much a connection takes while an end is held
// before its writers wait: a socket's buffers.
const heldBufferMax = 1 << 20

// Conn is a connection through the switchboard.
type Conn struct {
	net.Conn
	net      *Network
	from, to string
	once     sync.Once
	closed   chan struct{} // closed by Close or a cut
	broken   chan struct{} // closed by a cut
	// Under net.mu: the write deadline, and what was written while an end
	// was held (pending, delivered by flush in order once no end is held,
	// even after Close: TCP sends what it buffered before its FIN).
	writeDeadline time.Time
	pending       [][]byte
	pendingBytes  int
	flushing      bool
	closeAfter    bool
	drained       chan struct{}
	breakOnce     sync.Once
}

// SetDeadline sets the connection's deadlines, the write deadline also
// bounding a write's wait for a held end's full buffer.
func (c *Conn) SetDeadline(t time.Time) error {
	c.net.mu.Lock()
	c.writeDeadline = t
	c.net.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

// SetWriteDeadline sets the write deadline, which also bounds a write's
// wait for a held end's full buffer.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.net.mu.Lock()
	c.writeDeadline = t
	c.net.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

// holdLocked is the hold of either end, nil when neither is held.
func (c *Conn) holdLocked() chan struct{} {
	if h := c.net.held[c.from]; h != nil {
		return h
	}
	return c.net.held[c.to]
}

// Write buffers while either end is held (as a stopped peer's socket
// buffers do, waiting once they are full, until the write deadline),
// applies the link's delay, and fails once the link is cut.
func (c *Conn) Write(b []byte) (int, error) {
	c.net.mu.Lock()
	for {
		if c.holdLocked() == nil && !c.flushing {
			break
		}
		if c.pendingBytes == 0 || c.pendingBytes+len(b) <= heldBufferMax {
			c.pending = append(c.pending, append([]byte(nil), b...))
			c.pendingBytes += len(b)
			if !c.flushing {
				c.flushing, c.drained = true, make(chan struct{})
				go c.flush()
			}
			c.net.mu.Unlock()
			return len(b), nil
		}
		drained, deadline := c.drained, c.writeDeadline
		c.net.mu.Unlock()
		var expired <-chan time.Time
		if !deadline.IsZero() {
			t := time.NewTimer(time.Until(deadline))
			defer t.Stop()
			expired = t.C
		}
		select {
		case <-drained:
		case <-c.closed:
			return 0, net.ErrClosed
		case <-expired:
			return 0, os.ErrDeadlineExceeded
		}
		c.net.mu.Lock()
	}
	cut := c.net.isCut(c.from, c.to)
	d := c.net.delay[key(c.from, c.to)]
	c.net.mu.Unlock()
	if cut {
		c.cut()
		return 0, fmt.Errorf("write %s->%s: link cut (fault injected)", c.from, c.to)
	}
	if d > 0 {
		time.Sleep(d)
	}
	return c.Conn.Write(b)
}

// flush delivers what was written while an end was held, in order, once
// no end is held; it ends when nothing is pending, closing the connection
// if Close came meanwhile, or when the link is cut.
func (c *Conn) flush() {
	for {
		c.net.mu.Lock()
		if hold := c.holdLocked(); hold != nil {
			c.net.mu.Unlock()
			select {
			case <-hold:
				continue
			case <-c.broken:
			}
			c.net.mu.Lock()
			c.flushing = false
			close(c.drained)
			c.net.mu.Unlock()
			return // cut: the connection is closed and what was pending dropped
		}
		bufs := c.pending
		c.pending, c.pendingBytes = nil, 0
		cut := c.net.isCut(c.from, c.to)
		if len(bufs) == 0 || cut {
			c.flushing = false
			close(c.drained)
			closeAfter := c.closeAfter
			c.net.mu.Unlock()
			if closeAfter || cut {
				c.Conn.Close()
			}
			return
		}
		c.net.mu.Unlock()
		for _, b := range bufs {
			if _, err := c.Conn.Write(b); err != nil {
				c.cut()
				break
			}
		}
	}
}

// Close closes the connection and forgets it. What a held end has not
// been sent yet still goes, when the hold ends; meanwhile a read returns
// at once (its deadline is moved to the past).
func (c *Conn) Close() error {
	deferred := false
	c.once.Do(func() {
		close(c.closed)
		c.net.mu.Lock()
		delete(c.net.conns, c)
		if c.flushing {
			c.closeAfter, deferred = true, true
		}
		c.net.mu.Unlock()
	})
	if deferred {
		return c.Conn.SetReadDeadline(time.Unix(1, 0))
	}
	c.net.mu.Lock()
	waiting := c.flushing
	c.net.mu.Unlock()
	if waiting {
		return nil // the flush closes it
	}
	return c.Conn.Close()
}

// cut breaks the connection: what is pending is dropped.
func (c *Conn) cut() {
	c.breakOnce.Do(func() { close(c.broken) })
	c.net.mu.Lock()
	c.pending, c.pendingBytes = nil, 0
	c.net.mu.Unlock()
	c.Close()
	c.Conn.Close()
}
