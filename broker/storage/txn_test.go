package storage

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

func TestTransactionsInTheLog(t *testing.T) {
	f := newFixture(t, testConfig())
	now := f.nowMs()
	f.appendLeader(plain(1, now))         // 0
	f.appendLeader(txnb(1, 0, 0, 3, now)) // 1..3
	if fu, ok := f.l.FirstUnstableOffset(); !ok || fu != 1 {
		t.Fatalf("first unstable %d %v, want 1", fu, ok)
	}
	f.appendLeader(txnb(2, 0, 0, 2, now)) // 4..5
	f.appendLeader(txnb(1, 0, 3, 1, now)) // 6
	f.appendLeader(plain(1, now))         // 7
	if fu, _ := f.l.FirstUnstableOffset(); fu != 1 {
		t.Fatalf("first unstable %d, want 1", fu)
	}
	if got := f.l.OngoingTxns(); len(got) != 2 || got[0].ProducerID != 1 || got[0].FirstOffset != 1 || got[1].ProducerID != 2 || got[1].FirstOffset != 4 {
		t.Fatalf("ongoing %+v", got)
	}
	// A non-transactional batch inside producer 1's transaction is refused.
	_, err := f.l.AppendAsLeader(buildBatch(t, idem(1, 0, 4, 1, now)), 0)
	wantCode(t, err, pb.ErrorCode_INVALID_TXN_STATE)

	m := f.marker(1, 1, record.ControlAbort) // 8
	if m.Offset != 8 || m.AlreadyDone || m.Completed == nil || *m.Completed != (CompletedTxn{ProducerID: 1, FirstOffset: 1, LastOffset: 8, Aborted: true}) {
		t.Fatalf("abort marker: %+v %+v", m, m.Completed)
	}
	if fu, ok := f.l.FirstUndecidedOffset(); !ok || fu != 4 {
		t.Fatalf("first undecided after the abort %d %v, want 4", fu, ok)
	}
	// Producer 1's transaction holds the first unstable offset until the
	// HW passes its marker.
	wantUnstable := func(want int64, when string) {
		t.Helper()
		if fu, ok := f.l.FirstUnstableOffset(); !ok || fu != want {
			t.Fatalf("first unstable %s: %d %v, want %d", when, fu, ok, want)
		}
	}
	wantUnstable(1, "after the abort")
	f.l.OnHighWatermarkUpdated(8)
	wantUnstable(1, "with the HW at the abort marker")
	f.l.OnHighWatermarkUpdated(9)
	wantUnstable(4, "with the HW past the abort marker")
	m = f.marker(2, 1, record.ControlCommit) // 9
	if m.Offset != 9 || m.Completed == nil || m.Completed.Aborted || m.Completed.FirstOffset != 4 {
		t.Fatalf("commit marker: %+v", m)
	}
	if fu, ok := f.l.FirstUndecidedOffset(); ok {
		t.Fatalf("first undecided %d after both ended", fu)
	}
	wantUnstable(4, "after the commit")
	f.l.OnHighWatermarkUpdated(10)
	if fu, ok := f.l.FirstUnstableOffset(); ok {
		t.Fatalf("first unstable %d after both ended and the HW passed both markers", fu)
	}
	wantAborted := []AbortedTxn{{ProducerID: 1, FirstOffset: 1, LastOffset: 8, LastStableOffset: 4}}
	if got := f.l.AllAborted(); !reflect.DeepEqual(got, wantAborted) {
		t.Fatalf("aborted %+v, want %+v", got, wantAborted)
	}
	b, err := os.ReadFile(segPath(f.dir, 0, TxnIndexSuffix))
	if err != nil {
		t.Fatal(err)
	}
	if onDisk, err := ParseTxnIndex(b); err != nil || !reflect.DeepEqual(onDisk, wantAborted) {
		t.Fatalf(".txnindex holds %+v %v", onDisk, err)
	}
	// The markers are control batches in the log with the right content.
	for off, typ := range map[int64]record.ControlType{8: record.ControlAbort, 9: record.ControlCommit} {
		res, err := f.l.Read(off, 1000, 10, true)
		if err != nil {
			t.Fatal(err)
		}
		h := headerOfBatch(t, res.Records)
		gotTyp, coord, err := record.ReadControlBatch(res.Records[:h.Size()])
		if err != nil || gotTyp != typ || coord != 0 || !h.IsControl() || !h.IsTransactional() || h.BaseOffset != off {
			t.Fatalf("marker at %d: %v %d %v %+v", off, gotTyp, coord, err, h)
		}
	}
	checkCollect := func(when string) {
		t.Helper()
		for _, c := range []struct {
			from, upper int64
			want        int
		}{{0, 10, 1}, {0, 1, 0}, {0, 2, 1}, {8, 10, 1}, {9, 10, 0}, {3, 4, 1}, {1, 1, 0}} {
			if got := f.l.CollectAborted(c.from, c.upper); len(got) != c.want {
				t.Errorf("%s: CollectAborted(%d, %d) = %+v, want %d entries", when, c.from, c.upper, got, c.want)
			}
		}
	}
	checkCollect("live")

	// A marker repeated after a coordinator failover writes nothing; it
	// reports the log end it was checked against (the marker it repeats,
	// at 8, is below it: the caller waits for the HW to reach it).
	size := f.l.Size()
	for _, typ := range []record.ControlType{record.ControlAbort, record.ControlCommit} {
		m, err := f.l.AppendMarker(1, 1, 0, typ, 0)
		if err != nil || !m.AlreadyDone || m.Completed != nil || m.LogEndOffset != 10 {
			t.Fatalf("repeated marker: %+v %v", m, err)
		}
	}
	if f.l.Size() != size || f.l.LogEndOffset() != 10 {
		t.Fatal("a repeated marker wrote bytes")
	}
	// A marker with an older epoch is refused.
	_, err = f.l.AppendMarker(1, 0, 0, record.ControlAbort, 0)
	wantCode(t, err, pb.ErrorCode_INVALID_PRODUCER_EPOCH)

	f.reopenClean()
	if got := f.l.AllAborted(); !reflect.DeepEqual(got, wantAborted) {
		t.Fatalf("after a clean reopen: aborted %+v", got)
	}
	checkCollect("after a clean reopen")
	f.crash(0)
	if got := f.l.AllAborted(); !reflect.DeepEqual(got, wantAborted) {
		t.Fatalf("after recovery: aborted %+v", got)
	}
	checkCollect("after recovery")
	if m, err := f.l.AppendMarker(2, 1, 0, record.ControlCommit, 0); err != nil || !m.AlreadyDone {
		t.Fatalf("repeated marker after recovery: %+v %v", m, err)
	}
}

