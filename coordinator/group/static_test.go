package group

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/planted"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

func staticJoinReq(groupID, memberID, instanceID string, protocols ...string) *pb.JoinGroupRequest {
	r := joinReq(groupID, memberID, protocols...)
	r.GroupInstanceId = instanceID
	return r
}

func splitErr(err error) (pb.ErrorCode, string) { return errs.Split(err) }

// stableStatic brings a group with one static member to Stable and
// returns the member's JoinGroup answer.
func (h *harness) stableStatic(groupID, instanceID string) *pb.JoinGroupResponse {
	h.t.Helper()
	r := h.joinNow(staticJoinReq(groupID, "", instanceID))
	wantCode(h.t, "static join", r.ErrorCode, pb.ErrorCode_NONE)
	wantCode(h.t, "static sync", h.sync(groupID, r.MemberId, r.GenerationId, map[string]string{r.MemberId: "a-" + instanceID}).ErrorCode, pb.ErrorCode_NONE)
	return r
}

// staticPair is a Stable group of a dynamic member and a static one
// ("pod"); staticFirst makes the static member the leader. Every member
// supports range and sticky, range preferred.
type staticPair struct {
	dyn, static string
	gen         int32
	leader      string
}

func (h *harness) staticPair(groupID string, staticFirst bool) staticPair {
	h.t.Helper()
	dynReq := func(id string) *pb.JoinGroupRequest { return joinReq(groupID, id, "range", "sticky") }
	stReq := func(id string) *pb.JoinGroupRequest { return staticJoinReq(groupID, id, "pod", "range", "sticky") }
	firstReq, secondReq := dynReq, stReq
	if staticFirst {
		firstReq, secondReq = stReq, dynReq
	}
	first := h.joinNow(firstReq(""))
	h.sync(groupID, first.MemberId, first.GenerationId, nil)
	_, c2 := h.join(secondReq(""))
	_, c1 := h.join(firstReq(first.MemberId))
	r1, r2 := recv(h.t, c1), recv(h.t, c2)
	wantCode(h.t, "first rejoin", r1.ErrorCode, pb.ErrorCode_NONE)
	wantCode(h.t, "second join", r2.ErrorCode, pb.ErrorCode_NONE)
	p := staticPair{dyn: r1.MemberId, static: r2.MemberId, gen: r1.GenerationId, leader: r1.Leader}
	if staticFirst {
		p.dyn, p.static = p.static, p.dyn
	}
	follower := r2.MemberId
	ch := h.syncAsync(groupID, follower, p.gen, nil)
	wantCode(h.t, "leader sync", h.sync(groupID, p.leader, p.gen, map[string]string{p.dyn: "D", p.static: "S"}).ErrorCode, pb.ErrorCode_NONE)
	wantCode(h.t, "follower sync", recv(h.t, ch).ErrorCode, pb.ErrorCode_NONE)
	if h.state(groupID) != Stable {
		h.t.Fatalf("state %v", h.state(groupID))
	}
	return p
}

// TestStaleInstanceIDFenced: once a static member's group.instance.id
// belongs to a new member id, every call of the old incarnation that
// names the instance id — JoinGroup, SyncGroup, Heartbeat, OffsetCommit,
// TxnOffsetCommit, LeaveGroup — and every call of it still waiting is
// answered FENCED_INSTANCE_ID (Kafka's validateCurrentMember and
// replaceStaticMember), not UNKNOWN_MEMBER_ID.
func TestStaleInstanceIDFenced(t *testing.T) {
	staleInstanceCalls(t, pb.ErrorCode_FENCED_INSTANCE_ID)
	t.Run("planted", func(t *testing.T) {
		defer planted.Set(planted.StaleInstanceIDAnsweredUnknownMember)()
		staleInstanceCalls(t, pb.ErrorCode_UNKNOWN_MEMBER_ID)
	})
}

