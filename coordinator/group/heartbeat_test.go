package group

import (
	"testing"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

func TestConsumerGroupJoinAndSecondMember(t *testing.T) {
	h := newCGHarness(t)
	r := h.joinCG("g", "m1", "t")
	wantCode(t, "join m1", r.ErrorCode, pb.ErrorCode_NONE)
	if r.MemberEpoch != 1 || len(h.assignedOf(r)["t"]) != 6 {
		t.Fatalf("m1 joined at epoch %d with %v, want epoch 1 and all six partitions", r.MemberEpoch, h.assignedOf(r))
	}
	r2 := h.joinCG("g", "m2", "t")
	wantCode(t, "join m2", r2.ErrorCode, pb.ErrorCode_NONE)
	// m2's partitions are still m1's: it waits at the new epoch with nothing.
	if r2.MemberEpoch != 2 || len(h.assignedOf(r2)["t"]) != 0 {
		t.Fatalf("m2 joined at epoch %d with %v, want epoch 2 and nothing yet", r2.MemberEpoch, h.assignedOf(r2))
	}
	// m1 is asked to revoke three and stays at epoch 1.
	r1 := h.beat("g", "m1", 1, h.owned(map[string][]int32{"t": {0, 1, 2, 3, 4, 5}}))
	if r1.MemberEpoch != 1 || len(h.assignedOf(r1)["t"]) != 3 {
		t.Fatalf("m1 at epoch %d with %v, want epoch 1 keeping three", r1.MemberEpoch, h.assignedOf(r1))
	}
	kept := h.assignedOf(r1)["t"]
	r1 = h.beat("g", "m1", 1, h.owned(map[string][]int32{"t": kept}))
	if r1.MemberEpoch != 2 {
		t.Fatalf("m1 revoked; epoch %d, want 2", r1.MemberEpoch)
	}
	r2 = h.beat("g", "m2", 2, none())
	if got := h.assignedOf(r2)["t"]; len(got) != 3 {
		t.Fatalf("m2 got %v, want the three m1 released", got)
	}
	h.cgroup("g", func(cg *consumerGroup) {
		if st := cg.state(); st != cgStable {
			t.Fatalf("group state %s, want Stable", st)
		}
	})
}
