package storage

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/planted"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

const psTxnAttr = int16(0x10) // isTransactional

// psBatch is a data batch header of n records at offset off.
func psBatch(pid int64, epoch int16, seq int32, n int32, off int64, txn bool) *record.Header {
	h := &record.Header{
		BaseOffset:      off,
		Magic:           record.Magic,
		LastOffsetDelta: n - 1,
		RecordCount:     n,
		FirstTimestamp:  1000 + off,
		MaxTimestamp:    1000 + off,
		ProducerID:      pid,
		ProducerEpoch:   epoch,
		BaseSequence:    seq,
	}
	if txn {
		h.Attributes |= psTxnAttr
	}
	return h
}

// psOp changes a manager while setting up a test case.
type psOp func(m *ProducerStateManager)

func psData(pid int64, epoch int16, seq, n int32, off int64, txn bool) psOp {
	return func(m *ProducerStateManager) { m.ApplyData(psBatch(pid, epoch, seq, n, off, txn)) }
}

func psMarker(pid int64, epoch int16, coord int32, typ record.ControlType, off int64) psOp {
	return func(m *ProducerStateManager) { m.ApplyMarker(pid, epoch, coord, typ, off, 5000+off) }
}

// psSeqRun applies count batches of one record each for pid at epoch,
// sequences from seq and offsets from off.
func psSeqRun(pid int64, epoch int16, seq int32, off int64, count int) psOp {
	return func(m *ProducerStateManager) {
		for i := 0; i < count; i++ {
			m.ApplyData(psBatch(pid, epoch, seq+int32(i), 1, off+int64(i), false))
		}
	}
}

func psBuild(ops ...psOp) *ProducerStateManager {
	m := NewProducerStateManager()
	for _, op := range ops {
		op(m)
	}
	return m
}

func psCode(err error) pb.ErrorCode { return errs.CodeOf(err) }

