package testcluster

import (
	"testing"
	"time"

	"github.com/strand-io/strand/testkit/memnet"
)

// TestMemNetCluster runs a three-node cluster whose client, inter-broker,
// Kafka and Raft listeners are on an in-memory network (their addresses
// resolve nowhere as TCP): it elects a controller, creates a topic every
// broker sees with its leaders and full ISRs, and a node stopped and
// started again listens there anew and rejoins.
func TestMemNetCluster(t *testing.T) {
	c := New(t, Options{MemNet: true})
	for _, m := range c.Members() {
		for _, ln := range m.memLns {
			if _, ok := ln.Addr().(memnet.Addr); !ok {
				t.Fatalf("node %d listens on %v (%T), not on the in-memory network", m.ID, ln.Addr(), ln.Addr())
			}
		}
		if len(m.memLns) != 4 {
			t.Fatalf("node %d has %d in-memory listeners, want 4 (client, inter-broker, Kafka, Raft)", m.ID, len(m.memLns))
		}
	}
	c.Eventually(10*time.Second, "an active controller", func() bool { return c.ActiveController() > 0 })
	c.CreateTopic("over-memnet", 3, 3, nil)
	gossipSeesAll := func() bool {
		for _, m := range c.Members() {
			if m.Node == nil || m.Node.Gossip == nil || len(m.Node.Gossip.Members()) != len(c.Members()) {
				return false
			}
		}
		return true
	}
	c.Eventually(20*time.Second, "every node's gossip (on the in-memory transport) lists all three", gossipSeesAll)

	c.Stop(2)
	c.Start(2)
	c.WaitReady(30 * time.Second)
	c.CreateTopic("after-restart", 1, 3, nil)
	c.Eventually(20*time.Second, "the restarted node gossips with the others again", gossipSeesAll)

	// Gossip runs on the in-memory transport: cutting node 3 off there
	// makes the others' failure detectors drop it.
	c.Gossip.Isolate(c.Member(3).Cfg.GossipListen)
	c.Eventually(30*time.Second, "nodes 1 and 2 drop node 3 from gossip once it is cut off", func() bool {
		for _, id := range []int32{1, 2} {
			if _, ok := c.Member(id).Node.Gossip.Members()[3]; ok {
				return false
			}
		}
		return true
	})
}
