package fault

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strand-io/strand/testkit/memnet"
)

// dialB connects endpoint a to endpoint b over an in-memory network
// through a switchboard; accepted gets everything b read once the
// connection ends.
func dialB(t *testing.T) (n *Network, c net.Conn, accepted <-chan []byte) {
	t.Helper()
	mem := memnet.New()
	ln, err := mem.Listen("b:1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	n = NewNetwork()
	n.SetTransport(mem.Dial)
	n.Register("b", "b:1")
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- b
	}()
	c, err = n.Dial(context.Background(), "a", "b:1")
	if err != nil {
		t.Fatal(err)
	}
	return n, c, got
}

// A held endpoint's connections stay open but carry nothing until it is
// released; then what was written arrives, in order, even though the
// writer closed the connection meanwhile (TCP sends what it buffered
// before its FIN), and no write failed.
func TestHoldDelaysUntilRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, c, accepted := dialB(t)
		n.Hold("b")
		for _, w := range []string{"late", " answer"} {
			if _, err := c.Write([]byte(w)); err != nil {
				t.Fatalf("write while held: %v", err)
			}
		}
		if err := c.Close(); err != nil {
			t.Fatalf("close while held: %v", err)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		select {
		case b := <-accepted:
			t.Fatalf("the held endpoint received %q before the release", b)
		default:
		}
		n.Release("b")
		if got := string(<-accepted); got != "late answer" {
			t.Fatalf("received %q after the release, want %q", got, "late answer")
		}
	})
}

// A cut drops what a held connection had not sent.
func TestCutDropsWhatWasHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, c, accepted := dialB(t)
		n.Hold("b")
		if _, err := c.Write([]byte("lost")); err != nil {
			t.Fatal(err)
		}
		n.Cut("a", "b")
		n.Release("b")
		if got := <-accepted; len(got) != 0 {
			t.Fatalf("received %q through a cut link", got)
		}
	})
}

// A write to a held end whose buffers are full gives up at the write
// deadline, as a write to a stopped peer's full socket buffer does (a transport that times out and
// dials again must not pile up connections while a node is paused).
func TestHoldHonoursTheWriteDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memnet.New()
		ln, err := mem.Listen("b:1")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
			}
		}()
		n := NewNetwork()
		n.SetTransport(mem.Dial)
		n.Register("b", "b:1")
		c, err := n.Dial(context.Background(), "a", "b:1")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		n.Hold("b")
		defer n.Release("b")
		start := time.Now()
		_ = c.SetWriteDeadline(start.Add(3 * time.Second))
		if _, err := c.Write(make([]byte, heldBufferMax)); err != nil {
			t.Fatalf("a write that fits the held buffers: %v", err)
		}
		if _, err := c.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("write to a held end's full buffers past its deadline: %v, want a deadline error", err)
		}
		if waited := time.Since(start); waited != 3*time.Second {
			t.Fatalf("the write waited %v, want its deadline, 3s", waited)
		}
	})
}
