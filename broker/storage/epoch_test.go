package storage

import (
	"os"
	"path/filepath"
	"testing"
)

func epochCache(entries ...EpochEntry) *LeaderEpochCache {
	return &LeaderEpochCache{entries: append([]EpochEntry(nil), entries...)}
}

func TestEpochEndOffsetFor(t *testing.T) {
	c := epochCache(EpochEntry{2, 10}, EpochEntry{3, 25}, EpochEntry{6, 40})
	const leo = 57
	for _, tc := range []struct {
		req       int32
		epoch     int32
		endOffset int64
	}{
		{6, 6, leo},  // the latest epoch ends at the log end
		{9, 6, leo},  // newer than any: the latest epoch's end
		{3, 3, 40},   // an older epoch ends where the next starts
		{2, 2, 25},   //
		{4, 3, 40},   // an unknown epoch between: the largest below it, ending at the next start
		{5, 3, 40},   //
		{1, -1, -1},  // older than all
		{0, -1, -1},  //
		{-1, -1, -1}, // undefined
	} {
		e, off := c.EndOffsetFor(tc.req, leo)
		if e != tc.epoch || off != tc.endOffset {
			t.Errorf("EndOffsetFor(%d) = (%d, %d), want (%d, %d)", tc.req, e, off, tc.epoch, tc.endOffset)
		}
	}
	var empty LeaderEpochCache
	if e, off := empty.EndOffsetFor(3, leo); e != -1 || off != -1 {
		t.Errorf("empty cache: (%d, %d)", e, off)
	}
	if empty.Latest() != -1 {
		t.Error("empty cache latest")
	}
}

func TestEpochAssign(t *testing.T) {
	c := epochCache()
	for _, a := range []struct {
		epoch   int32
		off     int64
		changed bool
	}{
		{-1, 0, false}, {1, 0, true}, {1, 5, false}, {3, 10, true}, {3, 11, false}, {5, 20, true},
	} {
		changed, err := c.assign(a.epoch, a.off)
		if err != nil || changed != a.changed {
			t.Fatalf("assign(%d, %d) = %v %v", a.epoch, a.off, changed, err)
		}
	}
	want := []EpochEntry{{1, 0}, {3, 10}, {5, 20}}
	if !equalEpochs(c.Entries(), want) {
		t.Fatalf("entries %v, want %v", c.Entries(), want)
	}
	// A newer epoch at an offset an existing entry starts at or after replaces them.
	if _, err := c.assign(7, 10); err != nil {
		t.Fatal(err)
	}
	if want := []EpochEntry{{1, 0}, {7, 10}}; !equalEpochs(c.Entries(), want) {
		t.Fatalf("entries %v, want %v", c.Entries(), want)
	}
	// Entries returns a copy.
	e := c.Entries()
	e[0].Epoch = 99
	if c.Entries()[0].Epoch != 1 {
		t.Fatal("Entries shares its slice")
	}
}

// TestEpochAssignOlderEpoch: the batches decide, as in Kafka's cache. A
// replica that became leader at epoch 2 with its log ending at 85 and
// wrote nothing, then follows a leader whose log holds epoch-1 batches
// from 85 on, records them as epoch 1: its own (2, 85) described no batch.
// Keeping it made this replica, once leader, answer OffsetForLeaderEpoch(1)
// with 85 and cut its followers' copies of records it held itself.
func TestEpochAssignOlderEpoch(t *testing.T) {
	c := epochCache(EpochEntry{0, 0}, EpochEntry{1, 40})
	if _, err := c.assign(2, 85); err != nil { // became leader, wrote nothing
		t.Fatal(err)
	}
	for _, a := range []struct {
		epoch int32
		off   int64
	}{{1, 85}, {1, 86}, {1, 90}} { // the new leader's epoch-1 batches
		if _, err := c.assign(a.epoch, a.off); err != nil {
			t.Fatal(err)
		}
	}
	if want := []EpochEntry{{0, 0}, {1, 40}}; !equalEpochs(c.Entries(), want) {
		t.Fatalf("entries %v, want %v: epoch 1 goes on past 85", c.Entries(), want)
	}
	if e, end := c.EndOffsetFor(1, 95); e != 1 || end != 95 {
		t.Fatalf("EndOffsetFor(1) = (%d, %d), want (1, 95): the log end, not the stale 85", e, end)
	}
	// An older epoch than every entry after them replaces them (Kafka's
	// non-monotonic truncation), and then newer epochs follow again.
	c = epochCache(EpochEntry{3, 0}, EpochEntry{5, 10})
	if _, err := c.assign(4, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := c.assign(6, 12); err != nil {
		t.Fatal(err)
	}
	if want := []EpochEntry{{3, 0}, {4, 10}, {6, 12}}; !equalEpochs(c.Entries(), want) {
		t.Fatalf("entries %v, want %v", c.Entries(), want)
	}
}

func TestEpochTruncation(t *testing.T) {
	base := []EpochEntry{{1, 0}, {3, 10}, {5, 20}}
	for _, tc := range []struct {
		name string
		fn   func(c *LeaderEpochCache) error
		want []EpochEntry
	}{
		{"end past everything", func(c *LeaderEpochCache) error { return c.truncateFromEnd(100) }, base},
		{"end inside the last", func(c *LeaderEpochCache) error { return c.truncateFromEnd(21) }, base},
		{"end at the last's start", func(c *LeaderEpochCache) error { return c.truncateFromEnd(20) }, base[:2]},
		{"end inside the second", func(c *LeaderEpochCache) error { return c.truncateFromEnd(15) }, base[:2]},
		{"end at zero", func(c *LeaderEpochCache) error { return c.truncateFromEnd(0) }, nil},
		{"start at zero", func(c *LeaderEpochCache) error { return c.truncateFromStart(0) }, base},
		{"start inside the first", func(c *LeaderEpochCache) error { return c.truncateFromStart(4) }, []EpochEntry{{1, 4}, {3, 10}, {5, 20}}},
		{"start at the second", func(c *LeaderEpochCache) error { return c.truncateFromStart(10) }, base[1:]},
		{"start inside the second", func(c *LeaderEpochCache) error { return c.truncateFromStart(15) }, []EpochEntry{{3, 15}, {5, 20}}},
		{"start past the last", func(c *LeaderEpochCache) error { return c.truncateFromStart(30) }, []EpochEntry{{5, 30}}},
	} {
		c := epochCache(base...)
		if err := tc.fn(c); err != nil {
			t.Fatal(err)
		}
		if !equalEpochs(c.Entries(), tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, c.Entries(), tc.want)
		}
	}
}

func TestEpochCheckpointRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), EpochCheckpointFile)
	c := &LeaderEpochCache{path: path}
	for _, e := range []EpochEntry{{0, 0}, {2, 100}, {7, 1 << 40}} {
		if _, err := c.assign(e.Epoch, e.StartOffset); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadEpochCheckpoint(path)
	if err != nil || !equalEpochs(got, c.Entries()) {
		t.Fatalf("read back %v %v, want %v", got, err, c.Entries())
	}
	b, _ := os.ReadFile(path)
	if string(b) != "0\n3\n0 0\n2 100\n7 1099511627776\n" {
		t.Fatalf("file %q", b)
	}
	if err := c.truncateFromEnd(50); err != nil {
		t.Fatal(err)
	}
	if got, _ := ReadEpochCheckpoint(path); !equalEpochs(got, []EpochEntry{{0, 0}}) {
		t.Fatalf("after truncation the file holds %v", got)
	}
	if err := c.truncateFromStart(20); err != nil {
		t.Fatal(err)
	}
	if got, _ := ReadEpochCheckpoint(path); !equalEpochs(got, []EpochEntry{{0, 20}}) {
		t.Fatalf("after start truncation the file holds %v", got)
	}
	if err := c.truncateFromEnd(0); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadEpochCheckpoint(path); err != nil || len(got) != 0 {
		t.Fatalf("empty cache file: %v %v", got, err)
	}
}

func TestReadEpochCheckpointRejectsMalformed(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"empty":             "",
		"bad version":       "1\n1\n0 0\n",
		"no count":          "0\n",
		"count too big":     "0\n2\n0 0\n",
		"count too small":   "0\n1\n0 0\n1 5\n",
		"not numbers":       "0\n1\na b\n",
		"one field":         "0\n1\n5\n",
		"trailing garbage":  "0\n1\n5 10 x\n",
		"junk after number": "0\n1\n5 10x\n",
		"epoch repeats":     "0\n2\n1 0\n1 5\n",
		"epoch decreases":   "0\n2\n2 0\n1 5\n",
		"offset decreases":  "0\n2\n1 5\n2 3\n",
		"negative epoch":    "0\n1\n-2 0\n",
		"negative offset":   "0\n1\n2 -7\n",
		"blank line":        "0\n2\n1 0\n\n",
	} {
		p := filepath.Join(dir, "cp")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := ReadEpochCheckpoint(p); err == nil {
			t.Errorf("%s: accepted as %v", name, got)
		}
	}
	if _, err := ReadEpochCheckpoint(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file accepted")
	}
}

// The log's EndOffsetForEpoch answers from its own history and log end.
func TestLogEndOffsetForEpoch(t *testing.T) {
	f := newFixture(t, testConfig())
	f.appendLeaderEpoch(plain(3, f.nowMs()), 1) // 0..2
	f.appendLeaderEpoch(plain(2, f.nowMs()), 4) // 3..4
	f.appendLeaderEpoch(plain(2, f.nowMs()), 4) // 5..6
	f.appendLeaderEpoch(plain(1, f.nowMs()), 6) // 7
	for _, tc := range []struct {
		req   int32
		epoch int32
		off   int64
	}{{6, 6, 8}, {7, 6, 8}, {5, 4, 7}, {4, 4, 7}, {2, 1, 3}, {1, 1, 3}, {0, -1, -1}} {
		if e, off := f.l.EndOffsetForEpoch(tc.req); e != tc.epoch || off != tc.off {
			t.Errorf("EndOffsetForEpoch(%d) = (%d, %d), want (%d, %d)", tc.req, e, off, tc.epoch, tc.off)
		}
	}
	f.reopenClean()
	if e, off := f.l.EndOffsetForEpoch(4); e != 4 || off != 7 {
		t.Errorf("after reopen EndOffsetForEpoch(4) = (%d, %d)", e, off)
	}
}

// TestNewLogWritesNoEmptyEpochCheckpoint: opening a new log writes no
// leader-epoch checkpoint (an empty one says what its absence says, and
// costs two fsyncs per partition created); the first epoch assigned
// writes it.
func TestNewLogWritesNoEmptyEpochCheckpoint(t *testing.T) {
	f := newFixture(t, testConfig())
	path := filepath.Join(f.dir, EpochCheckpointFile)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a new log has a leader-epoch checkpoint (stat: %v)", err)
	}
	f.reopenClean()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a reopened empty log has a leader-epoch checkpoint (stat: %v)", err)
	}
	if err := f.l.AssignEpoch(3); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadEpochCheckpoint(path); err != nil || !equalEpochs(got, []EpochEntry{{3, 0}}) {
		t.Fatalf("after AssignEpoch the checkpoint holds %v (%v)", got, err)
	}
}
