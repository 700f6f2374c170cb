package client

import (
	"context"
	"errors"
	"slices"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Calls to a broker that stopped answering.
//
// A broker killed outright refuses connections, and every call to it fails
// at once. One that is stopped (SIGSTOP, a VM frozen, a network path that
// drops everything) leaves its calls unanswered until request.timeout.ms
// (30 s): its TCP connections look alive. The cluster fences such a broker
// within seconds (broker.unreachable.session.timeout.ms) and moves its
// leaderships and coordinators, so the producer need not wait for the
// timeout. Once a call to a broker has gone unanswered for slowCall, the
// client looks the metadata up again, asking the other brokers first, and
// again every slowCall/2 while the call is still out; a call to a broker
// that the metadata shows fenced is cancelled (errBrokerFenced) and retried
// wherever its partition's leader or its coordinator now is. An idempotent
// producer's retry of a batch the stopped broker may still append is
// deduplicated by its sequence, as after any request timeout.

// slowCall is how long a call goes unanswered before the client looks for
// the broker's fencing.
const slowCall = time.Second

// suspectFor is how long a broker that left a call unanswered is asked
// cluster-wide questions (Metadata, FindCoordinator) after the others.
const suspectFor = 5 * time.Second

// errBrokerFenced cancels a call to a broker the cluster fenced.
var errBrokerFenced = errors.New("strand: the broker was fenced by the cluster while the call was unanswered")

// goneSignal is closed while the broker at an address is fenced.
type goneSignal struct {
	ch     chan struct{}
	closed bool
}

func (c *cluster) goneLocked(addr string) *goneSignal {
	g := c.gone[addr]
	if g == nil {
		g = &goneSignal{ch: make(chan struct{})}
		c.gone[addr] = g
	}
	return g
}

// brokerFencedLocked records what a Metadata answer says of the broker at
// addr (c.mu held).
func (c *cluster) brokerFencedLocked(addr string, fenced bool) {
	g := c.goneLocked(addr)
	switch {
	case fenced && !g.closed:
		close(g.ch)
		g.closed = true
	case !fenced && g.closed:
		c.gone[addr] = &goneSignal{ch: make(chan struct{})}
	}
}

// suspectsLastLocked moves the addresses that recently left a call
// unanswered, or are fenced, to the end of addrs, keeping the order of the
// rest (c.mu held).
func (c *cluster) suspectsLastLocked(addrs []string) {
	now := c.cfg.clock.Now()
	bad := func(a string) bool {
		if g := c.gone[a]; g != nil && g.closed {
			return true
		}
		t, ok := c.suspects[a]
		return ok && now.Sub(t) < suspectFor
	}
	slices.SortStableFunc(addrs, func(a, b string) int {
		switch ba, bb := bad(a), bad(b); {
		case ba == bb:
			return 0
		case ba:
			return 1
		default:
			return -1
		}
	})
}

// watch returns a context for a call to addr that ends with errBrokerFenced
// if the metadata shows that broker fenced while the call is out, and,
// once the call has been out for slowCall, has the metadata looked up
// again (slow). Call stop when the call returns.
func (c *cluster) watch(ctx context.Context, addr string) (wctx context.Context, stop func()) {
	wctx, cancel := context.WithCancelCause(ctx)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return wctx, func() { cancel(nil) }
	}
	gone := c.goneLocked(addr).ch
	if c.gone[addr].closed {
		// Fenced as last seen: the call goes ahead (the broker may be
		// back and answer), and is cancelled once unanswered for slowCall
		// if the broker is still fenced then.
		gone = nil
	}
	c.bg.Add(1) // under c.mu, before close can wait
	c.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer c.bg.Done()
		t := c.cfg.clock.NewTimer(slowCall)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-wctx.Done():
				return
			case <-c.bgCtx.Done():
				return
			case <-gone:
				cancel(errBrokerFenced)
				return
			case <-t.C():
				if c.addrFenced(addr) {
					cancel(errBrokerFenced)
					return
				}
				c.slow(addr)
				t.Reset(slowCall / 2)
			}
		}
	}()
	return wctx, func() {
		close(done)
		cancel(nil)
	}
}

// slow notes that a call to addr is unanswered and looks the metadata up
// again in the background, at most every slowCall/2, with each broker
// given slowCall to answer (the suspects asked last). It does not wait
// for a look-up already running (refreshMu): that one may be the call
// waiting on the stopped broker.
func (c *cluster) slow(addr string) {
	c.mu.Lock()
	now := c.cfg.clock.Now()
	c.suspects[addr] = now
	if c.closed || c.slowActive || now.Sub(c.slowAt) < slowCall/2 {
		c.mu.Unlock()
		return
	}
	c.slowActive, c.slowAt = true, now
	c.bg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.bg.Done()
		defer func() {
			c.mu.Lock()
			c.slowActive = false
			c.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(c.bgCtx, 3*slowCall)
		defer cancel()
		for _, a := range c.seeds() {
			cc, err := c.conn(a)
			if err != nil {
				return
			}
			rctx, rcancel := context.WithTimeout(ctx, slowCall)
			names := c.knownTopics()
			resp, err := pb.NewMetadataClient(cc).Metadata(rctx, &pb.MetadataRequest{Topics: names, IncludeInternal: true})
			rcancel()
			if err == nil {
				if names == nil {
					resp.Topics = nil // an empty list is every topic: only the brokers are wanted
				}
				c.apply(resp)
				return
			}
			if ctx.Err() != nil {
				return
			}
		}
	}()
}

// knownTopics are the topics the client's metadata holds (nil: none, which
// asks for the brokers only).
func (c *cluster) knownTopics() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.topics) == 0 {
		return nil
	}
	names := make([]string, 0, len(c.topics))
	for t := range c.topics {
		names = append(names, t)
	}
	slices.Sort(names)
	return names
}

// brokerFenced reports whether the metadata last showed broker id fenced.
func (c *cluster) brokerFenced(id int32) bool {
	c.mu.Lock()
	addr, ok := c.brokers[id]
	c.mu.Unlock()
	return ok && c.addrFenced(addr)
}

// addrFenced reports whether the metadata last showed the broker at addr
// fenced.
func (c *cluster) addrFenced(addr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.gone[addr]
	return g != nil && g.closed
}

// slowBroker is slow for broker id.
func (c *cluster) slowBroker(id int32) {
	c.mu.Lock()
	addr, ok := c.brokers[id]
	c.mu.Unlock()
	if ok {
		c.slow(addr)
	}
}
