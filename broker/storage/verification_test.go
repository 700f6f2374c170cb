package storage

import (
	"context"
	"testing"
	"time"

	"github.com/strand-io/strand/internal/planted"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// verifiedAppend appends s as a client's produce does, presenting guard.
func (f *fixture) verifiedAppend(s batchSpec, guard *VerificationGuard) (AppendResult, error) {
	f.t.Helper()
	res, err := f.l.AppendVerifiedDeferred(buildBatch(f.t, s), 0, guard)
	if err == nil && res.FlushDeferred {
		_, err = f.l.WaitDurable(context.Background(), res.LastOffset, nil)
	}
	return res, err
}

// coordinatorAppend appends s as the group coordinator's transactional
// offset write does (OriginCoordinator), presenting guard.
func (f *fixture) coordinatorAppend(s batchSpec, guard *VerificationGuard) (AppendResult, error) {
	f.t.Helper()
	res, err := f.l.AppendCoordinatorDeferred(buildBatch(f.t, s), 0, guard)
	if err == nil && res.FlushDeferred {
		_, err = f.l.WaitDurable(context.Background(), res.LastOffset, nil)
	}
	return res, err
}

// startVerification starts a verification, failing the test on an error.
func (f *fixture) startVerification(pid int64, seq int32, epoch int16, epochBump bool) *VerificationGuard {
	f.t.Helper()
	g, err := f.l.StartTxnVerification(pid, seq, epoch, epochBump)
	if err != nil {
		f.t.Fatalf("StartTxnVerification(%d, %d, %d): %v", pid, seq, epoch, err)
	}
	return g
}

// lso is the last stable offset with the high watermark at the log end:
// the first unstable offset, or the log end when nothing is unstable.
func (f *fixture) lso() int64 {
	f.t.Helper()
	end := f.l.LogEndOffset()
	f.l.OnHighWatermarkUpdated(end)
	if fu, ok := f.l.FirstUnstableOffset(); ok {
		return fu
	}
	return end
}

// TestLateBatchAfterAbortMarker is the hanging transaction of a
// transaction version 1 producer, step by step as it happens on a leader:
// the leader verifies the producer's first transactional batch with the
// coordinator (the coordinator answers yes: the partition is in the open
// transaction), the transaction is aborted and its ABORT marker reaches
// the partition first (it finds nothing to end and writes nothing), then
// the verified batch is appended. It must be refused INVALID_TXN_STATE and
// leave no transaction open; with the guard put back (the planted bug) it
// opens a transaction no marker will end, and the last stable offset
// stays behind it while the log goes on.
func TestLateBatchAfterAbortMarker(t *testing.T) {
	const pid = 7
	run := func(t *testing.T) (err error, open bool, lso, end int64) {
		f := newFixture(t, testConfig())
		f.appendLeader(plain(2, f.nowMs()))
		guard := f.startVerification(pid, 0, 0, false) // then the coordinator answers: in the transaction
		if guard == nil {
			t.Fatal("no verification for a producer this partition has never seen")
		}
		m, merr := f.l.AppendMarkerVersion(pid, 0, 0, record.ControlAbort, 0, 1)
		if merr != nil || !m.NothingToEnd {
			t.Fatalf("the abort marker: %+v %v, want nothing to end", m, merr)
		}
		_, err = f.verifiedAppend(txnb(pid, 0, 0, 2, f.nowMs()), guard)
		f.appendLeader(plain(3, f.nowMs()))
		_, open = f.l.ProducerTxn(pid)
		return err, open, f.lso(), f.l.LogEndOffset()
	}
	err, open, lso, end := run(t)
	wantCode(t, err, pb.ErrorCode_INVALID_TXN_STATE)
	if open || lso != end {
		t.Fatalf("after the refused batch: transaction open %v, LSO %d, log end %d; want nothing open and the LSO at the end", open, lso, end)
	}
	t.Run("planted", func(t *testing.T) {
		defer planted.Set(planted.TxnVerificationUnguarded)()
		err, open, lso, end := run(t)
		if err != nil || !open || lso != 2 || end != 7 {
			t.Fatalf("with the guard put back: %v, open %v, LSO %d, log end %d; want the batch appended at 2, open, the LSO stuck at 2 below the end 7", err, open, lso, end)
		}
	})
}

// TestVerificationGuardRules: what makes and keeps a guard good.
func TestVerificationGuardRules(t *testing.T) {
	const pid = 9
	t.Run("no guard, no transaction", func(t *testing.T) {
		f := newFixture(t, testConfig())
		_, err := f.verifiedAppend(txnb(pid, 0, 0, 1, f.nowMs()), nil)
		wantCode(t, err, pb.ErrorCode_INVALID_TXN_STATE)
		// Without verification (tools, tests) it is taken.
		f.appendLeader(txnb(pid, 0, 0, 1, f.nowMs()))
	})
	t.Run("the open transaction vouches for the next batches", func(t *testing.T) {
		f := newFixture(t, testConfig())
		g := f.startVerification(pid, 0, 0, false)
		if _, err := f.verifiedAppend(txnb(pid, 0, 0, 1, f.nowMs()), g); err != nil {
			t.Fatal(err)
		}
		if _, ok := f.l.TxnVerification(pid); ok {
			t.Fatal("the first batch of the transaction left its verification behind")
		}
		if g := f.startVerification(pid, 1, 0, false); g != nil {
			t.Fatal("a verification was made for a transaction open at that epoch")
		}
		if _, err := f.verifiedAppend(txnb(pid, 0, 1, 1, f.nowMs()), nil); err != nil {
			t.Fatalf("the second batch of the open transaction: %v", err)
		}
		// Its version 1 COMMIT ends it: the next batch at the same epoch
		// needs a verification again.
		if _, err := f.l.AppendMarkerVersion(pid, 0, 0, record.ControlCommit, 0, 1); err != nil {
			t.Fatal(err)
		}
		_, err := f.verifiedAppend(txnb(pid, 0, 2, 1, f.nowMs()), nil)
		wantCode(t, err, pb.ErrorCode_INVALID_TXN_STATE)
		g = f.startVerification(pid, 2, 0, false)
		if _, err := f.verifiedAppend(txnb(pid, 0, 2, 1, f.nowMs()), g); err != nil {
			t.Fatalf("the next transaction, verified: %v", err)
		}
	})
	t.Run("a marker that writes nothing still clears", func(t *testing.T) {
		f := newFixture(t, testConfig())
		f.appendLeader(txnb(pid, 0, 0, 1, f.nowMs()))
		if _, err := f.l.AppendMarkerVersion(pid, 0, 0, record.ControlCommit, 0, 1); err != nil {
			t.Fatal(err)
		}
		g := f.startVerification(pid, 1, 0, false)
		// The coordinator re-sends the marker this partition already applied.
		if m, err := f.l.AppendMarkerVersion(pid, 0, 0, record.ControlCommit, 0, 1); err != nil || !m.AlreadyDone {
			t.Fatalf("the repeated marker: %+v %v", m, err)
		}
		_, err := f.verifiedAppend(txnb(pid, 0, 1, 1, f.nowMs()), g)
		wantCode(t, err, pb.ErrorCode_INVALID_TXN_STATE)
	})
	t.Run("a newer epoch replaces the guard", func(t *testing.T) {
		f := newFixture(t, testConfig())
		old := f.startVerification(pid, 0, 3, true)
		if again := f.startVerification(pid, 0, 3, true); again != old {
			t.Fatal("a second verification at the same epoch made a new guard")
		}
		g := f.startVerification(pid, 0, 4, true)
		if g == old {
			t.Fatal("a verification at a newer epoch kept the old guard")
		}
		_, err := f.verifiedAppend(txnb(pid, 3, 0, 1, f.nowMs()), old)
		wantCode(t, err, pb.ErrorCode_INVALID_TXN_STATE)
		if _, err := f.verifiedAppend(txnb(pid, 4, 0, 1, f.nowMs()), g); err != nil {
			t.Fatal(err)
		}
		// An older epoch than the partition's is refused before any guard.
		if _, err := f.l.StartTxnVerification(pid, 0, 3, true); err == nil {
			t.Fatal("a verification from an epoch older than the partition's was started")
		} else {
			wantCode(t, err, pb.ErrorCode_INVALID_PRODUCER_EPOCH)
		}
	})
	t.Run("the lowest sequence waits", func(t *testing.T) {
		f := newFixture(t, testConfig())
		f.startVerification(pid, 5, 0, false)
		g := f.startVerification(pid, 0, 0, false) // the first batch, retried
		if e, _ := f.l.TxnVerification(pid); e.LowestSequence != 0 || e.Guard != g {
			t.Fatalf("verification %+v, want lowest sequence 0", e)
		}
		_, err := f.verifiedAppend(txnb(pid, 0, 5, 1, f.nowMs()), g)
		wantCode(t, err, pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER)
		if _, err := f.verifiedAppend(txnb(pid, 0, 0, 5, f.nowMs()), g); err != nil {
			t.Fatal(err)
		}
		if _, err := f.verifiedAppend(txnb(pid, 0, 5, 1, f.nowMs()), nil); err != nil {
			t.Fatalf("the later batch once the first landed: %v", err)
		}
	})
	t.Run("a duplicate is answered before the guard is asked for", func(t *testing.T) {
		f := newFixture(t, testConfig())
		g := f.startVerification(pid, 0, 0, false)
		first, err := f.verifiedAppend(txnb(pid, 0, 0, 2, f.nowMs()), g)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.l.AppendMarkerVersion(pid, 0, 0, record.ControlAbort, 0, 1); err != nil {
			t.Fatal(err)
		}
		again, err := f.verifiedAppend(txnb(pid, 0, 0, 2, f.nowMs()), g)
		if err != nil || !again.Duplicate || again.FirstOffset != first.FirstOffset {
			t.Fatalf("the retried first batch: %+v %v, want the duplicate of %d", again, err, first.FirstOffset)
		}
	})
	t.Run("expires with producer.id.expiration.ms", func(t *testing.T) {
		cfg := testConfig()
		cfg.ProducerIDExpirationMs = time.Minute.Milliseconds()
		f := newFixture(t, cfg)
		f.startVerification(pid, 0, 0, false)
		f.clk.Advance(time.Minute - time.Millisecond)
		f.l.RemoveExpiredProducers()
		if _, ok := f.l.TxnVerification(pid); !ok {
			t.Fatal("the verification expired early")
		}
		f.clk.Advance(time.Millisecond)
		f.l.RemoveExpiredProducers()
		if _, ok := f.l.TxnVerification(pid); ok {
			t.Fatal("an unused verification outlived producer.id.expiration.ms")
		}
	})
	t.Run("survives a truncation", func(t *testing.T) {
		f := newFixture(t, testConfig())
		f.appendLeader(plain(2, f.nowMs()))
		f.appendLeader(plain(2, f.nowMs()))
		g := f.startVerification(pid, 0, 0, false)
		if err := f.l.TruncateTo(2); err != nil {
			t.Fatal(err)
		}
		if _, err := f.verifiedAppend(txnb(pid, 0, 0, 1, f.nowMs()), g); err != nil {
			t.Fatalf("the verified batch after a truncation: %v", err)
		}
	})
}

// TestCoordinatorWriteVerification: the group coordinator's
// transactional offset write starts its verification at no sequence (it
// numbers its batches itself) and appends with its guard: a marker in
// between refuses it INVALID_TXN_STATE and writes nothing, as a client's
// batch; but its sequence is not held to the verification's lowest one,
// which a client's batch above it would be.
func TestCoordinatorWriteVerification(t *testing.T) {
	const pid = 13
	f := newFixture(t, testConfig())
	f.appendLeader(plain(2, f.nowMs()))
	g := f.startVerification(pid, record.NoSequence, 0, false)
	if _, err := f.l.AppendMarkerVersion(pid, 0, 0, record.ControlAbort, 0, 1); err != nil {
		t.Fatal(err)
	}
	end := f.l.LogEndOffset()
	_, err := f.coordinatorAppend(txnb(pid, 0, 0, 1, f.nowMs()), g)
	wantCode(t, err, pb.ErrorCode_INVALID_TXN_STATE)
	if _, open := f.l.ProducerTxn(pid); open || f.l.LogEndOffset() != end || f.lso() != end {
		t.Fatalf("the refused write: transaction open %v, log end %d (was %d), LSO %d", open, f.l.LogEndOffset(), end, f.lso())
	}

	// The next transaction: verified afresh, appended at sequence 0.
	g = f.startVerification(pid, record.NoSequence, 0, false)
	_, err = f.verifiedAppend(txnb(pid, 0, 0, 1, f.nowMs()), g)
	wantCode(t, err, pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER) // as a client's, above the lowest sequence
	if _, err := f.coordinatorAppend(txnb(pid, 0, 0, 1, f.nowMs()), g); err != nil {
		t.Fatalf("the verified coordinator write: %v", err)
	}
	// Its next write continues the open transaction, with no guard.
	if _, err := f.coordinatorAppend(txnb(pid, 0, 1, 1, f.nowMs()), nil); err != nil {
		t.Fatalf("the second write of the open transaction: %v", err)
	}
	if _, open := f.l.ProducerTxn(pid); !open {
		t.Fatal("no transaction open after the coordinator's writes")
	}
	// Its COMMIT ends it: a write with no guard opens nothing.
	if _, err := f.l.AppendMarkerVersion(pid, 0, 0, record.ControlCommit, 0, 1); err != nil {
		t.Fatal(err)
	}
	_, err = f.coordinatorAppend(txnb(pid, 0, 2, 1, f.nowMs()), nil)
	wantCode(t, err, pb.ErrorCode_INVALID_TXN_STATE)
	if f.lso() != f.l.LogEndOffset() {
		t.Fatalf("LSO %d below the log end %d after the refused write", f.lso(), f.l.LogEndOffset())
	}
}

// TestVersion2MarkersAndVerification: under transaction version 2 every
// end bumps the epoch, and the marker ending a transaction carries the
// epoch the next one runs at. That marker keeps a verification made at
// its epoch (the next transaction's first batch, verified while the
// previous transaction's markers were still on their way); a marker of
// another epoch (a timeout abort, carrying the transaction's epoch + 1)
// clears it, and the late batch is refused even once the marker's fence
// (MarkerFenceTTL) is gone.
func TestVersion2MarkersAndVerification(t *testing.T) {
	const pid = 11
	t.Run("the next transaction's batch before the previous one's marker", func(t *testing.T) {
		f := newFixture(t, testConfig())
		g := f.startVerification(pid, 0, 0, true)
		if _, err := f.verifiedAppend(txnb(pid, 0, 0, 1, f.nowMs()), g); err != nil {
			t.Fatal(err)
		}
		next := f.startVerification(pid, 0, 1, true) // the commit answered epoch 1
		if next == nil {
			t.Fatal("no verification for the next transaction while the previous one is open at the older epoch")
		}
		m := f.marker(pid, 1, record.ControlCommit)
		if m.Completed == nil {
			t.Fatalf("the commit marker: %+v", m)
		}
		if _, err := f.verifiedAppend(txnb(pid, 1, 0, 1, f.nowMs()), next); err != nil {
			t.Fatalf("the next transaction's batch after the marker of its epoch: %v", err)
		}
		if epoch, open := f.l.ProducerTxn(pid); epoch != 1 || !open {
			t.Fatalf("producer at %d open %v, want epoch 1 open", epoch, open)
		}
	})
	t.Run("a timeout abort's marker", func(t *testing.T) {
		f := newFixture(t, testConfig())
		g := f.startVerification(pid, 0, 4, true)
		if m := f.marker(pid, 5, record.ControlAbort); !m.NothingToEnd {
			t.Fatalf("the abort marker: %+v", m)
		}
		_, err := f.verifiedAppend(txnb(pid, 4, 0, 1, f.nowMs()), g)
		wantCode(t, err, pb.ErrorCode_INVALID_PRODUCER_EPOCH) // the marker's fence
		f.clk.Advance(MarkerFenceTTL)
		_, err = f.verifiedAppend(txnb(pid, 4, 0, 1, f.nowMs()), g)
		wantCode(t, err, pb.ErrorCode_INVALID_TXN_STATE)
		if _, open := f.l.ProducerTxn(pid); open {
			t.Fatal("the late batch opened a transaction")
		}
	})
}

// TestVerificationBounds: a partition keeps at most maxVerifications (the
// oldest goes), and a verification the coordinator refused for good is
// dropped, unless a newer one replaced it.
func TestVerificationBounds(t *testing.T) {
	m := NewProducerStateManager()
	for pid := int64(0); pid <= maxVerifications; pid++ {
		m.StartVerification(pid, 0, 0, false, 1000+pid)
	}
	if n := len(m.verifications); n != maxVerifications {
		t.Fatalf("%d verifications kept, want %d", n, maxVerifications)
	}
	if _, ok := m.Verification(0); ok {
		t.Fatal("the oldest verification was kept past the bound")
	}
	if _, ok := m.Verification(maxVerifications); !ok {
		t.Fatal("the newest verification was not kept")
	}
	old := m.StartVerification(1, 0, 0, false, 0)
	newer := m.StartVerification(1, 0, 1, false, 0)
	m.DropVerification(1, old)
	if e, ok := m.Verification(1); !ok || e.Guard != newer {
		t.Fatal("dropping a replaced guard dropped its replacement")
	}
	m.DropVerification(1, newer)
	if _, ok := m.Verification(1); ok {
		t.Fatal("a refused verification was kept")
	}
}

// TestOlderEpochLeavesNewerVerification: a fenced producer's late request
// (an epoch older than the pending verification's) is verified after the
// live producer's. It must not receive the live producer's guard, and
// when its coordinator refuses it (fenced) and its verification is
// dropped, the live producer's stays: its batch is appended, not refused
// INVALID_TXN_STATE. The zombie's own guard is good for no append.
func TestOlderEpochLeavesNewerVerification(t *testing.T) {
	const pid = 17
	for _, bump := range []bool{false, true} {
		f := newFixture(t, testConfig())
		live := f.startVerification(pid, 0, 4, bump)
		zombie := f.startVerification(pid, 0, 3, bump)
		if zombie == nil || zombie == live {
			t.Fatalf("epochBump %v: the older epoch's request got the live producer's guard", bump)
		}
		f.l.DropTxnVerification(pid, zombie) // its coordinator fenced it
		if e, ok := f.l.TxnVerification(pid); !ok || e.Guard != live || e.Epoch != 4 {
			t.Fatalf("epochBump %v: the live verification after the zombie's drop: %+v %v", bump, e, ok)
		}
		_, err := f.verifiedAppend(txnb(pid, 3, 0, 1, f.nowMs()), zombie)
		wantCode(t, err, pb.ErrorCode_INVALID_TXN_STATE)
		if _, err := f.verifiedAppend(txnb(pid, 4, 0, 1, f.nowMs()), live); err != nil {
			t.Fatalf("epochBump %v: the live producer's batch: %v", bump, err)
		}
	}
}

// TestMarkerVersionDecidesWhatItKeeps: only a marker that bumped the
// epoch (written under transaction version 2) can leave a verification at
// its epoch in place, since only then is that verification for a later
// transaction than the one the marker ends. A marker at the producer's
// own epoch (version 1) ends the transaction running at that epoch, and a
// verification made at it (here by a request declaring version 2, a
// client mixing versions) must go: the late batch is refused
// INVALID_TXN_STATE, not appended as a transaction no marker will end.
func TestMarkerVersionDecidesWhatItKeeps(t *testing.T) {
	const pid = 19
	late := func(t *testing.T, f *fixture, g *VerificationGuard, epoch int16) {
		t.Helper()
		end := f.l.LogEndOffset()
		_, err := f.verifiedAppend(txnb(pid, epoch, 0, 1, f.nowMs()), g)
		wantCode(t, err, pb.ErrorCode_INVALID_TXN_STATE)
		if _, open := f.l.ProducerTxn(pid); open || f.lso() != f.l.LogEndOffset() || f.l.LogEndOffset() != end {
			t.Fatalf("the late batch: transaction open %v, LSO %d, log end %d (was %d)", open, f.lso(), f.l.LogEndOffset(), end)
		}
	}
	t.Run("a version 1 marker with nothing to end", func(t *testing.T) {
		f := newFixture(t, testConfig())
		g := f.startVerification(pid, 0, 2, true)
		if m, err := f.l.AppendMarkerVersion(pid, 2, 0, record.ControlAbort, 0, 1); err != nil || !m.NothingToEnd {
			t.Fatalf("the abort marker: %+v %v", m, err)
		}
		late(t, f, g, 2)
	})
	t.Run("a version 1 marker written", func(t *testing.T) {
		f := newFixture(t, testConfig())
		g := f.startVerification(pid, 0, 1, false)
		if _, err := f.verifiedAppend(txnb(pid, 1, 0, 1, f.nowMs()), g); err != nil {
			t.Fatal(err)
		}
		g = f.startVerification(pid, 1, 2, true)
		if m, err := f.l.AppendMarkerVersion(pid, 2, 0, record.ControlAbort, 0, 1); err != nil || m.Completed == nil {
			t.Fatalf("the abort marker: %+v %v", m, err)
		}
		late(t, f, g, 2)
	})
	t.Run("a version 2 marker keeps the next transaction's", func(t *testing.T) {
		f := newFixture(t, testConfig())
		g := f.startVerification(pid, 0, 1, true)
		if _, err := f.verifiedAppend(txnb(pid, 1, 0, 1, f.nowMs()), g); err != nil {
			t.Fatal(err)
		}
		g = f.startVerification(pid, 0, 2, true)
		if m, err := f.l.AppendMarkerVersion(pid, 2, 0, record.ControlCommit, 0, 2); err != nil || m.Completed == nil {
			t.Fatalf("the commit marker: %+v %v", m, err)
		}
		if _, err := f.verifiedAppend(txnb(pid, 2, 0, 1, f.nowMs()), g); err != nil {
			t.Fatalf("the next transaction's first batch: %v", err)
		}
	})
}

// TestVerificationEvictionOrder: at the bound the verification made first
// goes, in the order they were made (not by their timestamps, here all
// the same): one made again at a newer epoch counts as made then, and
// one already dropped or used is passed over. The order's bookkeeping
// stays within a constant factor of the verifications pending however
// many come and go.
func TestVerificationEvictionOrder(t *testing.T) {
	const now = 1000
	m := NewProducerStateManager()
	guards := map[int64]*VerificationGuard{}
	for pid := int64(0); pid < maxVerifications; pid++ {
		guards[pid] = m.StartVerification(pid, 0, 0, false, now)
	}
	m.StartVerification(0, 0, 1, false, now) // made again: now the newest
	m.DropVerification(1, guards[1])         // refused by its coordinator
	m.clearVerification(2, false, 0, 0)      // its first batch appended
	next := int64(maxVerifications)
	m.StartVerification(next, 0, 0, false, now) // fills the place 1 left
	next++
	m.StartVerification(next, 0, 0, false, now) // and 2's
	next++
	for want := int64(3); want < 40; want++ {
		if _, ok := m.Verification(want); !ok {
			t.Fatalf("verification %d gone before its turn", want)
		}
		m.StartVerification(next, 0, 0, false, now)
		next++
		if _, ok := m.Verification(want); ok {
			t.Fatalf("making verification %d evicted another than %d, the oldest", next-1, want)
		}
		if n := len(m.verifications); n != maxVerifications {
			t.Fatalf("%d verifications kept, want %d", n, maxVerifications)
		}
	}
	if e, ok := m.Verification(0); !ok || e.Epoch != 1 {
		t.Fatal("the verification made again at a newer epoch was evicted as the oldest")
	}

	m = NewProducerStateManager()
	for i := 0; i < 100000; i++ {
		pid := int64(i % 7)
		g := m.StartVerification(pid, 0, int16(i%3), false, now)
		if i%2 == 0 {
			m.DropVerification(pid, g)
		}
		// At most 7 pending at once.
		if n := len(m.verifyOrder.refs) - m.verifyOrder.head; n > 2*7+17 {
			t.Fatalf("after %d verifications: %d entries kept in order for at most 7 pending", i+1, n)
		}
	}
}
