package group

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/wait"
)

// classicJoin is a classic consumer's JoinGroup with the embedded consumer
// protocol: subscribed to topics, owning owned.
func classicJoin(group, member string, owned map[string][]int32, topics ...string) *pb.JoinGroupRequest {
	meta := encodeClassicSubscription(1, topics, owned, "")
	return &pb.JoinGroupRequest{GroupId: group, MemberId: member, SessionTimeoutMs: 10_000, RebalanceTimeoutMs: 30_000, ProtocolType: "consumer", ClientId: "classic",
		Protocols: []*pb.GroupProtocol{{Name: "cooperative-sticky", Metadata: meta}}}
}

// stableClassic brings a classic group of two consumers to Stable, c1
// with t-0..2 and c2 with t-3..5; it returns their member ids and the
// generation.
func stableClassic(t *testing.T, h *cgHarness, group string) (string, string, int32) {
	t.Helper()
	first := recv(t, h.joinAsync(classicJoin(group, "", nil, "t")))
	ch2 := h.joinAsync(classicJoin(group, "", nil, "t"))
	wait.Eventually(t, 5*time.Second, "the second join to start a rebalance", func() bool { return h.state(group) == PreparingRebalance })
	ch1 := h.joinAsync(classicJoin(group, first.MemberId, nil, "t"))
	j1, j2 := recv(t, ch1), recv(t, ch2)
	if j1.ErrorCode != pb.ErrorCode_NONE || j2.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("classic joins: %v %v", j1, j2)
	}
	leader, other := j1, j2
	if j2.MemberId == j2.Leader {
		leader, other = j2, j1
	}
	req := &pb.SyncGroupRequest{GroupId: group, MemberId: leader.MemberId, GenerationId: leader.GenerationId, Assignments: []*pb.GroupAssignment{
		{MemberId: leader.MemberId, Assignment: encodeClassicAssignment(1, map[string][]int32{"t": {0, 1, 2}})},
		{MemberId: other.MemberId, Assignment: encodeClassicAssignment(1, map[string][]int32{"t": {3, 4, 5}})}}}
	otherSync := h.syncAsync(group, other.MemberId, other.GenerationId, nil)
	r, err := h.c.SyncGroup(context.Background(), req)
	if err != nil || r.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("leader sync: %v %v", err, r)
	}
	wantCode(t, "follower sync", recv(t, otherSync).ErrorCode, pb.ErrorCode_NONE)
	if h.state(group) != Stable {
		t.Fatalf("classic group %v", h.state(group))
	}
	return leader.MemberId, other.MemberId, leader.GenerationId
}

// joinAsync runs a JoinGroup (either protocol's path) and returns where
// its answer arrives.
func (h *cgHarness) joinAsync(req *pb.JoinGroupRequest) <-chan *pb.JoinGroupResponse {
	out := make(chan *pb.JoinGroupResponse, 1)
	go func() {
		r, err := h.c.JoinGroup(context.Background(), req)
		if err != nil {
			r = &pb.JoinGroupResponse{ErrorCode: pb.ErrorCode_UNKNOWN_SERVER_ERROR, ErrorMessage: err.Error()}
		}
		out <- r
	}()
	return out
}

func listedType(t *testing.T, h *cgHarness, group string) (string, string) {
	t.Helper()
	r, err := h.c.ListGroups(context.Background(), &pb.ListGroupsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range r.Groups {
		if g.GroupId == group {
			return g.GroupType, g.State
		}
	}
	return "", ""
}

// classicRejoin runs a classic member of a consumer group through
// JoinGroup and SyncGroup, reporting owned; it returns the generation and
// the partitions of t SyncGroup gave it.
func classicRejoin(t *testing.T, h *cgHarness, group, member string, owned []int32) (int32, []int32) {
	t.Helper()
	j, err := h.c.JoinGroup(context.Background(), classicJoin(group, member, map[string][]int32{"t": owned}, "t"))
	if err != nil || j.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("rejoin %s: %v %v", member, err, j)
	}
	if j.Leader != "" || len(j.Members) != 0 || j.ProtocolName != "cooperative-sticky" {
		t.Fatalf("join of a consumer group answered leader %q, %d members, protocol %q; want none, none, cooperative-sticky", j.Leader, len(j.Members), j.ProtocolName)
	}
	s, err := h.c.SyncGroup(context.Background(), &pb.SyncGroupRequest{GroupId: group, MemberId: member, GenerationId: j.GenerationId})
	if err != nil || s.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("sync %s: %v %v", member, err, s)
	}
	a, err := decodeClassicAssignment(s.Assignment)
	if err != nil {
		t.Fatal(err)
	}
	return j.GenerationId, a.partitions["t"]
}

