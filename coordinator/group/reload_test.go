package group_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/coordinator"
	"github.com/strand-io/strand/coordinator/group"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

type addCall struct {
	txnID     string
	pid       int64
	epoch     int16
	topic     string
	partition int32
}

// recordingAdder is a TxnAdder standing in for the transaction coordinator.
type recordingAdder struct {
	mu    sync.Mutex
	calls []addCall
	// silent, when set, makes the transaction coordinator answer
	// nothing: a call waits for its context to end (or silent to be
	// closed) and returns the context's error.
	silent chan struct{}
	// deadlines records, per call, whether its context had a deadline.
	deadlines []bool
}

func (a *recordingAdder) AddPartition(ctx context.Context, txnID string, pid int64, epoch int16, topic string, partition int32) error {
	_, hasDeadline := ctx.Deadline()
	a.mu.Lock()
	a.calls = append(a.calls, addCall{txnID, pid, epoch, topic, partition})
	a.deadlines = append(a.deadlines, hasDeadline)
	silent := a.silent
	a.mu.Unlock()
	if silent != nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-silent:
			return errors.New("released")
		}
	}
	return nil
}

func (a *recordingAdder) Verify(ctx context.Context, txnID string, pid int64, epoch int16, topic string, partition int32) error {
	return a.AddPartition(ctx, txnID, pid, epoch, topic, partition)
}

// rig is a real one-node server plus a group coordinator of the test's own
// (with a fake transaction coordinator) over the node's real
// __consumer_offsets log.
type rig struct {
	t    *testing.T
	n    *node.Node
	cfg  group.Config
	txn  *recordingAdder
	part *broker.Partition
}

func newRig(t *testing.T) *rig {
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) {
		cfg.GroupConfig.InitialRebalanceDelay = 0
		cfg.OffsetsTopic.Partitions = 3
	})
	r := &rig{t: t, n: n, txn: &recordingAdder{}}
	r.cfg = group.DefaultConfig(1)
	r.cfg.Topic = n.Locator.Topic(pb.CoordinatorType_GROUP)
	r.cfg.Logger = testutil.Logger()
	r.cfg.InitialRebalanceDelay = 0
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	co := n.Locator.Find(ctx, pb.CoordinatorType_GROUP, "tg") // creates __consumer_offsets
	if co.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("find coordinator: %v %s", co.ErrorCode, co.ErrorMessage)
	}
	key := storage.PartitionKey{Topic: r.cfg.Topic.Name, Partition: coordinator.PartitionFor("tg", r.cfg.Topic.Partitions)}
	wait.Eventually(t, 15*time.Second, "this node to lead the group's partition", func() bool {
		r.part = n.Parts.Get(key)
		return r.part != nil && r.part.Leadership().Role == broker.RoleLeader
	})
	return r
}

// start runs a coordinator that loads the partition from the log.
func (r *rig) start() *group.Coordinator {
	c := group.New(r.cfg, r.n.Repl, r.n.Locator, r.txn, clock.Real)
	c.Start()
	r.t.Cleanup(c.Stop)
	wait.Eventually(r.t, 15*time.Second, "the load", func() bool {
		resp, _ := c.OffsetFetch(context.Background(), &pb.OffsetFetchRequest{GroupId: "tg"})
		return resp.ErrorCode == pb.ErrorCode_NONE
	})
	return c
}

func (r *rig) fetch(c *group.Coordinator, part int32, stable bool) (int64, pb.ErrorCode) {
	r.t.Helper()
	resp, err := c.OffsetFetch(context.Background(), &pb.OffsetFetchRequest{GroupId: "tg", RequireStable: stable,
		Partitions: []*pb.TopicPartition{{Topic: "orders", Partition: part}}})
	if err != nil || resp.ErrorCode != pb.ErrorCode_NONE {
		r.t.Fatalf("fetch: %v %v", resp, err)
	}
	return resp.Partitions[0].Offset, resp.Partitions[0].ErrorCode
}

func (r *rig) expect(c *group.Coordinator, part int32, stableOff int64, stableCode pb.ErrorCode, plainOff int64) {
	r.t.Helper()
	if off, code := r.fetch(c, part, true); code != stableCode || (code == pb.ErrorCode_NONE && off != stableOff) {
		r.t.Fatalf("orders-%d require_stable: %d %v, want %d %v", part, off, code, stableOff, stableCode)
	}
	if off, code := r.fetch(c, part, false); code != pb.ErrorCode_NONE || off != plainOff {
		r.t.Fatalf("orders-%d: %d %v, want %d", part, off, code, plainOff)
	}
}

