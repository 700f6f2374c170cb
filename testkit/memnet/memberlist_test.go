package memnet

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

func gossipTransport(t *testing.T, n *GossipNet, addr string) *GossipTransport {
	t.Helper()
	tr, err := n.Transport(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown() })
	return tr
}

// recvPacket takes the next packet, failing if none is queued (delivery is
// a channel send done inside WriteTo, so a delivered packet is already
// there when WriteTo returns).
func recvPacket(t *testing.T, tr *GossipTransport) ([]byte, string) {
	t.Helper()
	select {
	case p := <-tr.PacketCh():
		return p.Buf, p.From.String()
	default:
		t.Fatal("no packet queued")
		return nil, ""
	}
}

func noPacket(t *testing.T, tr *GossipTransport) {
	t.Helper()
	select {
	case p := <-tr.PacketCh():
		t.Fatalf("unexpected packet %q from %s", p.Buf, p.From)
	default:
	}
}

func TestGossipAddresses(t *testing.T) {
	n := NewGossipNet()
	if _, err := n.Transport("node1:7946"); err == nil {
		t.Fatal("a host name was taken as an address")
	}
	a := gossipTransport(t, n, "127.0.0.1:7946")
	if _, err := n.Transport("127.0.0.1:7946"); err == nil {
		t.Fatal("an address in use was handed out twice")
	}
	ip, port, err := a.FinalAdvertiseAddr("10.9.9.9", 1)
	if err != nil || !ip.Equal(net.ParseIP("127.0.0.1")) || port != 7946 {
		t.Fatalf("FinalAdvertiseAddr = %v %d %v", ip, port, err)
	}
	_ = a.Shutdown()
	if _, err := n.Transport("127.0.0.1:7946"); err != nil {
		t.Fatalf("a shut-down member's address cannot be reused: %v", err)
	}
}

func TestGossipPackets(t *testing.T) {
	n := NewGossipNet()
	n.PacketQueue = 2
	a := gossipTransport(t, n, "127.0.0.1:1")
	b := gossipTransport(t, n, "127.0.0.2:1")

	msg := []byte("ping")
	if _, err := a.WriteTo(msg, "127.0.0.2:1"); err != nil {
		t.Fatal(err)
	}
	msg[0] = 'X' // the sender may reuse its buffer
	buf, from := recvPacket(t, b)
	if string(buf) != "ping" || from != "127.0.0.1:1" {
		t.Fatalf("got %q from %s", buf, from)
	}

	// A full inbox drops, never blocks the sender.
	for i := 0; i < 5; i++ {
		if _, err := a.WriteTo([]byte{byte(i)}, "127.0.0.2:1"); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 2; i++ {
		if buf, _ := recvPacket(t, b); !bytes.Equal(buf, []byte{byte(i)}) {
			t.Fatalf("packet %d = %v", i, buf)
		}
	}
	noPacket(t, b)

	// To nobody: dropped without error, as UDP.
	if _, err := a.WriteTo([]byte("x"), "127.0.0.9:1"); err != nil {
		t.Fatalf("write to a missing member: %v", err)
	}
	_ = b.Shutdown()
	if _, err := a.WriteTo([]byte("x"), "127.0.0.2:1"); err != nil {
		t.Fatalf("write to a shut-down member: %v", err)
	}
	noPacket(t, b)
	_ = a.Shutdown()
	if _, err := a.WriteTo([]byte("x"), "127.0.0.2:1"); err == nil {
		t.Fatal("a shut-down transport still writes")
	}
}

func dialAccept(t *testing.T, from, to *GossipTransport) (net.Conn, net.Conn) {
	t.Helper()
	c, err := from.DialTimeout(to.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-to.StreamCh():
		return c, s
	default:
		t.Fatal("no stream accepted")
		return nil, nil
	}
}

func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

func TestGossipStreams(t *testing.T) {
	n := NewGossipNet()
	a := gossipTransport(t, n, "127.0.0.1:1")
	b := gossipTransport(t, n, "127.0.0.2:1")
	c, s := dialAccept(t, a, b)
	if c.RemoteAddr().String() != "127.0.0.2:1" || s.RemoteAddr().String() != "127.0.0.1:1" {
		t.Fatalf("addresses %v / %v", c.RemoteAddr(), s.RemoteAddr())
	}

	// Buffered: a large write completes with nobody reading, both ways.
	big := bytes.Repeat([]byte("abc"), 1<<18)
	if _, err := c.Write(big); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("reply")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(big))
	if _, err := io.ReadFull(s, got); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("server read %d bytes, %v", len(got), err)
	}
	r := make([]byte, 5)
	if _, err := io.ReadFull(c, r); err != nil || string(r) != "reply" {
		t.Fatalf("client read %q, %v", r, err)
	}

	// Close: the peer drains what was written, then EOF; its writes fail.
	if _, err := c.Write([]byte("last")); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	all, err := io.ReadAll(s)
	if err != nil || string(all) != "last" {
		t.Fatalf("after close read %q, %v", all, err)
	}
	if _, err := s.Write([]byte("x")); err == nil {
		t.Fatal("write to a closed peer succeeded")
	}
	if _, err := c.Read(r); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read on a closed conn: %v", err)
	}
}

