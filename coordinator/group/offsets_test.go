package group

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

func TestOffsetCommitRules(t *testing.T) {
	h := newHarness(t)
	// Standalone: no group, generation -1, no member id.
	wantCode(t, "standalone commit", h.commit("solo", "", -1, "t", 0, 10), pb.ErrorCode_NONE)
	if off, code := h.fetch("solo", "t", 0, true); off != 10 || code != pb.ErrorCode_NONE {
		t.Fatalf("fetch %d %v", off, code)
	}
	if off, _ := h.fetch("solo", "t", 1, false); off != -1 {
		t.Fatalf("uncommitted partition answers %d, want -1", off)
	}
	// A group with no members takes a commit at generation -1 whatever
	// member id it carries (Kafka looks at the generation before the
	// member), and refuses a generation UNKNOWN_MEMBER_ID: nobody holds it.
	wantCode(t, "generation -1 with a member id, empty group", h.commit("solo", "left-long-ago", -1, "t", 1, 7), pb.ErrorCode_NONE)
	wantCode(t, "generation -1 with a member id, no group", h.commit("fresh", "m", -1, "t", 0, 3), pb.ErrorCode_NONE)
	wantCode(t, "a generation in an empty group", h.commit("solo", "", 2, "t", 1, 8), pb.ErrorCode_UNKNOWN_MEMBER_ID)
	if off, _ := h.fetch("solo", "t", 1, false); off != 7 {
		t.Fatalf("empty group's partition 1 at %d, want 7", off)
	}
	// A generation for a group that does not exist: GROUP_ID_NOT_FOUND
	// from version 9 on, ILLEGAL_GENERATION before (Kafka's rule).
	wantCode(t, "generation on an unknown group", h.commit("nobody", "", 3, "t", 0, 1), pb.ErrorCode_GROUP_ID_NOT_FOUND)
	wantCode(t, "member of an unknown group", h.commit("nobody", "m", 3, "t", 0, 1), pb.ErrorCode_GROUP_ID_NOT_FOUND)
	for _, member := range []string{"", "m"} {
		r, err := h.c.OffsetCommit(context.Background(), &pb.OffsetCommitRequest{GroupId: "nobody", MemberId: member, GenerationId: 3, BeforeMemberEpochs: true,
			Offsets: []*pb.PartitionOffset{{Topic: "t", Partition: 0, Offset: 1, LeaderEpoch: -1}}})
		if err != nil || r.Partitions[0].ErrorCode != pb.ErrorCode_ILLEGAL_GENERATION {
			t.Fatalf("version 8 commit of member %q to an unknown group: %v %v, want ILLEGAL_GENERATION", member, r, err)
		}
	}

	ids, gen := h.stableGroup("g", 2)
	wantCode(t, "member commit", h.commit("g", ids[1], gen, "t", 2, 42), pb.ErrorCode_NONE)
	wantCode(t, "stale generation", h.commit("g", ids[1], gen-1, "t", 2, 43), pb.ErrorCode_ILLEGAL_GENERATION)
	wantCode(t, "unknown member", h.commit("g", "ghost", gen, "t", 2, 43), pb.ErrorCode_UNKNOWN_MEMBER_ID)
	wantCode(t, "standalone into a live group", h.commit("g", "", -1, "t", 2, 43), pb.ErrorCode_UNKNOWN_MEMBER_ID)
	// During the join phase the current generation may still commit (cooperative members keep working).
	_, ch0 := h.join(joinReq("g", ids[0]))
	wantCode(t, "commit while preparing", h.commit("g", ids[1], gen, "t", 2, 44), pb.ErrorCode_NONE)
	_, ch1 := h.join(joinReq("g", ids[1]))
	recv(t, ch0)
	recv(t, ch1)
	wantCode(t, "commit while completing", h.commit("g", ids[1], gen+1, "t", 2, 45), pb.ErrorCode_REBALANCE_IN_PROGRESS)
	if off, _ := h.fetch("g", "t", 2, false); off != 44 {
		t.Fatalf("committed %d, want 44", off)
	}
	// A failed write changes nothing.
	h.w.fail = errs.New(pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, "no ISR")
	wantCode(t, "failed write", h.commit("solo", "", -1, "t", 0, 11), pb.ErrorCode_COORDINATOR_NOT_AVAILABLE)
	h.w.fail = nil
	if off, _ := h.fetch("solo", "t", 0, false); off != 10 {
		t.Fatalf("after a failed write: %d", off)
	}
	// Fetch everything the group has.
	r, _ := h.c.OffsetFetch(context.Background(), &pb.OffsetFetchRequest{GroupId: "g"})
	if len(r.Partitions) != 1 || r.Partitions[0].Offset != 44 {
		t.Fatalf("fetch all %v", r)
	}
}

