package storage

import (
	"os"
	"testing"

	"github.com/strand-io/strand/record"
)

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

// A log of many segments holds no more files open than its cache allows,
// through a rescan of every segment, reads of every batch, and appends
// (one descriptor per segment used to exhaust a node's descriptors).
func TestFileCacheBoundsOpenFiles(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 300
	cfg.Files = NewFileCache(3)
	f := newFixture(t, cfg)
	var stored [][]byte
	for i := 0; i < 120; i++ {
		b := buildBatch(t, plain(1, f.nowMs()))
		if _, err := f.l.AppendAsLeader(b, 0); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, b)
	}
	if n := f.l.NumSegments(); n < 30 {
		t.Fatalf("only %d segments", n)
	}
	f.l.Abandon()
	before := openFDs(t)
	f.open(0) // rescans every segment
	readEach(t, f.l, stored, func(record.Header) bool { return false })
	for i := 0; i < 5; i++ {
		f.appendLeader(plain(1, f.nowMs()))
	}
	if err := f.l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := cfg.Files.Open(); got > 3 {
		t.Fatalf("%d segment files open, want at most 3", got)
	}
	if got := openFDs(t) - before; got > 3 {
		t.Fatalf("%d more descriptors open after opening and reading %d segments, want at most 3", got, f.l.NumSegments())
	}
	if cfg.Files.Evicted.Load() == 0 {
		t.Fatal("nothing was evicted")
	}
	f.reopenClean()
	readEach(t, f.l, stored, func(record.Header) bool { return false })
}
