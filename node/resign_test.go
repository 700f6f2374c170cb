package node_test

// Real cluster on real time: Raft's timeouts are the subject.

import (
	"testing"
	"time"

	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testcluster"
)

// TestCleanStopHandsQuorumLeadershipOver: the node leading the controller
// quorum hands the leadership to another voter when it stops cleanly, as
// a Kafka controller resigns. With controller.quorum.fetch.timeout.ms at
// 3 s here, the other voters would otherwise stand for election only 3 s
// after the leader's Raft stopped (the end of Stop); with the hand-over a
// new active controller is there within a second of Stop returning.
func TestCleanStopHandsQuorumLeadershipOver(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Mutate: func(_ int32, cfg *node.Config) {
		cfg.QuorumTimeouts = node.QuorumTimeouts{Heartbeat: 3 * time.Second, Election: 3 * time.Second, LeaderLease: time.Second, Commit: 5 * time.Millisecond}
	}})
	var old int32 = -1
	c.Eventually(30*time.Second, "an active controller", func() bool {
		old = c.ActiveController()
		return old >= 0
	})
	c.Stop(old)
	stopped := time.Now()
	c.Eventually(time.Second, "another active controller within a second of the clean stop", func() bool {
		a := c.ActiveController()
		return a >= 0 && a != old
	})
	t.Logf("node %d stopped; node %d active %v later", old, c.ActiveController(), time.Since(stopped).Round(time.Millisecond))
}
