package group

import (
	"context"
	"fmt"
	"testing"

	"github.com/strand-io/strand/internal/planted"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// txnFixture is a group brought to one state, with a static member
// ("pod") of the current generation.
type txnFixture struct {
	member string // with no group, or an Empty one: a member id it does not know
	gen    int32
}

// txnStates builds a fresh group in each state a TxnOffsetCommit can meet.
var txnStates = []struct {
	name  string
	build func(h *harness, g string) txnFixture
}{
	{"no group", func(h *harness, g string) txnFixture { return txnFixture{member: "gone", gen: 1} }},
	{"Empty", func(h *harness, g string) txnFixture {
		st := h.stableStatic(g, "pod")
		r, _ := h.c.LeaveGroup(context.Background(), &pb.LeaveGroupRequest{GroupId: g, MemberId: st.MemberId, GroupInstanceId: "pod"})
		wantCode(h.t, "leave", r.ErrorCode, pb.ErrorCode_NONE)
		if h.state(g) != Empty {
			h.t.Fatalf("state %v, want Empty", h.state(g))
		}
		return txnFixture{member: st.MemberId, gen: st.GenerationId + 1}
	}},
	{"PreparingRebalance", func(h *harness, g string) txnFixture {
		st := h.stableStatic(g, "pod")
		_, ch := h.join(joinReq(g, "")) // a newcomer; the static member has not rejoined yet
		pending(h.t, ch)
		if h.state(g) != PreparingRebalance {
			h.t.Fatalf("state %v, want PreparingRebalance", h.state(g))
		}
		return txnFixture{member: st.MemberId, gen: st.GenerationId}
	}},
	{"CompletingRebalance", func(h *harness, g string) txnFixture {
		r := h.joinNow(staticJoinReq(g, "", "pod"))
		if h.state(g) != CompletingRebalance {
			h.t.Fatalf("state %v, want CompletingRebalance", h.state(g))
		}
		return txnFixture{member: r.MemberId, gen: r.GenerationId}
	}},
	{"Stable", func(h *harness, g string) txnFixture {
		st := h.stableStatic(g, "pod")
		return txnFixture{member: st.MemberId, gen: st.GenerationId}
	}},
}

// txnShapes are the kinds of TxnOffsetCommit a producer can send.
var txnShapes = []struct {
	name string
	req  func(f txnFixture) (memberID, instanceID string, gen int32)
}{
	{"simple: generation -1, no member", func(f txnFixture) (string, string, int32) { return "", "", -1 }},
	{"member of the generation", func(f txnFixture) (string, string, int32) { return f.member, "pod", f.gen }},
	{"member of the generation, no instance id", func(f txnFixture) (string, string, int32) { return f.member, "", f.gen }},
	{"member of an older generation", func(f txnFixture) (string, string, int32) { return f.member, "pod", f.gen - 1 }},
	{"unknown member", func(f txnFixture) (string, string, int32) { return "ghost", "", f.gen }},
	{"instance id of another member id", func(f txnFixture) (string, string, int32) { return "ghost", "pod", f.gen }},
	{"generation without a member id", func(f txnFixture) (string, string, int32) { return "", "", f.gen }},
	{"member id with generation -1", func(f txnFixture) (string, string, int32) { return "ghost", "", -1 }},
}

const (
	ok      = pb.ErrorCode_NONE
	unknown = pb.ErrorCode_UNKNOWN_MEMBER_ID
	illegal = pb.ErrorCode_ILLEGAL_GENERATION
	fenced  = pb.ErrorCode_FENCED_INSTANCE_ID
	rebal   = pb.ErrorCode_REBALANCE_IN_PROGRESS
)

// kafkaTxnAnswers is what Kafka's classic group coordinator answers
// (validateOffsetCommit with isTransactional), row per shape, column per
// state (no group, Empty, PreparingRebalance, CompletingRebalance, Stable).
// A group that does not exist answers ILLEGAL_GENERATION to any
// generation but a negative one, whatever the member fields (Kafka's
// validateTransactionalOffsetCommit).
var kafkaTxnAnswers = [][]pb.ErrorCode{
	{ok, ok, ok, ok, ok},
	{illegal, unknown, ok, ok, ok},
	{illegal, unknown, ok, ok, ok},
	{illegal, unknown, illegal, illegal, illegal},
	{illegal, unknown, unknown, unknown, unknown},
	{illegal, unknown, fenced, fenced, fenced},
	{illegal, unknown, unknown, unknown, unknown},
	{ok, ok, unknown, unknown, unknown},
}

// txnAnswers runs every shape against a fresh group in every state.
func txnAnswers(t *testing.T) [][]pb.ErrorCode {
	h := newHarness(t)
	out := make([][]pb.ErrorCode, len(txnShapes))
	for i, shape := range txnShapes {
		out[i] = make([]pb.ErrorCode, len(txnStates))
		for j, st := range txnStates {
			g := fmt.Sprintf("g-%d-%d", i, j)
			f := st.build(h, g)
			member, instance, gen := shape.req(f)
			r, err := h.c.TxnOffsetCommit(context.Background(), &pb.TxnOffsetCommitRequest{TransactionalId: "tx", GroupId: g, ProducerId: int64(100 + i), ProducerEpoch: 0,
				MemberId: member, GroupInstanceId: instance, GenerationId: gen, Offsets: []*pb.PartitionOffset{{Topic: "t", Offset: 1, LeaderEpoch: -1}}})
			if err != nil {
				t.Fatal(err)
			}
			if r.ErrorCode != r.Partitions[0].ErrorCode {
				t.Fatalf("%s / %s: top-level %v, partition %v", shape.name, st.name, r.ErrorCode, r.Partitions[0].ErrorCode)
			}
			out[i][j] = r.ErrorCode
		}
	}
	return out
}

func compareTxnAnswers(t *testing.T, got, want [][]pb.ErrorCode) (diffs []string) {
	for i := range want {
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				diffs = append(diffs, fmt.Sprintf("%s in state %s: got %v, want %v", txnShapes[i].name, txnStates[j].name, got[i][j], want[i][j]))
			}
		}
	}
	return diffs
}

