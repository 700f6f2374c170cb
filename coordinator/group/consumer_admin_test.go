package group

import (
	"context"
	"testing"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TestConsumerGroupAdmin: ListGroups tells and filters the types,
// DeleteGroups refuses a consumer group with members and deletes an empty
// one with its offsets (tombstones: a reload has nothing of it),
// OffsetDelete keeps the offsets of subscribed topics.
func TestConsumerGroupAdmin(t *testing.T) {
	h := newCGHarness(t)
	h.img.setTopics(map[string]int{"t": 2, "u": 2})
	ctx := context.Background()
	h.joinCG("cg", "m", "t")
	wantCode(t, "classic group commit", h.commit("classic", "", -1, "t", 0, 1), pb.ErrorCode_NONE)
	for _, tc := range []struct {
		types []string
		want  []string
	}{
		{nil, []string{"cg", "classic"}},
		{[]string{"Consumer"}, []string{"cg"}},
		{[]string{"classic"}, []string{"classic"}},
		{[]string{"share"}, nil},
	} {
		r, err := h.c.ListGroups(ctx, &pb.ListGroupsRequest{TypesFilter: tc.types})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, g := range r.Groups {
			got = append(got, g.GroupId)
			if g.GroupId == "cg" && (g.GroupType != "consumer" || g.ProtocolType != "consumer" || g.State != cgStable) {
				t.Fatalf("listed %v", g)
			}
		}
		if !equalStrings(got, tc.want) {
			t.Fatalf("types %v listed %v, want %v", tc.types, got, tc.want)
		}
	}
	r, _ := h.c.ListGroups(ctx, &pb.ListGroupsRequest{StatesFilter: []string{"stable"}, TypesFilter: []string{"consumer"}})
	if len(r.Groups) != 1 {
		t.Fatalf("stable consumer groups: %v", r.Groups)
	}

	// Offsets of t (subscribed) and u (not).
	e := epochOf(h, "cg", "m")
	for _, topic := range []string{"t", "u"} {
		resp, _ := h.c.OffsetCommit(ctx, &pb.OffsetCommitRequest{GroupId: "cg", MemberId: "m", GenerationId: e, Offsets: []*pb.PartitionOffset{{Topic: topic, Offset: 4, LeaderEpoch: -1}}})
		wantCode(t, "commit "+topic, resp.Partitions[0].ErrorCode, pb.ErrorCode_NONE)
	}
	od, _ := h.c.OffsetDelete(ctx, &pb.OffsetDeleteRequest{GroupId: "cg", Partitions: []*pb.TopicPartition{{Topic: "t"}, {Topic: "u"}}})
	if od.ErrorCode != pb.ErrorCode_NONE || od.Partitions[0].ErrorCode != pb.ErrorCode_GROUP_SUBSCRIBED_TO_TOPIC || od.Partitions[1].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("OffsetDelete: %v", od)
	}
	if off, _ := h.fetch("cg", "u", 0, false); off != -1 {
		t.Fatalf("u's offset survived its deletion: %d", off)
	}

	dg, _ := h.c.DeleteGroups(ctx, &pb.DeleteGroupsRequest{GroupIds: []string{"cg"}})
	wantCode(t, "delete a consumer group with a member", dg.Groups[0].ErrorCode, pb.ErrorCode_NON_EMPTY_GROUP)
	wantCode(t, "leave", h.hb(&pb.ConsumerGroupHeartbeatRequest{GroupId: "cg", MemberId: "m", MemberEpoch: -1}).ErrorCode, pb.ErrorCode_NONE)
	dg, _ = h.c.DeleteGroups(ctx, &pb.DeleteGroupsRequest{GroupIds: []string{"cg"}})
	wantCode(t, "delete the empty consumer group", dg.Groups[0].ErrorCode, pb.ErrorCode_NONE)
	if typ, _ := listedType(t, h, "cg"); typ != "" {
		t.Fatalf("the deleted group is still listed as %q", typ)
	}
	h2 := h.failover()
	h2.cgroup("cg", func(cg *consumerGroup) {
		if cg != nil {
			t.Fatalf("a reload of the log brings the deleted group back: %s", describeCG(cg))
		}
	})
	if off, _ := h2.fetch("cg", "t", 0, false); off != -1 {
		t.Fatalf("the deleted group's offset is back after a reload: %d", off)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestBuildTarget: a new target is computed for every member, a static
// member replacing another starts from the other's target, only changed
// targets are written, then the target epoch.
func TestBuildTarget(t *testing.T) {
	cg := newConsumerGroup()
	mk := func(id, instance string, assigned assignment) *cmember {
		return &cmember{id: id, instanceID: instance, names: []string{"t"}, epoch: 3, state: memberStable, assigned: assigned, revoking: assignment{}}
	}
	for _, m := range []*cmember{mk("a", "", a(0, 1)), mk("b", "pod", a(2, 3))} {
		if err := cg.putMember(m); err != nil {
			t.Fatal(err)
		}
		cg.target[m.id] = m.assigned
	}
	cg.epoch, cg.assignmentEpoch = 3, 3
	sub := map[string]topicMeta{"t": {id: "t", name: "t", partitions: 4}}

	// b restarts as b2: same target, nothing changes but the epoch.
	n := mk("b2", "pod", a(2, 3))
	recs, next := buildTarget(targetInput{group: "g", cg: cg, epoch: 4, updated: n, replaced: "b", subscription: sub, regexes: cg.regexes, assignor: uniformAssignor{}})
	if !next["b2"].equal(a(2, 3)) || !next["a"].equal(a(0, 1)) || len(next) != 2 {
		t.Fatalf("targets after the static replacement: %v", next)
	}
	if len(recs) != 2 { // b2's target (new to the group) and the epoch
		t.Fatalf("%d records, want b2's target and the target epoch", len(recs))
	}
	if k, _ := decodeKey(recs[len(recs)-1].Key); k.typ != keyCGTargetEpoch {
		t.Fatalf("last record is type %d, want the target epoch", k.typ)
	}

	// A third member: the targets move as little as balance needs.
	c := mk("c", "", assignment{})
	c.epoch = 0
	recs, next = buildTarget(targetInput{group: "g", cg: cg, epoch: 4, updated: c, subscription: sub, regexes: cg.regexes, assignor: uniformAssignor{}})
	if next["c"].size() != 1 || next["a"].size()+next["b"].size() != 3 || overlap(next["a"], a(0, 1))+overlap(next["b"], a(2, 3)) != 3 {
		t.Fatalf("targets with a third member: %v", next)
	}
	if len(recs) != 3 { // c's target, the one member that gave one up, the epoch
		t.Fatalf("%d records, want 3", len(recs))
	}
}
