// Package fault is the switchboard that node-to-node and client
// connections go through in tests and drills: links between named
// endpoints can be cut (both directions) or delayed, and a node can be
// isolated, which also closes the connections it already has.
package fault

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"
)

// Network tracks endpoints (by name and address) and the links between them.
type Network struct {
	mu    sync.Mutex
	owner map[string]string // address -> endpoint name
	cut   map[[2]string]bool
	delay map[[2]string]time.Duration
	conns map[*Conn]struct{}
	// refused counts the dials refused on a cut link, per link.
	refused map[[2]string]int
	dialer  net.Dialer
	// under, when set, makes the connections instead of TCP (SetTransport).
	under func(ctx context.Context, addr string) (net.Conn, error)
}

// NewNetwork returns a network with every link up.
func NewNetwork() *Network {
	return &Network{owner: map[string]string{}, cut: map[[2]string]bool{}, delay: map[[2]string]time.Duration{}, conns: map[*Conn]struct{}{}, refused: map[[2]string]int{}}
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
		c.Conn.Close()
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

// HealAll restores every link and removes every delay.
func (n *Network) HealAll() {
	n.mu.Lock()
	n.cut = map[[2]string]bool{}
	n.delay = map[[2]string]time.Duration{}
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
	c := &Conn{Conn: raw, net: n, from: from, to: to}
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

// Conn is a connection through the switchboard.
type Conn struct {
	net.Conn
	net      *Network
	from, to string
	once     sync.Once
}

// Write applies the link's delay, and fails once the link is cut.
func (c *Conn) Write(b []byte) (int, error) {
	c.net.mu.Lock()
	cut := c.net.isCut(c.from, c.to)
	d := c.net.delay[key(c.from, c.to)]
	c.net.mu.Unlock()
	if cut {
		c.Conn.Close()
		return 0, fmt.Errorf("write %s->%s: link cut (fault injected)", c.from, c.to)
	}
	if d > 0 {
		time.Sleep(d)
	}
	return c.Conn.Write(b)
}

// Close closes the connection and forgets it.
func (c *Conn) Close() error {
	c.once.Do(func() {
		c.net.mu.Lock()
		delete(c.net.conns, c)
		c.net.mu.Unlock()
	})
	return c.Conn.Close()
}
