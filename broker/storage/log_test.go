package storage

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// sameExceptOffsetAndEpoch reports whether stored is sent with only
// baseOffset and partitionLeaderEpoch rewritten.
func sameExceptOffsetAndEpoch(sent, stored []byte) bool {
	if len(sent) != len(stored) {
		return false
	}
	return bytes.Equal(sent[8:12], stored[8:12]) && bytes.Equal(sent[16:], stored[16:])
}

func TestAppendAsLeaderAssignsContiguousOffsets(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1500
	f := newFixture(t, cfg)
	var sent [][]byte
	next := int64(0)
	for i := 0; i < 40; i++ {
		n := 1 + i%4
		b := buildBatch(t, plain(n, f.nowMs()+int64(i)))
		sent = append(sent, append([]byte(nil), b...))
		epoch := int32(i / 10)
		res, err := f.l.AppendAsLeader(b, epoch)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if res.FirstOffset != next || res.LastOffset != next+int64(n)-1 || res.NumMessages != int64(n) || res.Duplicate {
			t.Fatalf("append %d: %+v, want offsets %d..%d", i, res, next, next+int64(n)-1)
		}
		if res.Bytes != len(b) {
			t.Fatalf("append %d: Bytes %d, want %d", i, res.Bytes, len(b))
		}
		next += int64(n)
	}
	if got := f.l.LogEndOffset(); got != next {
		t.Fatalf("log end %d, want %d", got, next)
	}
	if f.l.NumSegments() < 3 {
		t.Fatalf("%d segments; SegmentBytes=%d should have forced rolls", f.l.NumSegments(), cfg.SegmentBytes)
	}
	got := readBatches(t, f.l, 0, next)
	if len(got) != len(sent) {
		t.Fatalf("read %d batches, want %d", len(got), len(sent))
	}
	off := int64(0)
	for i, b := range got {
		h := headerOfBatch(t, b) // the CRC still holds
		if h.BaseOffset != off {
			t.Fatalf("batch %d at offset %d, want %d", i, h.BaseOffset, off)
		}
		if want := int32(i / 10); h.PartitionLeaderEpoch != want {
			t.Fatalf("batch %d has leader epoch %d, want %d", i, h.PartitionLeaderEpoch, want)
		}
		if !sameExceptOffsetAndEpoch(sent[i], b) {
			t.Fatalf("batch %d: stored bytes differ from the sent ones beyond baseOffset and partitionLeaderEpoch", i)
		}
		off = h.NextOffset()
	}
	var total int64
	for _, b := range got {
		total += int64(len(b))
	}
	if f.l.Size() != total {
		t.Fatalf("Size %d, want %d", f.l.Size(), total)
	}
	wantEpochs := []EpochEntry{{0, 0}}
	for e := int32(1); e < 4; e++ {
		wantEpochs = append(wantEpochs, EpochEntry{e, headerOfBatch(t, got[e*10]).BaseOffset})
	}
	if g := f.l.Epochs(); !equalEpochs(g, wantEpochs) {
		t.Fatalf("epochs %v, want %v", g, wantEpochs)
	}
	checkIndexes(t, f.l)
}

// A batch whose records section is not decodable but whose CRC is right
// is stored as it is: the leader never decodes records.
func TestAppendAsLeaderNeverDecodesRecords(t *testing.T) {
	f := newFixture(t, testConfig())
	b := buildBatch(t, plain(3, f.nowMs()))
	for i := record.HeaderSize; i < len(b); i++ {
		b[i] = 0xff // varints that never end
	}
	binary.BigEndian.PutUint32(b[17:], record.ComputeCRC(b))
	if _, _, err := record.Decode(b); err == nil {
		t.Fatal("test batch should not decode")
	}
	sent := append([]byte(nil), b...)
	res, err := f.l.AppendAsLeader(b, 5)
	if err != nil {
		t.Fatalf("AppendAsLeader: %v", err)
	}
	if res.FirstOffset != 0 || res.LastOffset != 2 {
		t.Fatalf("%+v", res)
	}
	got := readBatches(t, f.l, 0, 3)
	if len(got) != 1 || !sameExceptOffsetAndEpoch(sent, got[0]) {
		t.Fatal("stored batch differs from the sent one")
	}
}

