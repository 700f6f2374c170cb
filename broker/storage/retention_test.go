package storage

import (
	"testing"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// retentionLog appends 5 segments of batches, advancing the clock 10
// minutes per segment (each record stamped with the clock), and returns
// the segment bases.
func retentionLog(t *testing.T, cfg Config) (*fixture, []int64) {
	t.Helper()
	cfg.SegmentMs = int64(10 * time.Minute / time.Millisecond)
	f := newFixture(t, cfg)
	for seg := 0; seg < 5; seg++ {
		for i := 0; i < 4; i++ {
			f.appendLeaderEpoch(idem(1, 0, int32(seg*4+i), 1, f.nowMs()), int32(seg))
			f.clk.Advance(time.Minute)
		}
		f.clk.Advance(6 * time.Minute)
	}
	bases := segBases(f.l)
	if len(bases) != 5 {
		t.Fatalf("segments %v, want 5", bases)
	}
	return f, bases
}

func TestRetentionByTime(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionMs = int64(30 * time.Minute / time.Millisecond)
	f, bases := retentionLog(t, cfg)
	// Now is t0+50m; segment k's newest record is at t0+10k+3 minutes, so
	// segments 0 and 1 (47 and 37 minutes old) are past 30 minutes; 2 (27) is not.
	n, err := f.l.DeleteRetention(f.l.LogEndOffset())
	if err != nil || n != 2 {
		t.Fatalf("deleted %d segments (%v), want 2", n, err)
	}
	if got := segBases(f.l); !equalInt64s(got, bases[2:]) {
		t.Fatalf("segments %v", got)
	}
	if got := segFiles(t, f.dir); !equalInt64s(got, bases[2:]) {
		t.Fatalf("segment files %v", got)
	}
	if f.l.LogStartOffset() != bases[2] {
		t.Fatalf("log start %d, want %d", f.l.LogStartOffset(), bases[2])
	}
	for _, off := range []int64{0, bases[2] - 1} {
		_, err := f.l.Read(off, 1000, 100, true)
		wantCode(t, err, pb.ErrorCode_OFFSET_OUT_OF_RANGE)
	}
	if res, err := f.l.Read(bases[2], 1000, 100, true); err != nil || len(res.Records) == 0 || res.LogStart != bases[2] {
		t.Fatalf("read at the new start: %v", err)
	}
	snaps, _ := ListSnapshots(f.dir)
	if len(snaps) == 0 || snaps[0] != bases[2] {
		t.Fatalf("snapshots %v: the one at the new start must stay, older ones go", snaps)
	}
	if e := f.l.Epochs(); e[0].StartOffset != bases[2] || e[0].Epoch != 2 {
		t.Fatalf("epochs %v", e)
	}
	// Nothing more is old enough yet.
	if n, _ := f.l.DeleteRetention(f.l.LogEndOffset()); n != 0 {
		t.Fatalf("deleted %d more", n)
	}
	// Much later everything is expired, but the active segment stays.
	f.clk.Advance(24 * time.Hour)
	n, _ = f.l.DeleteRetention(f.l.LogEndOffset())
	if n != 2 || f.l.NumSegments() != 1 || f.l.LogStartOffset() != bases[4] {
		t.Fatalf("deleted %d, %d segments left, start %d", n, f.l.NumSegments(), f.l.LogStartOffset())
	}
	// The start survives a reopen and a recovery, and producer state still works.
	f.reopenClean()
	if f.l.LogStartOffset() != bases[4] || f.l.LogEndOffset() != 20 {
		t.Fatalf("after reopen [%d, %d]", f.l.LogStartOffset(), f.l.LogEndOffset())
	}
	r, err := f.l.AppendAsLeader(buildBatch(t, idem(1, 0, 19, 1, f.nowMs())), 4)
	if err != nil || !r.Duplicate {
		t.Fatalf("duplicate after retention and reopen: %+v %v", r, err)
	}
	f.crash(0)
	if f.l.LogStartOffset() != bases[4] || f.l.LogEndOffset() != 20 {
		t.Fatalf("after recovery [%d, %d]", f.l.LogStartOffset(), f.l.LogEndOffset())
	}
}

func TestRetentionRespectsHighWatermark(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionMs = 1
	f, bases := retentionLog(t, cfg)
	// Everything is expired, but only segments wholly below the HW may go.
	n, _ := f.l.DeleteRetention(bases[2] - 1)
	if n != 1 || f.l.LogStartOffset() != bases[1] {
		t.Fatalf("HW inside segment 1: deleted %d, start %d", n, f.l.LogStartOffset())
	}
	n, _ = f.l.DeleteRetention(bases[2])
	if n != 1 || f.l.LogStartOffset() != bases[2] {
		t.Fatalf("HW at segment 2's base: deleted %d, start %d", n, f.l.LogStartOffset())
	}
	n, _ = f.l.DeleteRetention(0)
	if n != 0 {
		t.Fatalf("HW 0: deleted %d", n)
	}
}

func TestRetentionBySize(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionMs = -1
	f, bases := retentionLog(t, cfg)
	sizes := segSizes(f.l)
	// Keep at most the newest three segments' bytes.
	cfg.RetentionBytes = sizes[2] + sizes[3] + sizes[4]
	f.l.SetConfig(cfg)
	n, err := f.l.DeleteRetention(f.l.LogEndOffset())
	if err != nil || n != 2 || f.l.LogStartOffset() != bases[2] {
		t.Fatalf("deleted %d (%v), start %d", n, err, f.l.LogStartOffset())
	}
	if f.l.Size() != cfg.RetentionBytes {
		t.Fatalf("size %d, want %d", f.l.Size(), cfg.RetentionBytes)
	}
	// One byte less than the last two segments: segment 2 goes, segment 3
	// stays since without it the log would be below retention.bytes (Kafka's rule).
	cfg.RetentionBytes = sizes[3] + sizes[4] - 1
	f.l.SetConfig(cfg)
	n, _ = f.l.DeleteRetention(f.l.LogEndOffset())
	if n != 1 || f.l.NumSegments() != 2 || f.l.LogStartOffset() != bases[3] {
		t.Fatalf("deleted %d, %d left", n, f.l.NumSegments())
	}
	// Zero bytes: everything but the active segment.
	cfg.RetentionBytes = 0
	f.l.SetConfig(cfg)
	if n, _ := f.l.DeleteRetention(f.l.LogEndOffset()); n != 1 || f.l.NumSegments() != 1 {
		t.Fatalf("deleted %d, %d left", n, f.l.NumSegments())
	}
	if n, _ := f.l.DeleteRetention(f.l.LogEndOffset()); n != 0 || f.l.NumSegments() != 1 {
		t.Fatal("the active segment was deleted")
	}
}

// Retention by time after a recovery uses each segment's true newest
// timestamp, not one lost with the rescanned time index.
func TestRetentionByTimeAfterRecovery(t *testing.T) {
	cfg := testConfig()
	cfg.IndexIntervalBytes = 1 << 20 // sparse: no index entries inside segments
	cfg.RetentionMs = int64(30 * time.Minute / time.Millisecond)
	f, bases := retentionLog(t, cfg)
	want := segMaxTimestamps(f.l)
	f.crash(0)
	f.reopenClean()
	if got := segMaxTimestamps(f.l); !equalInt64s(got, want) {
		t.Fatalf("segment max timestamps %v after recovery, want %v", got, want)
	}
	n, _ := f.l.DeleteRetention(f.l.LogEndOffset())
	if n != 2 || f.l.LogStartOffset() != bases[2] {
		t.Fatalf("deleted %d, start %d", n, f.l.LogStartOffset())
	}
}

func segSizes(l *Log) []int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []int64
	for _, s := range l.segs {
		out = append(out, s.size)
	}
	return out
}

// cleanup.policy=compact alone turns retention off: every segment stays
// however old or large, as Kafka's LogConfig.delete=false does; with
// compact,delete retention applies as under delete.
func TestRetentionCleanupPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy CleanupPolicy
		want   int
	}{
		{CleanupCompact, 0},
		{CleanupCompactDelete, 4},
		{CleanupDelete, 4},
	} {
		cfg := testConfig()
		cfg.RetentionMs = int64(time.Minute / time.Millisecond)
		cfg.RetentionBytes = 1
		cfg.Cleanup = tc.policy
		f, _ := retentionLog(t, cfg)
		n, err := f.l.DeleteRetention(f.l.LogEndOffset())
		if err != nil || n != tc.want {
			t.Errorf("%v: deleted %d segments (%v), want %d", tc.policy, n, err, tc.want)
		}
	}
}
