package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/strand-io/strand/testkit/testutil"
)

// The active segment's .index and .timeindex are kept in memory until the
// segment rolls, the log flushes or the node stops, and a .txnindex only
// exists once a transaction aborted: dump-log on those names explains it
// instead of failing on a missing file. A file of a segment that does not
// exist at all is still an error.
func TestDumpLogActiveSegmentIndexes(t *testing.T) {
	dir := t.TempDir()
	n := testutil.StartDev(t, dir)
	b := "--bootstrap=" + n.Addr()
	run(t, "", "topics", "create", "di", "--partitions", "1", b)
	run(t, "a\nb\n", "produce", "di", b)
	base := filepath.Join(dir, "di-0", "00000000000000000000")
	for _, suffix := range []string{".index", ".timeindex", ".txnindex"} {
		out, errOut, err := runErr(t, "", "dump-log", base+suffix)
		if err != nil || !strings.HasPrefix(out, "Dumping "+base+suffix) || strings.Contains(errOut, "no such file") {
			t.Errorf("dump-log %s: err %v, stdout %q, stderr %q", suffix, err, out, errOut)
		}
		want := "kept in memory"
		if suffix == ".txnindex" {
			want = "created with its first aborted transaction"
		}
		if !strings.Contains(errOut, want) {
			t.Errorf("dump-log %s: stderr %q does not explain (%q)", suffix, errOut, want)
		}
	}
	// Several files at once, the .log among them, as kafka-dump-log --files.
	out := run(t, "", "dump-log", "--files", base+".log,"+base+".index")
	mustContain(t, out, "baseOffset: 0 lastOffset: 1", "Dumping "+base+".index")
	other := filepath.Join(dir, "di-0", "00000000000000000099.index")
	if _, errOut, err := runErr(t, "", "dump-log", other); err == nil || !strings.Contains(errOut, "no such file") {
		t.Errorf("dump-log of a segment that does not exist: err %v, stderr %q", err, errOut)
	}
}