func TestAppendIdempotentDuplicate(t *testing.T) {
	f := newFixture(t, testConfig())
	const pid = 42
	var sent [][]byte
	seq := int32(0)
	for i := 0; i < 4; i++ {
		b := buildBatch(t, idem(pid, 0, seq, 3, f.nowMs()))
		sent = append(sent, append([]byte(nil), b...))
		if _, err := f.l.AppendAsLeader(b, 0); err != nil {
			t.Fatal(err)
		}
		seq += 3
	}
	size, leo := f.l.Size(), f.l.LogEndOffset()
	for i, b := range sent {
		res, err := f.l.AppendAsLeader(append([]byte(nil), b...), 0)
		if err != nil {
			t.Fatalf("re-sent batch %d: %v", i, err)
		}
		if !res.Duplicate || res.FirstOffset != int64(3*i) || res.LastOffset != int64(3*i+2) {
			t.Fatalf("re-sent batch %d: %+v, want a duplicate at %d..%d", i, res, 3*i, 3*i+2)
		}
	}
	if f.l.Size() != size || f.l.LogEndOffset() != leo {
		t.Fatalf("duplicates wrote bytes: size %d→%d, end %d→%d", size, f.l.Size(), leo, f.l.LogEndOffset())
	}
	// The next sequence still goes in.
	res := f.appendLeader(idem(pid, 0, seq, 1, f.nowMs()))
	if res.Duplicate || res.FirstOffset != leo {
		t.Fatalf("next batch: %+v", res)
	}
}

func TestAppendOutOfOrderSequence(t *testing.T) {
	f := newFixture(t, testConfig())
	f.appendLeader(idem(7, 0, 0, 2, f.nowMs()))
	size := f.l.Size()
	for _, seq := range []int32{3, 5, 100} {
		_, err := f.l.AppendAsLeader(buildBatch(t, idem(7, 0, seq, 1, f.nowMs())), 0)
		wantCode(t, err, pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER)
	}
	if f.l.Size() != size || f.l.LogEndOffset() != 2 {
		t.Fatalf("a refused batch was written: size %d→%d, end %d", size, f.l.Size(), f.l.LogEndOffset())
	}
}

func TestAppendCorruptBatchRefused(t *testing.T) {
	f := newFixture(t, testConfig())
	f.appendLeader(plain(1, f.nowMs()))
	good := buildBatch(t, plain(3, f.nowMs()))
	for _, bit := range []int{21 * 8, 30*8 + 3, (record.HeaderSize+5)*8 + 1, (len(good)-1)*8 + 7} {
		b := append([]byte(nil), good...)
		b[bit/8] ^= 1 << (bit % 8)
		_, err := f.l.AppendAsLeader(b, 0)
		wantCode(t, err, pb.ErrorCode_CORRUPT_MESSAGE)
	}
	if f.l.LogEndOffset() != 1 || f.l.Size() != int64(len(buildBatch(t, plain(1, f.nowMs())))) {
		t.Fatalf("corrupt batches were written: end %d size %d", f.l.LogEndOffset(), f.l.Size())
	}
}

