package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	mt "github.com/strand-io/strand/metadata/metadatatest"

	"github.com/strand-io/strand/controller"
	"github.com/strand-io/strand/testkit/memnet"
	"github.com/strand-io/strand/testkit/wait"
)

// TestQuorumOverMemnet runs three voters whose Raft traffic goes over an
// in-memory network: the listeners come from the config and the
// addresses (which resolve nowhere as TCP) are only dialled through Dial.
// They elect a leader and commit a record every voter applies.
func TestQuorumOverMemnet(t *testing.T) {
	mn := memnet.New()
	var voters []controller.Voter
	for id := int32(1); id <= 3; id++ {
		voters = append(voters, controller.Voter{ID: id, Addr: fmt.Sprintf("ctl-%d.memnet:9093", id)})
	}
	var qs []*controller.Quorum
	for _, v := range voters {
		ln, err := mn.Listen(v.Addr)
		if err != nil {
			t.Fatal(err)
		}
		cfg := quorumConfig(t.TempDir(), "", voters)
		cfg.NodeID, cfg.Listener, cfg.Dial = v.ID, ln, mn.Dial
		q, err := controller.StartQuorum(cfg)
		if err != nil {
			t.Fatalf("StartQuorum %d: %v", v.ID, err)
		}
		t.Cleanup(func() { q.Close() })
		qs = append(qs, q)
	}
	var leader *controller.Quorum
	wait.Eventually(t, 10*time.Second, "a leader", func() bool {
		for _, q := range qs {
			if q.IsLeader() {
				leader = q
				return true
			}
		}
		return false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := leader.Propose(ctx, mt.TopicRec("over-memnet", nil)); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 10*time.Second, "the topic on every voter", func() bool {
		for _, q := range qs {
			if q.FSM.Image().Topic("over-memnet") == nil {
				return false
			}
		}
		return true
	})
	for _, q := range qs {
		if id := q.LeaderID(); id != leader.LeaderID() {
			t.Fatalf("voters disagree on the leader: %d and %d", id, leader.LeaderID())
		}
	}
}
