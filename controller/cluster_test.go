package controller_test

// Real cluster on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/wait"
)

// TestControllerFailover: kill the active controller while brokers keep
// drawing producer ids; a new controller is elected, metadata changes and
// producer-id allocation continue, and no id is ever handed out twice.
func TestControllerFailover(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	active := c.ActiveController()
	if active < 0 {
		t.Fatal("no active controller")
	}
	var mu sync.Mutex
	seen := map[int64]int32{}
	var dupErr error
	draw := func(m *testcluster.Member, n int, stop <-chan struct{}) {
		for i := 0; i < n; {
			select {
			case <-stop:
				return
			default:
			}
			if m.Node == nil {
				return
			}
			var id int64
			var err error
			_ = wait.Until(20*time.Second, "the producer id manager to load", func() bool {
				id, err = m.Node.PIDs.Next(context.Background())
				return !errors.Is(err, errs.CoordinatorLoadInProgress)
			})
			if err != nil {
				t.Errorf("node %d: %v", m.ID, err)
				return
			}
			mu.Lock()
			if other, dup := seen[id]; dup && dupErr == nil {
				dupErr = errors.New("producer id handed out twice")
				t.Errorf("producer id %d handed out by node %d and node %d", id, other, m.ID)
			}
			seen[id] = m.ID
			mu.Unlock()
			i++
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, m := range c.Members() {
		if m.ID == active {
			continue
		}
		wg.Add(1)
		go func(m *testcluster.Member) { defer wg.Done(); draw(m, 2500, stop) }(m)
	}
	// Kill the active controller while the ids are being drawn.
	c.Eventually(10*time.Second, "the first ids drawn", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) > 0
	})
	c.Kill(active)
	c.Eventually(20*time.Second, "a new active controller", func() bool {
		a := c.ActiveController()
		return a >= 0 && a != active
	})
	wg.Wait()
	close(stop)
	mu.Lock()
	n := len(seen)
	mu.Unlock()
	if n != 5000 {
		t.Fatalf("drew %d distinct producer ids, want 5000", n)
	}
	// Metadata changes continue under the new controller.
	c.CreateTopic("after-failover", 2, 2, nil)
	// The old controller returns as a follower and catches up.
	c.Start(active)
	c.WaitReady(30 * time.Second)
	c.Eventually(20*time.Second, "old controller caught up", func() bool {
		return c.Member(active).Node.Repl.Image().Topic("after-failover") != nil
	})
	adm, _ := client.NewAdmin(c.ClientOpts()...)
	defer adm.Close()
	// The returned broker is unfenced by the heartbeat after it caught up,
	// and the broker that answers DescribeCluster learns that from its own
	// metadata: wait for it rather than expect it at once.
	var last string
	if wait.Until(20*time.Second, "the cluster to settle after the failover", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		d, err := adm.DescribeCluster(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		actives, fenced := 0, []int32{}
		for _, v := range d.Controllers {
			if v.Active {
				actives++
			}
		}
		for _, b := range d.Brokers {
			if b.Fenced {
				fenced = append(fenced, b.NodeId)
			}
		}
		last = fmt.Sprintf("%d voters, %d active, %d brokers, fenced %v", len(d.Controllers), actives, len(d.Brokers), fenced)
		return len(d.Controllers) == 3 && actives == 1 && len(d.Brokers) == 3 && len(fenced) == 0
	}) != nil {
		t.Fatalf("cluster after failover: %s", last)
	}
}

// TestGossipFencesKilledBrokerEarly: with a long session timeout (20 s)
// and the default 2 s heartbeat, a killed broker is fenced soon after gossip
// declares it dead (two missed heartbeats), not when its session expires.
// Gossip usually notices the death before two heartbeats are missed;
// the controller must wait for them and fence then, not give up.
func TestGossipFencesKilledBrokerEarly(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{SessionTimeout: 20 * time.Second, HeartbeatInterval: 2 * time.Second})
	active := c.ActiveController()
	victim := int32(1)
	if victim == active {
		victim = 2
	}
	killed := time.Now()
	c.Kill(victim)
	c.Eventually(12*time.Second, "killed broker fenced before its 20 s session timeout", func() bool {
		b := c.Image().Brokers[victim]
		return b != nil && b.Fenced
	})
	t.Logf("broker %d fenced %.1fs after kill -9 (session timeout 20 s)", victim, time.Since(killed).Seconds())
}
