package group

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/wait"
)

// stableGroup brings a group of n members to Stable and returns their ids
// (the first is the leader) and the generation.
func (h *harness) stableGroup(groupID string, n int) ([]string, int32) {
	h.t.Helper()
	r := h.joinNow(joinReq(groupID, ""))
	wantCode(h.t, "first join", r.ErrorCode, pb.ErrorCode_NONE)
	ids := []string{r.MemberId}
	gen := r.GenerationId
	h.sync(groupID, ids[0], gen, map[string]string{ids[0]: "a0"})
	for len(ids) < n {
		// A newcomer starts a rebalance; every known member rejoins.
		_, chNew := h.join(joinReq(groupID, ""))
		var chans []<-chan *pb.JoinGroupResponse
		for _, id := range ids {
			wantCode(h.t, "heartbeat during rebalance", h.heartbeat(groupID, id, gen), pb.ErrorCode_REBALANCE_IN_PROGRESS)
			_, ch := h.join(joinReq(groupID, id))
			chans = append(chans, ch)
		}
		chans = append(chans, chNew)
		var leader string
		ids = ids[:0]
		for _, ch := range chans {
			r := recv(h.t, ch)
			wantCode(h.t, "rejoin", r.ErrorCode, pb.ErrorCode_NONE)
			ids = append(ids, r.MemberId)
			gen, leader = r.GenerationId, r.Leader
		}
		assign := map[string]string{}
		for i, id := range ids {
			assign[id] = "a" + string(rune('0'+i))
		}
		var followers []<-chan *pb.SyncGroupResponse
		for _, id := range ids {
			if id != leader {
				followers = append(followers, h.syncAsync(groupID, id, gen, nil))
			}
		}
		wantCode(h.t, "leader sync", h.sync(groupID, leader, gen, assign).ErrorCode, pb.ErrorCode_NONE)
		for _, ch := range followers {
			wantCode(h.t, "follower sync", recv(h.t, ch).ErrorCode, pb.ErrorCode_NONE)
		}
		if leader != ids[0] {
			h.t.Fatalf("leader %s is not the oldest member %s", leader, ids[0])
		}
	}
	if st := h.state(groupID); st != Stable {
		h.t.Fatalf("group is %v, want Stable", st)
	}
	return ids, gen
}

func TestJoinSyncHeartbeatOneMember(t *testing.T) {
	h := newHarness(t)
	r := h.joinNow(joinReq("g", ""))
	wantCode(t, "join", r.ErrorCode, pb.ErrorCode_NONE)
	if r.MemberId == "" || r.GenerationId != 1 || r.Leader != r.MemberId || r.ProtocolName != "range" || len(r.Members) != 1 {
		t.Fatalf("join answer %+v", r)
	}
	if h.state("g") != CompletingRebalance {
		t.Fatalf("state %v after join", h.state("g"))
	}
	wantCode(t, "heartbeat while completing", h.heartbeat("g", r.MemberId, 1), pb.ErrorCode_NONE)
	s := h.sync("g", r.MemberId, 1, map[string]string{r.MemberId: "mine"})
	wantCode(t, "sync", s.ErrorCode, pb.ErrorCode_NONE)
	if string(s.Assignment) != "mine" {
		t.Fatalf("assignment %q", s.Assignment)
	}
	if h.state("g") != Stable {
		t.Fatalf("state %v after sync", h.state("g"))
	}
	// The assignment was written before it was answered.
	bs := h.w.all()
	if len(bs) != 1 {
		t.Fatalf("%d batches written, want 1 (group metadata)", len(bs))
	}
	_, recs, err := record.Decode(bs[0])
	if err != nil {
		t.Fatal(err)
	}
	k, _ := decodeKey(recs[0].Key)
	var v pb.GroupMetadataValue
	if err := proto.Unmarshal(recs[0].Value, &v); err != nil || k.typ != keyGroupMetadata || v.Generation != 1 || len(v.Members) != 1 || string(v.Members[0].Assignment) != "mine" {
		t.Fatalf("group metadata record %+v %v %v", k, &v, err)
	}
	wantCode(t, "heartbeat", h.heartbeat("g", r.MemberId, 1), pb.ErrorCode_NONE)
	wantCode(t, "stale generation", h.heartbeat("g", r.MemberId, 0), pb.ErrorCode_ILLEGAL_GENERATION)
	wantCode(t, "unknown member", h.heartbeat("g", "nobody", 1), pb.ErrorCode_UNKNOWN_MEMBER_ID)
	wantCode(t, "unknown group", h.heartbeat("other", "x", 1), pb.ErrorCode_UNKNOWN_MEMBER_ID)
	// A Stable group answers a repeated SyncGroup at once.
	if s := h.sync("g", r.MemberId, 1, nil); s.ErrorCode != pb.ErrorCode_NONE || string(s.Assignment) != "mine" {
		t.Fatalf("second sync %+v", s)
	}
}

