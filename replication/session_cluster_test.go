package replication_test

// Real cluster on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/testkit/testcluster"
)

// converged: on every partition of topic, every replica has the same log
// end and the same high watermark, at least min.
func converged(c *testcluster.Cluster, topic string, parts int32, min int64) bool {
	for p := int32(0); p < parts; p++ {
		var leo, hw []int64
		for id := int32(1); id <= 3; id++ {
			m := c.Member(id)
			if m.Node == nil {
				return false
			}
			part := m.Node.Parts.Get(storage.PartitionKey{Topic: topic, Partition: p})
			if part == nil {
				return false
			}
			leo = append(leo, part.Log.LogEndOffset())
			hw = append(hw, part.HighWatermark())
		}
		if leo[0] < min || hw[0] < min || leo[0] != leo[1] || leo[1] != leo[2] || hw[0] != hw[1] || hw[1] != hw[2] {
			return false
		}
	}
	return true
}

type fetchTotals struct{ requests, named, answered int64 }

func totals(c *testcluster.Cluster) fetchTotals {
	var t fetchTotals
	for _, m := range c.Running() {
		r, n, a := m.Node.Repl.FetchStats()
		t.requests += r
		t.named += n
		t.answered += a
	}
	return t
}

// TestFetchSessionsCarryOnlyChanges: with 30 idle partitions beside a busy
// one, a follower's fetch names and receives only what moved (KIP-227),
// while every replica of every partition, idle ones included, keeps the
// leader's log end and high watermark; and a restarted leader's followers
// open new sessions and go on.
func TestFetchSessionsCarryOnlyChanges(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	const idle = 30
	c.CreateTopic("idle", idle, 3, nil)
	c.CreateTopic("busy", 1, 3, map[string]string{"min.insync.replicas": "2"})
	p, err := client.NewProducer(c.ClientOpts(client.WithPartitioner(client.ManualPartitioner{}))...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	defer p.Close(ctx)
	var first []*client.Record
	for i := int32(0); i < idle; i++ {
		first = append(first, &client.Record{Topic: "idle", Partition: i, Value: []byte("x")})
	}
	if err := p.ProduceSync(ctx, first...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c.Eventually(10*time.Second, "idle partitions converge", func() bool { return converged(c, "idle", idle, 1) })

	// Every node leads some partitions and is followed by the other two.
	c.Eventually(10*time.Second, "each leader holds a session per follower", func() bool {
		for _, m := range c.Running() {
			if s, n := m.Node.Repl.FetchSessions(); s != 2 || n < idle/3 {
				return false
			}
		}
		return true
	})

	before := totals(c)
	for i := 0; i < 60; i++ {
		if err := p.ProduceSync(ctx, &client.Record{Topic: "busy", Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	after := totals(c)
	d := fetchTotals{after.requests - before.requests, after.named - before.named, after.answered - before.answered}
	if d.requests < 60 {
		t.Fatalf("only %d follower fetches for 60 acks=all writes", d.requests)
	}
	// Without sessions each request names and answers every partition its
	// leader leads (about 10 idle ones each); with them, about one.
	if named, answered := float64(d.named)/float64(d.requests), float64(d.answered)/float64(d.requests); named > 2 || answered > 2 {
		t.Fatalf("per follower fetch: %.1f partitions named, %.1f answered; a session should carry only the busy one", named, answered)
	}
	c.Eventually(10*time.Second, "busy converges", func() bool { return converged(c, "busy", 1, 60) })

	// A write to one idle partition: its HW news reaches the followers.
	if err := p.ProduceSync(ctx, &client.Record{Topic: "idle", Partition: 7, Value: []byte("y")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c.Eventually(10*time.Second, "the written idle partition converges", func() bool { return converged(c, "idle", idle, 1) && converged(c, "busy", 1, 60) })

	// Restart a leader: its sessions are gone; followers open new ones.
	leader := c.Partition("busy", 0).Leader
	c.Stop(leader)
	c.Start(leader)
	c.WaitReady(20 * time.Second)
	for i := 0; i < 20; i++ {
		if err := p.ProduceSync(ctx, &client.Record{Topic: "busy", Value: []byte("after")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	c.Eventually(20*time.Second, "all converge after a restart", func() bool {
		return converged(c, "busy", 1, 80) && converged(c, "idle", idle, 1)
	})
	c.Eventually(20*time.Second, "sessions reopened", func() bool {
		s, _ := c.Member(leader).Node.Repl.FetchSessions()
		return s == 2 || len(c.Member(leader).Node.Parts.All()) > 0 && leaderOfNone(c, leader)
	})
}

// leaderOfNone: the node leads nothing (so nobody needs a session with it).
func leaderOfNone(c *testcluster.Cluster, id int32) bool {
	img := c.Image()
	for _, name := range img.TopicNames() {
		for _, p := range img.Topics[name].Partitions {
			if p.Leader == id {
				return false
			}
		}
	}
	return true
}
