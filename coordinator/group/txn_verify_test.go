package group_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/coordinator"
	"github.com/strand-io/strand/coordinator/group"
	"github.com/strand-io/strand/internal/planted"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/wait"
)

// partitionOf is the node's __consumer_offsets partition of group (this
// one node leads them all).
func (r *rig) partitionOf(groupID string) *broker.Partition {
	r.t.Helper()
	key := storage.PartitionKey{Topic: r.cfg.Topic.Name, Partition: coordinator.PartitionFor(groupID, r.cfg.Topic.Partitions)}
	p := r.n.Parts.Get(key)
	if p == nil {
		r.t.Fatalf("no replica of %v here", key)
	}
	return p
}

func openTxnOf(p *broker.Partition, pid int64) bool {
	for _, o := range p.Log.OngoingTxns() {
		if o.ProducerID == pid {
			return true
		}
	}
	return false
}

// TestTxnOffsetCommitOvertakenByItsAbort: a TxnOffsetCommit's partition
// of __consumer_offsets is verified with the transaction coordinator
// (answered yes); before the group coordinator appends the offsets, the
// transaction ends and its ABORT marker reaches the partition (as the
// transaction coordinator's WriteTxnMarkers does: the marker, then
// OnTxnMarker). The late write must be refused, with nothing written:
// INVALID_TXN_STATE under transaction version 1 (the marker at the
// producer's epoch), INVALID_PRODUCER_EPOCH under version 2 (the marker
// carries the bumped epoch), for a classic group's commit and for a
// member of a consumer group (KIP-848, checked at its member epoch) alike.
// The producer's next transaction commits there as usual. With the guard
// put back (the planted bug) the late write opens a transaction no marker
// will end: the partition's last stable offset stays behind it.
func TestTxnOffsetCommitOvertakenByItsAbort(t *testing.T) {
	r := newRig(t)
	c := r.start()
	ctx := context.Background()

	// A member of a consumer group, to commit at its member epoch.
	var hb *pb.ConsumerGroupHeartbeatResponse
	wait.Eventually(t, 15*time.Second, "the consumer group's partition loaded", func() bool {
		var err error
		hb, err = c.ConsumerGroupHeartbeat(ctx, &pb.ConsumerGroupHeartbeatRequest{GroupId: "cg", MemberId: "m1", MemberEpoch: 0,
			RebalanceTimeoutMs: 30_000, SubscribedTopicNames: &pb.TopicNames{Names: []string{"orders"}}, TopicPartitions: &pb.OwnedPartitions{}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return hb.ErrorCode != pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS
	})
	if hb.ErrorCode != pb.ErrorCode_NONE || hb.MemberEpoch <= 0 {
		t.Fatalf("ConsumerGroupHeartbeat: %v", hb)
	}

	// overtake, when set, runs once between the next write's verification
	// and its append.
	var mu sync.Mutex
	var overtake func()
	defer group.SetTxnVerifiedHookForTesting(func(topic string, _ int32) {
		mu.Lock()
		f := overtake
		overtake = nil
		mu.Unlock()
		if f != nil && topic == r.cfg.Topic.Name {
			f()
		}
	})()

	// run sends req with its transaction ended under it by a marker
	// (ABORT at markerEpoch, of transaction version txnVersion).
	run := func(t *testing.T, req *pb.TxnOffsetCommitRequest, markerEpoch int16) *pb.TxnOffsetCommitResponse {
		t.Helper()
		p := r.partitionOf(req.GroupId)
		end := int64(-1)
		mu.Lock()
		overtake = func() {
			if _, _, err := p.AppendMarkerVersion(req.ProducerId, markerEpoch, 0, record.ControlAbort, req.TransactionVersion); err != nil {
				t.Errorf("the abort marker: %v", err)
			}
			c.OnTxnMarker(p.Key.Partition, req.ProducerId, false)
			end = p.Log.LogEndOffset()
		}
		mu.Unlock()
		resp, err := c.TxnOffsetCommit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if end < 0 {
			t.Fatalf("the write was not verified (answered %v)", resp)
		}
		if resp.ErrorCode == pb.ErrorCode_NONE {
			// Written: the log moved on after the marker.
			return resp
		}
		if got := p.Log.LogEndOffset(); got != end {
			t.Fatalf("the refused write reached the log: its end moved from %d to %d", end, got)
		}
		if openTxnOf(p, req.ProducerId) {
			t.Fatalf("producer %d has a transaction open on %v after its abort", req.ProducerId, p.Key)
		}
		// Nothing pending: a stable fetch sees no unstable commit.
		f, _ := c.OffsetFetch(ctx, &pb.OffsetFetchRequest{GroupId: req.GroupId, RequireStable: true, MemberId: req.MemberId, MemberEpoch: req.GenerationId,
			Partitions: []*pb.TopicPartition{{Topic: "orders", Partition: 0}}})
		if f.ErrorCode != pb.ErrorCode_NONE || f.Partitions[0].ErrorCode != pb.ErrorCode_NONE || f.Partitions[0].Offset != -1 {
			t.Fatalf("after the refused write the group fetches %v", f)
		}
		return resp
	}
	commit := func(groupID, member string, memberEpoch int32, pid int64, epoch int16, tv int32) *pb.TxnOffsetCommitRequest {
		return &pb.TxnOffsetCommitRequest{TransactionalId: "tx-late", GroupId: groupID, MemberId: member, GenerationId: memberEpoch,
			ProducerId: pid, ProducerEpoch: int32(epoch), TransactionVersion: tv,
			Offsets: []*pb.PartitionOffset{{Topic: "orders", Partition: 0, Offset: 42, LeaderEpoch: -1}}}
	}

	for _, tc := range []struct {
		name        string
		req         *pb.TxnOffsetCommitRequest
		markerEpoch int16
		want        pb.ErrorCode
	}{
		{"classic-v1", commit("tg", "", -1, 5000, 3, 1), 3, pb.ErrorCode_INVALID_TXN_STATE},
		{"consumer-group-v1", commit("cg", "m1", hb.MemberEpoch, 5001, 0, 1), 0, pb.ErrorCode_INVALID_TXN_STATE},
		{"classic-v2", commit("tg", "", -1, 5002, 7, 2), 8, pb.ErrorCode_INVALID_PRODUCER_EPOCH},
		{"consumer-group-v2", commit("cg", "m1", hb.MemberEpoch, 5003, 1, 2), 2, pb.ErrorCode_INVALID_PRODUCER_EPOCH},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if resp := run(t, tc.req, tc.markerEpoch); resp.ErrorCode != tc.want || resp.Partitions[0].ErrorCode != tc.want {
				t.Fatalf("the late write answered %v, want %v", resp, tc.want)
			}
		})
	}

	// The producer's next transaction (version 1: the same epoch) is
	// verified afresh and written, pending until its marker.
	next := commit("tg", "", -1, 5000, 3, 1)
	resp, err := c.TxnOffsetCommit(ctx, next)
	if err != nil || resp.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("the next transaction's commit: %v %v", resp, err)
	}
	if p := r.partitionOf("tg"); !openTxnOf(p, 5000) {
		t.Fatalf("the next transaction's commit opened no transaction on %v", p.Key)
	}
	r.expect(c, 0, 0, pb.ErrorCode_UNSTABLE_OFFSET_COMMIT, -1)

	t.Run("planted", func(t *testing.T) {
		defer planted.Set(planted.TxnVerificationUnguarded)()
		req := commit("cg", "m1", hb.MemberEpoch, 5004, 0, 1)
		if resp := run(t, req, 0); resp.ErrorCode != pb.ErrorCode_NONE {
			t.Fatalf("with the guard put back the late write answered %v; want it written", resp)
		}
		p := r.partitionOf("cg")
		if !openTxnOf(p, req.ProducerId) {
			t.Fatalf("with the guard put back, no transaction of %d is left open on %v", req.ProducerId, p.Key)
		}
	})
}