func TestRebalanceWaitsForEveryMember(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 2)
	_, ch3 := h.join(joinReq("g", ""))
	pending(t, ch3)
	// Known members learn of the rebalance from their heartbeat.
	wantCode(t, "hb", h.heartbeat("g", ids[0], gen), pb.ErrorCode_REBALANCE_IN_PROGRESS)
	_, ch1 := h.join(joinReq("g", ids[0]))
	pending(t, ch3)
	pending(t, ch1)
	// SyncGroup for the old generation during the join phase is refused.
	if r := h.sync("g", ids[1], gen, nil); r.ErrorCode != pb.ErrorCode_REBALANCE_IN_PROGRESS {
		t.Fatalf("sync during rebalance: %v", r.ErrorCode)
	}
	_, ch2 := h.join(joinReq("g", ids[1]))
	r1, r2, r3 := recv(t, ch1), recv(t, ch2), recv(t, ch3)
	for _, r := range []*pb.JoinGroupResponse{r1, r2, r3} {
		if r.ErrorCode != pb.ErrorCode_NONE || r.GenerationId != gen+1 || r.Leader != ids[0] {
			t.Fatalf("join answer %+v", r)
		}
	}
	if len(r1.Members) != 3 || len(r2.Members) != 0 || len(r3.Members) != 0 {
		t.Fatalf("only the leader gets the member list: %d %d %d", len(r1.Members), len(r2.Members), len(r3.Members))
	}
	if string(r1.Members[2].Metadata) != "/range" {
		t.Fatalf("member metadata %q", r1.Members[2].Metadata)
	}
}

func TestInitialRebalanceDelay(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = 3 * time.Second })
	_, ch1 := h.join(joinReq("g", ""))
	h.advance(2 * time.Second)
	pending(t, ch1)
	_, ch2 := h.join(joinReq("g", "")) // pushes the end to now+3s
	h.advance(2 * time.Second)
	pending(t, ch1)
	h.advance(1100 * time.Millisecond)
	r1, r2 := recv(t, ch1), recv(t, ch2)
	if r1.GenerationId != 1 || r2.GenerationId != 1 || r1.Leader != r1.MemberId {
		t.Fatalf("answers %+v %+v", r1, r2)
	}
	// Only the first rebalance of an empty group is delayed.
	h.sync("g", r1.MemberId, 1, nil)
	_, ch3 := h.join(joinReq("g", r1.MemberId))
	_, ch4 := h.join(joinReq("g", r2.MemberId))
	if r := recv(t, ch3); r.GenerationId != 2 {
		t.Fatalf("second rebalance %+v", r)
	}
	recv(t, ch4)
}

func TestRebalanceTimeoutRemovesLaggards(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 2)
	_, ch := h.join(joinReq("g", ids[0]))
	// ids[1] heartbeats (its session is 10s) but never rejoins.
	for i := 0; i < 5; i++ {
		h.advance(5 * time.Second)
		pending(t, ch)
		wantCode(t, "hb", h.heartbeat("g", ids[1], gen), pb.ErrorCode_REBALANCE_IN_PROGRESS)
	}
	h.advance(6 * time.Second) // 31s > rebalance.timeout.ms=30000
	r := recv(t, ch)
	if r.ErrorCode != pb.ErrorCode_NONE || r.GenerationId != gen+1 || len(r.Members) != 1 {
		t.Fatalf("join after the rebalance timeout %+v", r)
	}
	wantCode(t, "laggard heartbeat", h.heartbeat("g", ids[1], gen), pb.ErrorCode_UNKNOWN_MEMBER_ID)
	if r := h.joinNow(joinReq("g", ids[1])); r.ErrorCode != pb.ErrorCode_UNKNOWN_MEMBER_ID {
		t.Fatalf("removed member rejoining with its id: %v", r.ErrorCode)
	}
}

