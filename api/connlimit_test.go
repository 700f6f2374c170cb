package api

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/strand-io/strand/testkit/wait"
)

// serveEcho accepts on ln until it is closed, holding every accepted
// connection open until its peer closes it.
func serveEcho(t *testing.T, ln net.Listener) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_, _ = io.Copy(io.Discard, c)
				c.Close()
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
}

func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// refusedFrom dials addr from src and reports whether the server closed
// the connection at once (the reset may already fail the dial).
func refusedFrom(t *testing.T, src, addr string) bool {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return true
	}
	defer c.Close()
	return closedByServer(c)
}

// closedByServer reports whether the server has closed c (a read ends
// with EOF or a reset within wait; an open connection costs the wait).
func closedByServer(c net.Conn, wait ...time.Duration) bool {
	d := 2 * time.Second
	if len(wait) > 0 {
		d = wait[0]
	}
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// A connection over the per-address cap or the total cap is closed at
// once and counted by reason; closing an admitted one frees its slot; an
// override raises one address's cap; another address is unaffected by a
// full one.
func TestConnLimiterCaps(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := NewConnMetrics()
	l := NewConnLimiter(ConnLimits{MaxConnections: 5, MaxPerIP: 2,
		PerIPOverrides: map[netip.Addr]int{netip.MustParseAddr("127.0.0.3"): 3}}, m, nil)
	serveEcho(t, l.Wrap(ln, "client"))
	addr := ln.Addr().String()

	a1, a2 := dialFrom(t, "127.0.0.1", addr), dialFrom(t, "127.0.0.1", addr)
	wait.Eventually(t, 5*time.Second, "two admitted", func() bool { return m.Current("client") == 2 })
	if !refusedFrom(t, "127.0.0.1", addr) {
		t.Fatal("a third connection from 127.0.0.1 (max.connections.per.ip=2) was kept open")
	}
	if closedByServer(a1, 100*time.Millisecond) || closedByServer(a2, 100*time.Millisecond) {
		t.Fatal("an admitted connection was closed")
	}
	if got := m.Rejected("client", RejectMaxPerIP); got != 1 {
		t.Fatalf("rejected per ip = %d, want 1", got)
	}
	// Another address is served while 127.0.0.1 is full; 127.0.0.3 has
	// an override of 3.
	b := dialFrom(t, "127.0.0.2", addr)
	c1, c2 := dialFrom(t, "127.0.0.3", addr), dialFrom(t, "127.0.0.3", addr)
	if closedByServer(b, 100*time.Millisecond) || closedByServer(c1, 100*time.Millisecond) || closedByServer(c2, 100*time.Millisecond) {
		t.Fatal("a connection within its address's cap was closed")
	}
	wait.Eventually(t, 5*time.Second, "five admitted", func() bool { return m.Current("client") == 5 })
	// Five open: max.connections refuses anyone now, 127.0.0.3 too.
	if !refusedFrom(t, "127.0.0.3", addr) {
		t.Fatal("a sixth connection (max.connections=5) was kept open")
	}
	if got := m.Rejected("client", RejectMaxConnections); got != 1 {
		t.Fatalf("rejected total = %d, want 1", got)
	}
	// A closed connection frees its slot.
	a1.Close()
	wait.Eventually(t, 5*time.Second, "a slot freed", func() bool { return m.Current("client") == 4 })
	if again := dialFrom(t, "127.0.0.1", addr); closedByServer(again, 100*time.Millisecond) {
		t.Fatal("a connection was refused after a slot was freed")
	}
}

// Connections whose address is not IP count toward the total only.
func TestRemoteIPOfPipeIsInvalid(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if ip := remoteIP(a); ip.IsValid() {
		t.Fatalf("pipe address %v", ip)
	}
}

// An admitted TCP connection reaches the server unwrapped: gRPC reads a
// *net.TCPConn without pinning a read buffer to it, so an idle
// connection holds no buffer. The listener's close stops the reaper.
func TestConnLimiterHandsOutTCPConns(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := NewConnLimiter(ConnLimits{MaxConnections: 5, MaxPerIP: 5}, nil, nil)
	wl := l.Wrap(ln, "client")
	got := make(chan net.Conn, 1)
	go func() {
		c, err := wl.Accept()
		if err == nil {
			got <- c
		}
		close(got)
	}()
	c := dialFrom(t, "127.0.0.1", ln.Addr().String())
	sc := <-got
	if _, ok := sc.(*net.TCPConn); !ok {
		t.Fatalf("accepted a %T, want *net.TCPConn", sc)
	}
	sc.Close()
	c.Close()
	wait.Eventually(t, 5*time.Second, "the slot freed", func() bool { return l.metrics.Current("client") == 0 })
	l.mu.Lock()
	reaped := l.reaped
	l.mu.Unlock()
	wl.Close()
	<-reaped
}

// idleListener is a listener that never accepts: enough for the
// limiter's bookkeeping.
type idleListener struct{ done chan struct{} }

func (l idleListener) Accept() (net.Conn, error) { <-l.done; return nil, net.ErrClosed }
func (l idleListener) Close() error {
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	return nil
}
func (l idleListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// A node wraps its listeners from several goroutines, and a node stopped
// just after it started closes one while another is still being wrapped:
// the last close, waiting for the reaper to end, must not meet a wrap
// that starts the next reaper (a shared WaitGroup was Added to while it
// was Waited on, which panics, as the simulation found on a quick
// restart), nor wait for the next reaper (the close then never returned).
func TestConnLimiterListenersComeAndGo(t *testing.T) {
	l := NewConnLimiter(ConnLimits{MaxConnections: 5, MaxPerIP: 5}, nil, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 50000 {
			a := l.Wrap(idleListener{make(chan struct{})}, "client")
			var b net.Listener
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); a.Close() }()
			go func() { defer wg.Done(); b = l.Wrap(idleListener{make(chan struct{})}, "kafka") }()
			wg.Wait()
			b.Close()
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("a listener's close waited for the reaper a later wrap started")
	}
}