// TestConsumerGroupConversionBothWays: a consumer-protocol member joining
// a Stable classic group converts it to a consumer group that keeps the
// classic members and their partitions; they are told to rejoin, give up
// what the new target takes, and the new member gets it only then. When it
// leaves, the group is a classic group again, rebalancing.
func TestConsumerGroupConversionBothWays(t *testing.T) {
	h := newCGHarness(t)
	c1, c2, gen := stableClassic(t, h, "g")
	if typ, _ := listedType(t, h, "g"); typ != "classic" {
		t.Fatalf("listed as %q", typ)
	}
	r := h.joinCG("g", "m", "t")
	wantCode(t, "consumer member joins", r.ErrorCode, pb.ErrorCode_NONE)
	if r.MemberEpoch != gen+1 || len(h.assignedOf(r)["t"]) != 0 {
		t.Fatalf("new member at epoch %d with %v; want epoch %d and nothing yet", r.MemberEpoch, h.assignedOf(r), gen+1)
	}
	if typ, _ := listedType(t, h, "g"); typ != "consumer" {
		t.Fatalf("listed as %q after the upgrade", typ)
	}
	d, _ := h.c.DescribeGroups(context.Background(), &pb.DescribeGroupsRequest{GroupIds: []string{"g"}})
	if dg := d.Groups[0]; dg.GroupType != "consumer" || dg.ProtocolType != "consumer" || len(dg.Members) != 3 {
		t.Fatalf("described %v", dg)
	}

	// The classic members learn of the rebalance from their heartbeats.
	for _, m := range []string{c1, c2} {
		hb, _ := h.c.Heartbeat(context.Background(), &pb.HeartbeatRequest{GroupId: "g", MemberId: m, GenerationId: gen})
		wantCode(t, "classic heartbeat", hb.ErrorCode, pb.ErrorCode_REBALANCE_IN_PROGRESS)
	}
	// Each rejoins owning its three; it keeps two, revokes one, rejoins.
	owned := map[string][]int32{c1: {0, 1, 2}, c2: {3, 4, 5}}
	for round := 0; round < 3; round++ {
		for _, m := range []string{c1, c2} {
			g, got := classicRejoin(t, h, "g", m, owned[m])
			owned[m] = got
			hb, _ := h.c.Heartbeat(context.Background(), &pb.HeartbeatRequest{GroupId: "g", MemberId: m, GenerationId: g})
			if hb.ErrorCode != pb.ErrorCode_NONE && hb.ErrorCode != pb.ErrorCode_REBALANCE_IN_PROGRESS {
				t.Fatalf("heartbeat of %s: %v", m, hb)
			}
		}
	}
	if len(owned[c1]) != 2 || len(owned[c2]) != 2 {
		t.Fatalf("classic members own %v after reconciling, want two each", owned)
	}
	r = h.beat("g", "m", epochOf(h, "g", "m"), none())
	mine := h.assignedOf(r)["t"]
	if len(mine) != 2 {
		t.Fatalf("the consumer member got %v", mine)
	}
	seen := map[int32]bool{}
	for _, ps := range [][]int32{owned[c1], owned[c2], mine} {
		for _, p := range ps {
			if seen[p] {
				t.Fatalf("partition %d twice: %v %v", p, owned, mine)
			}
			seen[p] = true
		}
	}
	// Offset commits of classic members are checked against their epochs.
	e1 := epochOf(h, "g", c1)
	wantCode(t, "classic member commit", h.commit("g", c1, e1, "t", owned[c1][0], 5), pb.ErrorCode_NONE)
	wantCode(t, "classic member commit, old generation", h.commit("g", c1, e1-1, "t", owned[c1][0], 5), pb.ErrorCode_ILLEGAL_GENERATION)

	// The consumer member leaves: the group is classic again and rebalances.
	lr := h.hb(&pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: "m", MemberEpoch: -1})
	wantCode(t, "leave", lr.ErrorCode, pb.ErrorCode_NONE)
	if typ, st := listedType(t, h, "g"); typ != "classic" || st != PreparingRebalance.String() {
		t.Fatalf("after the leave: %s %s, want a classic group preparing a rebalance", typ, st)
	}
	ch1, ch2 := h.joinAsync(classicJoin("g", c1, nil, "t")), h.joinAsync(classicJoin("g", c2, nil, "t"))
	j1, j2 := recv(t, ch1), recv(t, ch2)
	if j1.ErrorCode != pb.ErrorCode_NONE || j2.ErrorCode != pb.ErrorCode_NONE || j1.GenerationId != j2.GenerationId {
		t.Fatalf("classic rejoins after the downgrade: %v %v", j1, j2)
	}
	if h.state("g") != CompletingRebalance {
		t.Fatalf("state %v", h.state("g"))
	}
	// The offsets survived both conversions.
	if off, code := h.fetch("g", "t", owned[c1][0], false); off != 5 || code != pb.ErrorCode_NONE {
		t.Fatalf("offset after the conversions: %d %v", off, code)
	}
}

