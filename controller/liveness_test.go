package controller_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/controller"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/wait"
)

// reachability is the test's stand-in for gossip's ping: which brokers
// answer, and how many probes each got.
type reachability struct {
	mu     sync.Mutex
	down   map[int32]bool
	probes map[int32]int
}

func (r *reachability) probe(id int32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.probes[id]++
	return !r.down[id]
}

func (r *reachability) set(id int32, down bool) {
	r.mu.Lock()
	r.down[id] = down
	r.mu.Unlock()
}

func (r *reachability) count(id int32) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.probes[id]
}

// TestUnreachableBrokerFencedEarly: a broker that stops heartbeating and
// does not answer a probe is fenced once it has been silent for
// broker.unreachable.session.timeout.ms (1.75 s), long before
// broker.session.timeout.ms (9 s); one that stalls for 1.5 s and then
// heartbeats again is not fenced; one that is silent but answers probes
// keeps its whole session, and is fenced only when that expires.
func TestUnreachableBrokerFencedEarly(t *testing.T) {
	addr := freeAddr(t)
	q := startLeader(t, quorumConfig(t.TempDir(), addr, []controller.Voter{{ID: 1, Addr: addr}}))
	t.Cleanup(func() { q.Close() })
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	reach := &reachability{down: map[int32]bool{}, probes: map[int32]int{}}
	cfg := controller.DefaultConfig(1)
	cfg.Probe = reach.probe
	c := activeControllerWith(t, q, clk, cfg)
	limit := cfg.UnreachableSessionTimeout
	if limit != 1750*time.Millisecond || cfg.SessionTimeout != 9*time.Second {
		t.Fatalf("defaults: unreachable %v, session %v; want 1.75 s and 9 s", limit, cfg.SessionTimeout)
	}
	stall := limit - 250*time.Millisecond // a stall one heartbeat interval short of the limit

	ctx := context.Background()
	epochs := map[int32]int64{}
	heartbeat := func(id int32) {
		t.Helper()
		r, err := c.BrokerHeartbeat(ctx, &pb.BrokerHeartbeatRequest{NodeId: id, BrokerEpoch: epochs[id], CurrentMetadataOffset: 1 << 40})
		if err != nil {
			t.Fatal(err)
		}
		if r.Fenced {
			t.Fatalf("broker %d fenced at a heartbeat", id)
		}
	}
	fenced := func(id int32) bool { return q.FSM.Image().Brokers[id].Fenced }
	// step moves the fake clock on by d in the probe loop's 100 ms ticks,
	// letting the loop and the probes it starts run after each.
	step := func(d time.Duration) {
		for ; d > 0; d -= 100 * time.Millisecond {
			clk.Advance(100 * time.Millisecond)
			time.Sleep(5 * time.Millisecond)
		}
	}
	for _, id := range []int32{2, 3, 4} {
		e, code := register(c, id, "inc", "10.0.0.9:9096")
		if code != pb.ErrorCode_NONE {
			t.Fatalf("register %d: %v", id, code)
		}
		epochs[id] = e
		heartbeat(id)
	}

	// Broker 2 is killed: silent and unreachable. Broker 3 stalls, short
	// of the limit, unreachable meanwhile, then heartbeats again. Broker 4
	// is silent but answers probes (its heartbeats are merely late).
	reach.set(2, true)
	reach.set(3, true)
	step(stall)
	reach.set(3, false)
	heartbeat(3)
	if fenced(2) || fenced(3) || fenced(4) {
		t.Fatal("a broker was fenced before it had been silent for the limit")
	}
	if reach.count(2) == 0 || reach.count(4) == 0 {
		t.Fatalf("silent brokers not probed within %v: %d, %d probes", stall, reach.count(2), reach.count(4))
	}
	step(limit - stall - 100*time.Millisecond)
	if fenced(2) {
		t.Fatal("the unreachable broker was fenced before it had been silent for the limit")
	}
	// From the limit on, within half a second of fake time (the loop may
	// lag the fake clock on a busy machine: real time is waited for too).
	silent := limit - 100*time.Millisecond
	deadline := time.Now().Add(10 * time.Second)
	for !fenced(2) {
		if silent > limit+500*time.Millisecond {
			if time.Now().After(deadline) {
				t.Fatalf("the unreachable broker not fenced %v after its last heartbeat (limit %v)", silent, limit)
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		step(100 * time.Millisecond)
		silent += 100 * time.Millisecond
	}
	heartbeat(3)
	if fenced(3) || fenced(4) {
		t.Fatalf("fenced with the unreachable one: the stalled broker %v, the reachable silent one %v", fenced(3), fenced(4))
	}

	// Broker 4 answers probes: it keeps its session until the session
	// timeout, then loses it like any silent broker.
	for silent := limit + 200*time.Millisecond; silent < cfg.SessionTimeout-500*time.Millisecond; silent += 500 * time.Millisecond {
		step(500 * time.Millisecond)
		heartbeat(3)
	}
	if fenced(4) {
		t.Fatal("a silent broker that answers probes was fenced before its session timeout")
	}
	wait.Eventually(t, 5*time.Second, "the reachable silent broker fenced at its session timeout", func() bool {
		if fenced(4) {
			return true
		}
		step(100 * time.Millisecond)
		heartbeat(3)
		return false
	})
	if fenced(3) {
		t.Fatal("the broker that kept heartbeating was fenced")
	}
}
