package simdisk

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"math/rand"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

func write(t *testing.T, d *FS, name string, flag int, data string, sync bool) {
	t.Helper()
	f, err := d.OpenFile(name, flag, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func content(t *testing.T, d *FS, name string) string {
	t.Helper()
	b, err := d.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const appendFlags = os.O_WRONLY | os.O_CREATE | os.O_APPEND

func TestCrashKeepsSyncedAndDropsUnsynced(t *testing.T) {
	d := New(nil)
	if err := d.MkdirAll("/data/p-0", 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, d, "/data/p-0/a", appendFlags, "synced;", true)
	write(t, d, "/data/p-0/a", appendFlags, "lost", false)
	write(t, d, "/data/p-0/b", appendFlags, "never synced", false)
	if got := content(t, d, "/data/p-0/a"); got != "synced;lost" {
		t.Fatalf("before the crash a reads %q", got)
	}
	d.Crash()
	if got := content(t, d, "/data/p-0/a"); got != "synced;" {
		t.Fatalf("after the crash a reads %q, want its synced content", got)
	}
	// Directory entries are durable at once: b is there, empty.
	if got := content(t, d, "/data/p-0/b"); got != "" {
		t.Fatalf("after the crash b reads %q, want empty", got)
	}
}

func TestSyncThroughAnotherHandleCoversEarlierWrites(t *testing.T) {
	d := New(nil)
	write(t, d, "/x", appendFlags, "written then closed", false)
	f, err := d.OpenFile("/x", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	d.Crash()
	if got := content(t, d, "/x"); got != "written then closed" {
		t.Fatalf("got %q", got)
	}
	if _, err := f.Write([]byte("x")); !errors.Is(err, ErrCrashed) {
		t.Fatalf("a handle from before the crash wrote: %v", err)
	}
}

func TestTruncationIsLostWithoutSync(t *testing.T) {
	d := New(nil)
	write(t, d, "/x", appendFlags, "0123456789", true)
	f, _ := d.OpenFile("/x", os.O_RDWR, 0)
	if err := f.Truncate(4); err != nil {
		t.Fatal(err)
	}
	d.Crash()
	if got := content(t, d, "/x"); got != "0123456789" {
		t.Fatalf("got %q", got)
	}
}

func TestCrashTornKeepsAPrefix(t *testing.T) {
	seen := map[string]bool{}
	for seed := int64(0); seed < 50; seed++ {
		d := New(nil)
		write(t, d, "/x", appendFlags, "AAAA", true)
		write(t, d, "/x", appendFlags, "BBBB", false)
		write(t, d, "/x", appendFlags, "CCCC", false)
		d.CrashTorn(rand.New(rand.NewSource(seed)))
		got := content(t, d, "/x")
		if !bytes.HasPrefix([]byte("AAAABBBBCCCC"), []byte(got)) || len(got) < 4 {
			t.Fatalf("seed %d: %q is not the synced content followed by a prefix of what was written", seed, got)
		}
		seen[got] = true
		// What survived is durable now.
		d.Crash()
		if again := content(t, d, "/x"); again != got {
			t.Fatalf("seed %d: %q then %q", seed, got, again)
		}
	}
	var torn bool
	for s := range seen {
		if len(s)%4 != 0 {
			torn = true
		}
	}
	if !torn || len(seen) < 3 {
		t.Fatalf("50 seeds gave only %v", seen)
	}
	// The same seed tears the same way.
	a, b := New(nil), New(nil)
	for _, d := range []*FS{a, b} {
		write(t, d, "/x", appendFlags, "BBBBBBBBBBBBBBBBBBBB", false)
		d.CrashTorn(rand.New(rand.NewSource(7)))
	}
	if content(t, a, "/x") != content(t, b, "/x") {
		t.Fatal("not deterministic")
	}
}

func TestFailNextSync(t *testing.T) {
	d := New(nil)
	_ = d.MkdirAll("/data/t-0", 0o755)
	d.FailNextSync("/data/t-0", nil)
	f, _ := d.OpenFile("/data/t-0/seg", os.O_RDWR|os.O_CREATE, 0o644)
	_, _ = f.Write([]byte("data"))
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync: %v, want EIO", err)
	}
	if b, _ := d.Durable("/data/t-0/seg"); len(b) != 0 {
		t.Fatalf("a failed fsync made %q durable", b)
	}
	if err := f.Sync(); err != nil { // one-shot
		t.Fatal(err)
	}
	other := errors.New("boom")
	d.FailNextSync("/data/u", other)
	if err := f.Sync(); err != nil {
		t.Fatalf("a failure armed elsewhere hit: %v", err)
	}
	_ = d.MkdirAll("/data/u", 0o755)
	if err := d.SyncDir("/data/u"); !errors.Is(err, other) {
		t.Fatalf("SyncDir: %v", err)
	}
}

func TestDisarmSyncFailures(t *testing.T) {
	d := New(nil)
	_ = d.MkdirAll("/data/t-0", 0o755)
	d.FailNextSync("/data/t-0", nil)
	d.DisarmSyncFailures()
	f, _ := d.OpenFile("/data/t-0/seg", os.O_RDWR|os.O_CREATE, 0o644)
	_, _ = f.Write([]byte("data"))
	if err := f.Sync(); err != nil {
		t.Fatalf("a disarmed failure hit: %v", err)
	}
	if b, _ := d.Durable("/data/t-0/seg"); string(b) != "data" {
		t.Fatalf("durable %q after the sync, want %q", b, "data")
	}
}

func TestStallInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := New(nil)
		f, _ := d.OpenFile("/x", os.O_RDWR|os.O_CREATE, 0o644)
		release := d.Stall(context.Background())
		done := make(chan error)
		go func() {
			_, err := f.Write([]byte("late"))
			done <- err
		}()
		time.Sleep(time.Hour)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("write went through a stall: %v", err)
		default:
		}
		if b, _ := d.ReadFile("/x"); len(b) != 0 { // reads go on
			t.Fatalf("read %q", b)
		}
		release()
		if err := <-done; err != nil {
			t.Fatal(err)
		}

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		d.Stall(ctx)
		start := time.Now()
		if err := f.Sync(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("sync: %v", err)
		}
		if waited := time.Since(start); waited != time.Minute {
			t.Fatalf("waited %v", waited)
		}
		if err := f.Sync(); err != nil { // the stall ended with its context
			t.Fatal(err)
		}

		d.Stall(context.Background())
		go func() { done <- f.Sync() }()
		synctest.Wait()
		d.Crash()
		if err := <-done; !errors.Is(err, ErrCrashed) {
			t.Fatalf("a sync held across a crash: %v", err)
		}
	})
}