// TestConsumerGroupConversionRules: which groups convert, and when.
func TestConsumerGroupConversionRules(t *testing.T) {
	t.Run("rebalancing classic group waits", func(t *testing.T) {
		h := newCGHarness(t)
		j := recv(t, h.joinAsync(classicJoin("g", "", nil, "t"))) // CompletingRebalance: the leader has not synced
		wantCode(t, "join", j.ErrorCode, pb.ErrorCode_NONE)
		wantCode(t, "consumer member while the classic group completes its rebalance", h.joinCG("g", "m", "t").ErrorCode, pb.ErrorCode_COORDINATOR_NOT_AVAILABLE)
	})
	t.Run("not the consumer embedded protocol", func(t *testing.T) {
		h := newCGHarness(t)
		req := classicJoin("g", "", nil, "t")
		req.ProtocolType = "connect"
		j := recv(t, h.joinAsync(req))
		h.sync("g", j.MemberId, j.GenerationId, map[string]string{j.MemberId: "x"})
		wantCode(t, "consumer member in a connect group", h.joinCG("g", "m", "t").ErrorCode, pb.ErrorCode_GROUP_ID_NOT_FOUND)
	})
	t.Run("policy forbids the upgrade", func(t *testing.T) {
		h := newCGHarness(t, func(c *Config) { c.MigrationPolicy = MigrationDowngrade })
		stableClassic(t, h, "g")
		wantCode(t, "upgrade refused", h.joinCG("g", "m", "t").ErrorCode, pb.ErrorCode_GROUP_ID_NOT_FOUND)
	})
	t.Run("policy forbids the downgrade", func(t *testing.T) {
		h := newCGHarness(t, func(c *Config) { c.MigrationPolicy = MigrationUpgrade })
		stableClassic(t, h, "g")
		wantCode(t, "upgrade", h.joinCG("g", "m", "t").ErrorCode, pb.ErrorCode_NONE)
		wantCode(t, "leave", h.hb(&pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: "m", MemberEpoch: -1}).ErrorCode, pb.ErrorCode_NONE)
		if typ, _ := listedType(t, h, "g"); typ != "consumer" {
			t.Fatalf("downgraded against the policy: %s", typ)
		}
	})
	t.Run("empty groups convert freely, offsets stay", func(t *testing.T) {
		h := newCGHarness(t)
		wantCode(t, "commit", h.commit("g", "", -1, "t", 0, 7), pb.ErrorCode_NONE)
		wantCode(t, "consumer member", h.joinCG("g", "m", "t").ErrorCode, pb.ErrorCode_NONE)
		wantCode(t, "leave", h.hb(&pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: "m", MemberEpoch: -1}).ErrorCode, pb.ErrorCode_NONE)
		if typ, st := listedType(t, h, "g"); typ != "consumer" || st != cgEmpty {
			t.Fatalf("after the last member left: %s %s", typ, st)
		}
		wantCode(t, "classic join of the empty consumer group", recv(t, h.joinAsync(classicJoin("g", "", nil, "t"))).ErrorCode, pb.ErrorCode_NONE)
		if typ, _ := listedType(t, h, "g"); typ != "classic" {
			t.Fatalf("after a classic join: %s", typ)
		}
		if off, _ := h.fetch("g", "t", 0, false); off != 7 {
			t.Fatalf("offset %d after the conversions, want 7", off)
		}
	})
}

