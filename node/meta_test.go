package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMetaPropertiesVersion: meta.properties round-trips, and a version a
// newer binary would write is refused with a message that says so, rather
// than read as this binary's layout.
func TestMetaPropertiesVersion(t *testing.T) {
	dir := t.TempDir()
	if err := writeMeta(dir, nodeMeta{nodeID: 3, clusterID: "c-1"}); err != nil {
		t.Fatal(err)
	}
	m, err := readMeta(dir)
	if err != nil || m.nodeID != 3 || m.clusterID != "c-1" {
		t.Fatalf("round trip: %+v %v", m, err)
	}
	p := filepath.Join(dir, metaFile)
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), "version=1", "version=2", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readMeta(dir); err == nil || !strings.Contains(err.Error(), "newer Strand") {
		t.Fatalf("version 2: %v, want a refusal naming a newer Strand", err)
	}
}
