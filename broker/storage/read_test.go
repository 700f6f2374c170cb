package storage

import (
	"bytes"
	"testing"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// readFixture holds 10 batches of 3 records (offsets 0..29) in one segment.
func readFixture(t *testing.T) (*fixture, [][]byte) {
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	f := newFixture(t, cfg)
	var stored [][]byte
	for i := 0; i < 10; i++ {
		b := buildBatch(t, plain(3, f.nowMs()+int64(i)))
		if _, err := f.l.AppendAsLeader(b, 0); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, b) // rewritten in place: what is on disk
	}
	return f, stored
}

func concat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

func TestReadByteLimit(t *testing.T) {
	f, stored := readFixture(t)
	size := len(stored[0])
	cases := []struct {
		name     string
		maxBytes int
		minOne   bool
		want     []byte
	}{
		{"exactly two batches", 2 * size, false, concat(stored[:2]...)},
		{"two and a half batches", 2*size + size/2, false, concat(stored[:2]...)},
		{"one byte short of two", 2*size - 1, false, stored[0]},
		{"smaller than the first, minOneBatch", size - 1, true, stored[0]},
		{"zero, minOneBatch", 0, true, stored[0]},
		{"smaller than the first", size - 1, false, nil},
		{"zero", 0, false, nil},
		{"everything", 1 << 20, false, concat(stored...)},
	}
	for _, c := range cases {
		res, err := f.l.Read(0, c.maxBytes, 30, c.minOne)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !bytes.Equal(res.Records, c.want) {
			t.Errorf("%s: got %d bytes, want %d", c.name, len(res.Records), len(c.want))
		}
		if res.LogEnd != 30 || res.LogStart != 0 {
			t.Errorf("%s: log bounds [%d, %d]", c.name, res.LogStart, res.LogEnd)
		}
		if len(res.Records) > c.maxBytes && len(res.Records) > size {
			t.Errorf("%s: %d bytes over the limit %d", c.name, len(res.Records), c.maxBytes)
		}
	}
}

func TestReadUpperBound(t *testing.T) {
	f, stored := readFixture(t)
	for _, c := range []struct {
		upper int64
		n     int // batches expected
	}{
		{30, 10}, {29, 9}, {27, 9}, {26, 8}, {3, 1}, {2, 0}, {1, 0}, {0, 0}, {1000, 10},
	} {
		res, err := f.l.Read(0, 1<<20, c.upper, true)
		if err != nil {
			t.Fatal(err)
		}
		if want := concat(stored[:c.n]...); !bytes.Equal(res.Records, want) {
			t.Errorf("upper bound %d: %d bytes, want the %d batches below it", c.upper, len(res.Records), c.n)
		}
		for it := record.NewIter(res.Records); it.Next(); {
			if h := it.Header(); h.NextOffset() > c.upper {
				t.Errorf("upper bound %d: batch %d..%d reaches it", c.upper, h.BaseOffset, h.LastOffset())
			}
		}
	}
	// minOneBatch never overrides the upper bound.
	res, err := f.l.Read(27, 10, 29, true)
	if err != nil || len(res.Records) != 0 {
		t.Fatalf("read past the upper bound with minOneBatch: %d bytes %v", len(res.Records), err)
	}
}

func TestReadOffsetInsideBatch(t *testing.T) {
	f, stored := readFixture(t)
	for off := int64(0); off < 30; off++ {
		res, err := f.l.Read(off, 1, 30, true)
		if err != nil {
			t.Fatal(err)
		}
		i := off / 3
		if res.FirstOffset != 3*i || !bytes.Equal(res.Records, stored[i]) {
			t.Fatalf("Read(%d): first offset %d, %d bytes; want the whole batch at %d", off, res.FirstOffset, len(res.Records), 3*i)
		}
	}
}

func TestReadOutOfRange(t *testing.T) {
	f, _ := readFixture(t)
	for _, off := range []int64{-1, 31, 1000} {
		_, err := f.l.Read(off, 1000, 1000, true)
		wantCode(t, err, pb.ErrorCode_OFFSET_OUT_OF_RANGE)
	}
	// The log end itself is in range and empty.
	res, err := f.l.Read(30, 1000, 1000, true)
	if err != nil || len(res.Records) != 0 || res.LogEnd != 30 {
		t.Fatalf("Read(log end): %d bytes, %v", len(res.Records), err)
	}
}