func TestSessionExpiryStartsRebalance(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 2)
	for i := 0; i < 3; i++ {
		h.advance(3 * time.Second)
		wantCode(t, "hb", h.heartbeat("g", ids[0], gen), pb.ErrorCode_NONE)
	}
	h.advance(1500 * time.Millisecond)
	// ids[1] has been silent for 12s > 10s session.timeout.ms.
	if h.state("g") != PreparingRebalance {
		t.Fatalf("state %v after a session expired", h.state("g"))
	}
	wantCode(t, "expired member", h.heartbeat("g", ids[1], gen), pb.ErrorCode_UNKNOWN_MEMBER_ID)
	wantCode(t, "survivor", h.heartbeat("g", ids[0], gen), pb.ErrorCode_REBALANCE_IN_PROGRESS)
	r := h.joinNow(joinReq("g", ids[0]))
	if r.GenerationId != gen+1 || len(r.Members) != 1 {
		t.Fatalf("rejoin %+v", r)
	}
}

func TestExpiryDuringSyncWait(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 2)
	_, c0 := h.join(joinReq("g", ids[0]))
	_, c1 := h.join(joinReq("g", ids[1]))
	recv(t, c0)
	recv(t, c1)
	gen++
	// The follower waits in SyncGroup; the leader never sends its assignment.
	f := h.syncAsync("g", ids[1], gen, nil)
	wait.Eventually(t, 5*time.Second, "the follower to wait in SyncGroup", func() bool {
		s := h.c.shards[h.c.partitionOf("g")]
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.groups["g"].members[ids[1]].syncCh != nil
	})
	h.advance(11 * time.Second)
	if r := recv(t, f); r.ErrorCode != pb.ErrorCode_REBALANCE_IN_PROGRESS {
		t.Fatalf("waiting follower got %v, want REBALANCE_IN_PROGRESS", r.ErrorCode)
	}
	wantCode(t, "leader expired", h.heartbeat("g", ids[0], gen), pb.ErrorCode_UNKNOWN_MEMBER_ID)
}

func TestJoinValidation(t *testing.T) {
	h := newHarness(t)
	r := joinReq("g", "")
	r.SessionTimeoutMs = 500
	wantCode(t, "short session", h.joinNow(r).ErrorCode, pb.ErrorCode_INVALID_SESSION_TIMEOUT)
	r.SessionTimeoutMs = 31 * 60 * 1000
	wantCode(t, "long session", h.joinNow(r).ErrorCode, pb.ErrorCode_INVALID_SESSION_TIMEOUT)
	r = joinReq("g", "")
	r.Protocols = nil
	wantCode(t, "no protocols", h.joinNow(r).ErrorCode, pb.ErrorCode_INCONSISTENT_GROUP_PROTOCOL)
	wantCode(t, "unknown member of unknown group", h.joinNow(joinReq("g", "ghost")).ErrorCode, pb.ErrorCode_UNKNOWN_MEMBER_ID)
	wantCode(t, "empty group id", h.joinNow(joinReq("", "")).ErrorCode, pb.ErrorCode_INVALID_GROUP_ID)

	ids, _ := h.stableGroup("g", 1)
	wantCode(t, "no common protocol", h.joinNow(joinReq("g", "", "roundrobin")).ErrorCode, pb.ErrorCode_INCONSISTENT_GROUP_PROTOCOL)
	other := joinReq("g", "")
	other.ProtocolType = "connect"
	wantCode(t, "other protocol type", h.joinNow(other).ErrorCode, pb.ErrorCode_INCONSISTENT_GROUP_PROTOCOL)
	wantCode(t, "unknown member", h.joinNow(joinReq("g", "ghost")).ErrorCode, pb.ErrorCode_UNKNOWN_MEMBER_ID)
	if h.state("g") != Stable || len(ids) != 1 {
		t.Fatalf("a refused join moved the group to %v", h.state("g"))
	}
}

