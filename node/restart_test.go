package node_test

// Real cluster on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/strand-io/strand/testkit/testcluster"
)

// leaderLog is a slog handler that keeps the "became leader" events a node
// logs (partition and leader epoch), and drops everything else.
type leaderLog struct {
	mu     *sync.Mutex
	events *[]leaderEvent
}

type leaderEvent struct {
	partition string
	epoch     int64
}

func newLeaderLog() leaderLog { return leaderLog{mu: &sync.Mutex{}, events: new([]leaderEvent)} }

func (h leaderLog) Enabled(context.Context, slog.Level) bool { return true }
func (h leaderLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h leaderLog) WithGroup(string) slog.Handler            { return h }
func (h leaderLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "became leader" {
		return nil
	}
	var ev leaderEvent
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "partition":
			ev.partition = a.Value.String()
		case "epoch":
			ev.epoch = a.Value.Int64()
		}
		return true
	})
	h.mu.Lock()
	*h.events = append(*h.events, ev)
	h.mu.Unlock()
	return nil
}

func (h leaderLog) all() []leaderEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]leaderEvent(nil), *h.events...)
}

// A node restarted with an old Raft log replays metadata history; it must
// not act on it. Node 2 leads a partition, is killed, and the partition
// moves to another node at a higher epoch. When node 2 comes back, it may
// lead that partition again only at an epoch above the one the cluster had
// moved to: leading it at its old epoch, even briefly while replaying, is a
// zombie leader (after a full-cluster restart such a node wrote transaction
// markers for coordinator epochs long superseded).
func TestRestartedNodeDoesNotActOnStaleMetadata(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	c.CreateTopic("stale", 3, 3, nil)
	var part int32 = -1
	var oldEpoch int32
	for _, p := range c.Image().Topic("stale").Partitions {
		if p.Leader == 2 {
			part, oldEpoch = p.Partition, p.LeaderEpoch
		}
	}
	if part < 0 {
		t.Fatal("node 2 leads no partition of a 3-partition topic on 3 nodes")
	}
	c.Kill(2)
	c.Eventually(20*time.Second, "the partition to move off node 2", func() bool {
		p := c.Partition("stale", part)
		return p.Leader != 2 && p.Leader >= 0
	})
	movedEpoch := c.Partition("stale", part).LeaderEpoch
	if movedEpoch <= oldEpoch {
		t.Fatalf("leader epoch did not grow on failover: %d then %d", oldEpoch, movedEpoch)
	}

	events := newLeaderLog()
	m := c.Member(2)
	m.Cfg.Logger = slog.New(events)
	c.Start(2)
	// Preferred-leader election gives the partition back to node 2, which
	// shows the node did start acting on metadata once caught up.
	c.Eventually(30*time.Second, "node 2 to lead its partition again", func() bool {
		p := c.Partition("stale", part)
		return p.Leader == 2 && m.Node != nil && m.Node.AppliedOffset() >= c.Image().Offset
	})
	want := fmt.Sprintf("stale-%d", part)
	led := false
	for _, ev := range events.all() {
		if ev.partition != want {
			continue
		}
		led = true
		if ev.epoch <= int64(movedEpoch) {
			t.Errorf("restarted node 2 led %s at epoch %d, but the cluster had moved to epoch %d before it started (it was leader at %d before the kill)", want, ev.epoch, movedEpoch, oldEpoch)
		}
	}
	if !led {
		t.Fatalf("no became-leader event logged for %s on node 2 (events: %v)", want, events.all())
	}
}