// An aborted transaction must be reported to every reader of its range,
// however far after the range its marker lies (the .txnindex entry lives in
// the marker's segment).
func TestCollectAbortedMarkerSegmentsAfterTheRange(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 800
	f := newFixture(t, cfg)
	now := f.nowMs()
	f.appendLeader(txnb(1, 0, 0, 1, now)) // 0: producer 1's transaction opens
	f.appendLeader(txnb(2, 0, 0, 1, now)) // 1: producer 2's transaction opens
	for i := 0; i < 30; i++ {
		f.appendLeader(plain(1, now)) // 2..31
	}
	m2 := f.marker(2, 1, record.ControlAbort) // 32
	for i := 0; i < 30; i++ {
		f.appendLeader(plain(1, now))
	}
	m1 := f.marker(1, 1, record.ControlAbort)
	if f.l.NumSegments() < 5 {
		t.Fatalf("%d segments", f.l.NumSegments())
	}
	bases := segBases(f.l)
	if m1.Offset < bases[3] || m2.Offset < bases[1] {
		t.Fatalf("markers at %d and %d, segments %v", m2.Offset, m1.Offset, bases)
	}
	want := []AbortedTxn{
		{ProducerID: 2, FirstOffset: 1, LastOffset: m2.Offset, LastStableOffset: 0},
		{ProducerID: 1, FirstOffset: 0, LastOffset: m1.Offset, LastStableOffset: m1.Offset + 1},
	}
	if got := f.l.AllAborted(); !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted %+v, want %+v", got, want)
	}
	for _, c := range []struct {
		from, upper int64
		want        []AbortedTxn
	}{
		{0, 1, want[1:]},
		{0, 2, want},
		{1, 5, want},
		{5, 10, want},
		{m2.Offset + 1, m2.Offset + 5, want[1:]},
		{m1.Offset + 1, m1.Offset + 2, nil},
	} {
		if got := f.l.CollectAborted(c.from, c.upper); !reflect.DeepEqual(got, c.want) {
			t.Errorf("CollectAborted(%d, %d) = %+v, want %+v", c.from, c.upper, got, c.want)
		}
	}
}