func TestCheckData(t *testing.T) {
	const pid = 7
	tests := []struct {
		name    string
		setup   []psOp
		batch   *record.Header
		code    pb.ErrorCode
		dup     *BatchMetadata // expected duplicate, nil for none
		msgHave []string       // substrings of the error message
	}{
		{
			name:  "no producer id is never checked",
			setup: []psOp{psData(pid, 3, 0, 1, 0, true)},
			batch: psBatch(-1, -1, -1, 3, 0, false),
		},
		{
			name:  "unknown producer at sequence 0",
			batch: psBatch(pid, 0, 0, 2, 0, false),
		},
		{
			// KIP-360: its state may have been removed by retention or
			// producer-id expiration.
			name:  "unknown producer not at sequence 0",
			batch: psBatch(pid, 0, 5, 1, 0, false),
		},
		{
			name:  "duplicate of the last batch returns its original offsets",
			setup: []psOp{psData(pid, 0, 0, 3, 100, false), psData(pid, 0, 3, 2, 200, false)},
			batch: psBatch(pid, 0, 3, 2, 999, false),
			dup:   &BatchMetadata{FirstSeq: 3, LastSeq: 4, FirstOffset: 200, LastOffset: 201, MaxTimestamp: 1200},
		},
		{
			name:  "duplicate after four newer batches is still retained",
			setup: []psOp{psSeqRun(pid, 0, 0, 10, 5)},
			batch: psBatch(pid, 0, 0, 1, 999, false),
			dup:   &BatchMetadata{FirstSeq: 0, LastSeq: 0, FirstOffset: 10, LastOffset: 10, MaxTimestamp: 1010},
		},
		{
			name:    "re-sent after five newer batches is out of order",
			setup:   []psOp{psSeqRun(pid, 0, 0, 10, 6)},
			batch:   psBatch(pid, 0, 0, 1, 999, false),
			code:    pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER,
			msgHave: []string{"expected sequence 6", "baseSequence=0"},
		},
		{
			name:  "next sequence",
			setup: []psOp{psSeqRun(pid, 0, 0, 10, 6)},
			batch: psBatch(pid, 0, 6, 4, 999, false),
		},
		{
			name:    "gap",
			setup:   []psOp{psData(pid, 0, 0, 3, 0, false)},
			batch:   psBatch(pid, 0, 4, 1, 3, false),
			code:    pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER,
			msgHave: []string{"expected sequence 3", "baseSequence=4"},
		},
		{
			name:  "overlapping but not identical to a retained batch",
			setup: []psOp{psData(pid, 0, 0, 3, 0, false)},
			batch: psBatch(pid, 0, 1, 2, 3, false),
			code:  pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER,
		},
		{
			name:  "same first sequence, different last sequence is no duplicate",
			setup: []psOp{psData(pid, 0, 0, 3, 0, false)},
			batch: psBatch(pid, 0, 0, 2, 3, false),
			code:  pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER,
		},
		{
			name:  "sequence wraps from MaxInt32 to 0",
			setup: []psOp{psData(pid, 0, math.MaxInt32-2, 3, 0, false)},
			batch: psBatch(pid, 0, 0, 1, 2, false),
		},
		{
			name:    "after MaxInt32 only 0 follows",
			setup:   []psOp{psData(pid, 0, math.MaxInt32-2, 3, 0, false)},
			batch:   psBatch(pid, 0, math.MaxInt32, 2, 2, false), // not a duplicate: last sequence differs
			code:    pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER,
			msgHave: []string{"expected sequence 0"},
		},
		{
			name:  "a batch spanning the wrap is followed by its last sequence + 1",
			setup: []psOp{psData(pid, 0, 0, 1, 0, false), psData(pid, 0, math.MaxInt32-1, 4, 1, false)},
			batch: psBatch(pid, 0, 2, 1, 5, false),
		},
		{
			name:  "duplicate of a batch spanning the wrap",
			setup: []psOp{psData(pid, 0, 0, 1, 0, false), psData(pid, 0, math.MaxInt32-1, 4, 1, false)},
			batch: psBatch(pid, 0, math.MaxInt32-1, 4, 50, false),
			dup:   &BatchMetadata{FirstSeq: math.MaxInt32 - 1, LastSeq: 1, FirstOffset: 1, LastOffset: 4, MaxTimestamp: 1001},
		},
		{
			name:    "lower epoch",
			setup:   []psOp{psData(pid, 4, 0, 1, 0, false)},
			batch:   psBatch(pid, 3, 1, 1, 1, false),
			code:    pb.ErrorCode_INVALID_PRODUCER_EPOCH,
			msgHave: []string{"epoch 3", "current epoch 4"},
		},
		{
			name:  "lower epoch, even as a copy of an old batch",
			setup: []psOp{psData(pid, 3, 0, 1, 0, false), psData(pid, 4, 0, 1, 1, false)},
			batch: psBatch(pid, 3, 0, 1, 2, false),
			code:  pb.ErrorCode_INVALID_PRODUCER_EPOCH,
		},
		{
			name:  "new epoch starts at 0",
			setup: []psOp{psSeqRun(pid, 0, 0, 0, 3)},
			batch: psBatch(pid, 1, 0, 1, 3, false),
		},
		{
			name:    "new epoch must start at 0",
			setup:   []psOp{psSeqRun(pid, 0, 0, 0, 3)},
			batch:   psBatch(pid, 1, 3, 1, 3, false),
			code:    pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER,
			msgHave: []string{"new epoch 1", "baseSequence=0, received 3"},
		},
		{
			name:  "entry without batches at its epoch expects sequence 0",
			setup: []psOp{psMarker(pid, 2, 0, record.ControlAbort, 0)},
			batch: psBatch(pid, 2, 0, 1, 1, true),
		},
		{
			name:    "entry without batches at its epoch refuses sequence 1",
			setup:   []psOp{psMarker(pid, 2, 0, record.ControlAbort, 0)},
			batch:   psBatch(pid, 2, 1, 1, 1, true),
			code:    pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER,
			msgHave: []string{"expected sequence 0"},
		},
		{
			name:    "non-transactional batch during an open transaction",
			setup:   []psOp{psData(pid, 0, 0, 2, 10, true)},
			batch:   psBatch(pid, 0, 2, 1, 12, false),
			code:    pb.ErrorCode_INVALID_TXN_STATE,
			msgHave: []string{"producerId=7", "offset 10"},
		},
		{
			name:  "transactional batch during an open transaction",
			setup: []psOp{psData(pid, 0, 0, 2, 10, true)},
			batch: psBatch(pid, 0, 2, 1, 12, true),
		},
		{
			name:  "duplicate transactional batch during the transaction",
			setup: []psOp{psData(pid, 0, 0, 2, 10, true)},
			batch: psBatch(pid, 0, 0, 2, 12, true),
			dup:   &BatchMetadata{FirstSeq: 0, LastSeq: 1, FirstOffset: 10, LastOffset: 11, MaxTimestamp: 1010},
		},
		{
			name:  "non-transactional batch after the transaction ended",
			setup: []psOp{psData(pid, 0, 0, 2, 10, true), psMarker(pid, 1, 0, record.ControlCommit, 12)},
			batch: psBatch(pid, 1, 0, 1, 13, false),
		},
		{
			name:  "another producer's open transaction does not matter",
			setup: []psOp{psData(8, 0, 0, 2, 10, true), psData(pid, 0, 0, 1, 12, false)},
			batch: psBatch(pid, 0, 1, 1, 13, false),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := psBuild(tc.setup...)
			before := m.Producers()
			dup, err := m.CheckData(tc.batch)
			if got := psCode(err); got != tc.code {
				t.Fatalf("code = %v (%v), want %v", got, err, tc.code)
			}
			for _, s := range tc.msgHave {
				if err == nil || !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if !reflect.DeepEqual(dup, tc.dup) {
				t.Errorf("dup = %+v, want %+v", dup, tc.dup)
			}
			if after := m.Producers(); !reflect.DeepEqual(before, after) {
				t.Errorf("CheckData changed state:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
}

func TestCheckMarker(t *testing.T) {
	const pid = 9
	open := psData(pid, 0, 0, 2, 10, true)
	tests := []struct {
		name    string
		setup   []psOp
		epoch   int16
		coord   int32
		verdict MarkerVerdict
		code    pb.ErrorCode
	}{
		{name: "unknown producer: nothing to end", epoch: 1, coord: 0, verdict: MarkerNothingToEnd},
		{name: "unknown producer at the last epoch: nothing to end", epoch: 32767, coord: 0, verdict: MarkerNothingToEnd},
		{name: "bumped epoch ends the open transaction", setup: []psOp{open}, epoch: 1, coord: 0},
		{name: "bumped by more than one", setup: []psOp{open}, epoch: 5, coord: 0,
			code: pb.ErrorCode_INVALID_PRODUCER_EPOCH},
		{name: "the last epoch for a transaction open at epoch 0", setup: []psOp{open}, epoch: 32767, coord: 0,
			code: pb.ErrorCode_INVALID_PRODUCER_EPOCH},
		{name: "the last epoch for a transaction open at 32766", setup: []psOp{psData(pid, 32766, 0, 1, 0, true)}, epoch: 32767, coord: 0},
		{name: "lower epoch", setup: []psOp{psData(pid, 3, 0, 1, 0, true)}, epoch: 2, coord: 0,
			code: pb.ErrorCode_INVALID_PRODUCER_EPOCH},
		{name: "same epoch as the open transaction", setup: []psOp{open}, epoch: 0, coord: 0,
			code: pb.ErrorCode_INVALID_PRODUCER_EPOCH},
		{name: "idle producer, newer epoch: nothing to end", setup: []psOp{psData(pid, 0, 0, 2, 10, false)}, epoch: 1, coord: 0,
			verdict: MarkerNothingToEnd},
		{name: "idle producer, the last epoch: nothing to end",
			setup: []psOp{open, psMarker(pid, 1, 4, record.ControlCommit, 12)}, epoch: 32767, coord: 4, verdict: MarkerNothingToEnd},
		{name: "re-sent marker of a completed transaction is already done",
			setup: []psOp{open, psMarker(pid, 1, 4, record.ControlCommit, 12)}, epoch: 1, coord: 4, verdict: MarkerRepeat},
		{name: "re-sent by a new coordinator after failover is already done",
			setup: []psOp{open, psMarker(pid, 1, 4, record.ControlCommit, 12)}, epoch: 1, coord: 5, verdict: MarkerRepeat},
		{name: "re-sent by the fenced old coordinator",
			setup: []psOp{open, psMarker(pid, 1, 4, record.ControlCommit, 12)}, epoch: 1, coord: 3,
			code: pb.ErrorCode_TRANSACTION_COORDINATOR_FENCED},
		{name: "lower coordinator epoch",
			setup: []psOp{open, psMarker(pid, 1, 4, record.ControlCommit, 12), psData(pid, 1, 0, 1, 13, true)},
			epoch: 2, coord: 3, code: pb.ErrorCode_TRANSACTION_COORDINATOR_FENCED},
		{name: "same coordinator epoch",
			setup: []psOp{open, psMarker(pid, 1, 4, record.ControlCommit, 12), psData(pid, 1, 0, 1, 13, true)},
			epoch: 2, coord: 4},
		{name: "older marker epoch of a re-sent marker after a newer transaction began",
			setup: []psOp{open, psMarker(pid, 1, 4, record.ControlCommit, 12), psData(pid, 1, 0, 1, 13, true)},
			epoch: 1, coord: 4, code: pb.ErrorCode_INVALID_PRODUCER_EPOCH},
		{name: "re-sent marker when the next transaction completed too",
			setup: []psOp{open, psMarker(pid, 1, 4, record.ControlCommit, 12), psData(pid, 1, 0, 1, 13, true),
				psMarker(pid, 2, 4, record.ControlAbort, 14)},
			epoch: 1, coord: 4, code: pb.ErrorCode_INVALID_PRODUCER_EPOCH},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := psBuild(tc.setup...)
			before, fuBefore := m.Producers(), m.OngoingTxns()
			verdict, err := m.CheckMarker(pid, tc.epoch, tc.coord)
			if got := psCode(err); got != tc.code {
				t.Fatalf("code = %v (%v), want %v", got, err, tc.code)
			}
			if err == nil && verdict != tc.verdict {
				t.Errorf("verdict = %v, want %v", verdict, tc.verdict)
			}
			if !reflect.DeepEqual(before, m.Producers()) || !reflect.DeepEqual(fuBefore, m.OngoingTxns()) {
				t.Errorf("CheckMarker changed state")
			}
		})
	}
}

// TestCheckLegacyMarker: markers of transaction version 1 carry the epoch
// unbumped; they end an open transaction at the stored epoch or above and
// have nothing to end otherwise.
func TestCheckLegacyMarker(t *testing.T) {
	const pid = 9
	open := psData(pid, 3, 0, 2, 10, true)
	for _, tc := range []struct {
		name    string
		setup   []psOp
		epoch   int16
		coord   int32
		verdict MarkerVerdict
		code    pb.ErrorCode
	}{
		{name: "unknown producer", epoch: 3, verdict: MarkerNothingToEnd},
		{name: "open at the same epoch", setup: []psOp{open}, epoch: 3, verdict: MarkerEnds},
		{name: "open, a fence's bumped epoch", setup: []psOp{open}, epoch: 4, verdict: MarkerEnds},
		{name: "open, older epoch", setup: []psOp{open}, epoch: 2, code: pb.ErrorCode_INVALID_PRODUCER_EPOCH},
		{name: "repeat", setup: []psOp{open, psMarker(pid, 3, 1, record.ControlAbort, 12)}, epoch: 3, coord: 1, verdict: MarkerRepeat},
		{name: "idle, newer epoch", setup: []psOp{open, psMarker(pid, 3, 1, record.ControlAbort, 12)}, epoch: 32767, coord: 1, verdict: MarkerNothingToEnd},
		{name: "older coordinator", setup: []psOp{open, psMarker(pid, 3, 1, record.ControlAbort, 12)}, epoch: 3, coord: 0,
			code: pb.ErrorCode_TRANSACTION_COORDINATOR_FENCED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := psBuild(tc.setup...)
			verdict, err := m.CheckLegacyMarker(pid, tc.epoch, tc.coord)
			if got := psCode(err); got != tc.code {
				t.Fatalf("code = %v (%v), want %v", got, err, tc.code)
			}
			if err == nil && verdict != tc.verdict {
				t.Errorf("verdict = %v, want %v", verdict, tc.verdict)
			}
		})
	}
}

func TestApplyDataRetainsFiveBatches(t *testing.T) {
	m := psBuild(psSeqRun(1, 0, 0, 0, 7))
	e, ok := m.Get(1)
	if !ok {
		t.Fatal("producer 1 missing")
	}
	if len(e.Batches) != NumBatchesToRetain || NumBatchesToRetain != 5 {
		t.Fatalf("retained %d batches, want 5", len(e.Batches))
	}
	for i, b := range e.Batches {
		if want := int32(i + 2); b.FirstSeq != want || b.FirstOffset != int64(want) {
			t.Errorf("batch %d = %+v, want sequence/offset %d (oldest dropped first)", i, b, want)
		}
	}
	if e.LastSequence() != 6 || e.LastOffset() != 6 || e.LastTimestamp != 1006 {
		t.Errorf("last sequence/offset/timestamp = %d/%d/%d", e.LastSequence(), e.LastOffset(), e.LastTimestamp)
	}
	if m.MapEndOffset() != 7 {
		t.Errorf("MapEndOffset = %d, want 7", m.MapEndOffset())
	}
	// The copy is independent.
	e.Batches[0].FirstSeq = 99
	if e2, _ := m.Get(1); e2.Batches[0].FirstSeq != 2 {
		t.Error("Get returned state shared with the manager")
	}
	// An epoch change forgets the batches.
	m.ApplyData(psBatch(1, 1, 0, 3, 7, false))
	e, _ = m.Get(1)
	if e.Epoch != 1 || len(e.Batches) != 1 || e.LastSequence() != 2 {
		t.Errorf("after the epoch change: %+v", e)
	}
}

func TestApplyDataIsNotValidated(t *testing.T) {
	// Replication and recovery replay take whatever the leader wrote.
	m := psBuild(psData(1, 2, 40, 1, 0, false), psData(1, 1, 7, 1, 1, false), psData(-1, -1, -1, 4, 2, false))
	e, _ := m.Get(1)
	if e.Epoch != 1 || len(e.Batches) != 1 || e.Batches[0].FirstSeq != 7 {
		t.Errorf("state = %+v", e)
	}
	if m.Len() != 1 || m.MapEndOffset() != 6 {
		t.Errorf("Len = %d, MapEndOffset = %d; want 1, 6", m.Len(), m.MapEndOffset())
	}
}

func TestApplyMarker(t *testing.T) {
	m := NewProducerStateManager()
	if got := m.ApplyMarker(3, 1, 2, record.ControlCommit, 10, 77); got != nil {
		t.Errorf("marker without an open transaction returned %+v", got)
	}
	e, ok := m.Get(3)
	want := ProducerEntry{ProducerID: 3, Epoch: 1, CoordinatorEpoch: 2, CurrentTxnFirstOffset: -1, LastTimestamp: 77}
	if !ok || !reflect.DeepEqual(e, want) {
		t.Errorf("entry = %+v, want %+v", e, want)
	}
	if m.MapEndOffset() != 11 {
		t.Errorf("MapEndOffset = %d, want 11", m.MapEndOffset())
	}
}

// TestTransactionVersion2Cycle: data epoch 0 → COMMIT marker epoch 1 →
// data epoch 1 from sequence 0 → ABORT marker epoch 2.
func TestTransactionVersion2Cycle(t *testing.T) {
	const pid = 42
	m := NewProducerStateManager()
	step := func(h *record.Header) {
		t.Helper()
		dup, err := m.CheckData(h)
		if err != nil || dup != nil {
			t.Fatalf("CheckData(seq %d epoch %d) = %v, %v", h.BaseSequence, h.ProducerEpoch, dup, err)
		}
		m.ApplyData(h)
	}
	marker := func(epoch int16, typ record.ControlType, off int64) *CompletedTxn {
		t.Helper()
		verdict, err := m.CheckMarker(pid, epoch, 0)
		if err != nil || verdict != MarkerEnds {
			t.Fatalf("CheckMarker(epoch %d) = %v, %v", epoch, verdict, err)
		}
		return m.ApplyMarker(pid, epoch, 0, typ, off, 9000+off)
	}

	step(psBatch(pid, 0, 0, 3, 0, true))
	step(psBatch(pid, 0, 3, 2, 3, true))
	if fu, ok := m.FirstUndecidedOffset(); !ok || fu != 0 {
		t.Fatalf("FirstUndecidedOffset = %d, %v; want 0", fu, ok)
	}
	c := marker(1, record.ControlCommit, 5)
	if want := (CompletedTxn{ProducerID: pid, FirstOffset: 0, LastOffset: 5}); c == nil || *c != want {
		t.Fatalf("commit completed %+v, want %+v", c, want)
	}
	if _, ok := m.FirstUndecidedOffset(); ok {
		t.Fatal("a transaction is still open after the commit")
	}
	// The commit re-sent (coordinator failover) is already done.
	if verdict, err := m.CheckMarker(pid, 1, 1); verdict != MarkerRepeat || err != nil {
		t.Fatalf("re-sent commit: %v, %v", verdict, err)
	}
	// Data at the old epoch is now fenced; the new epoch restarts at 0.
	if _, err := m.CheckData(psBatch(pid, 0, 5, 1, 6, true)); psCode(err) != pb.ErrorCode_INVALID_PRODUCER_EPOCH {
		t.Fatalf("old-epoch data: %v", err)
	}
	if _, err := m.CheckData(psBatch(pid, 1, 5, 1, 6, true)); psCode(err) != pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER {
		t.Fatalf("epoch 1 continuing the old sequence: %v", err)
	}
	step(psBatch(pid, 1, 0, 1, 6, true))
	step(psBatch(pid, 1, 1, 1, 7, true))
	if fu, _ := m.FirstUndecidedOffset(); fu != 6 {
		t.Fatalf("FirstUndecidedOffset = %d, want 6", fu)
	}
	if _, err := m.CheckMarker(pid, 1, 0); psCode(err) != pb.ErrorCode_INVALID_PRODUCER_EPOCH {
		t.Fatalf("unbumped marker for an open transaction: %v", err)
	}
	c = marker(2, record.ControlAbort, 8)
	if want := (CompletedTxn{ProducerID: pid, FirstOffset: 6, LastOffset: 8, Aborted: true}); c == nil || *c != want {
		t.Fatalf("abort completed %+v, want %+v", c, want)
	}
	e, _ := m.Get(pid)
	want := ProducerEntry{ProducerID: pid, Epoch: 2, CoordinatorEpoch: 0, CurrentTxnFirstOffset: -1, LastTimestamp: 9008}
	if !reflect.DeepEqual(e, want) {
		t.Fatalf("final entry %+v, want %+v", e, want)
	}
	step(psBatch(pid, 2, 0, 1, 9, false))
}

func TestFirstUndecidedOffsetOverlapping(t *testing.T) {
	m := NewProducerStateManager()
	if _, ok := m.FirstUndecidedOffset(); ok {
		t.Fatal("empty manager has an undecided offset")
	}
	m.ApplyData(psBatch(1, 0, 0, 2, 10, true)) // A opens at 10
	m.ApplyData(psBatch(2, 0, 0, 2, 12, true)) // B opens at 12
	m.ApplyData(psBatch(1, 0, 2, 2, 14, true)) // A goes on
	m.ApplyData(psBatch(3, 0, 0, 1, 16, false))
	if fu, ok := m.FirstUndecidedOffset(); !ok || fu != 10 {
		t.Fatalf("FirstUndecidedOffset = %d, %v; want 10", fu, ok)
	}
	got := m.OngoingTxns()
	want := []OngoingTxn{
		{ProducerID: 1, Epoch: 0, CoordinatorEpoch: -1, FirstOffset: 10, LastTimestamp: 1014},
		{ProducerID: 2, Epoch: 0, CoordinatorEpoch: -1, FirstOffset: 12, LastTimestamp: 1012},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("OngoingTxns = %+v, want %+v", got, want)
	}
	m.ApplyMarker(1, 1, 0, record.ControlCommit, 17, 0) // A commits
	if fu, ok := m.FirstUndecidedOffset(); !ok || fu != 12 {
		t.Fatalf("after A's commit FirstUndecidedOffset = %d, %v; want 12", fu, ok)
	}
	m.ApplyData(psBatch(1, 1, 0, 1, 18, true)) // A opens again at 18
	if fu, _ := m.FirstUndecidedOffset(); fu != 12 {
		t.Fatalf("FirstUndecidedOffset = %d, want 12", fu)
	}
	m.ApplyMarker(2, 1, 0, record.ControlAbort, 19, 0) // B aborts
	if fu, ok := m.FirstUndecidedOffset(); !ok || fu != 18 {
		t.Fatalf("after B's abort FirstUndecidedOffset = %d, %v; want 18", fu, ok)
	}
	m.ApplyMarker(1, 2, 0, record.ControlAbort, 20, 0)
	if _, ok := m.FirstUndecidedOffset(); ok || len(m.OngoingTxns()) != 0 {
		t.Fatal("transactions still open")
	}
}

func TestOngoingIndexOutOfOrder(t *testing.T) {
	m := NewProducerStateManager()
	for _, o := range []struct{ pid, off int64 }{{1, 30}, {2, 10}, {3, 20}, {4, 10}} {
		m.put(o.pid, &producerState{coordEpoch: -1, txnFirst: o.off})
	}
	var got []int64
	for _, tx := range m.OngoingTxns() {
		got = append(got, tx.ProducerID)
	}
	if want := []int64{2, 4, 3, 1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	m.ApplyMarker(2, 1, 0, record.ControlCommit, 40, 0)
	if fu, _ := m.FirstUndecidedOffset(); fu != 10 {
		t.Fatalf("FirstUndecidedOffset = %d, want 10 (producer 4)", fu)
	}
	m.ApplyMarker(4, 1, 0, record.ControlCommit, 41, 0)
	if fu, _ := m.FirstUndecidedOffset(); fu != 20 {
		t.Fatalf("FirstUndecidedOffset = %d, want 20", fu)
	}
}

func TestRemoveExpired(t *testing.T) {
	const expiration = 1000
	m := NewProducerStateManager()
	m.ApplyData(psBatch(1, 0, 0, 1, 0, false)) // ts 1000: idle
	m.ApplyData(psBatch(2, 0, 0, 1, 1, true))  // ts 1001: idle but in a transaction
	m.ApplyData(psBatch(3, 0, 0, 1, 1500, false))
	m.ApplyMarker(4, 1, 0, record.ControlAbort, 1501, 900) // marker-only entry, idle
	m.ApplyData(psBatch(5, 0, 0, 1, 1, false))
	m.ApplyData(psBatch(5, 0, 1, 1, 999, false)) // ts 1999: exactly at the cutoff, kept

	if n := m.RemoveExpired(3000, -1); n != 0 {
		t.Fatalf("negative expiration removed %d", n)
	}
	if n := m.RemoveExpired(2999, expiration); n != 2 {
		t.Fatalf("removed %d, want 2", n)
	}
	var pids []int64
	for _, e := range m.Producers() {
		pids = append(pids, e.ProducerID)
	}
	if want := []int64{2, 3, 5}; !reflect.DeepEqual(pids, want) {
		t.Fatalf("left %v, want %v", pids, want)
	}
	// An expired producer that goes on is taken at its next sequence (KIP-360).
	if dup, err := m.CheckData(psBatch(1, 0, 1, 1, 3000, false)); err != nil || dup != nil {
		t.Fatalf("expired producer: %v, %v", dup, err)
	}
	if n := m.RemoveExpired(1<<40, expiration); n != 2 || m.Len() != 1 {
		t.Fatalf("removed %d, left %d; want 2 removed and the transactional one kept", n, m.Len())
	}
	if fu, ok := m.FirstUnstableOffset(); !ok || fu != 1 {
		t.Fatalf("FirstUnstableOffset = %d, %v; want 1", fu, ok)
	}
	m.ApplyData(psBatch(6, 0, 0, 1, 5, false))
	if n := m.RemoveExpired(-1<<62, math.MaxInt64); n != 0 {
		t.Fatalf("overflowing cutoff removed %d", n)
	}
}

func TestClearAndMapEndOffset(t *testing.T) {
	m := psBuild(psData(1, 0, 0, 3, 0, true), psData(2, 0, 0, 1, 3, false))
	if m.MapEndOffset() != 4 {
		t.Fatalf("MapEndOffset = %d, want 4", m.MapEndOffset())
	}
	m.SetMapEndOffset(2)
	if m.MapEndOffset() != 2 || m.Len() != 2 {
		t.Fatal("SetMapEndOffset changed producers or did not set")
	}
	m.Clear()
	if m.Len() != 0 || m.MapEndOffset() != 0 || len(m.Producers()) != 0 || len(m.OngoingTxns()) != 0 {
		t.Fatal("Clear left state")
	}
	if _, ok := m.FirstUnstableOffset(); ok {
		t.Fatal("Clear left an open transaction")
	}
	m.ApplyData(psBatch(1, 0, 0, 1, 10, true))
	if fu, _ := m.FirstUnstableOffset(); fu != 10 {
		t.Fatalf("FirstUnstableOffset after Clear = %d", fu)
	}
}

// afterExpiry is a producer's expiry, in a log: producer 7 writes sequences 0..2,
// is forgotten after producer.id.expiration.ms (retention could do the
// same), and goes on at sequence 3. It returns that append's error and the
// fixture.
func afterExpiry(t *testing.T) (*fixture, error) {
	t.Helper()
	cfg := testConfig()
	cfg.ProducerIDExpirationMs = 60_000
	f := newFixture(t, cfg)
	f.appendLeader(idem(7, 0, 0, 3, f.nowMs())) // 0..2
	f.clk.Advance(2 * time.Minute)
	if n := f.l.RemoveExpiredProducers(); n != 1 {
		t.Fatalf("RemoveExpiredProducers = %d, want producer 7 gone", n)
	}
	_, err := f.l.AppendAsLeader(buildBatch(t, idem(7, 0, 3, 2, f.nowMs())), 0)
	return f, err
}

// A producer id the partition has no state for is accepted at any sequence
// (Kafka's checkSequence with no current epoch, KIP-360), and its batch
// starts its state: the next batch must follow it.
func TestUnknownProducerAcceptedAtAnySequence(t *testing.T) {
	m := NewProducerStateManager()
	for _, seq := range []int32{0, 1, 5, math.MaxInt32} {
		if dup, err := m.CheckData(psBatch(9, 3, seq, 1, 0, false)); err != nil || dup != nil {
			t.Fatalf("unknown producer at sequence %d: %v, %v", seq, dup, err)
		}
	}
	// Transactional too.
	if _, err := m.CheckData(psBatch(9, 3, 17, 2, 0, true)); err != nil {
		t.Fatalf("unknown transactional producer at sequence 17: %v", err)
	}

	f, err := afterExpiry(t)
	if err != nil {
		t.Fatalf("the expired producer going on at sequence 3: %v", err)
	}
	if e, ok := f.l.psm.Get(7); !ok || e.LastSequence() != 4 {
		t.Fatalf("producer 7 after the append: %+v, %v; want last sequence 4", e, ok)
	}
	if got := f.l.LogEndOffset(); got != 5 {
		t.Fatalf("log end %d, want 5", got)
	}
	// From there the usual rules: a re-send is a duplicate, a gap is refused.
	res, err := f.l.AppendAsLeader(buildBatch(t, idem(7, 0, 3, 2, f.nowMs())), 0)
	if err != nil || !res.Duplicate || res.FirstOffset != 3 {
		t.Fatalf("re-sent batch: %+v, %v; want the duplicate at 3", res, err)
	}
	_, err = f.l.AppendAsLeader(buildBatch(t, idem(7, 0, 7, 1, f.nowMs())), 0)
	wantCode(t, err, pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER)
	f.appendLeader(idem(7, 0, 5, 1, f.nowMs()))
}

// With the planted bug the expired producer is refused UNKNOWN_PRODUCER_ID.
func TestUnknownProducerAcceptedAtAnySequenceCatchesPlantedBug(t *testing.T) {
	defer planted.Set(planted.UnknownProducerSequenceRefused)()
	f, err := afterExpiry(t)
	if err == nil {
		t.Fatal("with unknown-producer-sequence-refused planted the expired producer was still accepted at sequence 3")
	}
	wantCode(t, err, pb.ErrorCode_UNKNOWN_PRODUCER_ID)
	if got := f.l.LogEndOffset(); got != 3 {
		t.Fatalf("the refused batch was written: log end %d", got)
	}
}
