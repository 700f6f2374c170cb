package group

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/coordinator"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// fakeWriter stands in for the log: it keeps every batch (built exactly as
// the real writer builds them) and hands out offsets in order.
type fakeWriter struct {
	mu      sync.Mutex
	next    int64
	batches [][]byte
	fail    error
	hold    chan struct{} // when set, writes wait for it to close
	started chan struct{} // receives one value per write that began
	seqs    map[int64]producerSeq
}

// producerSeq is a producer's epoch and next sequence in the fake log.
type producerSeq struct {
	epoch int16
	next  int32
}

func (f *fakeWriter) write(ctx context.Context, s *shard, recs []record.Record, txn *txnProducer, recheck func() error) (int64, error) {
	f.mu.Lock()
	hold, started := f.hold, f.started
	f.mu.Unlock()
	if started != nil {
		started <- struct{}{}
	}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return -1, ctx.Err()
		}
	}
	if recheck != nil {
		// As the real writer: checked under the shard lock, then appended.
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := recheck(); err != nil {
			return -1, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return -1, f.fail
	}
	opts := record.BatchOptions{BaseOffset: f.next, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, PartitionLeaderEpoch: 0}
	if txn != nil {
		// Sequences as the real writer numbers them: from 0 at each epoch.
		if f.seqs == nil {
			f.seqs = map[int64]producerSeq{}
		}
		ps := f.seqs[txn.pid]
		if ps.epoch != txn.epoch {
			ps = producerSeq{epoch: txn.epoch}
		}
		opts.ProducerID, opts.ProducerEpoch, opts.Transactional, opts.BaseSequence = txn.pid, txn.epoch, true, ps.next
		ps.next += int32(len(recs))
		f.seqs[txn.pid] = ps
	}
	b, err := record.Build(opts, recs)
	if err != nil {
		return -1, err
	}
	first := f.next
	f.next += int64(len(recs))
	f.batches = append(f.batches, b)
	return first, nil
}

// startTxnVerification: the fake log keeps no verifications, so the
// transaction coordinator is always asked (the real log's guard is tested
// against a real partition: txn_verify_test.go).
func (f *fakeWriter) startTxnVerification(s *shard, txn *txnProducer, epochBump bool) (bool, error) {
	return true, nil
}

func (f *fakeWriter) dropTxnVerification(s *shard, txn *txnProducer) {}

// marker appends a control batch as the transaction coordinator would.
func (f *fakeWriter) marker(pid int64, epoch int16, typ record.ControlType) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := record.BuildControlBatch(pid, epoch, typ, 0, 0)
	record.SetBaseOffset(b, f.next)
	f.next++
	f.batches = append(f.batches, b)
}

func (f *fakeWriter) all() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.batches...)
}

// fakeAdder is a TxnAdder that records calls and answers err.
type fakeAdder struct {
	mu    sync.Mutex
	calls []string
	err   error
}

func (a *fakeAdder) AddPartition(ctx context.Context, transactionalID string, pid int64, epoch int16, topic string, partition int32) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, transactionalID+"/"+topic)
	return a.err
}

func (a *fakeAdder) Verify(ctx context.Context, transactionalID string, pid int64, epoch int16, topic string, partition int32) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, "verify "+transactionalID+"/"+topic)
	return a.err
}

