package client_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// callbacks counts a consumer's rebalance callbacks.
type callbacks struct {
	mu                      sync.Mutex
	assigned, revoked, lost int
}

func (cb *callbacks) opts() []client.Opt {
	add := func(n *int) func([]client.TopicPartition) {
		return func(tps []client.TopicPartition) {
			cb.mu.Lock()
			*n += len(tps)
			cb.mu.Unlock()
		}
	}
	return []client.Opt{client.OnPartitionsAssigned(add(&cb.assigned)), client.OnPartitionsRevoked(add(&cb.revoked)), client.OnPartitionsLost(add(&cb.lost))}
}

func (cb *callbacks) counts() (assigned, revoked, lost int) {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	return cb.assigned, cb.revoked, cb.lost
}

// TestStaticMemberRestartKeepsAssignment: a consumer with a
// GroupInstanceID that closes (without LeaveGroup) and restarts within its
// session timeout gets its partitions back and resumes after what it
// committed, while the other member keeps its generation and partitions:
// no rebalance — even though the restarted member led the group and its
// subscription metadata changed (it owns nothing after a restart). Once
// it closes for good, its partitions move only when its session expires.
func TestStaticMemberRestartKeepsAssignment(t *testing.T) {
	staticRestart(t, "sr", false)
	t.Run("planted", func(t *testing.T) {
		defer planted.Set(planted.StaticRejoinRebalances)()
		staticRestart(t, "sr-planted", true)
	})
}

func staticRestart(t *testing.T, name string, wantRebalance bool) {
	n := groupNode(t)
	base := []client.Opt{client.Bootstrap(n.Addr()), client.Logger(testutil.Logger())}
	createTopic(t, base, name, 4, 1)
	const session = 3 * time.Second
	opts := func(id string, extra ...client.Opt) []client.Opt {
		o := append(append([]client.Opt{}, base...), client.GroupID("g-"+name), client.Topics(name), client.Assignors("range"),
			client.HeartbeatInterval(100*time.Millisecond), client.SessionTimeout(session), client.AutoOffsetReset(client.ResetEarliest),
			client.AutoCommit(100*time.Millisecond), client.FetchMaxWait(100*time.Millisecond), client.ClientID(id))
		return append(o, extra...)
	}
	got := &seen{v: map[int]int{}}
	// The static member starts first: it leads the group.
	b := startMember(t, opts("b", client.GroupInstanceID("b")), got)
	wait.Eventually(t, 20*time.Second, "the static member to own all four partitions", func() bool { return len(b.c.Assignment()) == 4 })
	cbA := &callbacks{}
	a := startMember(t, opts("a", cbA.opts()...), got)
	ms := []*member{a, b}
	wait.Eventually(t, 20*time.Second, "two members with two partitions each", func() bool { return settled(ms, []int{2, 2}, 4) })
	produce(t, base, name, 0, 100)
	wait.Eventually(t, 20*time.Second, "100 records consumed", func() bool { return got.count(0, 100) == 100 })

	genA, partsB := a.c.GroupMetadata().GenerationID, fmt.Sprint(b.c.Assignment())
	_, revokedA, lostA := cbA.counts()
	oldB := b.c.GroupMetadata()
	b.close(t) // a static member sends no LeaveGroup
	b2 := startMember(t, opts("b", client.GroupInstanceID("b")), got)
	wait.Eventually(t, 20*time.Second, "the restarted static member to own two partitions", func() bool { return len(b2.c.Assignment()) == 2 })
	if wantRebalance {
		wait.Eventually(t, 20*time.Second, "the other member to rebalance", func() bool { return a.c.GroupMetadata().GenerationID > genA })
		return
	}
	if p := fmt.Sprint(b2.c.Assignment()); p != partsB {
		t.Fatalf("restarted static member owns %s, owned %s before", p, partsB)
	}
	gm := b2.c.GroupMetadata()
	if gm.GenerationID != oldB.GenerationID || gm.MemberID == oldB.MemberID || gm.GroupInstanceID != "b" {
		t.Fatalf("restarted static member's membership %+v, was %+v", gm, oldB)
	}
	if g := a.c.GroupMetadata().GenerationID; g != genA {
		t.Fatalf("the other member moved from generation %d to %d: the restart rebalanced the group", genA, g)
	}
	if _, r, l := cbA.counts(); r != revokedA || l != lostA || len(a.c.Assignment()) != 2 {
		t.Fatalf("the other member revoked %d and lost %d partitions during the restart (owns %v)", r-revokedA, l-lostA, a.c.Assignment())
	}
	// It resumes after what its first incarnation committed.
	produce(t, base, name, 100, 200)
	wait.Eventually(t, 20*time.Second, "200 records consumed", func() bool { return got.count(0, 200) == 200 })
	got.mu.Lock()
	for v := 0; v < 100; v++ {
		if got.v[v] != 1 {
			t.Errorf("record %d consumed %d times", v, got.v[v])
		}
	}
	got.mu.Unlock()

	// Gone for good: its partitions move after its session times out, not
	// at close.
	b2.close(t)
	closed := time.Now()
	wait.Eventually(t, 20*time.Second, "the other member to own all four partitions", func() bool { return len(a.c.Assignment()) == 4 })
	if waited := time.Since(closed); waited < session/2 {
		t.Fatalf("the static member's partitions moved %v after it closed, before its %v session could expire", waited, session)
	}
}