// TestConsumerGroupOffsetEpochs: commits and fetches are checked against
// member epochs as Kafka checks them.
func TestConsumerGroupOffsetEpochs(t *testing.T) {
	h := newCGHarness(t)
	r := h.joinCG("g", "m", "t")
	e := r.MemberEpoch
	commit := func(member string, epoch int32, before bool) pb.ErrorCode {
		resp, err := h.c.OffsetCommit(context.Background(), &pb.OffsetCommitRequest{GroupId: "g", MemberId: member, GenerationId: epoch, BeforeMemberEpochs: before,
			Offsets: []*pb.PartitionOffset{{Topic: "t", Partition: 0, Offset: 3, LeaderEpoch: -1}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Partitions[0].ErrorCode
	}
	wantCode(t, "member at its epoch", commit("m", e, false), pb.ErrorCode_NONE)
	wantCode(t, "stale epoch", commit("m", e-1, false), pb.ErrorCode_STALE_MEMBER_EPOCH)
	wantCode(t, "unknown member", commit("x", e, false), pb.ErrorCode_UNKNOWN_MEMBER_ID)
	wantCode(t, "before v9", commit("m", e, true), pb.ErrorCode_UNSUPPORTED_VERSION)
	wantCode(t, "admin commit while members exist", commit("", -1, false), pb.ErrorCode_UNKNOWN_MEMBER_ID)

	txn := func(member string, epoch int32) pb.ErrorCode {
		resp, err := h.c.TxnOffsetCommit(context.Background(), &pb.TxnOffsetCommitRequest{TransactionalId: "tx", GroupId: "g", ProducerId: 1, MemberId: member, GenerationId: epoch,
			Offsets: []*pb.PartitionOffset{{Topic: "t", Partition: 0, Offset: 4, LeaderEpoch: -1}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	wantCode(t, "transactional commit at the epoch", txn("m", e), pb.ErrorCode_NONE)
	wantCode(t, "transactional commit, stale epoch", txn("m", e-1), pb.ErrorCode_ILLEGAL_GENERATION)
	wantCode(t, "transactional commit, unknown member", txn("x", e), pb.ErrorCode_UNKNOWN_MEMBER_ID)

	fetch := func(member string, epoch int32) pb.ErrorCode {
		resp, err := h.c.OffsetFetch(context.Background(), &pb.OffsetFetchRequest{GroupId: "g", MemberId: member, MemberEpoch: epoch})
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	wantCode(t, "fetch at the epoch", fetch("m", e), pb.ErrorCode_NONE)
	wantCode(t, "fetch, stale epoch", fetch("m", e+1), pb.ErrorCode_STALE_MEMBER_EPOCH)
	wantCode(t, "fetch, unknown member", fetch("x", e), pb.ErrorCode_UNKNOWN_MEMBER_ID)
	wantCode(t, "fetch naming no member", fetch("", -1), pb.ErrorCode_NONE)

	wantCode(t, "leave", h.hb(&pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: "m", MemberEpoch: -1}).ErrorCode, pb.ErrorCode_NONE)
	wantCode(t, "admin commit to the empty group", commit("", -1, false), pb.ErrorCode_NONE)
}

// TestConsumerGroupCommitAssignmentEpochs: a member may commit at an
// older epoch than its own the partitions it had since then (KIP-1251);
// a partition it got later, one it does not have, or an epoch ahead of its
// own is STALE_MEMBER_EPOCH; the epochs survive a reload.
func TestConsumerGroupCommitAssignmentEpochs(t *testing.T) {
	h := newCGHarness(t)
	h.img.setTopics(map[string]int{"t": 6, "u": 1})
	own := map[string][]int32{}
	r := h.joinCG("g", "m", "t")
	own["m"] = h.assignedOf(r)["t"]
	h.joinCG("g", "m2", "t")
	own = settleAll(h, "g", "m", "m2")
	mid := epochOf(h, "g", "m")
	kept := own["m"]
	wantCode(t, "m2 leaves", h.hb(&pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: "m2", MemberEpoch: -1}).ErrorCode, pb.ErrorCode_NONE)
	own = settleAll(h, "g", "m")
	now := epochOf(h, "g", "m")
	if now <= mid || len(own["m"]) != 6 {
		t.Fatalf("m at epoch %d (was %d) with %v", now, mid, own["m"])
	}
	var gained int32 = -1
	for _, p := range own["m"] {
		if !slices.Contains(kept, p) {
			gained = p
		}
	}
	h = h.failover()
	commit := func(epoch int32, topic string, p int32) pb.ErrorCode {
		resp, err := h.c.OffsetCommit(context.Background(), &pb.OffsetCommitRequest{GroupId: "g", MemberId: "m", GenerationId: epoch,
			Offsets: []*pb.PartitionOffset{{Topic: topic, Partition: p, Offset: 1, LeaderEpoch: -1}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Partitions[0].ErrorCode
	}
	wantCode(t, "older epoch, a partition held since", commit(mid, "t", kept[0]), pb.ErrorCode_NONE)
	wantCode(t, "older epoch, a partition gained later", commit(mid, "t", gained), pb.ErrorCode_STALE_MEMBER_EPOCH)
	wantCode(t, "older epoch, a partition it does not have", commit(mid, "u", 0), pb.ErrorCode_STALE_MEMBER_EPOCH)
	wantCode(t, "its own epoch", commit(now, "t", gained), pb.ErrorCode_NONE)
	wantCode(t, "an epoch ahead of its own", commit(now+1, "t", gained), pb.ErrorCode_STALE_MEMBER_EPOCH)
}

// TestConversionKeepsOffsets: a group's offsets belong to its id, not to
// its membership. A classic group with a transaction's offsets pending
// (and none committed) converts to a consumer group: the conversion's
// membership tombstone must not take the group, and the pending offsets
// with it, away, live or when a coordinator loads the partition; the
// transaction's COMMIT then makes them the group's offsets.
func TestConversionKeepsOffsets(t *testing.T) {
	for _, reload := range []bool{false, true} {
		t.Run(map[bool]string{false: "live", true: "reloaded"}[reload], func(t *testing.T) {
			h := newCGHarness(t)
			c1, _, gen := stableClassic(t, h, "g")
			r, err := h.c.TxnOffsetCommit(context.Background(), &pb.TxnOffsetCommitRequest{TransactionalId: "tx", GroupId: "g", ProducerId: 7,
				MemberId: c1, GenerationId: gen, Offsets: []*pb.PartitionOffset{{Topic: "t", Partition: 0, Offset: 50, LeaderEpoch: -1}}})
			if err != nil || r.ErrorCode != pb.ErrorCode_NONE {
				t.Fatalf("txn commit: %v %v", err, r)
			}
			wantCode(t, "upgrade", h.joinCG("g", "m", "t").ErrorCode, pb.ErrorCode_NONE)
			if typ, _ := listedType(t, h, "g"); typ != "consumer" {
				t.Fatalf("listed as %q", typ)
			}
			if reload {
				h = h.failover()
			}
			if _, code := h.fetch("g", "t", 0, true); code != pb.ErrorCode_UNSTABLE_OFFSET_COMMIT {
				t.Fatalf("after the conversion the transaction's offset is not pending: %v", code)
			}
			h.w.marker(7, 0, record.ControlCommit)
			h.c.OnTxnMarker(h.c.partitionOf("g"), 7, true)
			if off, code := h.fetch("g", "t", 0, true); off != 50 || code != pb.ErrorCode_NONE {
				t.Fatalf("after the COMMIT: %d %v, want 50", off, code)
			}
			if off, _ := h.failover().fetch("g", "t", 0, true); off != 50 {
				t.Fatalf("reloaded after the COMMIT: %d, want 50", off)
			}
		})
	}
}

// TestDeleteGroupsDropsPendingOffsets: DeleteGroups of a group whose only
// offsets are a transaction's pending ones tombstones them too (Kafka's
// deleteAllOffsets), so the group is gone alike live and once a
// coordinator loads the partition, and the transaction's COMMIT brings
// nothing back.
func TestDeleteGroupsDropsPendingOffsets(t *testing.T) {
	for _, reload := range []bool{false, true} {
		t.Run(map[bool]string{false: "live", true: "reloaded"}[reload], func(t *testing.T) {
			h := newCGHarness(t)
			wantCode(t, "txn commit", h.txnCommit("g", 7, 0, "t", 0, 50).ErrorCode, pb.ErrorCode_NONE)
			dr, err := h.c.DeleteGroups(context.Background(), &pb.DeleteGroupsRequest{GroupIds: []string{"g"}})
			if err != nil || dr.Groups[0].ErrorCode != pb.ErrorCode_NONE {
				t.Fatalf("DeleteGroups: %v %v", dr, err)
			}
			if reload {
				h = h.failover()
			}
			if typ, _ := listedType(t, h, "g"); typ != "" {
				t.Fatalf("deleted group listed as %q", typ)
			}
			h.w.marker(7, 0, record.ControlCommit)
			h.c.OnTxnMarker(h.c.partitionOf("g"), 7, true)
			if off, code := h.fetch("g", "t", 0, true); off != -1 || code != pb.ErrorCode_NONE {
				t.Fatalf("after the COMMIT: %d %v, want -1", off, code)
			}
		})
	}
}

// TestClassicJoinWaitsForConversion: a classic JoinGroup that reaches the
// group while its conversion to a consumer group is being written acts
// only once the conversion is in memory, on the consumer group, instead of
// joining the classic group the conversion is replacing.
func TestClassicJoinWaitsForConversion(t *testing.T) {
	h := newCGHarness(t)
	stableClassic(t, h, "g")
	started, held := make(chan struct{}, 8), make(chan struct{})
	h.w.mu.Lock()
	h.w.started, h.w.hold = started, held
	h.w.mu.Unlock()
	converted := make(chan *pb.ConsumerGroupHeartbeatResponse, 1)
	go func() {
		r, _ := h.c.ConsumerGroupHeartbeat(context.Background(), &pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: "m", RebalanceTimeoutMs: 30_000,
			SubscribedTopicNames: subNames("t"), TopicPartitions: none(), ClientId: "client", Version: 1}, nil)
		converted <- r
	}()
	<-started // the conversion's records are being written
	// The conversion is written once the join waits for it (without the
	// wait, the join acts at once on the classic group).
	var once sync.Once
	release := func() { once.Do(func() { close(held) }) }
	onLaneWait = func(string) { release() }
	t.Cleanup(func() { release(); onLaneWait = nil })
	r, _ := h.c.join(context.Background(), classicJoin("g", "", nil, "t"))
	release()
	if r != toConsumerGroupJoin {
		t.Fatalf("the classic join acted on the classic group being converted (answered %v), not on the consumer group", r)
	}
	if r := recv(t, converted); r == nil || r.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("conversion: %v", r)
	}
}
