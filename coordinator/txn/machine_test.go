package txn

import (
	"fmt"
	"strings"
	"testing"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/planted"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// The state machine's table: every state (and an unknown id, a Dead one and
// a state with a transition in flight) against every request, under
// transaction versions 1 and 2. The expectations are Kafka 4.5's
// TransactionCoordinator (prepareInitProducerIdTransit,
// handleAddPartitionsToTransaction, handleVerifyPartitionsInTransaction,
// endTransaction with its version 2 retry rules, endTransactionWithTV1,
// abortTimedOutTransactions, the marker completion) and
// TransactionMetadata (the prepare* transitions, VALID_PREVIOUS_STATES),
// except where a comment names a Strand refinement.
//
// Every fixture is producer id 100 at epoch 5 (last epoch 4), transaction
// timeout 1000 ms, started at time 0; Ongoing and Prepare* hold partition
// t-0. Relative epochs: "cur" is 5, "retry" 4 (Kafka's "Retry": the epoch
// before an EndTxn's bump), "stale" 3, "newer" 6.
//
// An outcome reads:
//
//	State@E[+markers][ next]  a transition written at epoch E (then markers;
//	                          next: it records the next producer id)
//	→ P/E                     the answer's producer id and epoch
//	→ CODE                    the answer's error (after the write, if any)
//	CODE                      refused, nothing written
//	busy                      CONCURRENT_TRANSACTIONS: in flight, wait and retry
//	need-pid                  the driver must allocate a producer id first
//	ok                        answered NONE, nothing written
//	-                         nothing to do (the coordinator's own requests)

var tableStates = []string{"unknown", "Dead", "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "PrepareEpochFence", "pending"}

func fixture(state string) *Metadata {
	if state == "unknown" {
		return nil
	}
	m := newMetadata("tx", 100, 1000, 0)
	m.ProducerEpoch, m.LastProducerEpoch, m.StartTimeMs = 5, 4, 0
	switch state {
	case "pending":
		m.State = Ongoing
		m.pending = m.base(Ongoing, 0)
	default:
		s, ok := ParseState(state)
		if !ok {
			panic(state)
		}
		m.State = s
	}
	if m.State == Ongoing || m.State.IsPrepare() || m.State == PrepareEpochFence {
		m.Partitions[TopicPartition{"t", 0}] = true
	}
	if m.State == Empty || m.State.IsComplete() {
		m.StartTimeMs = -1
	}
	return m
}

// describe renders a decision as the table writes outcomes.
func describe(d Decision) string {
	switch {
	case d.NeedProducerID:
		return "need-pid"
	case d.Busy:
		return "busy"
	}
	var b strings.Builder
	if t := d.Write; t != nil {
		fmt.Fprintf(&b, "%s@%d", t.state, t.epoch)
		if d.SendMarkers {
			b.WriteString("+markers")
		}
		if t.nextPID >= 0 {
			b.WriteString(" next")
		}
		switch {
		case d.Err != nil:
			fmt.Fprintf(&b, " → %s", errs.CodeOf(d.Err))
		case d.ProducerID != 0 || d.Epoch != 0:
			fmt.Fprintf(&b, " → %d/%d", d.ProducerID, d.Epoch)
		}
		return b.String()
	}
	switch {
	case d.Err != nil:
		return errs.CodeOf(d.Err).String()
	case d.ProducerID != 0 || d.Epoch != 0:
		return fmt.Sprintf("ok %d/%d", d.ProducerID, d.Epoch)
	}
	return "-"
}

func TestDecideTable(t *testing.T) {
	tp0, tp1 := []TopicPartition{{"t", 0}}, []TopicPartition{{"t", 1}}
	init := func(pid int64, epoch int16) Request {
		return Request{Kind: KindInitProducerId, ProducerID: pid, Epoch: epoch, TimeoutMs: 1000}
	}
	add := func(kind Kind, pid int64, epoch int16, tps []TopicPartition) Request {
		return Request{Kind: kind, ProducerID: pid, Epoch: epoch, Partitions: tps}
	}
	end := func(tv int16, pid int64, epoch int16, commit bool) Request {
		return Request{Kind: KindEndTxn, TxnVersion: tv, ProducerID: pid, Epoch: epoch, Commit: commit}
	}
	const PF, ITS, IPM, TA = "PRODUCER_FENCED", "INVALID_TXN_STATE", "INVALID_PRODUCER_ID_MAPPING", "TRANSACTION_ABORTABLE"
	fenceAbort := "PrepareAbort@6+markers → CONCURRENT_TRANSACTIONS"
	rows := []struct {
		name string
		req  Request
		// one outcome per tableStates entry:
		// unknown, Dead, Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, PrepareEpochFence, pending
		want []string
	}{
		// InitProducerId. A new producer (no expected id) bumps the epoch
		// (the last epoch becomes -1); with a transaction open it fences:
		// the abort is written at the bumped epoch, PREPARE_EPOCH_FENCE is
		// only the transition in flight, and the caller retries.
		{"init new producer", init(-1, -1),
			[]string{"need-pid", "need-pid", "Empty@6 → 100/6", fenceAbort, "busy", "busy", "Empty@6 → 100/6", "Empty@6 → 100/6", "busy", "busy"}},
		// KIP-360: the producer names its current id and epoch.
		{"init expected current", init(100, 5),
			[]string{"need-pid", "need-pid", "Empty@6 → 100/6", fenceAbort, "busy", "busy", "Empty@6 → 100/6", "Empty@6 → 100/6", "busy", "busy"}},
		// A retry of an InitProducerId whose answer was lost: the epoch it
		// was answered with is now the last epoch; the same epoch again.
		{"init expected last (retry)", init(100, 4),
			[]string{"need-pid", "need-pid", "Empty@5 → 100/5", fenceAbort, "busy", "busy", "Empty@5 → 100/5", "Empty@5 → 100/5", "busy", "busy"}},
		// Kafka checks an expected epoch only when it bumps, so a stale one
		// still fences an open transaction.
		{"init expected stale", init(100, 3),
			[]string{"need-pid", "need-pid", PF, fenceAbort, "busy", "busy", PF, PF, "busy", "busy"}},
		{"init expected other id", init(999, 5),
			[]string{"need-pid", "need-pid", PF, PF, PF, PF, PF, PF, PF, "busy"}},

		// AddPartitionsToTxn (a partition leader under version 2, the
		// client under version 1).
		{"add new partition", add(KindAddPartitions, 100, 5, tp1),
			[]string{IPM, IPM, "Ongoing@5", "Ongoing@5", "busy", "busy", "Ongoing@5", "Ongoing@5", "busy", "busy"}},
		{"add partition already in", add(KindAddPartitions, 100, 5, tp0),
			[]string{IPM, IPM, "Ongoing@5", "-", "busy", "busy", "Ongoing@5", "Ongoing@5", "busy", "busy"}},
		{"add stale epoch", add(KindAddPartitions, 100, 4, tp0),
			[]string{IPM, IPM, PF, PF, PF, PF, PF, PF, PF, PF}},
		{"add newer epoch", add(KindAddPartitions, 100, 6, tp0),
			[]string{IPM, IPM, PF, PF, PF, PF, PF, PF, PF, PF}},
		{"add other producer id", add(KindAddPartitions, 999, 5, tp0),
			[]string{IPM, IPM, IPM, IPM, IPM, IPM, IPM, IPM, IPM, IPM}},
		// Verify-only never writes. As Kafka, a partition the transaction
		// does not hold (none open, or not added) is TRANSACTION_ABORTABLE.
		{"verify partition in", add(KindVerifyPartitions, 100, 5, tp0),
			[]string{IPM, IPM, TA, "-", "busy", "busy", TA, TA, "busy", "busy"}},
		{"verify partition not in", add(KindVerifyPartitions, 100, 5, tp1),
			[]string{IPM, IPM, TA, TA, "busy", "busy", TA, TA, "busy", "busy"}},

		// EndTxn, transaction version 2: the epoch is bumped at every end.
		// Kafka's table for Empty and Complete* (trunk, 4.5: an empty
		// transaction may be committed as well as aborted):
		//   Empty:          abort retry PF, current EB; commit retry PF, current EB
		//   CompleteAbort:  abort retry NONE, current EB; commit retry ITS, current EB
		//   CompleteCommit: abort retry ITS, current EB; commit retry NONE, current EB
		// Prepare*: a retry of the same end waits for the markers (Kafka:
		// CONCURRENT_TRANSACTIONS), the other end is ITS. Strand: the
		// current epoch in Prepare* (a new end racing the previous one's
		// markers) waits too, where Kafka answers PRODUCER_FENCED.
		{"end v2 commit current", end(2, 100, 5, true),
			[]string{IPM, IPM, "PrepareCommit@6+markers → 100/6", "PrepareCommit@6+markers → 100/6", "busy", "busy",
				"PrepareCommit@6+markers → 100/6", "PrepareCommit@6+markers → 100/6", "busy", "busy"}},
		{"end v2 commit retry", end(2, 100, 4, true),
			[]string{IPM, IPM, PF, PF, "busy", ITS, "ok 100/5", ITS, PF, "busy"}},
		{"end v2 abort current", end(2, 100, 5, false),
			[]string{IPM, IPM, "PrepareAbort@6+markers → 100/6", "PrepareAbort@6+markers → 100/6", "busy", "busy",
				"PrepareAbort@6+markers → 100/6", "PrepareAbort@6+markers → 100/6", "busy", "busy"}},
		{"end v2 abort retry", end(2, 100, 4, false),
			[]string{IPM, IPM, PF, PF, ITS, "busy", ITS, "ok 100/5", PF, "busy"}},
		{"end v2 commit stale", end(2, 100, 3, true),
			[]string{IPM, IPM, PF, PF, PF, PF, PF, PF, PF, "busy"}},
		// Kafka: PRODUCER_FENCED "even in the cases where the epoch is
		// higher".
		{"end v2 abort newer", end(2, 100, 6, false),
			[]string{IPM, IPM, PF, PF, PF, PF, PF, PF, PF, "busy"}},
		{"end v2 other producer id", end(2, 999, 5, true),
			[]string{IPM, IPM, IPM, IPM, IPM, IPM, IPM, IPM, IPM, IPM}},

		// EndTxn, transaction version 1: no bump; only the current epoch.
		{"end v1 commit current", end(1, 100, 5, true),
			[]string{IPM, IPM, ITS, "PrepareCommit@5+markers → 100/5", "busy", ITS, "ok 100/5", ITS, ITS, "busy"}},
		{"end v1 abort current", end(1, 100, 5, false),
			[]string{IPM, IPM, ITS, "PrepareAbort@5+markers → 100/5", ITS, "busy", ITS, "ok 100/5", ITS, "busy"}},
		{"end v1 commit previous epoch", end(1, 100, 4, true),
			[]string{IPM, IPM, PF, PF, PF, PF, PF, PF, PF, PF}},
		{"end v1 other producer id", end(1, 999, 5, false),
			[]string{IPM, IPM, IPM, IPM, IPM, IPM, IPM, IPM, IPM, IPM}},

		// The coordinator's own requests. A timed-out transaction is
		// aborted like a fence: once bumped, markers follow. A loaded
		// PREPARE_EPOCH_FENCE (an old Strand log) is carried on by the scan.
		{"timeout due", Request{Kind: KindTimeout, Now: 5000},
			[]string{"-", "-", "-", "PrepareAbort@6+markers", "-", "-", "-", "-", "PrepareAbort@5+markers", "-"}},
		{"timeout not due", Request{Kind: KindTimeout, Now: 1000},
			[]string{"-", "-", "-", "-", "-", "-", "-", "-", "PrepareAbort@5+markers", "-"}},
		{"markers done", Request{Kind: KindMarkersDone, ProducerID: 100, Epoch: 5},
			[]string{"-", "-", "-", "-", "CompleteCommit@5", "CompleteAbort@5", "-", "-", "-", "-"}},
		{"markers done, other epoch", Request{Kind: KindMarkersDone, ProducerID: 100, Epoch: 4},
			[]string{"-", "-", "-", "-", "-", "-", "-", "-", "-", "-"}},
		{"expire idle", Request{Kind: KindExpire, ExpirationMs: 100, Now: 5000},
			[]string{"-", "-", "Dead@5", "-", "-", "-", "Dead@5", "Dead@5", "-", "-"}},
		{"resume fence", Request{Kind: KindResumeFence},
			[]string{"-", "-", "-", "-", "-", "-", "-", "-", "PrepareAbort@5+markers", "-"}},
	}
	for _, row := range rows {
		if len(row.want) != len(tableStates) {
			t.Fatalf("%s: %d outcomes for %d states", row.name, len(row.want), len(tableStates))
		}
		for i, st := range tableStates {
			m := fixture(st)
			if st == "Dead" {
				m.State = Dead
			}
			r := row.req
			r.NewProducerID = -1
			d := Decide(m, r)
			got := describe(d)
			if got != row.want[i] {
				t.Errorf("%-28s in %-17s: got %q, want %q (%v)", row.name, st, got, row.want[i], d.Err)
			}
			// Whatever Decide writes is a legal transition from the state
			// (the metadata would refuse it otherwise), and Decide never
			// changes the metadata it reads.
			if m != nil && d.Write != nil {
				before := *m
				if !CanTransition(m.State, d.Write.state) && !(m.State == Empty && d.Write.state == Empty) {
					t.Errorf("%s in %s: writes illegal %s → %s", row.name, st, m.State, d.Write.state)
				}
				if m.State != before.State || m.ProducerEpoch != before.ProducerEpoch {
					t.Errorf("%s in %s: Decide changed the metadata", row.name, st)
				}
			}
		}
	}
}

// sim drives the state machine the way Coordinator does, without I/O:
// transitions are applied at once, producer ids come from a counter, and
// markers are "written" by recording their epoch.
type sim struct {
	t       *testing.T
	m       *Metadata
	nextPID int64
	markers []int16 // the epochs of markers written, in order
	now     int64
}

func newSim(t *testing.T, firstEpoch int16) *sim {
	s := &sim{t: t, nextPID: 1000}
	r := Request{Kind: KindInitProducerId, ProducerID: -1, TimeoutMs: 60000}
	if d := Decide(nil, r); !d.NeedProducerID {
		t.Fatalf("init on an unknown id: %s", describe(d))
	}
	s.m = newMetadata("tx", 100, 60000, 0)
	s.m.ProducerEpoch = firstEpoch - 1
	return s
}

// do decides r, allocating producer ids as asked, applies the write and
// completes any markers; it returns the decision.
func (s *sim) do(r Request) Decision {
	s.t.Helper()
	s.now++
	r.Now, r.NewProducerID = s.now, -1
	d := Decide(s.m, r)
	if d.NeedProducerID {
		r.NewProducerID = s.nextPID
		s.nextPID++
		d = Decide(s.m, r)
	}
	if d.NeedProducerID {
		s.t.Fatalf("%s asked for a producer id twice", r.Kind)
	}
	if d.Write != nil {
		if !s.m.begin(d.Write) {
			s.t.Fatalf("%s: %s → %s refused", r.Kind, s.m.State, d.Write.state)
		}
		s.m.apply()
		if d.SendMarkers && s.m.State.IsPrepare() {
			s.markers = append(s.markers, s.m.ProducerEpoch)
			done := s.do(Request{Kind: KindMarkersDone, ProducerID: s.m.ProducerID, Epoch: s.m.ProducerEpoch})
			if done.Write == nil {
				s.t.Fatalf("markers done did not complete: %s", describe(done))
			}
		}
	}
	return d
}

// TestEpochExhaustionRotates walks one transactional id across the end of
// its epochs through every kind of bump: re-init, a commit (version 2's
// bump per EndTxn), a fence and a timeout abort. No producer is ever handed
// an epoch above 32766, no marker carries one above 32767, a version 2
// marker is always above its transaction's epoch, and the producer id
// changes exactly when the epochs run out.
func TestEpochExhaustionRotates(t *testing.T) {
	type step struct {
		name string
		run  func(s *sim, pid int64, epoch int16) (int64, int16)
	}
	commit := step{"commit", func(s *sim, pid int64, epoch int16) (int64, int16) {
		s.do(Request{Kind: KindAddPartitions, ProducerID: pid, Epoch: epoch, Partitions: []TopicPartition{{"t", 0}}})
		d := s.do(Request{Kind: KindEndTxn, TxnVersion: 2, ProducerID: pid, Epoch: epoch, Commit: true})
		if d.Err != nil {
			s.t.Fatalf("commit at %d/%d: %v", pid, epoch, d.Err)
		}
		if got := s.markers[len(s.markers)-1]; got <= epoch {
			s.t.Fatalf("commit marker at epoch %d, not above the data's %d", got, epoch)
		}
		return d.ProducerID, d.Epoch
	}}
	reinit := step{"re-init", func(s *sim, pid int64, epoch int16) (int64, int16) {
		d := s.do(Request{Kind: KindInitProducerId, ProducerID: pid, Epoch: epoch, TimeoutMs: 60000})
		if d.Err != nil {
			s.t.Fatalf("re-init at %d/%d: %v", pid, epoch, d.Err)
		}
		return d.ProducerID, d.Epoch
	}}
	fence := step{"fence", func(s *sim, pid int64, epoch int16) (int64, int16) {
		s.do(Request{Kind: KindAddPartitions, ProducerID: pid, Epoch: epoch, Partitions: []TopicPartition{{"t", 0}}})
		d := s.do(Request{Kind: KindInitProducerId, ProducerID: -1, TimeoutMs: 60000})
		if errs.CodeOf(d.Err).String() != "CONCURRENT_TRANSACTIONS" {
			s.t.Fatalf("fence at %d/%d answered %s", pid, epoch, describe(d))
		}
		// The fenced producer is told so, whatever it asks.
		for _, commit := range []bool{true, false} {
			if old := s.do(Request{Kind: KindEndTxn, TxnVersion: 2, ProducerID: pid, Epoch: epoch, Commit: commit}); errs.CodeOf(old.Err).String() != "PRODUCER_FENCED" {
				s.t.Fatalf("the fenced producer %d/%d ending its transaction: %s", pid, epoch, describe(old))
			}
		}
		d = s.do(Request{Kind: KindInitProducerId, ProducerID: -1, TimeoutMs: 60000})
		if d.Err != nil {
			s.t.Fatalf("retried init after the fence: %v", d.Err)
		}
		return d.ProducerID, d.Epoch
	}}
	timeout := step{"timeout", func(s *sim, pid int64, epoch int16) (int64, int16) {
		s.do(Request{Kind: KindAddPartitions, ProducerID: pid, Epoch: epoch, Partitions: []TopicPartition{{"t", 0}}})
		s.now += 120000
		if d := s.do(Request{Kind: KindTimeout}); d.Write == nil {
			s.t.Fatalf("timeout at %d/%d did nothing", pid, epoch)
		}
		if d := s.do(Request{Kind: KindEndTxn, TxnVersion: 2, ProducerID: pid, Epoch: epoch, Commit: true}); errs.CodeOf(d.Err).String() != "TRANSACTION_TIMED_OUT" {
			s.t.Fatalf("commit after the timeout abort: %s", describe(d))
		}
		d := s.do(Request{Kind: KindEndTxn, TxnVersion: 2, ProducerID: pid, Epoch: epoch, Commit: false})
		if d.Err != nil {
			s.t.Fatalf("abort after the timeout abort: %v", d.Err)
		}
		return d.ProducerID, d.Epoch
	}}
	for _, st := range []step{commit, reinit, fence, timeout} {
		for _, first := range []int16{32760, 32763, 32764, 32765, 32766} {
			t.Run(fmt.Sprintf("%s from %d", st.name, first), func(t *testing.T) {
				s := newSim(t, first)
				d := s.do(Request{Kind: KindInitProducerId, ProducerID: -1, TimeoutMs: 60000})
				pid, epoch := d.ProducerID, d.Epoch
				rotations := 0
				for i := 0; i < 8; i++ {
					npid, nepoch := st.run(s, pid, epoch)
					if nepoch < 0 || nepoch > MaxEpoch-1 {
						t.Fatalf("step %d: handed epoch %d (from %d/%d)", i, nepoch, pid, epoch)
					}
					if npid != pid {
						rotations++
						if nepoch != 0 {
							t.Fatalf("step %d: rotated to %d at epoch %d, want 0", i, npid, nepoch)
						}
						if s.m.PrevProducerID != pid {
							t.Fatalf("step %d: the previous producer id is %d, want %d", i, s.m.PrevProducerID, pid)
						}
					} else if nepoch <= epoch {
						t.Fatalf("step %d: epoch %d → %d did not move forward", i, epoch, nepoch)
					}
					pid, epoch = npid, nepoch
				}
				for _, e := range s.markers {
					if e < 0 {
						t.Fatalf("a marker at epoch %d", e)
					}
				}
				if rotations != 1 {
					t.Fatalf("%d rotations in 8 steps from epoch %d, want 1", rotations, first)
				}
			})
		}
	}
}

// TestFenceAtLastEpochLikeKafka: a fence at epoch 32766 is Kafka's
// prepareFenceProducerEpoch, then prepareProducerIdRotation. The abort is
// written at 32767 on the same producer id with no next producer id and no
// last epoch, and completes there; the fencing producer's retried
// InitProducerId writes Empty for a new producer id at epoch 0 (no last
// epoch: it named none) and is answered that. The fenced producer is told
// PRODUCER_FENCED whatever it asks, its KIP-360 InitProducerId included,
// before the rotation and after; it is never handed 32767.
func TestFenceAtLastEpochLikeKafka(t *testing.T) {
	s := newSim(t, 32766)
	d := s.do(Request{Kind: KindInitProducerId, ProducerID: -1, TimeoutMs: 60000})
	pid, epoch := d.ProducerID, d.Epoch
	if epoch != 32766 {
		t.Fatalf("first epoch %d", epoch)
	}
	s.do(Request{Kind: KindAddPartitions, ProducerID: pid, Epoch: epoch, Partitions: []TopicPartition{{"t", 0}}})
	var written []string
	record := func(d Decision) {
		if d.Write != nil {
			written = append(written, fmt.Sprintf("%s(%d/%d next %d last %d)", d.Write.state, d.Write.producerID, d.Write.epoch, d.Write.nextPID, d.Write.lastEpoch))
		}
	}
	fence := s.do(Request{Kind: KindInitProducerId, ProducerID: -1, TimeoutMs: 60000})
	record(fence)
	if errs.CodeOf(fence.Err) != pb.ErrorCode_CONCURRENT_TRANSACTIONS {
		t.Fatalf("the fence: %s", describe(fence))
	}
	if s.m.State != CompleteAbort || s.m.ProducerID != pid || s.m.ProducerEpoch != MaxEpoch {
		t.Fatalf("after the fence's markers: %s %d/%d, want CompleteAbort %d/%d", s.m.State, s.m.ProducerID, s.m.ProducerEpoch, pid, MaxEpoch)
	}
	written = append(written, fmt.Sprintf("%s(%d/%d next %d last %d)", s.m.State, s.m.ProducerID, s.m.ProducerEpoch, s.m.NextProducerID, s.m.LastProducerEpoch))
	// endV1 is what a version 1 EndTxn of the fenced producer gets: once
	// the id moved on, its producer id is no longer the id's (Kafka).
	zombie := func(when string, endV1 pb.ErrorCode) {
		for _, c := range []struct {
			r    Request
			want pb.ErrorCode
		}{
			{Request{Kind: KindInitProducerId, ProducerID: pid, Epoch: epoch, TimeoutMs: 60000}, pb.ErrorCode_PRODUCER_FENCED},
			{Request{Kind: KindAddPartitions, ProducerID: pid, Epoch: epoch, Partitions: []TopicPartition{{"t", 1}}}, pb.ErrorCode_PRODUCER_FENCED},
			{Request{Kind: KindEndTxn, TxnVersion: 2, ProducerID: pid, Epoch: epoch, Commit: false}, pb.ErrorCode_PRODUCER_FENCED},
			{Request{Kind: KindEndTxn, TxnVersion: 1, ProducerID: pid, Epoch: epoch, Commit: true}, endV1},
		} {
			r := c.r
			r.Now, r.NewProducerID = s.now, 2000
			if got := Decide(s.m, r); errs.CodeOf(got.Err) != c.want {
				t.Fatalf("%s, the fenced producer's %s (TV%d): %s, want %s", when, r.Kind, r.TxnVersion, describe(got), c.want)
			}
		}
	}
	zombie("before the rotation", pb.ErrorCode_PRODUCER_FENCED)
	retry := s.do(Request{Kind: KindInitProducerId, ProducerID: -1, TimeoutMs: 60000})
	record(retry)
	if retry.Err != nil || retry.ProducerID == pid || retry.Epoch != 0 {
		t.Fatalf("the fencing producer's retry: %s, want a new producer id at epoch 0", describe(retry))
	}
	want := fmt.Sprintf("PrepareAbort(%[1]d/32767 next -1 last -1) CompleteAbort(%[1]d/32767 next -1 last -1) Empty(%[2]d/0 next -1 last -1)", pid, retry.ProducerID)
	if got := strings.Join(written, " "); got != want {
		t.Fatalf("written:\n %s\nwant\n %s", got, want)
	}
	if s.m.PrevProducerID != pid {
		t.Fatalf("previous producer id %d, want %d", s.m.PrevProducerID, pid)
	}
	zombie("after the rotation", pb.ErrorCode_INVALID_PRODUCER_ID_MAPPING)

	// A transactional id whose fence Strand recorded before, with the
	// fenced epoch as the last epoch: the fenced producer is still told.
	old := newSim(t, 5)
	d = old.do(Request{Kind: KindInitProducerId, ProducerID: -1, TimeoutMs: 60000})
	old.do(Request{Kind: KindAddPartitions, ProducerID: d.ProducerID, Epoch: d.Epoch, Partitions: []TopicPartition{{"t", 0}}})
	old.do(Request{Kind: KindInitProducerId, ProducerID: -1, TimeoutMs: 60000})
	old.m.LastProducerEpoch = d.Epoch
	for _, r := range []Request{
		{Kind: KindInitProducerId, ProducerID: d.ProducerID, Epoch: d.Epoch, TimeoutMs: 60000},
		{Kind: KindEndTxn, TxnVersion: 2, ProducerID: d.ProducerID, Epoch: d.Epoch},
	} {
		if got := Decide(old.m, r); errs.CodeOf(got.Err) != pb.ErrorCode_PRODUCER_FENCED {
			t.Fatalf("the fenced producer's %s, as recorded before: %s", r.Kind, describe(got))
		}
	}
}

// TestFenceAtExhaustedEpochPlanted puts the unchecked fence back: the
// retried InitProducerId after a fence at 32766 hands out a wrapped epoch,
// and the walk above catches it.
func TestFenceAtExhaustedEpochPlanted(t *testing.T) {
	defer planted.Set(planted.FenceEpochOverflow)()
	s := newSim(t, 32766)
	d := s.do(Request{Kind: KindInitProducerId, ProducerID: -1, TimeoutMs: 60000})
	s.do(Request{Kind: KindAddPartitions, ProducerID: d.ProducerID, Epoch: d.Epoch, Partitions: []TopicPartition{{"t", 0}}})
	s.do(Request{Kind: KindInitProducerId, ProducerID: -1, TimeoutMs: 60000})
	d = s.do(Request{Kind: KindInitProducerId, ProducerID: -1, TimeoutMs: 60000})
	if d.Epoch >= 0 {
		t.Fatalf("with the bug put back the retried init answered %d/%d; the planted bug no longer reproduces", d.ProducerID, d.Epoch)
	}
	t.Logf("with the fence's check removed, the producer is handed epoch %d", d.Epoch)
}

// TestEndTxnRetryAfterRotation: the answer to the EndTxn that rotated the
// producer id is lost; its retry (old id, last epoch) gets the same answer,
// during the markers and after, never INVALID_PRODUCER_ID_MAPPING.
func TestEndTxnRetryAfterRotation(t *testing.T) {
	run := func(t *testing.T) (during, after, abortAfter string) {
		s := newSim(t, 32766)
		d := s.do(Request{Kind: KindInitProducerId, ProducerID: -1, TimeoutMs: 60000})
		s.do(Request{Kind: KindAddPartitions, ProducerID: d.ProducerID, Epoch: d.Epoch, Partitions: []TopicPartition{{"t", 0}}})
		end := Request{Kind: KindEndTxn, TxnVersion: 2, ProducerID: 100, Epoch: 32766, Commit: true, NewProducerID: 1000, Now: 1}
		first := Decide(s.m, end)
		if first.Err != nil || first.ProducerID != 1000 || first.Epoch != 0 || first.Write.epoch != MaxEpoch {
			t.Fatalf("the rotating commit: %s (prepare at %d)", describe(first), first.Write.epoch)
		}
		s.m.begin(first.Write)
		s.m.apply()
		retry := end
		retry.NewProducerID = -1
		during = describe(Decide(s.m, retry))
		done := Decide(s.m, Request{Kind: KindMarkersDone, ProducerID: 100, Epoch: MaxEpoch})
		s.m.begin(done.Write)
		s.m.apply()
		if s.m.ProducerID != 1000 || s.m.ProducerEpoch != 0 || s.m.PrevProducerID != 100 {
			t.Fatalf("after the markers: %d/%d prev %d", s.m.ProducerID, s.m.ProducerEpoch, s.m.PrevProducerID)
		}
		after = describe(Decide(s.m, retry))
		abortAfter = describe(Decide(s.m, Request{Kind: KindEndTxn, TxnVersion: 2, ProducerID: 100, Epoch: 32766}))
		return during, after, abortAfter
	}
	during, after, abortAfter := run(t)
	if during != "busy" || after != "ok 1000/0" || abortAfter != "INVALID_TXN_STATE" {
		t.Fatalf("commit retried during the markers %q, after them %q, an abort retried after them %q; want busy, ok 1000/0, INVALID_TXN_STATE", during, after, abortAfter)
	}
	t.Run("planted", func(t *testing.T) {
		defer planted.Set(planted.EndTxnRetryAfterRotationRefused)()
		_, after, _ := run(t)
		if after != "INVALID_PRODUCER_ID_MAPPING" {
			t.Fatalf("with the rotation forgetting the last epoch the retry got %q; the planted bug no longer reproduces", after)
		}
	})
}

// TestRotatedProducerDuringMarkers: the EndTxn at the end of the epochs
// answered the next producer id at epoch 0; that producer's next
// transaction reaches the coordinator (its first AddPartitions, or an abort
// before anything was sent) while the markers of the rotating one are still
// being written. It waits for them (busy), then goes on under the new id,
// never INVALID_PRODUCER_ID_MAPPING, which the producer could only die of.
func TestRotatedProducerDuringMarkers(t *testing.T) {
	s := newSim(t, 32766)
	d := s.do(Request{Kind: KindInitProducerId, ProducerID: -1, TimeoutMs: 60000})
	s.do(Request{Kind: KindAddPartitions, ProducerID: d.ProducerID, Epoch: d.Epoch, Partitions: []TopicPartition{{"t", 0}}})
	first := Decide(s.m, Request{Kind: KindEndTxn, TxnVersion: 2, ProducerID: d.ProducerID, Epoch: d.Epoch, Commit: true, NewProducerID: 1000, Now: 1})
	if first.Err != nil || first.ProducerID != 1000 || first.Epoch != 0 {
		t.Fatalf("the rotating commit: %s", describe(first))
	}
	s.m.begin(first.Write)
	s.m.apply()
	add := Request{Kind: KindAddPartitions, TxnVersion: 2, ProducerID: 1000, Epoch: 0, Partitions: []TopicPartition{{"t", 1}}, NewProducerID: -1, Now: 2}
	abort := Request{Kind: KindEndTxn, TxnVersion: 2, ProducerID: 1000, Epoch: 0, NewProducerID: -1, Now: 2}
	verify := add
	verify.Kind = KindVerifyPartitions
	for name, r := range map[string]Request{"add": add, "verify": verify, "empty abort": abort} {
		if got := describe(Decide(s.m, r)); got != "busy" {
			t.Errorf("%s from the next producer id during the markers: %s, want busy", name, got)
		}
	}
	// Any other producer id, or another epoch of the next one, is still refused.
	other := add
	other.ProducerID = 999
	if got := describe(Decide(s.m, other)); got != "INVALID_PRODUCER_ID_MAPPING" {
		t.Errorf("another producer id during the markers: %s", got)
	}
	done := Decide(s.m, Request{Kind: KindMarkersDone, ProducerID: d.ProducerID, Epoch: MaxEpoch})
	s.m.begin(done.Write)
	s.m.apply()
	if got := describe(Decide(s.m, abort)); got != "PrepareAbort@1+markers → 1000/1" {
		t.Errorf("the empty abort after the markers: %s", got)
	}
	if got := describe(Decide(s.m, add)); !strings.HasPrefix(got, "Ongoing@0") {
		t.Errorf("the add after the markers: %s", got)
	}
}

// TestEmptyAbort: a producer that aborts before any of its records reached
// a broker (no partition in the transaction) gets NONE and a bumped epoch,
// from Empty and from both Complete states; with the bug put back it gets
// INVALID_TXN_STATE.
func TestEmptyAbort(t *testing.T) {
	for _, st := range []string{"Empty", "CompleteCommit", "CompleteAbort"} {
		m := fixture(st)
		d := Decide(m, Request{Kind: KindEndTxn, TxnVersion: 2, ProducerID: 100, Epoch: 5, NewProducerID: -1, Now: 7})
		if got := describe(d); got != "PrepareAbort@6+markers → 100/6" {
			t.Fatalf("empty abort in %s: %s", st, got)
		}
		if len(d.Write.partitions) != 0 || d.Write.startTimeMs != 7 {
			t.Fatalf("empty abort in %s writes partitions %v start %d", st, d.Write.partitions, d.Write.startTimeMs)
		}
		func() {
			defer planted.Set(planted.EmptyAbortRefused)()
			if got := describe(Decide(m, Request{Kind: KindEndTxn, TxnVersion: 2, ProducerID: 100, Epoch: 5, NewProducerID: -1})); got != "INVALID_TXN_STATE" {
				t.Fatalf("with the bug put back, empty abort in %s: %s", st, got)
			}
		}()
	}
}

// TestFenceKeepsPrepareEpochFenceInMemory: the fence writes PREPARE_ABORT at
// the bumped epoch, never a PREPARE_EPOCH_FENCE record (worked example 3's log
// has none); the planted bug writes one.
func TestFenceKeepsPrepareEpochFenceInMemory(t *testing.T) {
	m := fixture("Ongoing")
	r := Request{Kind: KindInitProducerId, ProducerID: -1, TimeoutMs: 1000, NewProducerID: -1}
	if d := Decide(m, r); d.Write == nil || d.Write.state != PrepareAbort || d.Write.epoch != 6 {
		t.Fatalf("the fence writes %s", describe(d))
	}
	defer planted.Set(planted.FenceWritesPrepareEpochFence)()
	if d := Decide(m, r); d.Write == nil || d.Write.state != PrepareEpochFence {
		t.Fatalf("with the bug put back the fence writes %s", describe(d))
	}
}

// TestTransactionVersionOfMarkers: the markers of a transaction follow the
// epoch rule of the EndTxn that ends it. A version 1 end writes PREPARE_*
// at version 1 (markers at the producer's unbumped epoch) even on an id
// whose metadata is at version 2 (InitProducerId and the gRPC SDK default
// to 2); a version 2 end writes version 2 (the bumped epoch). The add that
// starts a transaction gives it its version, and a later add of another
// version does not change it.
func TestTransactionVersionOfMarkers(t *testing.T) {
	tp := []TopicPartition{{"t", 0}}
	for _, tc := range []struct {
		startTV, laterTV, endTV int16
		ongoingTV, prepareTV    int16
		epoch                   int16
	}{
		{startTV: 1, laterTV: 2, endTV: 1, ongoingTV: 1, prepareTV: 1, epoch: 5},
		{startTV: 2, laterTV: 1, endTV: 2, ongoingTV: 2, prepareTV: 2, epoch: 6},
		// A version 1 producer's transaction that a version 2 add started
		// (a partition leader not told the producer's version).
		{startTV: 2, laterTV: 2, endTV: 1, ongoingTV: 2, prepareTV: 1, epoch: 5},
	} {
		name := fmt.Sprintf("start%d-end%d", tc.startTV, tc.endTV)
		t.Run(name, func(t *testing.T) {
			m := fixture("CompleteCommit") // TxnVersion 2, epoch 5
			step := func(r Request) Decision {
				t.Helper()
				r.ProducerID, r.Epoch, r.NewProducerID = 100, 5, -1
				d := Decide(m, r)
				if d.Err != nil || d.Write == nil {
					t.Fatalf("%v: %s", r.Kind, describe(d))
				}
				if !m.begin(d.Write) {
					t.Fatalf("%v: illegal transition to %s", r.Kind, d.Write.state)
				}
				m.apply()
				return d
			}
			step(Request{Kind: KindAddPartitions, TxnVersion: tc.startTV, Partitions: tp})
			step(Request{Kind: KindAddPartitions, TxnVersion: tc.laterTV, Partitions: []TopicPartition{{"t", 1}}})
			if m.TxnVersion != tc.ongoingTV {
				t.Fatalf("open transaction at version %d, want %d (the version of the add that started it)", m.TxnVersion, tc.ongoingTV)
			}
			d := step(Request{Kind: KindEndTxn, TxnVersion: tc.endTV, Commit: true})
			if m.State != PrepareCommit || m.TxnVersion != tc.prepareTV || m.ProducerEpoch != tc.epoch || d.Epoch != tc.epoch {
				t.Fatalf("after EndTxn v%d: %s at version %d epoch %d (answered %d); want PrepareCommit at version %d epoch %d",
					tc.endTV, m.State, m.TxnVersion, m.ProducerEpoch, d.Epoch, tc.prepareTV, tc.epoch)
			}
		})
	}
}

// TestTransactionVersionPersisted: the transaction log keeps each
// transaction's version, so a coordinator that loads a version 1
// transaction (say, in PREPARE_COMMIT) writes its markers by version 1's
// rule; a record written before the version was kept loads as version 2.
func TestTransactionVersionPersisted(t *testing.T) {
	m := fixture("Ongoing")
	for _, v := range []int16{1, 2} {
		tr := m.base(PrepareCommit, 1)
		tr.txnVersion = v
		if got := fromValue("tx", tr.value()).TxnVersion; got != v {
			t.Fatalf("version %d loaded as %d", v, got)
		}
	}
	old := m.base(PrepareCommit, 1).value()
	old.ClientTransactionVersion = 0
	if got := fromValue("tx", old).TxnVersion; got != 2 {
		t.Fatalf("a record without a version loaded as version %d, want 2", got)
	}
}
