package broker_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/clock"
)

// asideDirs lists the directories of dir set aside with suffix.
func asideDirs(t *testing.T, dir, suffix string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && storage.IsAsideDirName(e.Name(), suffix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestDeleteIsAtomicAcrossACrash: deleting a partition renames its
// directory to a "-delete" name before removing it, so a crash during the
// removal leaves no partial log under the partition's name (a restart
// would recover it as the partition's log); the next start removes the
// renamed directory and loads nothing of it.
func TestDeleteIsAtomicAcrossACrash(t *testing.T) {
	dir := t.TempDir()
	m := openManager(t, dir)
	p, err := m.GetOrCreateTopic(key, "tid", nil)
	if err != nil {
		t.Fatal(err)
	}
	lead(t, p, 1)
	produce(t, p, 1, batch{n: 5})
	crash := errors.New("crash")
	restore := storage.SetDeleteHookForTesting(func(aside string) error {
		// Part of the removal done when the crash comes.
		_ = os.Remove(filepath.Join(aside, storage.PartitionMetadataFile))
		return crash
	})
	err = m.Delete(key)
	restore()
	if !errors.Is(err, crash) {
		t.Fatalf("Delete: %v, want the crash", err)
	}
	if _, err := os.Stat(filepath.Join(dir, storage.DirName(key.Topic, key.Partition))); !os.IsNotExist(err) {
		t.Fatalf("the partition's directory is still under its name after the rename (%v)", err)
	}
	if got := asideDirs(t, dir, storage.DeleteDirSuffix); len(got) != 1 || !strings.HasPrefix(got[0], "orders-0.") {
		t.Fatalf("directories being deleted: %q, want one orders-0.<id>-delete", got)
	}
	m.Abandon()

	m = openManager(t, dir)
	defer m.Close()
	if p := m.Get(key); p != nil {
		t.Fatalf("the deleted partition was loaded again (log end %d)", p.Log.LogEndOffset())
	}
	if got := asideDirs(t, dir, storage.DeleteDirSuffix); len(got) != 0 {
		t.Fatalf("the start left %q", got)
	}
}

// TestPartitionMetadataOnLoad: a log whose partition.metadata is there but
// does not read fails to load, naming the partition, rather than being
// taken for a log of no known topic (which the next topic of its name
// would adopt); a log with no partition.metadata (written before topic
// ids were recorded) still loads, of no topic id yet.
func TestPartitionMetadataOnLoad(t *testing.T) {
	dir := t.TempDir()
	m := openManager(t, dir)
	p, err := m.GetOrCreateTopic(key, "tid", nil)
	if err != nil {
		t.Fatal(err)
	}
	lead(t, p, 1)
	produce(t, p, 1, batch{n: 3})
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	meta := filepath.Join(dir, storage.DirName(key.Topic, key.Partition), storage.PartitionMetadataFile)
	if err := os.WriteFile(meta, []byte("version: 0\ntopic_"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := broker.DefaultConfig(dir)
	cfg.Log.Files = storage.NewFileCache(4)
	if m, err := broker.Open(cfg, clock.Real); err == nil {
		m.Close()
		t.Fatal("a log with a corrupt partition.metadata was loaded")
	} else if !strings.Contains(err.Error(), key.String()) || !strings.Contains(err.Error(), storage.PartitionMetadataFile) {
		t.Fatalf("the load failed with %q, which names neither the partition nor the file", err)
	}

	if err := os.Remove(meta); err != nil {
		t.Fatal(err)
	}
	m = openManager(t, dir)
	defer m.Close()
	p = m.Get(key)
	if p == nil || p.TopicID() != "" || p.Log.LogEndOffset() != 3 {
		t.Fatalf("the log with no partition.metadata: %v", p)
	}
}
