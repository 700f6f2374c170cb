package replication_test

// Real cluster on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/testkit/testcluster"
)

// TestFollowerLogEnds: the leader reports each follower's log end as its
// fetches tell it (what the web console shows of a reassignment); a
// follower reports nothing.
func TestFollowerLogEnds(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	c.CreateTopic("ends", 1, 3, nil)
	p, err := client.NewProducer(c.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	defer p.Close(ctx)
	for range 5 {
		if err := p.ProduceSync(ctx, &client.Record{Topic: "ends", Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	leader := c.Partition("ends", 0).Leader
	lm := c.Member(leader).Node
	c.Eventually(10*time.Second, "both followers at the leader's log end of 5", func() bool {
		ends, end, ok := lm.Repl.FollowerLogEnds("ends", 0)
		if !ok || end != 5 || len(ends) != 2 {
			return false
		}
		for id, e := range ends {
			if id == leader || e != end {
				return false
			}
		}
		return true
	})
	for _, m := range c.Members() {
		if m.ID != leader {
			if _, _, ok := m.Node.Repl.FollowerLogEnds("ends", 0); ok {
				t.Errorf("follower %d reports follower log ends", m.ID)
			}
		}
	}
	if _, _, ok := lm.Repl.FollowerLogEnds("nope", 0); ok {
		t.Error("log ends of an unknown partition")
	}
}