func TestDirectoryOperations(t *testing.T) {
	d := New(nil)
	_ = d.MkdirAll("/data/t-0", 0o755)
	write(t, d, "/data/t-0/a.tmp", appendFlags, "x", true)
	if err := d.Rename("/data/t-0/a.tmp", "/data/t-0/a"); err != nil {
		t.Fatal(err)
	}
	if err := d.Rename("/data/t-0", "/data/t-0.abc-delete"); err != nil {
		t.Fatal(err)
	}
	if got := content(t, d, "/data/t-0.abc-delete/a"); got != "x" {
		t.Fatal(got)
	}
	if _, err := d.Stat("/data/t-0"); !errors.Is(err, fs.ErrNotExist) || !os.IsNotExist(err) {
		t.Fatalf("stat of the old name: %v", err)
	}
	es, err := d.ReadDir("/data")
	if err != nil || len(es) != 1 || es[0].Name() != "t-0.abc-delete" || !es[0].IsDir() {
		t.Fatalf("%v %v", es, err)
	}
	if err := d.Remove("/data/t-0.abc-delete"); err == nil {
		t.Fatal("removed a directory that is not empty")
	}
	if err := d.RemoveAll("/data/t-0.abc-delete"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.OpenFile("/nodir/x", os.O_CREATE|os.O_WRONLY, 0o644); !os.IsNotExist(err) {
		t.Fatalf("created a file in a missing directory: %v", err)
	}
	d.Crash()
	if es, _ := d.ReadDir("/data"); len(es) != 0 {
		t.Fatalf("%v", es)
	}
}