func (h *harness) txnCommit(groupID string, pid int64, epoch int32, topic string, part int32, off int64) *pb.TxnOffsetCommitResponse {
	h.t.Helper()
	r, err := h.c.TxnOffsetCommit(context.Background(), &pb.TxnOffsetCommitRequest{TransactionalId: "tx", GroupId: groupID, ProducerId: pid,
		ProducerEpoch: epoch, GenerationId: -1, Offsets: []*pb.PartitionOffset{{Topic: topic, Partition: part, Offset: off, LeaderEpoch: -1}}})
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func TestTxnOffsetCommitPendingUntilMarker(t *testing.T) {
	h := newHarness(t)
	wantCode(t, "base", h.commit("g", "", -1, "t", 0, 5), pb.ErrorCode_NONE)
	r := h.txnCommit("g", 7, 0, "t", 0, 50)
	wantCode(t, "txn commit", r.ErrorCode, pb.ErrorCode_NONE)
	if len(h.txn.calls) != 1 || h.txn.calls[0] != "tx/__consumer_offsets" {
		t.Fatalf("AddPartition calls %v", h.txn.calls)
	}
	// Pending: invisible, and unstable for require_stable readers.
	if off, code := h.fetch("g", "t", 0, false); off != 5 || code != pb.ErrorCode_NONE {
		t.Fatalf("fetch %d %v, want the old offset", off, code)
	}
	fr, _ := h.c.OffsetFetch(context.Background(), &pb.OffsetFetchRequest{GroupId: "g", RequireStable: true, Partitions: []*pb.TopicPartition{{Topic: "t"}}})
	if p := fr.Partitions[0]; p.ErrorCode != pb.ErrorCode_UNSTABLE_OFFSET_COMMIT || !strings.Contains(p.ErrorMessage, "producerId=7") {
		t.Fatalf("stable fetch %v", p)
	}
	// The written batch is transactional, with the producer in it.
	bs := h.w.all()
	hd, recs, _ := record.Decode(bs[len(bs)-1])
	k, _ := decodeKey(recs[0].Key)
	if !hd.IsTransactional() || hd.ProducerID != 7 || k.typ != keyOffsetCommit || k.group != "g" {
		t.Fatalf("txn batch header %+v key %+v", hd, k)
	}
	h.c.OnTxnMarker(h.c.partitionOf("g"), 7, true)
	if off, code := h.fetch("g", "t", 0, true); off != 50 || code != pb.ErrorCode_NONE {
		t.Fatalf("after COMMIT: %d %v", off, code)
	}
	// An aborted transaction leaves the committed offset alone.
	h.txnCommit("g", 7, 1, "t", 0, 60)
	h.c.OnTxnMarker(h.c.partitionOf("g"), 7, false)
	if off, code := h.fetch("g", "t", 0, true); off != 50 || code != pb.ErrorCode_NONE {
		t.Fatalf("after ABORT: %d %v", off, code)
	}
	// A marker of another producer settles nothing.
	h.txnCommit("g", 8, 0, "t", 0, 70)
	h.c.OnTxnMarker(h.c.partitionOf("g"), 9, true)
	if _, code := h.fetch("g", "t", 0, true); code != pb.ErrorCode_UNSTABLE_OFFSET_COMMIT {
		t.Fatalf("still pending: %v", code)
	}
	// The transaction coordinator's answer is TxnOffsetCommit's answer.
	h.txn.err = errs.New(pb.ErrorCode_PRODUCER_FENCED, "epoch 3 is fenced")
	r = h.txnCommit("g", 10, 3, "t", 1, 1)
	if r.ErrorCode != pb.ErrorCode_PRODUCER_FENCED || r.Partitions[0].ErrorCode != pb.ErrorCode_PRODUCER_FENCED {
		t.Fatalf("fenced: %v", r)
	}
}

func TestTxnOffsetCommitGroupChecks(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 1)
	req := &pb.TxnOffsetCommitRequest{TransactionalId: "tx", GroupId: "g", ProducerId: 1, ProducerEpoch: 0, MemberId: ids[0], GenerationId: gen - 1,
		Offsets: []*pb.PartitionOffset{{Topic: "t", Offset: 1}}}
	r, _ := h.c.TxnOffsetCommit(context.Background(), req)
	wantCode(t, "stale generation", r.ErrorCode, pb.ErrorCode_ILLEGAL_GENERATION)
	req.GenerationId, req.MemberId = gen, "ghost"
	r, _ = h.c.TxnOffsetCommit(context.Background(), req)
	wantCode(t, "unknown member", r.ErrorCode, pb.ErrorCode_UNKNOWN_MEMBER_ID)
	if len(h.txn.calls) != 0 {
		t.Fatalf("a refused commit was added to the transaction: %v", h.txn.calls)
	}
	req.MemberId = ids[0]
	r, _ = h.c.TxnOffsetCommit(context.Background(), req)
	wantCode(t, "member of the generation", r.ErrorCode, pb.ErrorCode_NONE)
	req.TransactionalId = ""
	r, _ = h.c.TxnOffsetCommit(context.Background(), req)
	wantCode(t, "no transactional id", r.ErrorCode, pb.ErrorCode_INVALID_REQUEST)
}