func staleInstanceCalls(t *testing.T, want pb.ErrorCode) {
	h := newHarness(t)
	ctx := context.Background()
	p := h.staticPair("g", false)
	again := h.joinNow(staticJoinReq("g", "", "pod", "range", "sticky"))
	wantCode(t, "restart", again.ErrorCode, pb.ErrorCode_NONE)
	old, gen := p.static, p.gen

	hb, _ := h.c.Heartbeat(ctx, &pb.HeartbeatRequest{GroupId: "g", MemberId: old, GroupInstanceId: "pod", GenerationId: gen})
	wantCode(t, "old heartbeat", hb.ErrorCode, want)
	sr, _ := h.c.SyncGroup(ctx, &pb.SyncGroupRequest{GroupId: "g", MemberId: old, GroupInstanceId: "pod", GenerationId: gen})
	wantCode(t, "old sync", sr.ErrorCode, want)
	cr, _ := h.c.OffsetCommit(ctx, &pb.OffsetCommitRequest{GroupId: "g", MemberId: old, GroupInstanceId: "pod", GenerationId: gen,
		Offsets: []*pb.PartitionOffset{{Topic: "t", Offset: 1}}})
	wantCode(t, "old commit", cr.Partitions[0].ErrorCode, want)
	tr, _ := h.c.TxnOffsetCommit(ctx, &pb.TxnOffsetCommitRequest{TransactionalId: "tx", GroupId: "g", ProducerId: 1, MemberId: old, GroupInstanceId: "pod",
		GenerationId: gen, Offsets: []*pb.PartitionOffset{{Topic: "t", Offset: 1}}})
	wantCode(t, "old txn commit", tr.ErrorCode, want)
	lr, _ := h.c.LeaveGroup(ctx, &pb.LeaveGroupRequest{GroupId: "g", MemberId: old, GroupInstanceId: "pod"})
	wantCode(t, "old leave", lr.ErrorCode, want)
	wantCode(t, "old rejoin", h.joinNow(staticJoinReq("g", old, "pod", "range", "sticky")).ErrorCode, want)
	// Nothing the old incarnation sent moved the group.
	if h.state("g") != Stable {
		t.Fatalf("state %v", h.state("g"))
	}
	hb, _ = h.c.Heartbeat(ctx, &pb.HeartbeatRequest{GroupId: "g", MemberId: again.MemberId, GroupInstanceId: "pod", GenerationId: gen})
	wantCode(t, "new heartbeat", hb.ErrorCode, pb.ErrorCode_NONE)
	// Without an instance id only the member id is checked; an instance id
	// the group does not know is an unknown member.
	wantCode(t, "old heartbeat without instance id", h.heartbeat("g", old, gen), pb.ErrorCode_UNKNOWN_MEMBER_ID)
	hb, _ = h.c.Heartbeat(ctx, &pb.HeartbeatRequest{GroupId: "g", MemberId: again.MemberId, GroupInstanceId: "other", GenerationId: gen})
	wantCode(t, "unknown instance id", hb.ErrorCode, pb.ErrorCode_UNKNOWN_MEMBER_ID)

	// A waiting JoinGroup of a replaced incarnation is fenced by the restart.
	_, waitJoin := h.join(staticJoinReq("g", again.MemberId, "pod", "range", "sticky")) // starts a rebalance
	pending(t, waitJoin)
	_, thirdJoin := h.join(staticJoinReq("g", "", "pod", "range", "sticky"))
	wantCode(t, "waiting join of the replaced incarnation", recv(t, waitJoin).ErrorCode, want)
	_, dynJoin := h.join(joinReq("g", p.dyn, "range", "sticky"))
	third, dj := recv(t, thirdJoin), recv(t, dynJoin)
	if third.ErrorCode != pb.ErrorCode_NONE || dj.ErrorCode != pb.ErrorCode_NONE || dj.Leader != p.dyn || h.state("g") != CompletingRebalance {
		t.Fatalf("rebalance after the restart: %+v / %+v, state %v", third, dj, h.state("g"))
	}
	// ... and so is a waiting SyncGroup.
	resp, waitSync, write := h.c.sync(context.Background(), &pb.SyncGroupRequest{GroupId: "g", MemberId: third.MemberId, GroupInstanceId: "pod", GenerationId: third.GenerationId})
	if resp != nil || write != nil {
		t.Fatalf("a follower's sync answered at once: %v", resp)
	}
	_, fourth := h.join(staticJoinReq("g", "", "pod", "range", "sticky"))
	wantCode(t, "waiting sync of the replaced incarnation", recv(t, waitSync).ErrorCode, want)
	pending(t, fourth)
}

