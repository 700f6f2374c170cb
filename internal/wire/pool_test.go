package wire

import (
	"errors"
	"testing"
)

// TestPoolGetAfterClose: once closed, the pool creates no connection. A
// caller still running as its node stopped used to get a new one that
// nobody closed (its goroutines outlived the node; the cluster simulation
// caught them left over at the end of a run).
func TestPoolGetAfterClose(t *testing.T) {
	p := NewPool(nil)
	c, err := p.Get("127.0.0.1:1")
	if err != nil || c == nil {
		t.Fatalf("Get before Close: %v %v", c, err)
	}
	p.Close()
	c, err = p.Get("127.0.0.1:1")
	if !errors.Is(err, ErrPoolClosed) || c != nil {
		if c != nil {
			c.Close()
		}
		t.Fatalf("Get after Close: %v, %v; want nil, ErrPoolClosed", c, err)
	}
	p.Drop("127.0.0.1:1") // harmless once closed
	p.Close()             // and so is a second Close
}