// TestMarkerDuringTxnWrite: a marker that lands while the transactional
// write waits for the ISR still settles it.
func TestMarkerDuringTxnWrite(t *testing.T) {
	h := newHarness(t)
	h.w.hold, h.w.started = make(chan struct{}), make(chan struct{}, 1)
	done := make(chan *pb.TxnOffsetCommitResponse, 1)
	go func() { done <- h.txnCommit("g", 3, 0, "t", 0, 9) }()
	<-h.w.started
	if _, code := h.fetch("g", "t", 0, true); code != pb.ErrorCode_UNSTABLE_OFFSET_COMMIT {
		t.Fatalf("a commit being written must be unstable, got %v", code)
	}
	h.c.OnTxnMarker(h.c.partitionOf("g"), 3, true)
	close(h.w.hold)
	wantCode(t, "commit", recv(t, done).ErrorCode, pb.ErrorCode_NONE)
	if off, code := h.fetch("g", "t", 0, true); off != 9 || code != pb.ErrorCode_NONE {
		t.Fatalf("after the marker: %d %v", off, code)
	}
}

// TestReplayMatchesLive replays everything the coordinator wrote (plus
// markers) into a fresh shard, as a load does, and compares.
func TestReplayMatchesLive(t *testing.T) {
	h := newHarness(t)
	part := h.c.partitionOf("g")
	ids, gen := h.stableGroup("g", 2)
	h.commit("g", ids[0], gen, "t", 0, 1)
	h.commit("g", ids[0], gen, "t", 0, 2)
	h.txnCommit("g", 7, 0, "t", 1, 70) // committed below
	h.txnCommit("g", 8, 0, "t", 2, 80) // aborted below
	h.txnCommit("g", 9, 0, "t", 3, 90) // left open
	h.commit("g", ids[1], gen, "t", 4, 4)
	h.txnCommit("g", 7, 0, "t", 4, 40) // written after the plain commit of t-4: wins at COMMIT
	h.w.marker(7, 1, record.ControlCommit)
	h.c.OnTxnMarker(part, 7, true)
	h.w.marker(8, 1, record.ControlAbort)
	h.c.OnTxnMarker(part, 8, false)

	live := h.c.shards[part]
	re := newShard(part, nil, 1)
	re.status = loading
	for _, b := range h.w.all() {
		hd, err := record.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		re.mu.Lock()
		h.c.applyBatch(re, hd, b)
		re.mu.Unlock()
	}
	lg, rg := live.groups["g"], re.groups["g"]
	for p, e := range lg.offsets {
		if rg.offsets[p] != e {
			t.Errorf("%v: live %+v, replayed %+v", p, e, rg.offsets[p])
		}
	}
	if len(lg.offsets) != len(rg.offsets) || len(lg.offsets) != 3 {
		t.Errorf("offsets live %v replayed %v", lg.offsets, rg.offsets)
	}
	if _, aborted := lg.offsets[tp{"t", 2}]; aborted || lg.offsets[tp{"t", 4}].offset != 40 || lg.offsets[tp{"t", 1}].offset != 70 {
		t.Errorf("live offsets %v", lg.offsets)
	}
	if len(rg.pending) != 1 || len(rg.pending[tp{"t", 3}]) != 1 || len(lg.pending) != 1 {
		t.Errorf("pending live %v replayed %v", lg.pending, rg.pending)
	}
	if rg.generation != gen || len(rg.members) != 2 || rg.state != Stable || rg.leader != lg.leader {
		t.Errorf("membership replayed as gen %d, %d members, %v", rg.generation, len(rg.members), rg.state)
	}
	for id, m := range lg.members {
		if string(re.groups["g"].members[id].assignment) != string(m.assignment) {
			t.Errorf("member %s assignment differs", id)
		}
	}
}

