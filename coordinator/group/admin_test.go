package group

import (
	"context"
	"encoding/binary"
	"testing"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// subscription encodes a "consumer" protocol subscription (version 0) of topics.
func subscription(topics ...string) []byte {
	b := binary.BigEndian.AppendUint16(nil, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(topics)))
	for _, t := range topics {
		b = binary.BigEndian.AppendUint16(b, uint16(len(t)))
		b = append(b, t...)
	}
	return binary.BigEndian.AppendUint32(b, 0xffffffff) // null user data
}

// TestAdminRequestsRespectMembers: a group with members is not deleted
// (NON_EMPTY_GROUP), and OffsetDelete keeps the offsets of the topics its
// members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC) while deleting the
// others; ListGroups filters by state and type.
func TestAdminRequestsRespectMembers(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	req := joinReq("g", "")
	req.Protocols[0].Metadata = subscription("orders")
	j := h.joinNow(req)
	wantCode(t, "join", j.ErrorCode, pb.ErrorCode_NONE)
	wantCode(t, "sync", h.sync("g", j.MemberId, j.GenerationId, map[string]string{j.MemberId: "a"}).ErrorCode, pb.ErrorCode_NONE)
	wantCode(t, "commit orders", h.commit("g", j.MemberId, j.GenerationId, "orders", 0, 5), pb.ErrorCode_NONE)
	wantCode(t, "commit audit", h.commit("g", j.MemberId, j.GenerationId, "audit", 0, 7), pb.ErrorCode_NONE)

	dr, err := h.c.DeleteGroups(ctx, &pb.DeleteGroupsRequest{GroupIds: []string{"g", "nobody"}})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "delete g", dr.Groups[0].ErrorCode, pb.ErrorCode_NON_EMPTY_GROUP)
	wantCode(t, "delete nobody", dr.Groups[1].ErrorCode, pb.ErrorCode_GROUP_ID_NOT_FOUND)

	od, err := h.c.OffsetDelete(ctx, &pb.OffsetDeleteRequest{GroupId: "g", Partitions: []*pb.TopicPartition{{Topic: "orders", Partition: 0}, {Topic: "audit", Partition: 0}}})
	if err != nil || od.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("OffsetDelete: %v %v", od, err)
	}
	wantCode(t, "delete orders-0", od.Partitions[0].ErrorCode, pb.ErrorCode_GROUP_SUBSCRIBED_TO_TOPIC)
	wantCode(t, "delete audit-0", od.Partitions[1].ErrorCode, pb.ErrorCode_NONE)
	if off, _ := h.fetch("g", "orders", 0, false); off != 5 {
		t.Fatalf("orders-0 = %d after a refused delete, want 5", off)
	}
	if off, _ := h.fetch("g", "audit", 0, false); off != -1 {
		t.Fatalf("audit-0 = %d after its delete, want -1", off)
	}

	for _, c := range []struct {
		states, types []string
		want          int
	}{{nil, nil, 1}, {[]string{"stable"}, nil, 1}, {[]string{"Empty"}, nil, 0}, {nil, []string{"Classic"}, 1}, {nil, []string{"consumer"}, 0}} {
		lr, err := h.c.ListGroups(ctx, &pb.ListGroupsRequest{StatesFilter: c.states, TypesFilter: c.types})
		if err != nil || lr.ErrorCode != pb.ErrorCode_NONE || len(lr.Groups) != c.want {
			t.Fatalf("ListGroups states %v types %v: %v %v, want %d groups", c.states, c.types, lr, err, c.want)
		}
	}
}

func TestSubscriptionTopics(t *testing.T) {
	if got := subscriptionTopics(subscription("a", "bc")); len(got) != 2 || got[0] != "a" || got[1] != "bc" {
		t.Fatalf("decoded %q", got)
	}
	for _, bad := range [][]byte{nil, {0, 0, 0, 0, 0, 9}, {0, 0, 0, 0, 0, 1, 0, 5, 'a'}} {
		if got := subscriptionTopics(bad); len(got) != 0 {
			t.Fatalf("%v decoded to %q", bad, got)
		}
	}
}

// TestLeaveByInstanceID: an administrator removes a static member by its
// group.instance.id alone; an instance id the group does not know is an
// unknown member.
func TestLeaveByInstanceID(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	j := h.joinNow(staticJoinReq("g", "", "pod", "range"))
	wantCode(t, "join", j.ErrorCode, pb.ErrorCode_NONE)
	lr, _ := h.c.LeaveGroup(ctx, &pb.LeaveGroupRequest{GroupId: "g", GroupInstanceId: "other"})
	wantCode(t, "leave of an unknown instance", lr.ErrorCode, pb.ErrorCode_UNKNOWN_MEMBER_ID)
	lr, _ = h.c.LeaveGroup(ctx, &pb.LeaveGroupRequest{GroupId: "g", GroupInstanceId: "pod"})
	wantCode(t, "leave by instance id", lr.ErrorCode, pb.ErrorCode_NONE)
	if st := h.state("g"); st != Empty {
		t.Fatalf("state %v after its only member was removed, want Empty", st)
	}
	wantCode(t, "the removed member's heartbeat", h.heartbeat("g", j.MemberId, j.GenerationId), pb.ErrorCode_UNKNOWN_MEMBER_ID)
}

// TestNoJoinWhileDeleting: while a group's tombstones are being written
// nobody joins it (COORDINATOR_NOT_AVAILABLE, retriable): a membership
// written before the group's tombstone would vanish on reload.
func TestNoJoinWhileDeleting(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	wantCode(t, "commit", h.commit("g", "", -1, "orders", 0, 3), pb.ErrorCode_NONE)
	hold, started := make(chan struct{}), make(chan struct{}, 1)
	h.w.mu.Lock()
	h.w.hold, h.w.started = hold, started
	h.w.mu.Unlock()
	done := make(chan *pb.DeleteGroupsResponse, 1)
	go func() {
		r, _ := h.c.DeleteGroups(ctx, &pb.DeleteGroupsRequest{GroupIds: []string{"g"}})
		done <- r
	}()
	recv(t, started)
	r, ch := h.join(joinReq("g", ""))
	if ch != nil {
		t.Fatal("a join during the delete waits instead of being refused")
	}
	wantCode(t, "join during the delete", r.ErrorCode, pb.ErrorCode_COORDINATOR_NOT_AVAILABLE)
	close(hold)
	wantCode(t, "delete", recv(t, done).Groups[0].ErrorCode, pb.ErrorCode_NONE)
	if st := h.state("g"); st != Dead {
		t.Fatalf("state %v after the delete, want Dead (gone)", st)
	}
	h.w.mu.Lock()
	h.w.hold, h.w.started = nil, nil
	h.w.mu.Unlock()
	wantCode(t, "join after the delete", h.joinNow(joinReq("g", "")).ErrorCode, pb.ErrorCode_NONE)
}
