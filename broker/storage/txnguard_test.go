package storage

import (
	"testing"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// TestMarkerWithNothingToEnd: a marker for a producer with no state, or
// with no open transaction, writes nothing and creates or moves no
// producer state (a marker at 32767 cannot fence a producer out), and is
// answered like a repeat. Under transaction version 2 it still fences,
// on this leader and for MarkerFenceTTL, the batch that was on its way
// when the transaction ended: the late batch of the ended epoch is
// refused, the producer's next epoch is accepted.
func TestMarkerWithNothingToEnd(t *testing.T) {
	f := newFixture(t, testConfig())
	f.appendLeader(plain(1, f.nowMs()))
	end, size := f.l.LogEndOffset(), f.l.Size()

	// A producer this partition never saw.
	m := f.marker(7, 3, record.ControlAbort)
	if !m.AlreadyDone || !m.NothingToEnd || m.Offset != -1 || m.LogEndOffset != end {
		t.Fatalf("marker for an unknown producer: %+v", m)
	}
	if f.l.LogEndOffset() != end || f.l.Size() != size || f.l.psm.Len() != 0 {
		t.Fatal("a marker with nothing to end wrote something or made producer state")
	}
	// The batch that was on its way, at the ended epoch, is refused ...
	_, err := f.l.AppendAsLeader(buildBatch(t, txnb(7, 2, 0, 1, f.nowMs())), 0)
	wantCode(t, err, pb.ErrorCode_INVALID_PRODUCER_EPOCH)
	// ... the producer's next transaction is not.
	f.appendLeader(txnb(7, 3, 0, 1, f.nowMs()))
	if epoch, open := f.l.ProducerTxn(7); epoch != 3 || !open {
		t.Fatalf("producer 7 after its next batch: epoch %d open %v", epoch, open)
	}

	// An idle producer (its transaction committed) and markers at 32767.
	f.appendLeader(txnb(9, 0, 0, 1, f.nowMs()))
	f.marker(9, 1, record.ControlCommit)
	end, size = f.l.LogEndOffset(), f.l.Size()
	for _, typ := range []record.ControlType{record.ControlAbort, record.ControlCommit} {
		for _, version := range []int32{2, 0} {
			m, err := f.l.AppendMarkerVersion(9, 32767, 0, typ, 0, version)
			if err != nil || !m.AlreadyDone || !m.NothingToEnd {
				t.Fatalf("marker at 32767 (version %d) for an idle producer: %+v %v", version, m, err)
			}
		}
	}
	if e, _ := f.l.psm.Get(9); e.Epoch != 1 || f.l.LogEndOffset() != end || f.l.Size() != size {
		t.Fatalf("markers with nothing to end moved the producer (epoch %d) or wrote", e.Epoch)
	}
	// The fence lives MarkerFenceTTL.
	f.marker(11, 5, record.ControlAbort)
	f.clk.Advance(MarkerFenceTTL)
	f.appendLeader(txnb(11, 4, 0, 1, f.nowMs()))
}

// TestAbortHanging: the administrator's abort ends only an open
// transaction, named by its start offset and the producer's current epoch,
// that has been open for the minimum given as far as the log has seen;
// the marker carries the producer's epoch, which does not move.
func TestAbortHanging(t *testing.T) {
	f := newFixture(t, testConfig())
	const pid = 5
	f.appendLeader(plain(1, f.nowMs()))
	first := f.appendLeader(txnb(pid, 2, 0, 2, f.nowMs())).FirstOffset
	f.appendLeader(txnb(pid, 2, 2, 1, f.nowMs()))
	minOpen := 15 * time.Minute
	f.clk.Advance(minOpen - time.Second)
	for _, c := range []struct {
		epoch int16
		start int64
		code  pb.ErrorCode
	}{
		{2, first, pb.ErrorCode_INVALID_TXN_STATE},     // too young
		{2, first + 1, pb.ErrorCode_INVALID_TXN_STATE}, // not where it starts
		{3, first, pb.ErrorCode_INVALID_PRODUCER_EPOCH},
		{1, first, pb.ErrorCode_INVALID_PRODUCER_EPOCH},
	} {
		_, err := f.l.AbortHanging(pid, c.epoch, c.start, minOpen, 0)
		wantCode(t, err, c.code)
	}
	_, err := f.l.AbortHanging(77, 0, first, 0, 0)
	wantCode(t, err, pb.ErrorCode_INVALID_TXN_STATE) // no such producer
	f.clk.Advance(time.Second)
	m, err := f.l.AbortHanging(pid, 2, first, minOpen, 0)
	if err != nil || m.Completed == nil || !m.Completed.Aborted || m.Completed.FirstOffset != first {
		t.Fatalf("abort of the hanging transaction: %+v %v", m, err)
	}
	if epoch, open := f.l.ProducerTxn(pid); epoch != 2 || open {
		t.Fatalf("after the abort: epoch %d open %v, want 2 and closed", epoch, open)
	}
	_, err = f.l.AbortHanging(pid, 2, first, 0, 0)
	wantCode(t, err, pb.ErrorCode_INVALID_TXN_STATE) // nothing open any more

	// A transaction found open at recovery counts from the log's opening.
	second := f.appendLeader(txnb(pid, 3, 0, 1, f.nowMs())).FirstOffset
	f.clk.Advance(time.Hour)
	f.crash(0)
	_, err = f.l.AbortHanging(pid, 3, second, minOpen, 0)
	wantCode(t, err, pb.ErrorCode_INVALID_TXN_STATE)
	f.clk.Advance(minOpen)
	if _, err := f.l.AbortHanging(pid, 3, second, minOpen, 0); err != nil {
		t.Fatalf("abort after minOpen since the log opened: %v", err)
	}
}

// TestVersion1TransactionsAtOneEpoch: a transaction version 1 producer
// keeps its epoch across transactions. Its markers carry that epoch
// unbumped (the legacy rule ends the open transaction with them), and its
// next transaction at the same epoch continues the sequence: the next
// sequence is accepted, a repeat of the last batch is a duplicate, a gap
// is refused, and sequence 0 (what a version 2 producer sends at a new
// epoch) is not a new start. Nothing fences the epoch after a version 1
// marker.
func TestVersion1TransactionsAtOneEpoch(t *testing.T) {
	f := newFixture(t, testConfig())
	first := f.appendLeader(txnb(5, 3, 0, 2, f.nowMs()))
	m, err := f.l.AppendMarkerVersion(5, 3, 0, record.ControlCommit, 0, 1)
	if err != nil || m.AlreadyDone || m.Completed == nil || m.Completed.FirstOffset != first.FirstOffset {
		t.Fatalf("version 1 marker at the producer's epoch: %+v %v", m, err)
	}
	if epoch, open := f.l.ProducerTxn(5); epoch != 3 || open {
		t.Fatalf("after the marker: epoch %d open %v, want epoch 3 closed", epoch, open)
	}
	// A repeat of that marker writes nothing.
	if m, err := f.l.AppendMarkerVersion(5, 3, 0, record.ControlCommit, 0, 1); err != nil || !m.AlreadyDone {
		t.Fatalf("the repeated version 1 marker: %+v %v", m, err)
	}
	_, err = f.l.AppendAsLeader(buildBatch(t, txnb(5, 3, 3, 1, f.nowMs())), 0)
	wantCode(t, err, pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER)
	_, err = f.l.AppendAsLeader(buildBatch(t, txnb(5, 3, 0, 1, f.nowMs())), 0)
	if err == nil {
		t.Fatal("sequence 0 at the same epoch was taken as a new start")
	}
	next := f.appendLeader(txnb(5, 3, 2, 1, f.nowMs()))
	if next.Duplicate {
		t.Fatalf("the next sequence was taken for a duplicate: %+v", next)
	}
	if epoch, open := f.l.ProducerTxn(5); epoch != 3 || !open {
		t.Fatalf("the second transaction: epoch %d open %v, want epoch 3 open", epoch, open)
	}
	if again := f.appendLeader(txnb(5, 3, 2, 1, f.nowMs())); !again.Duplicate || again.FirstOffset != next.FirstOffset {
		t.Fatalf("a retry of the last batch: %+v, want the duplicate of %d", again, next.FirstOffset)
	}
	f.l.OnHighWatermarkUpdated(f.l.LogEndOffset()) // the first transaction's marker is replicated
	if fu, ok := f.l.FirstUnstableOffset(); !ok || fu != next.FirstOffset {
		t.Fatalf("first unstable offset %d %v, want %d (the second transaction's start)", fu, ok, next.FirstOffset)
	}
	m, err = f.l.AppendMarkerVersion(5, 3, 0, record.ControlAbort, 0, 1)
	if err != nil || m.Completed == nil || !m.Completed.Aborted || m.Completed.FirstOffset != next.FirstOffset {
		t.Fatalf("version 1 abort of the second transaction: %+v %v", m, err)
	}
}