func TestAppendAsFollower(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1000
	leader := newFixture(t, cfg)
	follower := newFixture(t, cfg)
	now := leader.nowMs()
	leader.appendLeaderEpoch(plain(2, now), 0)
	leader.appendLeaderEpoch(txnb(1, 0, 0, 2, now), 0)
	leader.appendLeaderEpoch(txnb(2, 0, 0, 2, now), 0)
	for i := 0; i < 10; i++ {
		leader.appendLeaderEpoch(idem(3, 0, int32(i), 1, now), 2)
	}
	if _, err := leader.l.AppendMarker(1, 1, 0, record.ControlAbort, 2); err != nil {
		t.Fatal(err)
	}
	for i := 10; i < 15; i++ {
		leader.appendLeaderEpoch(idem(3, 0, int32(i), 1, now), 5)
	}
	if _, err := leader.l.AppendMarker(2, 1, 0, record.ControlCommit, 5); err != nil {
		t.Fatal(err)
	}
	leader.appendLeaderEpoch(txnb(1, 1, 0, 1, now), 5) // open at the end
	leo := leader.l.LogEndOffset()

	// A batch that starts below the follower's log end is refused. (One
	// past it is not: a cleaned leader's log skips offsets, and Kafka's
	// followers only need them to increase; TestFollowerReplicatesACleanedLog.)
	first, _ := leader.l.Read(0, 1, leo, true)
	if _, err := follower.l.AppendAsFollower(first.Records); err != nil {
		t.Fatal(err)
	}
	size := follower.l.Size()
	if _, err := follower.l.AppendAsFollower(first.Records); err == nil {
		t.Fatal("a batch at offset 0 was appended again to the follower")
	}
	if follower.l.LogEndOffset() != 2 || follower.l.Size() != size {
		t.Fatal("refused follower append wrote something")
	}
	// Replicate with small fetches.
	for off := int64(2); off < leo; {
		res, err := leader.l.Read(off, 300, leo, true)
		if err != nil {
			t.Fatal(err)
		}
		ar, err := follower.l.AppendAsFollower(res.Records)
		if err != nil {
			t.Fatalf("AppendAsFollower at %d: %v", off, err)
		}
		if ar.FirstOffset != off {
			t.Fatalf("follower append at %d: %+v", off, ar)
		}
		off = ar.LastOffset + 1
	}
	compareReplica(t, leader.l, follower.l)
	if got := follower.l.Epochs(); !equalEpochs(got, []EpochEntry{{0, 0}, {2, 6}, {5, 17}}) {
		t.Fatalf("follower epochs %v", got)
	}
	// The follower, as new leader, still recognises producer 3's retries.
	b := buildBatch(t, idem(3, 0, 14, 1, now))
	if r, err := follower.l.AppendAsLeader(b, 6); err != nil || !r.Duplicate || r.FirstOffset != 21 {
		t.Fatalf("retry on the new leader: %+v %v", r, err)
	}
	// Follower state survives a restart.
	follower.reopenClean()
	compareReplica(t, leader.l, follower.l)
}

func compareReplica(t *testing.T, leader, follower *Log) {
	t.Helper()
	leo := leader.LogEndOffset()
	if follower.LogEndOffset() != leo {
		t.Fatalf("follower log end %d, leader %d", follower.LogEndOffset(), leo)
	}
	if !reflect.DeepEqual(readBatches(t, follower, 0, leo), readBatches(t, leader, 0, leo)) {
		t.Fatal("follower bytes differ from the leader's")
	}
	if !equalEpochs(follower.Epochs(), leader.Epochs()) {
		t.Fatalf("epochs: follower %v, leader %v", follower.Epochs(), leader.Epochs())
	}
	if !reflect.DeepEqual(follower.AllAborted(), leader.AllAborted()) {
		t.Fatalf("aborted: follower %+v, leader %+v", follower.AllAborted(), leader.AllAborted())
	}
	if !reflect.DeepEqual(follower.OngoingTxns(), leader.OngoingTxns()) {
		t.Fatalf("ongoing: follower %+v, leader %+v", follower.OngoingTxns(), leader.OngoingTxns())
	}
	if !reflect.DeepEqual(follower.Producers(), leader.Producers()) {
		t.Fatalf("producers: follower %+v\nleader %+v", follower.Producers(), leader.Producers())
	}
}