// TestStaticRejoinWithoutRebalance: a static member that restarts (empty
// member id, same group.instance.id) into a Stable group gets its
// assignment back under a new member id and nobody rebalances — also when
// its metadata bytes changed (a restarted consumer owns nothing) and when
// it is the leader — unless the group's protocol would change (Kafka's
// updateStaticMemberAndRebalance). A restarted leader is answered with the
// old leader id, so it does not compute an assignment the group ignores.
func TestStaticRejoinWithoutRebalance(t *testing.T) {
	cases := []struct {
		name              string
		staticFirst       bool // the static member leads
		metadata          string
		protocols         []string
		rebalance         bool
		plantedRebalances bool // with the planted bug
	}{
		{name: "follower, same metadata", protocols: []string{"range", "sticky"}},
		{name: "follower, new metadata", metadata: "restarted, owns nothing", protocols: []string{"range", "sticky"}, plantedRebalances: true},
		{name: "leader", staticFirst: true, protocols: []string{"range", "sticky"}, plantedRebalances: true},
		{name: "protocol changes", protocols: []string{"sticky"}, rebalance: true, plantedRebalances: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			staticRejoin(t, c.staticFirst, c.metadata, c.protocols, c.rebalance)
		})
	}
	t.Run("planted", func(t *testing.T) {
		defer planted.Set(planted.StaticRejoinRebalances)()
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				staticRejoin(t, c.staticFirst, c.metadata, c.protocols, c.plantedRebalances)
			})
		}
	})
}

func staticRejoin(t *testing.T, staticFirst bool, metadata string, protocols []string, rebalance bool) {
	h := newHarness(t)
	p := h.staticPair("g", staticFirst)
	req := staticJoinReq("g", "", "pod", protocols...)
	if metadata != "" {
		for _, pr := range req.Protocols {
			pr.Metadata = []byte(metadata)
		}
	}
	r, ch := h.join(req)
	if r != nil {
		t.Fatalf("answered at once, before the new member id was stored: %v", r)
	}
	if rebalance {
		if h.state("g") != PreparingRebalance {
			t.Fatalf("state %v, want a rebalance", h.state("g"))
		}
		wantCode(t, "the other member's heartbeat", h.heartbeat("g", p.dyn, p.gen), pb.ErrorCode_REBALANCE_IN_PROGRESS)
		return
	}
	if st := h.state("g"); st != Stable {
		t.Fatalf("state %v right after the restart, want Stable: the restart started a rebalance", st)
	}
	again := recv(t, ch)
	wantCode(t, "restart", again.ErrorCode, pb.ErrorCode_NONE)
	if again.MemberId == p.static || again.GenerationId != p.gen || again.ProtocolName != "range" || len(again.Members) != 0 {
		t.Fatalf("restart answered %+v (old member id %s, generation %d)", again, p.static, p.gen)
	}
	if again.Leader == again.MemberId {
		t.Fatalf("a restarted member is told it leads a Stable group: %+v", again)
	}
	if staticFirst && again.Leader != p.static {
		t.Fatalf("restarted leader answered leader %q, want its old id %q", again.Leader, p.static)
	}
	if h.state("g") != Stable {
		t.Fatalf("state %v, want Stable (no rebalance)", h.state("g"))
	}
	wantCode(t, "the other member's heartbeat", h.heartbeat("g", p.dyn, p.gen), pb.ErrorCode_NONE)
	s := h.sync("g", again.MemberId, again.GenerationId, nil)
	if s.ErrorCode != pb.ErrorCode_NONE || string(s.Assignment) != "S" {
		t.Fatalf("restarted member's sync %+v, want its old assignment", s)
	}
	if staticFirst {
		// It leads the next rebalance under its new id.
		_, c1 := h.join(joinReq("g", p.dyn, "range", "sticky"))
		_, c2 := h.join(staticJoinReq("g", again.MemberId, "pod", "range", "sticky"))
		if a, b := recv(t, c1), recv(t, c2); a.Leader != again.MemberId || b.Leader != again.MemberId || len(b.Members) != 2 {
			t.Fatalf("next rebalance: %+v / %+v", a, b)
		}
	}
}

