package memnet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

func echoServer(t *testing.T, ln net.Listener) {
	t.Helper()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
}

func TestDialAcceptEcho(t *testing.T) {
	n := New()
	ln, err := n.Listen("node-1:9092")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if got := ln.Addr().String(); got != "node-1:9092" {
		t.Fatalf("Addr = %q", got)
	}
	echoServer(t, ln)
	c, err := n.Dial(context.Background(), "node-1:9092")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.RemoteAddr().String() != "node-1:9092" {
		t.Fatalf("RemoteAddr = %v", c.RemoteAddr())
	}
	// More than the buffer, so the writer waits for the echo to drain it.
	msg := bytes.Repeat([]byte("strand"), bufSize/2)
	go func() {
		if _, err := c.Write(msg); err != nil {
			t.Error(err)
		}
	}()
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("echo differs")
	}
}

func TestWriteDoesNotWaitForReader(t *testing.T) {
	n := New()
	ln, _ := n.Listen("a:1")
	defer ln.Close()
	c, err := n.Dial(context.Background(), "a:1")
	if err != nil {
		t.Fatal(err)
	}
	// Nobody accepts or reads: a write within the buffer still returns.
	if k, err := c.Write([]byte("hello")); err != nil || k != 5 {
		t.Fatalf("Write = %d, %v", k, err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("read %q, %v", buf, err)
	}
}

func TestRefused(t *testing.T) {
	n := New()
	_, err := n.Dial(context.Background(), "nobody:1")
	var op *net.OpError
	if !errors.As(err, &op) || !IsRefused(err) {
		t.Fatalf("dial to nobody: %v, want a refused *net.OpError", err)
	}
	ln, _ := n.Listen("x:1")
	ln.Close()
	if _, err := n.Dial(context.Background(), "x:1"); !IsRefused(err) {
		t.Fatalf("dial to a closed listener: %v, want refused", err)
	}
}

func TestListenTwiceAndPortZero(t *testing.T) {
	n := New()
	ln, err := n.Listen("h:7")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Listen("h:7"); err == nil {
		t.Fatal("second listen on h:7 succeeded")
	}
	ln.Close()
	ln2, err := n.Listen("h:7")
	if err != nil {
		t.Fatalf("listen after close: %v", err)
	}
	ln2.Close()
	a, _ := n.Listen("h:0")
	b, _ := n.Listen("h:0")
	if a.Addr().String() == b.Addr().String() || a.Addr().String() == "h:0" {
		t.Fatalf("port 0 gave %v and %v", a.Addr(), b.Addr())
	}
}

func TestListenerClose(t *testing.T) {
	n := New()
	ln, _ := n.Listen("a:1")
	// A connection dialled but not accepted is closed with the listener.
	// Nothing accepts before Close: an Accept running beside it could
	// take the connection first, and then nobody would close it.
	c, err := n.Dial(context.Background(), "a:1")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read on a conn its listener dropped: %v, want EOF", err)
	}

	// An Accept already waiting is woken by Close.
	ln2, _ := n.Listen("a:2")
	errc := make(chan error, 1)
	go func() {
		_, err := ln2.Accept()
		errc <- err
	}()
	ln2.Close()
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept woken by Close: %v, want net.ErrClosed", err)
	}
}

func TestConnClose(t *testing.T) {
	n := New()
	ln, _ := n.Listen("a:1")
	defer ln.Close()
	c, _ := n.Dial(context.Background(), "a:1")
	s, _ := ln.Accept()
	c.Write([]byte("bye"))
	c.Close()
	// The peer reads what was written, then EOF; its writes fail.
	got, err := io.ReadAll(s)
	if err != nil || string(got) != "bye" {
		t.Fatalf("ReadAll = %q, %v", got, err)
	}
	if _, err := s.Write([]byte("x")); err == nil {
		t.Fatal("write to a closed peer succeeded")
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after own close: %v", err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after own close: %v", err)
	}
	// A reader blocked when the peer closes wakes with EOF.
	c2, _ := n.Dial(context.Background(), "a:1")
	s2, _ := ln.Accept()
	errc := make(chan error, 1)
	go func() {
		_, err := s2.Read(make([]byte, 1))
		errc <- err
	}()
	c2.Close()
	if err := <-errc; err != io.EOF {
		t.Fatalf("blocked read when the peer closed: %v, want EOF", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) && errors.As(err, &ne) && ne.Timeout()
}

func TestDeadlines(t *testing.T) {
	n := New()
	ln, _ := n.Listen("a:1")
	defer ln.Close()
	c, _ := n.Dial(context.Background(), "a:1")
	s, _ := ln.Accept()

	// A deadline in the past fails a read at once.
	c.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := c.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("read past deadline: %v", err)
	}
	// A blocked read wakes when a deadline is set under it.
	c.SetReadDeadline(time.Time{})
	errc := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		errc <- err
	}()
	c.SetReadDeadline(time.Now().Add(-time.Second))
	if err := <-errc; !isTimeout(err) {
		t.Fatalf("read woken by a deadline: %v", err)
	}
	// Clearing the deadline makes reads work again.
	c.SetReadDeadline(time.Time{})
	s.Write([]byte("k"))
	if _, err := c.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	// A write blocked on a full buffer times out at its deadline.
	c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	k, err := c.Write(make([]byte, bufSize+1))
	if !isTimeout(err) || k != bufSize {
		t.Fatalf("write over a full buffer: %d, %v", k, err)
	}
	c.SetWriteDeadline(time.Time{})
	// SetDeadline sets both.
	c.SetDeadline(time.Now().Add(-time.Second))
	if _, err := c.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("read after SetDeadline: %v", err)
	}
	if _, err := c.Write([]byte("x")); !isTimeout(err) {
		t.Fatalf("write after SetDeadline: %v", err)
	}
}

func TestDialContext(t *testing.T) {
	n := New()
	ln, _ := n.Listen("a:1")
	defer ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := n.Dial(ctx, "a:1"); !errors.Is(err, context.Canceled) {
		t.Fatalf("dial with a cancelled context: %v", err)
	}
	// Nobody accepts: once the backlog is full a dial waits for its context.
	for i := 0; i < cap(ln.(*Listener).conns); i++ {
		if _, err := n.Dial(context.Background(), "a:1"); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := n.Dial(ctx, "a:1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dial over a full backlog: %v", err)
	}
}

func TestConcurrentConns(t *testing.T) {
	n := New()
	ln, _ := n.Listen("srv:1")
	defer ln.Close()
	echoServer(t, ln)
	var wg sync.WaitGroup
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := n.Dial(context.Background(), "srv:1")
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			for j := 0; j < 50; j++ {
				msg := []byte(fmt.Sprintf("conn %d msg %d", i, j))
				if _, err := c.Write(msg); err != nil {
					t.Error(err)
					return
				}
				got := make([]byte, len(msg))
				if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
					t.Errorf("conn %d: got %q, %v", i, got, err)
					return
				}
			}
		}(i)
	}
	wg.Wait()
}
