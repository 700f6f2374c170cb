package controller_test

import (
	"reflect"
	"testing"

	"github.com/strand-io/strand/controller"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	mt "github.com/strand-io/strand/metadata/metadatatest"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// state is what a test checks of a partition after each record.
type state struct {
	Replicas, ISR, Adding, Removing []int32
	Leader, LE, PE                  int32
}

func stateOf(p *metadata.Partition) state {
	norm := func(s []int32) []int32 {
		if len(s) == 0 {
			return nil
		}
		return s
	}
	return state{norm(p.Replicas), norm(p.ISR), norm(p.AddingReplicas), norm(p.RemovingReplicas), p.Leader, p.LeaderEpoch, p.PartitionEpoch}
}

func mustApply(t *testing.T, im *metadata.Image, recs ...*pb.MetadataRecord) *metadata.Image {
	t.Helper()
	next, _, err := metadata.Apply(im, mt.BatchAt(im.Offset+1, recs...))
	if err != nil {
		t.Fatalf("Apply refused %v: %v", recs, err)
	}
	return next
}

func reassign(t *testing.T, im *metadata.Image, target []int32, cancel bool) *metadata.Image {
	t.Helper()
	rec, err := controller.ReassignRecord(im, "t", 0, target, cancel)
	if err != nil {
		t.Fatalf("ReassignRecord(%v, cancel=%v): %v", target, cancel, err)
	}
	if rec == nil {
		t.Fatalf("ReassignRecord(%v, cancel=%v): no record", target, cancel)
	}
	return mustApply(t, im, rec)
}

func want(t *testing.T, im *metadata.Image, w state) {
	t.Helper()
	if got := stateOf(im.Partition("t", 0)); !reflect.DeepEqual(got, w) {
		t.Fatalf("partition state\n got %+v\nwant %+v", got, w)
	}
}

// base: brokers 1-4, t-0 on [1,2,3], leader 1, epochs (2,5).
func reassignBase(t *testing.T) *metadata.Image {
	return clusterImage(t, 4, nil, mt.TopicRec("t", nil), mt.PartRec("t", 0, []int32{1, 2, 3}, []int32{1, 2, 3}, 1, 2, 5))
}

func TestReassignStartThenCompleteOnISR(t *testing.T) {
	im := reassignBase(t)
	im = reassign(t, im, []int32{2, 3, 4}, false)
	// Target first, then the replicas being removed; 4 is not in the ISR yet.
	want(t, im, state{Replicas: []int32{2, 3, 4, 1}, ISR: []int32{1, 2, 3}, Adding: []int32{4}, Removing: []int32{1}, Leader: 1, LE: 2, PE: 6})
	if recs := controller.ReassignCompletions(im); len(recs) != 0 {
		t.Fatalf("completion before the adding replica is in the ISR: %v", recs)
	}
	// The leader's ISR expansion adds 4.
	im = mustApply(t, im, mt.ChangeRec("t", 0, 1, []int32{1, 2, 3, 4}, 2, 7))
	recs := controller.ReassignCompletions(im)
	if len(recs) != 1 {
		t.Fatalf("want one completion record, got %v", recs)
	}
	im = mustApply(t, im, recs...)
	// The leader (1) was removed: a new one from target ∩ ISR, the first of the target; new leader epoch.
	want(t, im, state{Replicas: []int32{2, 3, 4}, ISR: []int32{2, 3, 4}, Leader: 2, LE: 3, PE: 8})
	if recs := controller.ReassignCompletions(im); len(recs) != 0 {
		t.Fatalf("a completed reassignment completes again: %v", recs)
	}
}

func TestReassignCompletionKeepsLeaderInTarget(t *testing.T) {
	im := reassignBase(t)
	im = reassign(t, im, []int32{1, 3, 4}, false)
	want(t, im, state{Replicas: []int32{1, 3, 4, 2}, ISR: []int32{1, 2, 3}, Adding: []int32{4}, Removing: []int32{2}, Leader: 1, LE: 2, PE: 6})
	im = mustApply(t, im, mt.ChangeRec("t", 0, 1, []int32{1, 2, 3, 4}, 2, 7))
	im = mustApply(t, im, controller.ReassignCompletions(im)...)
	// The leader stays; 2 leaves the replicas and the ISR, and the leader
	// epoch moves (a replica was dropped: its fetches in flight are fenced).
	want(t, im, state{Replicas: []int32{1, 3, 4}, ISR: []int32{1, 3, 4}, Leader: 1, LE: 3, PE: 8})
}

func TestReassignLeaderFencedMidway(t *testing.T) {
	im := reassignBase(t)
	im = reassign(t, im, []int32{2, 3, 4}, false)
	im = mustApply(t, im, mt.ChangeRec("t", 0, 1, []int32{1, 2, 3, 4}, 2, 7))
	// Broker 2 (target's first) fell out of the ISR: the next of the target leads.
	im = mustApply(t, im, mt.ChangeRec("t", 0, 1, []int32{1, 3, 4}, 2, 8))
	im = mustApply(t, im, controller.ReassignCompletions(im)...)
	want(t, im, state{Replicas: []int32{2, 3, 4}, ISR: []int32{3, 4}, Leader: 3, LE: 3, PE: 9})
}

func TestReassignCancel(t *testing.T) {
	im := reassignBase(t)
	if _, err := controller.ReassignRecord(im, "t", 0, nil, true); errs.CodeOf(err) != pb.ErrorCode_NO_REASSIGNMENT_IN_PROGRESS {
		t.Fatalf("cancel with none in progress: %v, want NO_REASSIGNMENT_IN_PROGRESS", err)
	}
	im = reassign(t, im, []int32{2, 3, 4}, false)
	im = mustApply(t, im, mt.ChangeRec("t", 0, 1, []int32{1, 2, 3, 4}, 2, 7)) // 4 in sync, not yet completed
	im = reassign(t, im, nil, true)
	// Back to the original replicas (in the order they had during the
	// reassignment, as Kafka reverts: the original minus nothing, target's
	// order first); 4 leaves the ISR, and the leader epoch moves.
	want(t, im, state{Replicas: []int32{2, 3, 1}, ISR: []int32{1, 2, 3}, Leader: 1, LE: 3, PE: 8})
	if _, err := controller.ReassignRecord(im, "t", 0, nil, true); errs.CodeOf(err) != pb.ErrorCode_NO_REASSIGNMENT_IN_PROGRESS {
		t.Fatalf("second cancel: %v, want NO_REASSIGNMENT_IN_PROGRESS", err)
	}
}

func TestReassignCancelMovesLeaderOffAddedReplica(t *testing.T) {
	im := reassignBase(t)
	im = reassign(t, im, []int32{4, 2, 3}, false)
	im = mustApply(t, im, mt.ChangeRec("t", 0, 1, []int32{1, 2, 3, 4}, 2, 7))
	im = mustApply(t, im, mt.ChangeRec("t", 0, 4, []int32{1, 2, 3, 4}, 3, 8)) // a preferred election mid-way
	im = reassign(t, im, nil, true)
	// 4 led: the first in-sync original replica takes over.
	want(t, im, state{Replicas: []int32{2, 3, 1}, ISR: []int32{1, 2, 3}, Leader: 2, LE: 4, PE: 9})
}

func TestReassignReorderCompletesAtOnce(t *testing.T) {
	im := reassignBase(t)
	im = reassign(t, im, []int32{3, 2, 1}, false)
	want(t, im, state{Replicas: []int32{3, 2, 1}, ISR: []int32{1, 2, 3}, Leader: 1, LE: 2, PE: 6})
	// Shrinking to in-sync replicas needs no catching up either.
	im = reassign(t, im, []int32{2, 3}, false)
	want(t, im, state{Replicas: []int32{2, 3}, ISR: []int32{2, 3}, Leader: 2, LE: 3, PE: 7})
}

func TestReassignToCurrentReplicasIsNoChange(t *testing.T) {
	im := reassignBase(t)
	if rec, err := controller.ReassignRecord(im, "t", 0, []int32{1, 2, 3}, false); rec != nil || err != nil {
		t.Fatalf("reassigning to the current replicas: %v, %v; want no record", rec, err)
	}
}

func TestReassignChangeTargetMidway(t *testing.T) {
	im := clusterImage(t, 5, nil, mt.TopicRec("t", nil), mt.PartRec("t", 0, []int32{1, 2, 3}, []int32{1, 2, 3}, 1, 2, 5))
	im = reassign(t, im, []int32{2, 3, 4}, false)
	// A new target replaces the one in progress; the original replicas
	// stay the reference. 4 is dropped, so the leader epoch moves.
	im = reassign(t, im, []int32{1, 2, 5}, false)
	want(t, im, state{Replicas: []int32{1, 2, 5, 3}, ISR: []int32{1, 2, 3}, Adding: []int32{5}, Removing: []int32{3}, Leader: 1, LE: 3, PE: 7})
}

// TestReassignRevertKeepsAnInSyncReplica: when only the adding replicas
// are left in sync (the originals fell out while the new one led), a cancel
// or a new target that drops them would delete the only up-to-date copies
// and bring the partition back on a stale replica. Without unclean leader
// election it is refused with INVALID_REPLICA_ASSIGNMENT and nothing is
// written; with it the topic chose that risk.
func TestReassignRevertKeepsAnInSyncReplica(t *testing.T) {
	start := func(t *testing.T, configs map[string]string) *metadata.Image {
		im := clusterImage(t, 5, nil, mt.TopicRec("t", configs), mt.PartRec("t", 0, []int32{1, 2, 3}, []int32{1, 2, 3}, 1, 2, 5))
		im = reassign(t, im, []int32{4, 2, 3}, false)
		im = mustApply(t, im, mt.ChangeRec("t", 0, 1, []int32{1, 2, 3, 4}, 2, 7))
		// The originals fall out one by one; 4 ends up leading alone.
		return mustApply(t, im, mt.ChangeRec("t", 0, 4, []int32{4}, 3, 8))
	}
	im := start(t, nil)
	if rec, err := controller.ReassignRecord(im, "t", 0, nil, true); errs.CodeOf(err) != pb.ErrorCode_INVALID_REPLICA_ASSIGNMENT || rec != nil {
		t.Fatalf("cancel leaving no in-sync replica: %v, %v; want INVALID_REPLICA_ASSIGNMENT and no record", rec, err)
	}
	if rec, err := controller.ReassignRecord(im, "t", 0, []int32{1, 2, 5}, false); errs.CodeOf(err) != pb.ErrorCode_INVALID_REPLICA_ASSIGNMENT || rec != nil {
		t.Fatalf("new target dropping every in-sync replica: %v, %v; want INVALID_REPLICA_ASSIGNMENT and no record", rec, err)
	}
	// A new target that keeps 4 is fine.
	if _, err := controller.ReassignRecord(im, "t", 0, []int32{4, 2, 5}, false); err != nil {
		t.Fatalf("new target keeping the in-sync replica: %v", err)
	}
	im = start(t, map[string]string{metadata.ConfigTopicUncleanElection: "true"})
	if _, err := controller.ReassignRecord(im, "t", 0, nil, true); err != nil {
		t.Fatalf("cancel with unclean.leader.election.enable=true: %v", err)
	}
}

func TestReassignValidation(t *testing.T) {
	im := reassignBase(t)
	cases := []struct {
		name      string
		topic     string
		partition int32
		target    []int32
		code      pb.ErrorCode
	}{
		{"unknown topic", "nope", 0, []int32{1}, pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION},
		{"unknown partition", "t", 3, []int32{1}, pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION},
		{"empty list", "t", 0, []int32{}, pb.ErrorCode_INVALID_REPLICA_ASSIGNMENT},
		{"duplicate broker", "t", 0, []int32{1, 2, 2}, pb.ErrorCode_INVALID_REPLICA_ASSIGNMENT},
		{"unregistered broker", "t", 0, []int32{1, 2, 9}, pb.ErrorCode_INVALID_REPLICA_ASSIGNMENT},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec, err := controller.ReassignRecord(im, c.topic, c.partition, c.target, false)
			if errs.CodeOf(err) != c.code || rec != nil {
				t.Fatalf("got %v (record %v), want %v", err, rec, c.code)
			}
		})
	}
}

// Old records (no assignment) leave the replica set and the lists alone,
// and a snapshot carries the lists.
func TestReassignImageRecords(t *testing.T) {
	im := reassignBase(t)
	im = reassign(t, im, []int32{2, 3, 4}, false)
	im = mustApply(t, im, mt.ChangeRec("t", 0, 1, []int32{1, 2, 3}, 2, 7))
	want(t, im, state{Replicas: []int32{2, 3, 4, 1}, ISR: []int32{1, 2, 3}, Adding: []int32{4}, Removing: []int32{1}, Leader: 1, LE: 2, PE: 7})
	snap, _, err := metadata.Apply(metadata.EmptyImage(), im.SnapshotRecords())
	if err != nil {
		t.Fatal(err)
	}
	want(t, snap, stateOf(im.Partition("t", 0)))
}