// TestStaticRejoinIsWritten: the new member id of a restarted static
// member is in the log before it is answered (Kafka stores the group in
// updateStaticMemberAndRebalance), so a new coordinator loads it rather
// than the old id; a failed write puts the old id back and answers the
// error; a rebalance that starts while the write waits answers the member.
func TestStaticRejoinIsWritten(t *testing.T) {
	h := newHarness(t)
	p := h.staticPair("g", false)
	before := len(h.w.all())
	again := h.joinNow(staticJoinReq("g", "", "pod", "range", "sticky"))
	wantCode(t, "restart", again.ErrorCode, pb.ErrorCode_NONE)
	bs := h.w.all()
	if len(bs) != before+1 {
		t.Fatalf("%d batches written by the restart, want 1", len(bs)-before)
	}
	_, recs, err := record.Decode(bs[len(bs)-1])
	if err != nil {
		t.Fatal(err)
	}
	var v pb.GroupMetadataValue
	if err := proto.Unmarshal(recs[0].Value, &v); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range v.Members {
		if m.MemberId == p.static {
			t.Fatalf("the old member id is still written: %v", &v)
		}
		if m.MemberId == again.MemberId && m.GroupInstanceId == "pod" && string(m.Assignment) == "S" {
			found = true
		}
	}
	if !found || v.Generation != p.gen || len(v.Members) != 2 {
		t.Fatalf("written membership %v, want member %s with assignment S", &v, again.MemberId)
	}
	// A reload of the log knows the new id.
	re := newShard(h.c.partitionOf("g"), nil, 1)
	for _, b := range bs {
		hd, err := record.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		h.c.applyBatch(re, hd, b)
	}
	if m := re.groups["g"].members[again.MemberId]; m == nil || string(m.assignment) != "S" || m.instanceID != "pod" {
		t.Fatalf("reloaded members %v", re.groups["g"].members)
	}

	// The write fails: the old id is back, the restart is told to retry.
	h.w.fail = errs.New(pb.ErrorCode_NOT_COORDINATOR, "leadership moved")
	failed := h.joinNow(staticJoinReq("g", "", "pod", "range", "sticky"))
	wantCode(t, "restart with a failed write", failed.ErrorCode, pb.ErrorCode_NOT_COORDINATOR)
	h.w.fail = nil
	hb, _ := h.c.Heartbeat(context.Background(), &pb.HeartbeatRequest{GroupId: "g", MemberId: again.MemberId, GroupInstanceId: "pod", GenerationId: p.gen})
	wantCode(t, "heartbeat of the member the failed restart would have replaced", hb.ErrorCode, pb.ErrorCode_NONE)
	if h.state("g") != Stable {
		t.Fatalf("state %v", h.state("g"))
	}

	// A rebalance starts while the write waits: the rebalance answers.
	h.w.mu.Lock()
	h.w.hold, h.w.started = make(chan struct{}), make(chan struct{}, 1)
	hold := h.w.hold
	h.w.mu.Unlock()
	_, waiting := h.join(staticJoinReq("g", "", "pod", "range", "sticky"))
	<-h.w.started
	pending(t, waiting)
	h.w.mu.Lock()
	h.w.hold, h.w.started = nil, nil
	h.w.mu.Unlock()
	_, newcomer := h.join(joinReq("g", "", "range", "sticky"))
	_, dyn := h.join(joinReq("g", p.dyn, "range", "sticky"))
	w, n, d := recv(t, waiting), recv(t, newcomer), recv(t, dyn)
	for _, r := range []*pb.JoinGroupResponse{w, n, d} {
		if r.ErrorCode != pb.ErrorCode_NONE || r.GenerationId != p.gen+1 {
			t.Fatalf("rebalance answers %+v / %+v / %+v", w, n, d)
		}
	}
	close(hold)
	if h.state("g") != CompletingRebalance {
		t.Fatalf("state %v", h.state("g"))
	}

	t.Run("planted", func(t *testing.T) {
		defer planted.Set(planted.StaticRejoinNotPersisted)()
		h := newHarness(t)
		h.staticPair("g", false)
		before := len(h.w.all())
		wantCode(t, "restart", h.joinNow(staticJoinReq("g", "", "pod", "range", "sticky")).ErrorCode, pb.ErrorCode_NONE)
		if n := len(h.w.all()) - before; n != 0 {
			t.Fatalf("%d batches written with the bug planted", n)
		}
	})
}