// TestTxnOffsetCommitVersion1Verifies: a transaction version 1 commit (a
// Kafka client's TxnOffsetCommit below v5, after its AddOffsetsToTxn) only
// verifies that the group's partition is in the transaction; a version 2
// one (or one that does not say: the gRPC SDK) adds it. A failed
// verification commits nothing.
func TestTxnOffsetCommitVersion1Verifies(t *testing.T) {
	h := newHarness(t)
	commit := func(tv int32) *pb.TxnOffsetCommitResponse {
		r, err := h.c.TxnOffsetCommit(context.Background(), &pb.TxnOffsetCommitRequest{TransactionalId: "tx", GroupId: "g", ProducerId: 7,
			ProducerEpoch: 0, GenerationId: -1, TransactionVersion: tv, Offsets: []*pb.PartitionOffset{{Topic: "t", Partition: 0, Offset: 9, LeaderEpoch: -1}}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	wantCode(t, "v1 commit", commit(1).ErrorCode, pb.ErrorCode_NONE)
	wantCode(t, "v2 commit", commit(2).ErrorCode, pb.ErrorCode_NONE)
	wantCode(t, "unset commit", commit(0).ErrorCode, pb.ErrorCode_NONE)
	want := []string{"verify tx/__consumer_offsets", "tx/__consumer_offsets", "tx/__consumer_offsets"}
	if fmt.Sprint(h.txn.calls) != fmt.Sprint(want) {
		t.Fatalf("transaction coordinator calls %q, want %q", h.txn.calls, want)
	}
	h.txn.err = errs.New(pb.ErrorCode_INVALID_TXN_STATE, "not in the transaction")
	before := len(h.w.all())
	r := commit(1)
	if len(r.Partitions) != 1 || r.Partitions[0].ErrorCode != pb.ErrorCode_INVALID_TXN_STATE {
		t.Fatalf("unverified commit answered %v", r)
	}
	if len(h.w.all()) != before {
		t.Fatalf("an unverified commit was written")
	}
}

// TestOffsetCommitRecheckedAtAppend: a commit validated while its member
// was in the group, whose member then leaves before the commit is
// appended, is refused as the member's commit would be after it left
// (UNKNOWN_MEMBER_ID), and nothing of it reaches the log.
func TestOffsetCommitRecheckedAtAppend(t *testing.T) {
	hold := func(w *fakeWriter) (chan struct{}, chan struct{}) {
		started, held := make(chan struct{}, 8), make(chan struct{})
		w.mu.Lock()
		w.started, w.hold = started, held
		w.mu.Unlock()
		return started, held
	}
	commitAsync := func(c *Coordinator, member string, gen int32) <-chan *pb.OffsetCommitResponse {
		out := make(chan *pb.OffsetCommitResponse, 1)
		go func() {
			r, err := c.OffsetCommit(context.Background(), &pb.OffsetCommitRequest{GroupId: "g", MemberId: member, GenerationId: gen,
				Offsets: []*pb.PartitionOffset{{Topic: "t", Partition: 0, Offset: 5, LeaderEpoch: -1}}})
			if err != nil {
				r = &pb.OffsetCommitResponse{Partitions: []*pb.PartitionError{{ErrorCode: pb.ErrorCode_UNKNOWN_SERVER_ERROR, ErrorMessage: err.Error()}}}
			}
			out <- r
		}()
		return out
	}
	noCommitRecord := func(t *testing.T, w *fakeWriter) {
		for _, b := range w.all() {
			_, recs, err := record.Decode(b)
			if err != nil {
				continue
			}
			for _, r := range recs {
				if k, _ := decodeKey(r.Key); k.typ == keyOffsetCommit && r.Value != nil {
					t.Fatalf("the refused commit reached the log: %+v", k)
				}
			}
		}
	}

	t.Run("classic", func(t *testing.T) {
		h := newHarness(t)
		j := h.joinNow(joinReq("g", ""))
		wantCode(t, "sync", h.sync("g", j.MemberId, j.GenerationId, map[string]string{j.MemberId: "a"}).ErrorCode, pb.ErrorCode_NONE)
		started, held := hold(h.w)
		done := commitAsync(h.c, j.MemberId, j.GenerationId)
		<-started
		lr, err := h.c.LeaveGroup(context.Background(), &pb.LeaveGroupRequest{GroupId: "g", MemberId: j.MemberId})
		if err != nil || lr.ErrorCode != pb.ErrorCode_NONE {
			t.Fatalf("leave: %v %v", err, lr)
		}
		close(held)
		wantCode(t, "commit of a member that left meanwhile", recv(t, done).Partitions[0].ErrorCode, pb.ErrorCode_UNKNOWN_MEMBER_ID)
		if off, _ := h.fetch("g", "t", 0, false); off != -1 {
			t.Fatalf("offset %d committed", off)
		}
		noCommitRecord(t, h.w)
	})

	t.Run("consumer", func(t *testing.T) {
		h := newCGHarness(t)
		r := h.joinCG("g", "m", "t")
		wantCode(t, "join", r.ErrorCode, pb.ErrorCode_NONE)
		started, held := hold(h.w)
		done := commitAsync(h.c, "m", r.MemberEpoch)
		<-started
		left := make(chan *pb.ConsumerGroupHeartbeatResponse, 1)
		go func() {
			lr, _ := h.c.ConsumerGroupHeartbeat(context.Background(), &pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: "m", MemberEpoch: leaveEpoch, Version: 1}, nil)
			left <- lr
		}()
		<-started // the leave's write is under way
		close(held)
		if lr := recv(t, left); lr == nil || lr.ErrorCode != pb.ErrorCode_NONE {
			t.Fatalf("leave: %v", lr)
		}
		wantCode(t, "commit of a member that left meanwhile", recv(t, done).Partitions[0].ErrorCode, pb.ErrorCode_UNKNOWN_MEMBER_ID)
		noCommitRecord(t, h.w)
	})
}

// TestTxnOffsetCommitRecheckedAtAppend: as OffsetCommit, a transactional
// commit whose member leaves between its check and its append is refused
// (UNKNOWN_MEMBER_ID) with nothing written and nothing pending.
func TestTxnOffsetCommitRecheckedAtAppend(t *testing.T) {
	h := newHarness(t)
	j := h.joinNow(joinReq("g", ""))
	wantCode(t, "sync", h.sync("g", j.MemberId, j.GenerationId, map[string]string{j.MemberId: "a"}).ErrorCode, pb.ErrorCode_NONE)
	before := len(h.w.all())
	started, held := make(chan struct{}, 8), make(chan struct{})
	h.w.mu.Lock()
	h.w.started, h.w.hold = started, held
	h.w.mu.Unlock()
	done := make(chan *pb.TxnOffsetCommitResponse, 1)
	go func() {
		r, _ := h.c.TxnOffsetCommit(context.Background(), &pb.TxnOffsetCommitRequest{TransactionalId: "tx", GroupId: "g", ProducerId: 7,
			MemberId: j.MemberId, GenerationId: j.GenerationId, Offsets: []*pb.PartitionOffset{{Topic: "t", Partition: 0, Offset: 5, LeaderEpoch: -1}}})
		done <- r
	}()
	<-started
	lr, err := h.c.LeaveGroup(context.Background(), &pb.LeaveGroupRequest{GroupId: "g", MemberId: j.MemberId})
	if err != nil || lr.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("leave: %v %v", err, lr)
	}
	close(held)
	r := recv(t, done)
	if r == nil || r.Partitions[0].ErrorCode != pb.ErrorCode_UNKNOWN_MEMBER_ID {
		t.Fatalf("transactional commit of a member that left meanwhile: %v, want UNKNOWN_MEMBER_ID", r)
	}
	for _, b := range h.w.all()[before:] {
		if hd, err := record.ParseHeader(b); err == nil && hd.IsTransactional() {
			t.Fatal("the refused transactional commit reached the log")
		}
	}
	if _, code := h.fetch("g", "t", 0, true); code != pb.ErrorCode_NONE {
		t.Fatalf("require_stable fetch: %v, want nothing pending", code)
	}
}