func TestProtocolSelection(t *testing.T) {
	h := newHarness(t)
	ids, _ := h.stableGroup("g", 2)
	// Members prefer differently: a tie goes to the oldest member's preference.
	_, a := h.join(joinReq("g", ids[0], "cooperative-sticky", "range"))
	_, b := h.join(joinReq("g", ids[1], "range", "cooperative-sticky"))
	ra, rb := recv(t, a), recv(t, b)
	if ra.ProtocolName != "cooperative-sticky" || rb.ProtocolName != "cooperative-sticky" {
		t.Fatalf("selected %q/%q", ra.ProtocolName, rb.ProtocolName)
	}
	// A member that supports only range forces range.
	rc, c := h.join(joinReq("g", "", "range"))
	if rc != nil {
		t.Fatalf("range-only member refused: %v", rc)
	}
	_, a2 := h.join(joinReq("g", ids[0], "cooperative-sticky", "range"))
	_, b2 := h.join(joinReq("g", rb.MemberId, "range", "cooperative-sticky"))
	r := recv(t, a2)
	recv(t, b2)
	recv(t, c)
	if r.ProtocolName != "range" || r.GenerationId != ra.GenerationId+1 {
		t.Fatalf("selected %q at generation %d", r.ProtocolName, r.GenerationId)
	}
}

func TestLeaveGroup(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 2)
	r, _ := h.c.LeaveGroup(context.Background(), &pb.LeaveGroupRequest{GroupId: "g", MemberId: ids[1]})
	wantCode(t, "leave", r.ErrorCode, pb.ErrorCode_NONE)
	r, _ = h.c.LeaveGroup(context.Background(), &pb.LeaveGroupRequest{GroupId: "g", MemberId: ids[1]})
	wantCode(t, "leave twice", r.ErrorCode, pb.ErrorCode_UNKNOWN_MEMBER_ID)
	wantCode(t, "hb", h.heartbeat("g", ids[0], gen), pb.ErrorCode_REBALANCE_IN_PROGRESS)
	j := h.joinNow(joinReq("g", ids[0]))
	h.sync("g", ids[0], j.GenerationId, nil)
	// The last member leaving empties the group; the new generation is written.
	before := len(h.w.all())
	r, _ = h.c.LeaveGroup(context.Background(), &pb.LeaveGroupRequest{GroupId: "g", MemberId: ids[0]})
	wantCode(t, "last leave", r.ErrorCode, pb.ErrorCode_NONE)
	if h.state("g") != Empty {
		t.Fatalf("state %v", h.state("g"))
	}
	wait.Eventually(t, 5*time.Second, "the Empty group to be written", func() bool { return len(h.w.all()) != before })
	d, _ := h.c.DescribeGroups(context.Background(), &pb.DescribeGroupsRequest{GroupIds: []string{"g", "nope"}})
	if d.Groups[0].State != "Empty" || d.Groups[0].GenerationId != j.GenerationId+1 || d.Groups[1].State != "Dead" {
		t.Fatalf("describe %v", d)
	}
}

func TestLeaderSyncWriteFails(t *testing.T) {
	h := newHarness(t)
	r := h.joinNow(joinReq("g", ""))
	h.w.fail = errs.New(pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, "no ISR")
	s := h.sync("g", r.MemberId, r.GenerationId, map[string]string{r.MemberId: "x"})
	wantCode(t, "sync with a failed write", s.ErrorCode, pb.ErrorCode_COORDINATOR_NOT_AVAILABLE)
	if h.state("g") != PreparingRebalance {
		t.Fatalf("state %v, want a new rebalance", h.state("g"))
	}
	h.w.fail = nil
	r2 := h.joinNow(joinReq("g", r.MemberId))
	if r2.GenerationId != r.GenerationId+1 {
		t.Fatalf("rejoin %+v", r2)
	}
}

