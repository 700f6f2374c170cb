package replication_test

// Real cluster on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"testing"
	"time"

	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/replication"
	"github.com/strand-io/strand/testkit/testcluster"
)

// TestHoldFollowerFetch checks the drills' testing fault: while a
// partition's follower fetches are held, its followers keep fetching and
// stay in the ISR but get nothing appended since the hold, so the HW stays
// at the hold point; a release, or the hold's end, lets them catch up.
func TestHoldFollowerFetch(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{ReplicaLag: time.Minute})
	const topic = "held"
	c.CreateTopic(topic, 1, 3, nil)
	part := c.Partition(topic, 0)
	leader := c.Member(part.Leader).Node
	var followers []int32
	for _, id := range part.Replicas {
		if id != part.Leader {
			followers = append(followers, id)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lp, err := leader.Repl.Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	appendN := func(acks int32) {
		t.Helper()
		b, err := record.Build(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []record.Record{{Value: []byte("a")}, {Value: []byte("b")}})
		if err != nil {
			t.Fatal(err)
		}
		a := leader.Repl.AppendLeader(topic, 0, b, acks)
		if err := a.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	appendN(-1) // 0..1, on every replica
	if lp.HighWatermark() != 2 {
		t.Fatalf("HW %d, want 2", lp.HighWatermark())
	}

	if _, err := c.Member(followers[0]).Node.HoldFollowerFetch(topic, 0, time.Second); err == nil {
		t.Error("a follower took a hold")
	}
	for _, d := range []time.Duration{0, replication.MaxFollowerFetchHold + time.Second} {
		if _, err := leader.HoldFollowerFetch(topic, 0, d); err == nil {
			t.Errorf("a hold of %s was taken", d)
		}
	}
	fh, err := leader.HoldFollowerFetch(topic, 0, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if fh.Offset != 2 {
		t.Fatalf("hold at %d, want 2", fh.Offset)
	}
	appendN(1) // 2..3, on the leader only
	appendN(1) // 4..5
	// Let every follower fetch a few times under the hold.
	fetches := func() (n int64) {
		for _, id := range followers {
			r, _, _ := c.Member(id).Node.Repl.FetchStats()
			n += r
		}
		return n
	}
	before := fetches()
	c.Eventually(10*time.Second, "follower fetches under the hold", func() bool { return fetches() >= before+6 })
	for _, id := range followers {
		if end := c.Log(id, topic, 0).LogEndOffset(); end != 2 {
			t.Errorf("follower %d has log end %d under the hold, want 2", id, end)
		}
	}
	if hw := lp.HighWatermark(); hw != 2 {
		t.Errorf("HW %d under the hold, want 2", hw)
	}
	if isr := lp.Leadership().ISR; len(isr) != 3 {
		t.Errorf("ISR %v under the hold, want all three", isr)
	}
	if !leader.ReleaseFollowerFetch(topic, 0) {
		t.Error("release found no hold")
	}
	c.Eventually(10*time.Second, "the HW after the release", func() bool { return lp.HighWatermark() == 6 })

	// A hold ends by itself.
	if _, err := leader.HoldFollowerFetch(topic, 0, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	appendN(1) // 6..7
	c.Eventually(10*time.Second, "the HW after the hold ran out", func() bool { return lp.HighWatermark() == 8 })
	if leader.ReleaseFollowerFetch(topic, 0) {
		t.Error("release found a hold that had run out")
	}
}
