package controller_test

// Real cluster on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"fmt"
	"testing"

	"github.com/strand-io/strand/testkit/testcluster"
)

// checkSpread asserts what Kafka's rack-unaware placement gives a topic of
// k×n partitions on n brokers: every broker leads k partitions, the
// partitions one broker leads do not all have the same replica list, and
// when a broker fails the partitions it led move (to their first
// follower) evenly over the other brokers instead of all to one.
func checkSpread(t *testing.T, brokers []int32, reps [][]int32) {
	t.Helper()
	n := len(brokers)
	k := len(reps) / n
	leads := map[int32]int{}
	lists := map[int32]map[string]bool{}
	successors := map[int32]map[int32]int{}
	for p, r := range reps {
		leader := r[0]
		leads[leader]++
		if lists[leader] == nil {
			lists[leader], successors[leader] = map[string]bool{}, map[int32]int{}
		}
		lists[leader][fmt.Sprint(r)] = true
		if len(r) > 1 {
			successors[leader][r[1]]++
		}
		seen := map[int32]bool{}
		for _, b := range r {
			if seen[b] {
				t.Fatalf("partition %d: broker %d twice in %v", p, b, r)
			}
			seen[b] = true
		}
	}
	for _, b := range brokers {
		if leads[b] != k {
			t.Fatalf("broker %d leads %d partitions, want %d: %v", b, leads[b], k, reps)
		}
		if k > 1 && len(reps[0]) > 2 && len(lists[b]) < 2 {
			t.Fatalf("every partition led by broker %d has the replica list %v: followers do not spread (%v)", b, lists[b], reps)
		}
		if len(reps[0]) > 1 && k >= n-1 {
			lo, hi := k, 0
			for _, o := range brokers {
				if o != b {
					lo, hi = min(lo, successors[b][o]), max(hi, successors[b][o])
				}
			}
			if hi-lo > 1 {
				t.Fatalf("if broker %d fails, its partitions' first followers are %v: one broker takes them all (%v)", b, successors[b], reps)
			}
		}
	}
}

// TestCreateTopicsSpreadsFollowers: a topic of 6 partitions with
// replication factor 3 on three brokers. Partitions 0 and 3 used to get
// the same replica list (every list a rotation of 1,2,3), so the brokers
// that took over a failed broker's leaderships were always the same one.
func TestCreateTopicsSpreadsFollowers(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	c.CreateTopic("spread", 6, 3, nil)
	top := c.Image().Topic("spread")
	var reps [][]int32
	for _, p := range top.Partitions {
		reps = append(reps, append([]int32(nil), p.Replicas...))
	}
	t.Logf("replicas: %v", reps)
	checkSpread(t, []int32{1, 2, 3}, reps)
	// Not all rotations of one ordering.
	rot := map[string]bool{}
	for _, r := range reps {
		for i := range r {
			rot[fmt.Sprint(append(append([]int32(nil), r[i:]...), r[:i]...))] = true
		}
	}
	if len(rot) == len(reps[0]) {
		t.Fatalf("every replica list is a rotation of one ordering: %v", reps)
	}
}