func TestStaticMemberRejoinKeepsAssignment(t *testing.T) {
	h := newHarness(t)
	lead := h.joinNow(joinReq("g", ""))
	h.sync("g", lead.MemberId, 1, nil)
	sreq := joinReq("g", "")
	sreq.GroupInstanceId = "pod-1"
	_, c2 := h.join(sreq)
	_, c1 := h.join(joinReq("g", lead.MemberId))
	recv(t, c1)
	st := recv(t, c2)
	h.sync("g", lead.MemberId, st.GenerationId, map[string]string{lead.MemberId: "L", st.MemberId: "S"})
	// The static member restarts with no member id: same generation, same assignment, no rebalance.
	again := h.joinNow(sreq)
	if again.ErrorCode != pb.ErrorCode_NONE || again.GenerationId != st.GenerationId || again.MemberId == st.MemberId {
		t.Fatalf("static rejoin %+v (was %s)", again, st.MemberId)
	}
	if s := h.sync("g", again.MemberId, again.GenerationId, nil); string(s.Assignment) != "S" {
		t.Fatalf("static member's assignment %q", s.Assignment)
	}
	wantCode(t, "old id fenced", h.heartbeat("g", st.MemberId, st.GenerationId), pb.ErrorCode_UNKNOWN_MEMBER_ID)
	if h.state("g") != Stable {
		t.Fatalf("state %v", h.state("g"))
	}
}

func TestNotCoordinatorAndLoading(t *testing.T) {
	h := newHarness(t)
	p := h.c.partitionOf("g")
	r := h.joinNow(joinReq("g", ""))
	h.sync("g", r.MemberId, r.GenerationId, nil)
	// A second member waits in JoinGroup when leadership goes away.
	_, wait := h.join(joinReq("g", ""))
	h.c.StoppedLeading(p)
	wantCode(t, "waiting join", recv(t, wait).ErrorCode, pb.ErrorCode_NOT_COORDINATOR)
	wantCode(t, "heartbeat", h.heartbeat("g", r.MemberId, r.GenerationId), pb.ErrorCode_NOT_COORDINATOR)
	if _, code := h.fetch("g", "t", 0, false); code != pb.ErrorCode_NOT_COORDINATOR {
		t.Fatalf("fetch: %v", code)
	}
	s := newShard(p, nil, 1)
	h.c.shards[p] = s // loading
	wantCode(t, "join while loading", h.joinNow(joinReq("g", "")).ErrorCode, pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS)
	wantCode(t, "commit while loading", h.commit("g", "", -1, "t", 0, 1), pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS)
}

// TestSyncWriteAfterGroupMovedOn: the leader's assignment of generation N
// is about to be written when a member leaves and the group rebalances.
// The generation-N membership must not reach the log after that (a reload
// would bring back a Stable group with the member that left); the leader
// is told to rejoin.
func TestSyncWriteAfterGroupMovedOn(t *testing.T) {
	h := newHarness(t)
	a := h.joinNow(joinReq("g", ""))
	_, chB := h.join(joinReq("g", ""))
	_, chA := h.join(joinReq("g", a.MemberId))
	ja, jb := recv(t, chA), recv(t, chB)
	leader, other := ja, jb
	if jb.MemberId == jb.Leader {
		leader, other = jb, ja
	}
	gen := leader.GenerationId
	started, held := make(chan struct{}, 4), make(chan struct{})
	h.w.mu.Lock()
	h.w.started, h.w.hold = started, held
	h.w.mu.Unlock()
	synced := h.syncAsync("g", leader.MemberId, gen, map[string]string{leader.MemberId: "L", other.MemberId: "O"})
	<-started
	lr, err := h.c.LeaveGroup(context.Background(), &pb.LeaveGroupRequest{GroupId: "g", MemberId: other.MemberId})
	if err != nil || lr.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("leave: %v %v", err, lr)
	}
	close(held)
	wantCode(t, "leader's sync", recv(t, synced).ErrorCode, pb.ErrorCode_REBALANCE_IN_PROGRESS)
	for _, b := range h.w.all() {
		_, recs, err := record.Decode(b)
		if err != nil {
			continue
		}
		for _, r := range recs {
			var v pb.GroupMetadataValue
			if k, _ := decodeKey(r.Key); k.typ != keyGroupMetadata || r.Value == nil || proto.Unmarshal(r.Value, &v) != nil {
				continue
			}
			for _, m := range v.Members {
				if m.MemberId == other.MemberId {
					t.Fatalf("generation %d's membership with the member that left was written after it left: %v", v.Generation, &v)
				}
			}
		}
	}
}