func TestGossipDeadlines(t *testing.T) {
	n := NewGossipNet()
	a := gossipTransport(t, n, "127.0.0.1:1")
	b := gossipTransport(t, n, "127.0.0.2:1")
	c, s := dialAccept(t, a, b)
	buf := make([]byte, 4)

	_ = c.SetReadDeadline(time.Now().Add(-time.Second))
	_, err := c.Read(buf)
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past the deadline: %v", err)
	}
	_ = c.SetWriteDeadline(time.Now().Add(-time.Second))
	if _, err := c.Write(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write past the deadline: %v", err)
	}

	// Clearing the deadlines makes the conn usable again.
	_ = c.SetDeadline(time.Time{})
	if _, err := s.Write([]byte("data")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "data" {
		t.Fatalf("read after clearing the deadline: %q %v", buf, err)
	}

	// A deadline set (to the past) while a Read waits ends that Read.
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(buf)
		done <- err
	}()
	_ = c.SetReadDeadline(time.Now())
	if err := <-done; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("waiting read after the deadline: %v", err)
	}

	// A Close while a Read waits ends that Read.
	_ = s.SetReadDeadline(time.Time{})
	go func() {
		_, err := s.Read(buf)
		done <- err
	}()
	_ = s.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("waiting read after close: %v", err)
	}
}

func TestGossipShutdownAndCut(t *testing.T) {
	n := NewGossipNet()
	a := gossipTransport(t, n, "127.0.0.1:1")
	b := gossipTransport(t, n, "127.0.0.2:1")
	c := gossipTransport(t, n, "127.0.0.3:1")

	if _, err := a.DialTimeout("127.0.0.9:1", time.Hour); !isRefused(err) {
		t.Fatalf("dial to nobody: %v", err)
	}

	// Cut a-b: packets dropped and dials refused between them only, and
	// the streams open between them broken.
	ab, ba := dialAccept(t, a, b)
	n.Cut("127.0.0.1:1", "127.0.0.2:1")
	if _, err := ab.Write([]byte("x")); err == nil {
		t.Fatal("a stream across a cut still writes")
	}
	if _, err := ba.Read(make([]byte, 1)); err == nil {
		t.Fatal("a stream across a cut still reads")
	}
	for _, p := range [][2]*GossipTransport{{a, b}, {b, a}} {
		if _, err := p[0].WriteTo([]byte("x"), p[1].Addr()); err != nil {
			t.Fatal(err)
		}
		noPacket(t, p[1])
		if _, err := p[0].DialTimeout(p[1].Addr(), time.Hour); !isRefused(err) {
			t.Fatalf("dial across a cut: %v", err)
		}
	}
	if _, err := a.WriteTo([]byte("y"), c.Addr()); err != nil {
		t.Fatal(err)
	}
	recvPacket(t, c)
	dialAccept(t, a, c)

	// Isolate c: nobody reaches it, nor it anybody.
	n.Isolate(c.Addr())
	if _, err := b.DialTimeout(c.Addr(), time.Hour); !isRefused(err) {
		t.Fatalf("dial to an isolated member: %v", err)
	}
	if _, err := c.WriteTo([]byte("z"), b.Addr()); err != nil {
		t.Fatal(err)
	}
	noPacket(t, b)

	n.Heal()
	dialAccept(t, a, b)
	dialAccept(t, b, c)

	// Shutdown: unreachable at once; its open streams break (the peer
	// reads EOF).
	bc, cb := dialAccept(t, b, c)
	_ = c.Shutdown()
	if _, err := b.DialTimeout(c.Addr(), time.Hour); !isRefused(err) {
		t.Fatalf("dial to a shut-down member: %v", err)
	}
	if _, err := bc.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("peer of a shut-down member reads %v", err)
	}
	if _, err := cb.Write([]byte("x")); err == nil {
		t.Fatal("a shut-down member's stream still writes")
	}
	if _, err := c.DialTimeout(b.Addr(), time.Hour); err == nil {
		t.Fatal("a shut-down transport still dials")
	}
}