// TestTxnOffsetCommitVerifyDeadline: the group coordinator's call to the
// transaction coordinator for a TxnOffsetCommit has a deadline
// (TxnVerifyTimeout) even when the request's context has none: a
// transaction coordinator that does not answer gets the commit answered
// COORDINATOR_NOT_AVAILABLE (retriable), with nothing written, instead
// of holding it for good.
func TestTxnOffsetCommitVerifyDeadline(t *testing.T) {
	r := newRig(t)
	r.cfg.TxnVerifyTimeout = 100 * time.Millisecond
	c := r.start()
	silent := make(chan struct{})
	r.txn.mu.Lock()
	r.txn.silent = silent
	r.txn.mu.Unlock()
	defer close(silent)
	p := r.partitionOf("tg")
	end := p.Log.LogEndOffset()
	type answer struct {
		resp *pb.TxnOffsetCommitResponse
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := c.TxnOffsetCommit(context.Background(), &pb.TxnOffsetCommitRequest{TransactionalId: "tx-silent", GroupId: "tg",
			ProducerId: 6000, ProducerEpoch: 0, GenerationId: -1, TransactionVersion: 2,
			Offsets: []*pb.PartitionOffset{{Topic: "orders", Partition: 0, Offset: 7, LeaderEpoch: -1}}})
		done <- answer{resp, err}
	}()
	var a answer
	select {
	case a = <-done:
	case <-time.After(30 * time.Second): // only a guard against the hang
		t.Fatal("no answer while the transaction coordinator was silent: the call to it has no deadline")
	}
	if a.err != nil || a.resp.ErrorCode != pb.ErrorCode_COORDINATOR_NOT_AVAILABLE {
		t.Fatalf("the commit: %v %v, want COORDINATOR_NOT_AVAILABLE", a.resp, a.err)
	}
	r.txn.mu.Lock()
	deadlines := append([]bool(nil), r.txn.deadlines...)
	r.txn.mu.Unlock()
	if len(deadlines) != 1 || !deadlines[0] {
		t.Fatalf("calls to the transaction coordinator with a deadline: %v, want one, with", deadlines)
	}
	if got := p.Log.LogEndOffset(); got != end || openTxnOf(p, 6000) {
		t.Fatalf("the unanswered commit wrote: log end %d (was %d), transaction open %v", got, end, openTxnOf(p, 6000))
	}
}