// Markers and data batches in one replicated chunk are applied in log
// order: a transaction that opens after a marker in the same fetch stays
// open, and the aborted entry's LSO is the one at the marker.
func TestAppendAsFollowerAppliesMarkersInOrder(t *testing.T) {
	leader := newFixture(t, testConfig())
	follower := newFixture(t, testConfig())
	now := leader.nowMs()
	leader.appendLeader(txnb(1, 0, 0, 2, now)) // 0..1
	leader.marker(1, 1, record.ControlAbort)   // 2
	leader.appendLeader(txnb(1, 1, 0, 2, now)) // 3..4, a new transaction
	leader.appendLeader(txnb(2, 0, 0, 1, now)) // 5
	leader.marker(2, 1, record.ControlAbort)   // 6
	res, err := leader.l.Read(0, 1<<20, 100, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := follower.l.AppendAsFollower(res.Records); err != nil {
		t.Fatal(err)
	}
	compareReplica(t, leader.l, follower.l)
	if fu, ok := follower.l.FirstUndecidedOffset(); !ok || fu != 3 {
		t.Fatalf("follower first undecided %d %v, want 3", fu, ok)
	}
	// The follower keeps the completed transactions as the leader does,
	// until the HW passes their markers.
	if fu, ok := follower.l.FirstUnstableOffset(); !ok || fu != 0 {
		t.Fatalf("follower first unstable %d %v before the HW moved, want 0", fu, ok)
	}
	follower.l.OnHighWatermarkUpdated(7)
	if fu, ok := follower.l.FirstUnstableOffset(); !ok || fu != 3 {
		t.Fatalf("follower first unstable %d %v with the HW past both markers, want 3", fu, ok)
	}
}

func TestAppendAsFollowerRefusesCorruptMarker(t *testing.T) {
	f := newFixture(t, testConfig())
	// A control batch whose single record is not a marker.
	b, err := record.Build(record.BatchOptions{ProducerID: 1, ProducerEpoch: 1, BaseSequence: -1, Transactional: true, Control: true},
		[]record.Record{{Key: []byte{0, 0}, Value: []byte{1}, Timestamp: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.l.AppendAsFollower(b); err == nil {
		t.Fatal("a control batch that is no marker was replicated")
	}
	if f.l.LogEndOffset() != 0 || f.l.Size() != 0 {
		t.Fatal("refused follower append wrote something")
	}
}

func TestTruncateTo(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1000
	f := newFixture(t, cfg)
	now := f.nowMs()
	var sent [][]byte
	offsets := []int64{}
	seq := int32(0)
	epoch := int32(0)
	for i := 0; i < 30; i++ {
		if i == 10 {
			epoch = 3
		}
		if i == 20 {
			epoch = 7
		}
		if i == 12 {
			f.appendLeaderEpoch(txnb(9, 0, 0, 1, now+int64(i)), epoch)
		}
		if i == 25 {
			if _, err := f.l.AppendMarker(9, 1, 0, record.ControlAbort, epoch); err != nil {
				t.Fatal(err)
			}
		}
		b := buildBatch(t, idem(4, 0, seq, 2, now+int64(i)))
		sent = append(sent, append([]byte(nil), b...))
		r, err := f.l.AppendAsLeader(b, epoch)
		if err != nil {
			t.Fatal(err)
		}
		offsets = append(offsets, r.FirstOffset)
		seq += 2
	}
	if len(f.l.AllAborted()) != 1 {
		t.Fatal("no aborted txn")
	}
	before := captureState(t, f.l)
	bases := before.bases
	if len(bases) < 4 {
		t.Fatalf("segments %v", bases)
	}
	// Cut inside batch 17 (two records): the whole batch goes.
	cut := offsets[17] + 1
	if err := f.l.TruncateTo(cut); err != nil {
		t.Fatal(err)
	}
	end := offsets[17]
	if f.l.LogEndOffset() != end {
		t.Fatalf("log end %d, want %d", f.l.LogEndOffset(), end)
	}
	var keep []int64
	for _, b := range bases {
		if b < end {
			keep = append(keep, b)
		}
	}
	if got := segFiles(t, f.dir); !equalInt64s(got, keep) {
		t.Fatalf("segment files %v, want %v", got, keep)
	}
	if got := readBatches(t, f.l, 0, end); !reflect.DeepEqual(got, before.batches[:len(got)]) || len(got) != 18 {
		t.Fatalf("%d batches left", len(got))
	}
	checkIndexes(t, f.l)
	if len(f.l.AllAborted()) != 0 {
		t.Fatalf("the aborted entry past the cut survived: %+v", f.l.AllAborted())
	}
	if fu, ok := f.l.FirstUnstableOffset(); !ok || fu != offsets[12]-1 {
		t.Fatalf("the transaction the cut marker ended should be open again: %d %v", fu, ok)
	}
	if got := f.l.Epochs(); !equalEpochs(got, []EpochEntry{{0, 0}, {3, offsets[10]}}) {
		t.Fatalf("epochs %v", got)
	}
	if cp, err := ReadEpochCheckpoint(filepath.Join(f.dir, EpochCheckpointFile)); err != nil || !equalEpochs(cp, f.l.Epochs()) {
		t.Fatalf("epoch checkpoint %v %v", cp, err)
	}
	snaps, _ := ListSnapshots(f.dir)
	for _, s := range snaps {
		if s > end {
			t.Fatalf("snapshot %d past the cut", s)
		}
	}
	// The active segment's max timestamp is that of what is left.
	maxTs := segMaxTimestamps(f.l)
	if last := headerOfBatch(t, before.batches[17]); maxTs[len(maxTs)-1] != last.MaxTimestamp {
		t.Fatalf("active segment max timestamp %d, want %d", maxTs[len(maxTs)-1], last.MaxTimestamp)
	}
	// A surviving batch is a duplicate; the truncated one is appended again.
	r, err := f.l.AppendAsLeader(append([]byte(nil), sent[16]...), 3)
	if err != nil || !r.Duplicate || r.FirstOffset != offsets[16] {
		t.Fatalf("surviving batch: %+v %v", r, err)
	}
	r, err = f.l.AppendAsLeader(append([]byte(nil), sent[17]...), 3)
	if err != nil || r.Duplicate || r.FirstOffset != end {
		t.Fatalf("truncated batch: %+v %v", r, err)
	}
	_, err = f.l.AppendAsLeader(append([]byte(nil), sent[19]...), 3)
	wantCode(t, err, pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER)

	// Truncating at or past the end does nothing; below the start clamps.
	leo := f.l.LogEndOffset()
	if err := f.l.TruncateTo(leo + 100); err != nil || f.l.LogEndOffset() != leo {
		t.Fatal("truncate past the end")
	}
	f.reopenClean()
	if f.l.LogEndOffset() != leo || len(f.l.AllAborted()) != 0 {
		t.Fatal("truncation did not survive a reopen")
	}
	if err := f.l.TruncateTo(-5); err != nil || f.l.LogEndOffset() != 0 || f.l.NumSegments() != 1 {
		t.Fatalf("truncate to the start: end %d, %d segments, %v", f.l.LogEndOffset(), f.l.NumSegments(), err)
	}
	if f.l.ProducerCount() != 0 || len(f.l.Epochs()) != 0 {
		t.Fatalf("state left after truncating everything: %d producers, epochs %v", f.l.ProducerCount(), f.l.Epochs())
	}
	if r := f.appendLeader(plain(1, now)); r.FirstOffset != 0 {
		t.Fatalf("append after truncating everything at %d", r.FirstOffset)
	}
}

// Truncating exactly at a segment boundary removes the later segment whole.
func TestTruncateToSegmentBoundary(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 600
	f := newFixture(t, cfg)
	for i := 0; i < 20; i++ {
		f.appendLeader(plain(1, f.nowMs()))
	}
	bases := segBases(f.l)
	if err := f.l.TruncateTo(bases[2]); err != nil {
		t.Fatal(err)
	}
	if got := segBases(f.l); !equalInt64s(got, bases[:2]) || f.l.LogEndOffset() != bases[2] {
		t.Fatalf("segments %v end %d", got, f.l.LogEndOffset())
	}
	checkIndexes(t, f.l)
	r := f.appendLeader(plain(1, f.nowMs()))
	if r.FirstOffset != bases[2] {
		t.Fatalf("append at %d", r.FirstOffset)
	}
	f.crash(0)
	if f.l.LogEndOffset() != bases[2]+1 {
		t.Fatalf("after recovery the log end is %d", f.l.LogEndOffset())
	}
}

// After a truncation the next index entries are spaced as a rebuild from
// the log would space them, whether the segment was in memory or loaded
// from disk.
func TestTruncateKeepsIndexSpacing(t *testing.T) {
	for _, reopen := range []bool{false, true} {
		for _, where := range []string{"boundary", "inside the first", "inside the second"} {
			cfg := testConfig()
			cfg.SegmentBytes = 700
			cfg.IndexIntervalBytes = 250
			f := newFixture(t, cfg)
			for i := 0; i < 20; i++ {
				f.appendLeader(plain(1+i%3, f.nowMs()))
			}
			if reopen {
				f.reopenClean()
			}
			bases := segBases(f.l)
			cut := map[string]int64{"boundary": bases[1], "inside the first": bases[1] - 3, "inside the second": bases[1] + 4}[where]
			if err := f.l.TruncateTo(cut); err != nil {
				t.Fatal(err)
			}
			// Bigger segments from now on, so the appends land in the truncated one.
			f.cfg.SegmentBytes = 1 << 20
			f.l.SetConfig(f.cfg)
			for i := 0; i < 8; i++ {
				f.appendLeader(plain(1+i%2, f.nowMs()))
			}
			want := indexDump(f.l)
			f.crash(0)
			if got := indexDump(f.l); got != want {
				t.Fatalf("reopen %v, cut %s: indexes after truncation and appends\n%s\nrebuilt from the log\n%s", reopen, where, want, got)
			}
			f.l.Abandon()
		}
	}
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 600
	f := newFixture(t, cfg)
	for i := 0; i < 20; i++ {
		f.appendLeaderEpoch(idem(1, 0, int32(i), 1, f.nowMs()), 2)
	}
	if err := f.l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	check := func(when string, end int64) {
		t.Helper()
		if f.l.LogStartOffset() != 1000 || f.l.LogEndOffset() != end {
			t.Fatalf("%s: log [%d, %d]", when, f.l.LogStartOffset(), f.l.LogEndOffset())
		}
		if got := segFiles(t, f.dir); !equalInt64s(got, []int64{1000}) {
			t.Fatalf("%s: segment files %v", when, got)
		}
		_, err := f.l.Read(0, 100, 2000, true)
		wantCode(t, err, pb.ErrorCode_OFFSET_OUT_OF_RANGE)
		_, err = f.l.Read(999, 100, 2000, true)
		wantCode(t, err, pb.ErrorCode_OFFSET_OUT_OF_RANGE)
	}
	check("after", 1000)
	if f.l.ProducerCount() != 0 || len(f.l.Epochs()) != 0 || f.l.RecoveryPoint() != 1000 {
		t.Fatalf("state left: %d producers, epochs %v, recovery point %d", f.l.ProducerCount(), f.l.Epochs(), f.l.RecoveryPoint())
	}
	if snaps, _ := ListSnapshots(f.dir); len(snaps) != 0 {
		t.Fatalf("snapshots %v", snaps)
	}
	r := f.appendLeaderEpoch(idem(1, 0, 0, 1, f.nowMs()), 3)
	if r.FirstOffset != 1000 {
		t.Fatalf("append at %d", r.FirstOffset)
	}
	check("after an append", 1001)
	f.crash(0)
	check("after recovery", 1001)
	if got := f.l.Epochs(); !equalEpochs(got, []EpochEntry{{3, 1000}}) {
		t.Fatalf("epochs %v", got)
	}
	f.reopenClean()
	check("after a clean reopen", 1001)
}