// errorRecorder is a slog handler that keeps error records: an illegal
// state transition logs one, and every test fails on it.
type errorRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (h *errorRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (h *errorRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.msgs = append(h.msgs, r.Message)
	h.mu.Unlock()
	return nil
}
func (h *errorRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *errorRecorder) WithGroup(string) slog.Handler      { return h }

type harness struct {
	t   *testing.T
	c   *Coordinator
	clk *clock.Fake
	w   *fakeWriter
	txn *fakeAdder
}

func testConfig() Config {
	cfg := DefaultConfig(1)
	cfg.Topic = coordinator.InternalTopic{Name: "__consumer_offsets", Partitions: 4}
	cfg.GroupMinSessionTimeout = time.Second
	cfg.InitialRebalanceDelay = 0
	return cfg
}

// newHarness is a coordinator with a fake clock and log, leading (and
// having loaded) every partition; nothing runs in the background.
func newHarness(t *testing.T, mutate ...func(*Config)) *harness {
	cfg := testConfig()
	for _, m := range mutate {
		m(&cfg)
	}
	rec := &errorRecorder{}
	cfg.Logger = slog.New(rec)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	h := &harness{t: t, clk: clk, w: &fakeWriter{next: 100}, txn: &fakeAdder{}}
	h.c = New(cfg, nil, nil, h.txn, clk)
	h.c.w = h.w
	for p := int32(0); p < cfg.Topic.Partitions; p++ {
		s := newShard(p, nil, 0)
		s.status = active
		h.c.shards[p] = s
	}
	t.Cleanup(func() {
		h.c.Stop()
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, m := range rec.msgs {
			t.Errorf("coordinator logged an error: %s", m)
		}
	})
	return h
}

// advance moves the clock and runs the deadline sweep.
func (h *harness) advance(d time.Duration) {
	h.clk.Advance(d)
	h.c.sweep()
}

func (h *harness) state(groupID string) State {
	s := h.c.shards[h.c.partitionOf(groupID)]
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[groupID]
	if g == nil {
		return Dead
	}
	return g.state
}

func joinReq(groupID, memberID string, protocols ...string) *pb.JoinGroupRequest {
	if len(protocols) == 0 {
		protocols = []string{"range"}
	}
	r := &pb.JoinGroupRequest{GroupId: groupID, MemberId: memberID, SessionTimeoutMs: 10_000, RebalanceTimeoutMs: 30_000, ProtocolType: "consumer", ClientId: "c"}
	for _, p := range protocols {
		r.Protocols = append(r.Protocols, &pb.GroupProtocol{Name: p, Metadata: []byte(memberID + "/" + p)})
	}
	return r
}

// join starts a JoinGroup; the answer is either now or on the channel.
func (h *harness) join(req *pb.JoinGroupRequest) (*pb.JoinGroupResponse, <-chan *pb.JoinGroupResponse) {
	return h.c.join(context.Background(), req)
}

// joinNow expects JoinGroup to answer without waiting for anyone.
func (h *harness) joinNow(req *pb.JoinGroupRequest) *pb.JoinGroupResponse {
	h.t.Helper()
	r, ch := h.c.join(context.Background(), req)
	if r != nil {
		return r
	}
	return recv(h.t, ch)
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		var zero T
		t.Fatal("no answer within 5s")
		return zero
	}
}

func pending[T any](t *testing.T, ch <-chan T) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("answered too early: %v", v)
	default:
	}
}

// syncAll runs SyncGroup for the leader (with assignments) and returns each
// member's answer.
func (h *harness) sync(groupID, memberID string, gen int32, assign map[string]string) *pb.SyncGroupResponse {
	h.t.Helper()
	req := &pb.SyncGroupRequest{GroupId: groupID, MemberId: memberID, GenerationId: gen}
	for m, a := range assign {
		req.Assignments = append(req.Assignments, &pb.GroupAssignment{MemberId: m, Assignment: []byte(a)})
	}
	resp, err := h.c.SyncGroup(context.Background(), req)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}

func (h *harness) heartbeat(groupID, memberID string, gen int32) pb.ErrorCode {
	h.t.Helper()
	r, err := h.c.Heartbeat(context.Background(), &pb.HeartbeatRequest{GroupId: groupID, MemberId: memberID, GenerationId: gen})
	if err != nil {
		h.t.Fatal(err)
	}
	return r.ErrorCode
}

func (h *harness) commit(groupID, memberID string, gen int32, topic string, part int32, off int64) pb.ErrorCode {
	h.t.Helper()
	r, err := h.c.OffsetCommit(context.Background(), &pb.OffsetCommitRequest{GroupId: groupID, MemberId: memberID, GenerationId: gen,
		Offsets: []*pb.PartitionOffset{{Topic: topic, Partition: part, Offset: off, LeaderEpoch: -1}}})
	if err != nil {
		h.t.Fatal(err)
	}
	return r.Partitions[0].ErrorCode
}

func (h *harness) fetch(groupID, topic string, part int32, stable bool) (int64, pb.ErrorCode) {
	h.t.Helper()
	r, err := h.c.OffsetFetch(context.Background(), &pb.OffsetFetchRequest{GroupId: groupID, RequireStable: stable,
		Partitions: []*pb.TopicPartition{{Topic: topic, Partition: part}}})
	if err != nil {
		h.t.Fatal(err)
	}
	if r.ErrorCode != pb.ErrorCode_NONE {
		return -1, r.ErrorCode
	}
	return r.Partitions[0].Offset, r.Partitions[0].ErrorCode
}

func wantCode(t *testing.T, what string, got, want pb.ErrorCode) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func errContains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }

var errBoom = errors.New("boom")

// syncAsync starts a SyncGroup and returns where its answer arrives.
func (h *harness) syncAsync(groupID, memberID string, gen int32, assign map[string]string) <-chan *pb.SyncGroupResponse {
	req := &pb.SyncGroupRequest{GroupId: groupID, MemberId: memberID, GenerationId: gen}
	for m, a := range assign {
		req.Assignments = append(req.Assignments, &pb.GroupAssignment{MemberId: m, Assignment: []byte(a)})
	}
	out := make(chan *pb.SyncGroupResponse, 1)
	go func() {
		r, err := h.c.SyncGroup(context.Background(), req)
		if err != nil {
			r = &pb.SyncGroupResponse{ErrorCode: pb.ErrorCode_UNKNOWN_SERVER_ERROR, ErrorMessage: err.Error()}
		}
		out <- r
	}()
	return out
}