func txnCommit(t *testing.T, c *group.Coordinator, pid int64, epoch int32, part int32, off int64) {
	t.Helper()
	resp, err := c.TxnOffsetCommit(context.Background(), &pb.TxnOffsetCommitRequest{TransactionalId: "tx-1", GroupId: "tg", ProducerId: pid,
		ProducerEpoch: epoch, GenerationId: -1, Offsets: []*pb.PartitionOffset{{Topic: "orders", Partition: part, Offset: off, LeaderEpoch: -1}}})
	if err != nil || resp.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("TxnOffsetCommit: %v %v", resp, err)
	}
}

// TestTxnOffsetCommitSurvivesReload: transactional offsets are invisible
// until their COMMIT marker and dropped by ABORT, live and after the
// coordinator reloads the partition from its log (with real marker
// batches on the partition).
func TestTxnOffsetCommitSurvivesReload(t *testing.T) {
	r := newRig(t)
	c := r.start()
	ctx := context.Background()
	cr, _ := c.OffsetCommit(ctx, &pb.OffsetCommitRequest{GroupId: "tg", GenerationId: -1,
		Offsets: []*pb.PartitionOffset{{Topic: "orders", Partition: 0, Offset: 5}, {Topic: "orders", Partition: 1, Offset: 6}}})
	if cr.Partitions[0].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("commit: %v", cr)
	}
	const pidA, pidB = int64(4000), int64(4001)
	txnCommit(t, c, pidA, 0, 0, 50)
	txnCommit(t, c, pidB, 2, 1, 60)
	r.txn.mu.Lock()
	if len(r.txn.calls) != 2 || r.txn.calls[0] != (addCall{"tx-1", pidA, 0, "__consumer_offsets", r.part.Key.Partition}) {
		t.Fatalf("AddPartition calls %+v", r.txn.calls)
	}
	r.txn.mu.Unlock()
	r.expect(c, 0, 0, pb.ErrorCode_UNSTABLE_OFFSET_COMMIT, 5)
	r.expect(c, 1, 0, pb.ErrorCode_UNSTABLE_OFFSET_COMMIT, 6)
	// The log's producer state saw real transactional batches: both
	// transactions hold the partition's LSO.
	if n := len(r.part.Log.OngoingTxns()); n != 2 {
		t.Fatalf("%d open transactions on the partition, want 2", n)
	}

	// Restart: pending offsets come back pending.
	c.Stop()
	c = r.start()
	r.expect(c, 0, 0, pb.ErrorCode_UNSTABLE_OFFSET_COMMIT, 5)
	r.expect(c, 1, 0, pb.ErrorCode_UNSTABLE_OFFSET_COMMIT, 6)
	fr, _ := c.OffsetFetch(ctx, &pb.OffsetFetchRequest{GroupId: "tg", RequireStable: true})
	if len(fr.Partitions) != 2 || !strings.Contains(fr.Partitions[0].ErrorMessage, `producerId=4000 transactional.id="tx-1"`) {
		t.Fatalf("a reloaded pending commit names its transaction: %v", fr)
	}

	// Markers as the transaction coordinator writes them (epoch + 1):
	// COMMIT for A, ABORT for B, then a reload applies them.
	if _, err := r.n.Repl.WriteMarker(ctx, r.part.Key.Topic, r.part.Key.Partition, pidA, 1, 0, record.ControlCommit, 2, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := r.n.Repl.WriteMarker(ctx, r.part.Key.Topic, r.part.Key.Partition, pidB, 3, 0, record.ControlAbort, 2, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	c.Stop()
	c = r.start()
	r.expect(c, 0, 50, pb.ErrorCode_NONE, 50)
	r.expect(c, 1, 6, pb.ErrorCode_NONE, 6)

	// Live: the next transaction of A (epoch 1) and OnTxnMarker.
	txnCommit(t, c, pidA, 1, 0, 70)
	r.expect(c, 0, 0, pb.ErrorCode_UNSTABLE_OFFSET_COMMIT, 50)
	if _, err := r.n.Repl.WriteMarker(ctx, r.part.Key.Topic, r.part.Key.Partition, pidA, 2, 0, record.ControlCommit, 2, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	c.OnTxnMarker(r.part.Key.Partition, pidA, true)
	r.expect(c, 0, 70, pb.ErrorCode_NONE, 70)
	// The same outcome after one more reload.
	c.Stop()
	c = r.start()
	r.expect(c, 0, 70, pb.ErrorCode_NONE, 70)
	r.expect(c, 1, 6, pb.ErrorCode_NONE, 6)

	// A fenced epoch is refused by the log itself.
	resp, _ := c.TxnOffsetCommit(ctx, &pb.TxnOffsetCommitRequest{TransactionalId: "tx-1", GroupId: "tg", ProducerId: pidA, ProducerEpoch: 0,
		GenerationId: -1, Offsets: []*pb.PartitionOffset{{Topic: "orders", Partition: 0, Offset: 99}}})
	if resp.ErrorCode != pb.ErrorCode_INVALID_PRODUCER_EPOCH {
		t.Fatalf("old epoch: %v", resp)
	}
	r.expect(c, 0, 70, pb.ErrorCode_NONE, 70)
}

// TestGroupSurvivesReload: a stable group's membership and offsets come
// back after a reload, so members carry on with their generation.
func TestGroupSurvivesReload(t *testing.T) {
	r := newRig(t)
	r.cfg.GroupMinSessionTimeout = time.Second
	c := r.start()
	ctx := context.Background()
	j, _ := c.JoinGroup(ctx, &pb.JoinGroupRequest{GroupId: "tg", SessionTimeoutMs: 10000, RebalanceTimeoutMs: 10000, ProtocolType: "consumer",
		Protocols: []*pb.GroupProtocol{{Name: "range", Metadata: []byte("sub")}}})
	if j.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("join: %v", j)
	}
	s, _ := c.SyncGroup(ctx, &pb.SyncGroupRequest{GroupId: "tg", GenerationId: j.GenerationId, MemberId: j.MemberId,
		Assignments: []*pb.GroupAssignment{{MemberId: j.MemberId, Assignment: []byte("all")}}})
	if s.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("sync: %v", s)
	}
	cr, _ := c.OffsetCommit(ctx, &pb.OffsetCommitRequest{GroupId: "tg", GenerationId: j.GenerationId, MemberId: j.MemberId,
		Offsets: []*pb.PartitionOffset{{Topic: "orders", Partition: 2, Offset: 12}}})
	if cr.Partitions[0].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("commit: %v", cr)
	}
	c.Stop()
	c = r.start()
	hb, _ := c.Heartbeat(ctx, &pb.HeartbeatRequest{GroupId: "tg", GenerationId: j.GenerationId, MemberId: j.MemberId})
	if hb.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("heartbeat after reload: %v", hb)
	}
	s, _ = c.SyncGroup(ctx, &pb.SyncGroupRequest{GroupId: "tg", GenerationId: j.GenerationId, MemberId: j.MemberId})
	if s.ErrorCode != pb.ErrorCode_NONE || string(s.Assignment) != "all" {
		t.Fatalf("assignment after reload: %v", s)
	}
	if off, _ := r.fetch(c, 2, true); off != 12 {
		t.Fatalf("offset after reload %d", off)
	}
	d, _ := c.DescribeGroups(ctx, &pb.DescribeGroupsRequest{GroupIds: []string{"tg"}})
	if g := d.Groups[0]; g.State != "Stable" || g.GenerationId != j.GenerationId || len(g.Members) != 1 || g.ProtocolType != "consumer" {
		t.Fatalf("describe after reload: %v", g)
	}
}

