package storage

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestOffsetIndexLookupAndTruncate(t *testing.T) {
	ix := offsetIndex{path: filepath.Join(t.TempDir(), FileName(100)+IndexSuffix), base: 100}
	for i, off := range []int64{103, 110, 120, 135} {
		ix.append(off, int64(1000*(i+1)))
	}
	for _, c := range []struct{ off, pos int64 }{
		{50, 0}, {100, 0}, {102, 0}, {103, 1000}, {109, 1000}, {110, 2000}, {134, 3000}, {135, 4000}, {1 << 40, 4000},
	} {
		if got := ix.lookup(c.off); got != c.pos {
			t.Errorf("lookup(%d) = %d, want %d", c.off, got, c.pos)
		}
	}
	if err := ix.flush(false); err != nil {
		t.Fatal(err)
	}
	ix.truncateTo(120)
	if len(ix.rel) != 2 || ix.lookup(200) != 2000 {
		t.Fatalf("after truncateTo(120): %v", ix.rel)
	}
	if err := ix.flush(false); err != nil {
		t.Fatal(err)
	}
	got, err := ReadOffsetIndex(ix.path)
	if err != nil || !reflect.DeepEqual(got, []IndexEntry{{103, 1000}, {110, 2000}}) {
		t.Fatalf("file after truncation %v %v", got, err)
	}
	// Appends after a flush are added to the file, not rewritten.
	ix.append(111, 2500)
	if err := ix.flush(true); err != nil {
		t.Fatal(err)
	}
	var back offsetIndex
	back.path, back.base = ix.path, 100
	if err := back.load(1 << 20); err != nil || !reflect.DeepEqual(back.rel, ix.rel) || !reflect.DeepEqual(back.pos, ix.pos) {
		t.Fatalf("load: %v %v %v", back.rel, back.pos, err)
	}
	// A position beyond the segment is refused.
	if err := back.load(2500); err == nil {
		t.Fatal("index pointing past the segment loaded")
	}
}

func TestOffsetIndexLoadRejectsGarbage(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName(0)+IndexSuffix)
	for name, b := range map[string][]byte{
		"partial entry":            {0, 0, 0, 1, 0, 0, 0, 2, 0},
		"offsets not increasing":   {0, 0, 0, 5, 0, 0, 0, 10, 0, 0, 0, 5, 0, 0, 0, 20},
		"positions not increasing": {0, 0, 0, 5, 0, 0, 0, 10, 0, 0, 0, 6, 0, 0, 0, 10},
	} {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		ix := offsetIndex{path: path}
		if err := ix.load(1 << 20); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
	ix := offsetIndex{path: filepath.Join(dir, "missing")}
	if err := ix.load(100); err == nil {
		t.Error("missing index loaded")
	}
}

func TestTimeIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName(10)+TimeIndexSuffix)
	ti := timeIndex{path: path, base: 10}
	ti.maybeAppend(100, 10)
	ti.maybeAppend(100, 12) // not newer: skipped
	ti.maybeAppend(90, 13)  // older: skipped
	ti.maybeAppend(150, 15)
	ti.maybeAppend(200, 20)
	if !reflect.DeepEqual(ti.ts, []int64{100, 150, 200}) {
		t.Fatalf("entries %v", ti.ts)
	}
	for _, c := range []struct{ ts, off int64 }{
		{50, 10}, {100, 10}, {101, 10}, {150, 10}, {151, 15}, {200, 15}, {201, 20},
	} {
		if got := ti.lookup(c.ts); got != c.off {
			t.Errorf("lookup(%d) = %d, want %d", c.ts, got, c.off)
		}
	}
	if ts, ok := ti.maxTimestamp(); !ok || ts != 200 {
		t.Fatal("max timestamp")
	}
	if err := ti.flush(true); err != nil {
		t.Fatal(err)
	}
	got, err := ReadTimeIndex(path)
	if err != nil || !reflect.DeepEqual(got, []TimeIndexEntry{{100, 10}, {150, 15}, {200, 20}}) {
		t.Fatalf("file %v %v", got, err)
	}
	back := timeIndex{path: path, base: 10}
	if err := back.load(11); err != nil || !reflect.DeepEqual(back.ts, ti.ts) {
		t.Fatalf("load %v %v", back.ts, err)
	}
	if err := back.load(10); err == nil {
		t.Fatal("entry at the segment's next offset accepted")
	}
	ti.truncateTo(15)
	if err := ti.flush(false); err != nil {
		t.Fatal(err)
	}
	if got, _ := ReadTimeIndex(path); !reflect.DeepEqual(got, []TimeIndexEntry{{100, 10}}) {
		t.Fatalf("after truncation %v", got)
	}
	if err := os.WriteFile(path, []byte{1, 2, 3}, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := back.load(100); err == nil {
		t.Fatal("partial entry loaded")
	}
}

func TestTxnIndexFile(t *testing.T) {
	dir := t.TempDir()
	ti := txnIndex{path: filepath.Join(dir, FileName(100)+TxnIndexSuffix)}
	a := []AbortedTxn{{7, 90, 105, 95}, {8, 101, 110, 111}, {7, 112, 120, 121}}
	for _, e := range a {
		if err := ti.append(e, true); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(ti.path)
	if len(b) != 3*txnIndexEntry {
		t.Fatalf("file of %d bytes", len(b))
	}
	back := txnIndex{path: ti.path}
	if err := back.load(100, 121); err != nil || !reflect.DeepEqual(back.entries, a) {
		t.Fatalf("load %+v %v", back.entries, err)
	}
	if err := back.load(100, 120); err == nil {
		t.Fatal("entry past the segment loaded")
	}
	if err := back.load(106, 200); err == nil {
		t.Fatal("entry before the segment loaded")
	}
	if err := ti.truncateTo(110); err != nil {
		t.Fatal(err)
	}
	if err := back.load(100, 121); err != nil || !reflect.DeepEqual(back.entries, a[:1]) {
		t.Fatalf("after truncation %+v %v", back.entries, err)
	}
	if err := ti.reset(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ti.path); !os.IsNotExist(err) {
		t.Fatal("reset kept the file")
	}
	if err := back.load(100, 121); err != nil || len(back.entries) != 0 {
		t.Fatal("missing txn index is not empty")
	}
	for name, b := range map[string][]byte{
		"partial":     make([]byte, txnIndexEntry+1),
		"bad version": append([]byte{0, 1}, make([]byte, txnIndexEntry-2)...),
	} {
		if _, err := ParseTxnIndex(b); err == nil {
			t.Errorf("%s parsed", name)
		}
	}
}