// A request holding good batches followed by a torn or corrupt one writes
// nothing at all.
func TestAppendRequestWithTornBatchWritesNothing(t *testing.T) {
	f := newFixture(t, testConfig())
	a := buildBatch(t, plain(2, f.nowMs()))
	b := buildBatch(t, plain(2, f.nowMs()))
	flipped := append([]byte(nil), b...)
	flipped[len(flipped)-3] ^= 0x10
	cases := map[string][]byte{
		"torn second batch":    append(append([]byte(nil), a...), b[:len(b)-7]...),
		"partial header":       append(append([]byte(nil), a...), b[:20]...),
		"corrupt second batch": append(append([]byte(nil), a...), flipped...),
		"trailing single byte": append(append([]byte(nil), a...), 0),
		"empty request":        {},
		"garbage batch length": append(append([]byte(nil), a...), bytes.Repeat([]byte{0x7f}, 70)...),
		"idempotent and plain": append(buildBatch(t, idem(3, 0, 0, 1, 0)), a...),
	}
	for name, req := range cases {
		if _, err := f.l.AppendAsLeader(req, 0); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if f.l.Size() != 0 || f.l.LogEndOffset() != 0 {
			t.Fatalf("%s: wrote something (size %d)", name, f.l.Size())
		}
	}
	// Both good batches in one request are fine.
	res, err := f.l.AppendAsLeader(append(append([]byte(nil), a...), b...), 0)
	if err != nil || res.FirstOffset != 0 || res.LastOffset != 3 {
		t.Fatalf("two good batches: %+v %v", res, err)
	}
}

func TestAppendClientControlBatchRefused(t *testing.T) {
	f := newFixture(t, testConfig())
	f.appendLeader(txnb(5, 0, 0, 1, f.nowMs()))
	ctl := record.BuildControlBatch(5, 1, record.ControlCommit, 0, f.nowMs())
	_, err := f.l.AppendAsLeader(ctl, 0)
	wantCode(t, err, pb.ErrorCode_INVALID_RECORD)
	if f.l.LogEndOffset() != 1 {
		t.Fatal("control batch written")
	}
	if fu, ok := f.l.FirstUnstableOffset(); !ok || fu != 0 {
		t.Fatalf("the refused marker changed producer state: %d %v", fu, ok)
	}
}