// TestTxnOffsetCommitAnswersByState: TxnOffsetCommit answers what Kafka
// answers in every group state, for every kind of request; in particular a
// member of the current generation may commit while the group is
// CompletingRebalance (where OffsetCommit answers REBALANCE_IN_PROGRESS).
func TestTxnOffsetCommitAnswersByState(t *testing.T) {
	for _, d := range compareTxnAnswers(t, txnAnswers(t), kafkaTxnAnswers) {
		t.Error(d)
	}

	t.Run("planted refusal while completing", func(t *testing.T) {
		defer planted.Set(planted.TxnOffsetCommitRefusedWhileCompleting)()
		want := cloneAnswers(kafkaTxnAnswers)
		want[1][3], want[2][3] = rebal, rebal
		for _, d := range compareTxnAnswers(t, txnAnswers(t), want) {
			t.Error(d)
		}
	})
	t.Run("planted member rules unlike Kafka", func(t *testing.T) {
		defer planted.Set(planted.TxnOffsetCommitMemberRulesUnlikeKafka)()
		// Strand's answers before the fix.
		want := [][]pb.ErrorCode{
			{ok, ok, ok, ok, ok},
			{unknown, unknown, ok, rebal, ok},
			{unknown, unknown, ok, rebal, ok},
			{unknown, unknown, illegal, illegal, illegal},
			{unknown, unknown, unknown, unknown, unknown},
			{unknown, unknown, unknown, unknown, unknown},
			{illegal, ok, ok, ok, ok},
			{unknown, unknown, unknown, unknown, unknown},
		}
		for _, d := range compareTxnAnswers(t, txnAnswers(t), want) {
			t.Error(d)
		}
	})
}

func cloneAnswers(a [][]pb.ErrorCode) [][]pb.ErrorCode {
	out := make([][]pb.ErrorCode, len(a))
	for i := range a {
		out[i] = append([]pb.ErrorCode(nil), a[i]...)
	}
	return out
}

// TestTxnOffsetCommitDeadGroup: a coordinator that lost the group's
// partition answers NOT_COORDINATOR; a Dead group (which only a dropped
// shard holds) answers COORDINATOR_NOT_AVAILABLE, as in Kafka.
func TestTxnOffsetCommitDeadGroup(t *testing.T) {
	h := newHarness(t)
	st := h.stableStatic("g", "pod")
	p := h.c.partitionOf("g")
	s := h.c.shards[p]
	h.c.StoppedLeading(p)
	r, _ := h.c.TxnOffsetCommit(context.Background(), &pb.TxnOffsetCommitRequest{TransactionalId: "tx", GroupId: "g", ProducerId: 1,
		MemberId: st.MemberId, GroupInstanceId: "pod", GenerationId: st.GenerationId, Offsets: []*pb.PartitionOffset{{Topic: "t", Offset: 1}}})
	wantCode(t, "after the shard is dropped", r.ErrorCode, pb.ErrorCode_NOT_COORDINATOR)
	s.mu.Lock()
	g := s.groups["g"]
	s.mu.Unlock()
	if g.state != Dead {
		t.Fatalf("dropped group is %v", g.state)
	}
	for _, gen := range []int32{-1, st.GenerationId} {
		err := checkTxnCommit(g, &pb.TxnOffsetCommitRequest{GroupId: "g", MemberId: st.MemberId, GroupInstanceId: "pod", GenerationId: gen})
		if code, _ := splitErr(err); code != pb.ErrorCode_COORDINATOR_NOT_AVAILABLE {
			t.Fatalf("Dead group, generation %d: %v", gen, err)
		}
	}
	t.Run("planted", func(t *testing.T) {
		defer planted.Set(planted.TxnOffsetCommitMemberRulesUnlikeKafka)()
		err := checkTxnCommit(g, &pb.TxnOffsetCommitRequest{GroupId: "g", MemberId: st.MemberId, GroupInstanceId: "pod", GenerationId: st.GenerationId})
		if code, _ := splitErr(err); code != pb.ErrorCode_UNKNOWN_MEMBER_ID {
			t.Fatalf("Dead group with the old rules: %v", err)
		}
	})
}