// TestStaleShardWritesNothing: a coordinator's shard of a partition is
// bound to the leadership it was loaded at. One loaded under an epoch the
// partition is no longer led at (it was dropped for a newer leadership,
// whose load owns the partition now) must not write: its commit answers
// NOT_COORDINATOR and the log does not grow.
func TestStaleShardWritesNothing(t *testing.T) {
	r := newRig(t)
	c := group.New(r.cfg, r.n.Repl, r.n.Locator, r.txn, clock.Real)
	t.Cleanup(c.Stop)
	epoch := r.part.Leadership().LeaderEpoch
	c.BecameLeader(r.part, epoch+1) // a leadership the partition is not (or no longer) at
	wait.Eventually(t, 15*time.Second, "the load", func() bool {
		resp, _ := c.OffsetFetch(context.Background(), &pb.OffsetFetchRequest{GroupId: "tg"})
		return resp.ErrorCode == pb.ErrorCode_NONE
	})
	end := r.part.Log.LogEndOffset()
	resp, err := c.OffsetCommit(context.Background(), &pb.OffsetCommitRequest{GroupId: "tg", GenerationId: -1,
		Offsets: []*pb.PartitionOffset{{Topic: "orders", Partition: 0, Offset: 5, LeaderEpoch: -1}}})
	if err != nil || resp.Partitions[0].ErrorCode != pb.ErrorCode_NOT_COORDINATOR {
		t.Fatalf("commit through a stale shard: %v %v, want NOT_COORDINATOR", resp, err)
	}
	if got := r.part.Log.LogEndOffset(); got != end {
		t.Fatalf("the stale shard wrote: log end %d -> %d", end, got)
	}
}