func TestRollBySegmentBytes(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1000
	f := newFixture(t, cfg)
	for i := 0; i < 30; i++ {
		f.appendLeader(idem(1, 0, int32(i), 1, f.nowMs()))
	}
	bases := segBases(f.l)
	if len(bases) < 3 {
		t.Fatalf("%d segments", len(bases))
	}
	f.l.mu.RLock()
	for _, s := range f.l.segs {
		if s.size > cfg.SegmentBytes {
			t.Errorf("segment %d holds %d bytes > segment.bytes %d", s.base, s.size, cfg.SegmentBytes)
		}
		if s != f.l.active() && s.dirty {
			t.Errorf("segment %d was rolled but not fsynced", s.base)
		}
	}
	f.l.mu.RUnlock()
	if got := segFiles(t, f.dir); !equalInt64s(got, bases) {
		t.Fatalf("segment files %v, segments %v", got, bases)
	}
	snaps, err := ListSnapshots(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	if !equalInt64s(snaps, bases[1:]) {
		t.Fatalf("snapshots %v, want one per roll at %v", snaps, bases[1:])
	}
	// The snapshot at a roll is the producer state as of that offset.
	for _, b := range bases[1:] {
		m, err := LoadSnapshot(SnapshotPath(f.dir, b))
		if err != nil {
			t.Fatal(err)
		}
		e, ok := m.Get(1)
		if !ok || e.LastOffset() != b-1 || e.LastSequence() != int32(b-1) {
			t.Fatalf("snapshot %d: %+v", b, e)
		}
	}
	// Rolled segments are on disk, so the recovery point moved to the active segment.
	if rp := f.l.RecoveryPoint(); rp != bases[len(bases)-1] {
		t.Fatalf("recovery point %d, want the active base %d", rp, bases[len(bases)-1])
	}
	// A batch bigger than a segment still goes in, alone.
	big := plain(10, f.nowMs())
	big.valueSize = 300
	res := f.appendLeader(big)
	if f.l.LogEndOffset() != res.LastOffset+1 || segBases(f.l)[f.l.NumSegments()-1] != res.FirstOffset {
		t.Fatalf("oversized batch not in its own segment")
	}
}

func TestRollBySegmentMs(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentMs = 1000
	f := newFixture(t, cfg)
	f.appendLeader(plain(1, f.nowMs()))
	f.clk.Advance(500 * time.Millisecond)
	f.appendLeader(plain(1, f.nowMs()))
	if n := f.l.NumSegments(); n != 1 {
		t.Fatalf("rolled after 500ms of segment.ms=1000: %d segments", n)
	}
	f.clk.Advance(600 * time.Millisecond)
	f.appendLeader(plain(1, f.nowMs()))
	if got := segBases(f.l); !equalInt64s(got, []int64{0, 2}) {
		t.Fatalf("segments %v, want a roll at 2 after 1100ms", got)
	}
	f.clk.Advance(999 * time.Millisecond)
	f.appendLeader(plain(1, f.nowMs()))
	if n := f.l.NumSegments(); n != 2 {
		t.Fatalf("rolled again too early: %d segments", n)
	}
	snaps, _ := ListSnapshots(f.dir)
	if !equalInt64s(snaps, []int64{2}) {
		t.Fatalf("snapshots %v", snaps)
	}
}

// An empty segment that waited longer than segment.ms is not rolled by
// its first batch, and counts segment.ms from that batch on.
func TestRollBySegmentMsEmptySegment(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentMs = 1000
	f := newFixture(t, cfg)
	f.clk.Advance(time.Hour)
	f.appendLeader(plain(1, f.nowMs()))
	f.clk.Advance(10 * time.Millisecond)
	f.appendLeader(plain(1, f.nowMs()))
	if n := f.l.NumSegments(); n != 1 {
		t.Fatalf("the second batch rolled a segment whose first batch is 10ms old: %d segments", n)
	}
}

func TestLogStatusAccessors(t *testing.T) {
	f := newFixture(t, testConfig())
	if f.l.Dir() != f.dir || f.l.Key() != testKey || DirName("t", 0) != "t-0" {
		t.Fatal("names")
	}
	if f.l.LatestEpoch() != -1 || f.l.LogEndOffset() != 0 || f.l.LogStartOffset() != 0 {
		t.Fatal("empty log")
	}
	f.appendLeaderEpoch(plain(2, f.nowMs()), 3)
	if f.l.LatestEpoch() != 3 {
		t.Fatalf("latest epoch %d", f.l.LatestEpoch())
	}
	c := f.l.Config()
	c.SegmentBytes = 12345
	f.l.SetConfig(c)
	if f.l.Config().SegmentBytes != 12345 {
		t.Fatal("SetConfig")
	}
	if err := f.l.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := f.l.AppendAsLeader(buildBatch(t, plain(1, 0)), 3)
	wantCode(t, err, pb.ErrorCode_KAFKA_STORAGE_ERROR)
	_, err = f.l.Read(0, 100, 10, true)
	wantCode(t, err, pb.ErrorCode_KAFKA_STORAGE_ERROR)
	if err := f.l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	f.open(f.l.RecoveryPoint())
	if err := f.l.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.dir); !os.IsNotExist(err) {
		t.Fatalf("Delete left the directory: %v", err)
	}
	f.l = nil
}

func TestOpenRemovesLeftovers(t *testing.T) {
	f := newFixture(t, testConfig())
	f.appendLeader(plain(1, f.nowMs()))
	if err := f.l.Close(); err != nil {
		t.Fatal(err)
	}
	leftovers := []string{
		FileName(0) + LogSuffix + ".deleted",
		FileName(500) + IndexSuffix,
		FileName(500) + TimeIndexSuffix,
		FileName(500) + TxnIndexSuffix,
		EpochCheckpointFile + ".tmp",
		FileName(1) + SnapshotSuffix + ".tmp",
	}
	for _, n := range leftovers {
		if err := os.WriteFile(filepath.Join(f.dir, n), []byte("junk"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.open(1)
	for _, n := range leftovers {
		if _, err := os.Stat(filepath.Join(f.dir, n)); !os.IsNotExist(err) {
			t.Errorf("%s survived Open", n)
		}
	}
	if f.l.LogEndOffset() != 1 {
		t.Fatal("log end")
	}
}

func equalInt64s(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalEpochs(a, b []EpochEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
