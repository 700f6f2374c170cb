package storage

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestOffsetCheckpointRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "recovery-point-offset-checkpoint")
	want := map[PartitionKey]int64{
		{"orders", 0}:             17,
		{"orders", 11}:            1 << 40,
		{"__consumer_offsets", 3}: 0,
		{"a.b-c_d", 2}:            5,
	}
	if err := WriteOffsetCheckpoint(nil, path, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadOffsetCheckpoint(nil, path)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("read back %v %v", got, err)
	}
	b, _ := os.ReadFile(path)
	const wantText = "0\n4\n__consumer_offsets 3 0\na.b-c_d 2 5\norders 0 17\norders 11 1099511627776\n"
	if string(b) != wantText {
		t.Fatalf("file %q, want %q (Kafka's format, sorted)", b, wantText)
	}
	// Overwrite with fewer entries; nothing of the old file is left.
	if err := WriteOffsetCheckpoint(nil, path, map[PartitionKey]int64{{"x", 1}: 2}); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadOffsetCheckpoint(nil, path); err != nil || !reflect.DeepEqual(got, map[PartitionKey]int64{{"x", 1}: 2}) {
		t.Fatalf("after overwrite %v %v", got, err)
	}
	if err := WriteOffsetCheckpoint(nil, path, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadOffsetCheckpoint(nil, path); err != nil || len(got) != 0 {
		t.Fatalf("empty checkpoint %v %v", got, err)
	}
	// A missing file is an empty map.
	if got, err := ReadOffsetCheckpoint(nil, filepath.Join(t.TempDir(), "none")); err != nil || len(got) != 0 {
		t.Fatalf("missing file: %v %v", got, err)
	}
	// No temporary file is left behind.
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatal("temporary file left")
	}
}

func TestOffsetCheckpointRejectsMalformed(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"empty":              "",
		"bad version":        "1\n1\nt 0 5\n",
		"no count":           "0\n",
		"count not a number": "0\nx\n",
		"count too big":      "0\n2\nt 0 5\n",
		"count too small":    "0\n1\nt 0 5\nt 1 6\n",
		"two fields":         "0\n1\nt 0\n",
		"four fields":        "0\n1\nt 0 5 6\n",
		"bad partition":      "0\n1\nt x 5\n",
		"bad offset":         "0\n1\nt 0 5x\n",
		"partition overflow": "0\n1\nt 4294967296 5\n",
		"negative partition": "0\n1\nt -1 5\n",
		"duplicate entry":    "0\n2\nt 0 5\nt 0 6\n",
		"blank line":         "0\n2\nt 0 5\n\nt 1 5\n",
	} {
		p := filepath.Join(dir, "cp")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := ReadOffsetCheckpoint(nil, p); err == nil {
			t.Errorf("%s: accepted as %v", name, got)
		}
	}
}

func TestOffsetCheckpointRefusesUnwritableTopics(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cp")
	for _, topic := range []string{"", "a b", "a\nb", "tab\there"} {
		if err := WriteOffsetCheckpoint(nil, path, map[PartitionKey]int64{{topic, 0}: 1}); err == nil {
			t.Errorf("topic %q written", topic)
		}
	}
}