// TestLoadWaitsForTheISR: a coordinator taking over an offsets partition
// whose log ends past its high watermark (a commit the previous leader
// wrote and never had acknowledged, which a follower elected next may not
// have) serves nothing from it: its groups answer
// COORDINATOR_LOAD_IN_PROGRESS until the HW reaches the log end, and then
// the commit is served.
func TestLoadWaitsForTheISR(t *testing.T) {
	r := newRig(t)
	c := r.start()
	ctx := context.Background()
	commit := func(off int64) {
		t.Helper()
		resp, err := c.OffsetCommit(ctx, &pb.OffsetCommitRequest{GroupId: "tg", GenerationId: -1,
			Offsets: []*pb.PartitionOffset{{Topic: "orders", Partition: 0, Offset: off, LeaderEpoch: -1}}})
		if err != nil || resp.Partitions[0].ErrorCode != pb.ErrorCode_NONE {
			t.Fatalf("commit %d: %v %v", off, resp, err)
		}
	}
	commit(7)
	acked := r.part.HighWatermark()
	commit(9)
	c.Stop()
	// The log as a new leader finds it: the commit of 9 above the HW.
	if !r.part.SetHighWatermark(acked, true) || r.part.HighWatermark() != acked {
		t.Fatalf("could not move the HW back to %d (log end %d)", acked, r.part.Log.LogEndOffset())
	}
	cfg := r.cfg
	said := &saidHandler{}
	cfg.Logger = slog.New(said)
	c2 := group.New(cfg, r.n.Repl, r.n.Locator, r.txn, clock.Real)
	t.Cleanup(c2.Stop)
	c2.BecameLeader(r.part, r.part.Leadership().LeaderEpoch)
	// Once it has read the whole log, it still does not serve the
	// unacknowledged tail (without the wait, the load would be done
	// and the fetch below answered 9).
	wait.Eventually(t, 15*time.Second, "the load to read the log", func() bool {
		return said.has("waiting for the ISR") || said.has("loaded groups")
	})
	resp, _ := c2.OffsetFetch(ctx, &pb.OffsetFetchRequest{GroupId: "tg", Partitions: []*pb.TopicPartition{{Topic: "orders", Partition: 0}}})
	if resp.ErrorCode != pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS {
		t.Fatalf("with a commit above the HW the coordinator answered %v, want COORDINATOR_LOAD_IN_PROGRESS", resp)
	}
	r.part.SetHighWatermark(r.part.Log.LogEndOffset(), false)
	wait.Eventually(t, 15*time.Second, "the load to finish once the ISR has the log", func() bool {
		resp, _ := c2.OffsetFetch(ctx, &pb.OffsetFetchRequest{GroupId: "tg"})
		return resp.ErrorCode == pb.ErrorCode_NONE
	})
	if off, code := r.fetch(c2, 0, false); code != pb.ErrorCode_NONE || off != 9 {
		t.Fatalf("after the load: %d %v, want 9", off, code)
	}
}

// saidHandler is a slog handler that remembers the messages logged.
type saidHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (h *saidHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *saidHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.msgs = append(h.msgs, r.Message)
	h.mu.Unlock()
	return nil
}
func (h *saidHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *saidHandler) WithGroup(string) slog.Handler      { return h }

func (h *saidHandler) has(prefix string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.msgs {
		if strings.HasPrefix(m, prefix) {
			return true
		}
	}
	return false
}