func TestReadStopsAtSegmentEnd(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 700
	f := newFixture(t, cfg)
	var stored [][]byte
	for i := 0; i < 20; i++ {
		b := buildBatch(t, plain(2, f.nowMs()))
		if _, err := f.l.AppendAsLeader(b, 0); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, b)
	}
	bases := segBases(f.l)
	if len(bases) < 3 {
		t.Fatalf("segments %v", bases)
	}
	// From the start of segment 0 a big read returns exactly that segment.
	res, err := f.l.Read(0, 1<<20, 1000, true)
	if err != nil {
		t.Fatal(err)
	}
	n := int(bases[1] / 2)
	if !bytes.Equal(res.Records, concat(stored[:n]...)) {
		t.Fatalf("read from 0 returned %d bytes, want segment 0's %d batches", len(res.Records), n)
	}
	// From the middle of segment 1 it stops at segment 1's end.
	res, err = f.l.Read(bases[1]+3, 1<<20, 1000, true)
	if err != nil {
		t.Fatal(err)
	}
	from, to := int(bases[1]/2)+1, int(bases[2]/2)
	if res.FirstOffset != bases[1]+2 || !bytes.Equal(res.Records, concat(stored[from:to]...)) {
		t.Fatalf("read from %d: first %d, %d bytes", bases[1]+3, res.FirstOffset, len(res.Records))
	}
	// Reading on and on covers the log once.
	if got := readBatches(t, f.l, 0, f.l.LogEndOffset()); !bytes.Equal(concat(got...), concat(stored...)) {
		t.Fatal("a full scan differs from what was appended")
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 600
	f := newFixture(t, cfg)
	base := f.nowMs()
	// batch i holds 2 records with timestamps base+10i and base+10i+1, except
	// batch 5, whose records are older than everything before them.
	for i := 0; i < 12; i++ {
		ts := base + 10*int64(i)
		if i == 5 {
			ts = base - 1000
		}
		f.appendLeader(plain(2, ts))
	}
	f.marker(99, 0, record.ControlCommit) // a control batch at 24, timestamped now
	if f.l.NumSegments() < 3 {
		t.Fatalf("%d segments", f.l.NumSegments())
	}
	cases := []struct {
		ts     int64
		upper  int64
		off    int64
		gotTs  int64
		wantOK bool
	}{
		{base - 5000, 100, 0, base, true},
		{base, 100, 0, base, true},
		{base + 1, 100, 1, base + 1, true},
		{base + 2, 100, 2, base + 10, true},
		{base + 35, 100, 8, base + 40, true},
		{base + 41, 100, 9, base + 41, true},
		{base + 42, 100, 12, base + 60, true}, // batch 5 (offsets 10, 11) is older
		{base + 111, 100, 23, base + 111, true},
		{base + 112, 100, 0, 0, false}, // no data record is that new
		{base + 41, 9, 0, 0, false},    // batch 4 (8..9) reaches the bound
		{base + 41, 10, 9, base + 41, true},
	}
	for _, c := range cases {
		off, ts, ok, err := f.l.OffsetForTimestamp(c.ts, c.upper)
		if err != nil {
			t.Fatal(err)
		}
		if ok != c.wantOK || (ok && (off != c.off || ts != c.gotTs)) {
			t.Errorf("OffsetForTimestamp(base%+d, upper %d) = %d, base%+d, %v; want %d, base%+d, %v",
				c.ts-base, c.upper, off, ts-base, ok, c.off, c.gotTs-base, c.wantOK)
		}
	}
	// The same answers once the log has been recovered from scratch and reopened.
	f.crash(0)
	f.reopenClean()
	for _, c := range cases {
		off, ts, ok, err := f.l.OffsetForTimestamp(c.ts, c.upper)
		if err != nil {
			t.Fatal(err)
		}
		if ok != c.wantOK || (ok && (off != c.off || ts != c.gotTs)) {
			t.Errorf("after recovery: OffsetForTimestamp(base%+d, upper %d) = %d, base%+d, %v; want %d, base%+d, %v",
				c.ts-base, c.upper, off, ts-base, ok, c.off, c.gotTs-base, c.wantOK)
		}
	}
}

// With sparse indexes, timestamps are found through the time index's
// segment maximum, which must survive a recovery (the seal entry).
func TestOffsetForTimestampSparseIndexAfterRecovery(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 600
	cfg.IndexIntervalBytes = 1 << 20 // no index entries at all
	f := newFixture(t, cfg)
	base := f.nowMs()
	for i := 0; i < 20; i++ {
		f.appendLeader(plain(1, base+int64(i)))
	}
	want := segMaxTimestamps(f.l)
	check := func(when string) {
		t.Helper()
		if got := segMaxTimestamps(f.l); !equalInt64s(got, want) {
			t.Fatalf("%s: segment max timestamps %v, want %v", when, got, want)
		}
		for i := int64(0); i < 20; i++ {
			off, _, ok, err := f.l.OffsetForTimestamp(base+i, 100)
			if err != nil || !ok || off != i {
				t.Fatalf("%s: OffsetForTimestamp(base+%d) = %d %v %v", when, i, off, ok, err)
			}
		}
	}
	check("before")
	f.reopenClean()
	check("after a clean reopen")
	f.crash(0)
	check("after recovery")
	f.reopenClean()
	check("after recovery and a clean reopen")
}

func TestLastBatchIsControl(t *testing.T) {
	f := newFixture(t, testConfig())
	f.appendLeader(txnb(1, 0, 0, 2, f.nowMs()))
	m := f.marker(1, 1, record.ControlCommit)
	if m.Offset != 2 {
		t.Fatalf("marker at %d", m.Offset)
	}
	for off, want := range map[int64]bool{0: false, 1: false, 2: false, 3: true} {
		if got := f.l.LastBatchIsControl(off); got != want {
			t.Errorf("LastBatchIsControl(%d) = %v", off, got)
		}
	}
	f.appendLeader(plain(1, f.nowMs()))
	if f.l.LastBatchIsControl(4) {
		t.Error("LastBatchIsControl(4) after a data batch")
	}
}
