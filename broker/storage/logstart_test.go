package storage

import (
	"testing"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TestAdvanceLogStart: DeleteRecords' storage step moves the log start into
// a segment, deletes whole segments below it, refuses a start past the log
// end, never moves back, and the start survives a clean reopen and a
// crash (the checkpoint). Reads below it are OFFSET_OUT_OF_RANGE.
func TestAdvanceLogStart(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 600
	f := newFixture(t, cfg)
	for i := 0; i < 30; i++ {
		if _, err := f.l.AppendAsLeader(buildBatch(t, plain(2, f.nowMs()+int64(i))), 0); err != nil {
			t.Fatal(err)
		}
	}
	bases := segBases(f.l)
	if len(bases) < 3 {
		t.Fatalf("segments %v: want at least 3", bases)
	}
	// Inside the second segment, one record into a batch.
	target := bases[1] + 3
	low, err := f.l.AdvanceLogStart(target)
	if err != nil || low != target {
		t.Fatalf("AdvanceLogStart(%d) = %d, %v", target, low, err)
	}
	if got := segBases(f.l); got[0] != bases[1] {
		t.Fatalf("segments %v: the first one (entirely below %d) must be gone", got, target)
	}
	check := func(when string) {
		t.Helper()
		if f.l.LogStartOffset() != target {
			t.Fatalf("%s: log start %d, want %d", when, f.l.LogStartOffset(), target)
		}
		_, err := f.l.Read(target-1, 1000, 100, true)
		wantCode(t, err, pb.ErrorCode_OFFSET_OUT_OF_RANGE)
		res, err := f.l.Read(target, 1000, 100, true)
		if err != nil || len(res.Records) == 0 || res.LogStart != target {
			t.Fatalf("%s: read at the new start: %+v, %v", when, res, err)
		}
		if off, _, ok, err := f.l.OffsetForTimestamp(0, f.l.LogEndOffset()); err != nil || !ok || off != target {
			t.Fatalf("%s: OffsetForTimestamp(0) = %d %v %v, want the log start %d", when, off, ok, err, target)
		}
	}
	check("after the advance")
	// Never back down; never past the end.
	if low, err := f.l.AdvanceLogStart(target - 2); err != nil || low != target {
		t.Fatalf("AdvanceLogStart down = %d, %v", low, err)
	}
	_, err = f.l.AdvanceLogStart(f.l.LogEndOffset() + 1)
	wantCode(t, err, pb.ErrorCode_OFFSET_OUT_OF_RANGE)

	f.reopenClean()
	check("after a clean reopen")
	f.crash(0)
	check("after a crash")
	// A later retention pass keeps the start inside the segment.
	if _, err := f.l.DeleteRetention(f.l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	check("after retention")
	// Up to the log end: the log is empty but keeps its end.
	leo := f.l.LogEndOffset()
	if low, err := f.l.AdvanceLogStart(leo); err != nil || low != leo {
		t.Fatalf("AdvanceLogStart(leo) = %d, %v", low, err)
	}
	f.reopenClean()
	if f.l.LogStartOffset() != leo || f.l.LogEndOffset() != leo {
		t.Fatalf("after reopen [%d, %d], want [%d, %d]", f.l.LogStartOffset(), f.l.LogEndOffset(), leo, leo)
	}
}

// TestMaxTimestampOffset: ListOffsets -3 finds the record with the largest
// timestamp (the first one with it), below the bound and from the start.
func TestMaxTimestampOffset(t *testing.T) {
	f := newFixture(t, testConfig())
	if _, _, ok, _ := f.l.MaxTimestampOffset(0); ok {
		t.Fatal("an empty log has a max timestamp")
	}
	ts := []int64{100, 500, 300, 500, 200}
	for _, x := range ts {
		if _, err := f.l.AppendAsLeader(buildBatch(t, plain(1, x)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if off, tsv, ok, err := f.l.MaxTimestampOffset(5); err != nil || !ok || off != 1 || tsv != 500 {
		t.Fatalf("max timestamp = %d@%d %v %v, want 1@500", off, tsv, ok, err)
	}
	if off, _, ok, _ := f.l.MaxTimestampOffset(1); !ok || off != 0 {
		t.Fatalf("below 1: %d %v, want 0", off, ok)
	}
	if _, err := f.l.AdvanceLogStart(2); err != nil {
		t.Fatal(err)
	}
	if off, tsv, ok, _ := f.l.MaxTimestampOffset(5); !ok || off != 3 || tsv != 500 {
		t.Fatalf("from the start 2: %d@%d %v, want 3@500", off, tsv, ok)
	}
}
