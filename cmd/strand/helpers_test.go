package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Callbacks fail with errors of different concrete types (a broker error,
// a wrapped context error); the tool must keep the first, not panic.
func TestFirstErrorKeepsFirstOfMixedTypes(t *testing.T) {
	var f firstError
	f.set(nil) // ignored
	if f.get() != nil {
		t.Fatalf("empty: %v", f.get())
	}
	first := errors.New("NOT_ENOUGH_REPLICAS")
	f.set(first)
	f.set(fmt.Errorf("wrapped: %w", errors.New("deadline")))
	if f.get() != first {
		t.Fatalf("got %v, want the first error", f.get())
	}

	var g firstError
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				g.set(errors.New("a"))
			} else {
				g.set(fmt.Errorf("b%d", i))
			}
		}()
	}
	wg.Wait()
	if g.get() == nil {
		t.Fatal("no error kept")
	}
}

func TestServerGCPercentYieldsToGOGC(t *testing.T) {
	env := map[string]string{}
	get := func(k string) string { return env[k] }
	if pct, ok := serverGCPercent(get); !ok || pct != defaultServerGOGC {
		t.Fatalf("GOGC unset: got %d %v, want %d true", pct, ok, defaultServerGOGC)
	}
	for _, v := range []string{"50", "off"} {
		env["GOGC"] = v
		if _, ok := serverGCPercent(get); ok {
			t.Fatalf("GOGC=%s: the server overrode the operator's choice", v)
		}
	}
}

// fakeCommitter advances a fake clock: flushing takes flushTook, EndTxn
// endTook; failFlush / failCommit make that step fail.
type fakeCommitter struct {
	clock                 *time.Time
	flushTook, endTook    time.Duration
	failFlush, failCommit error
}

func (f *fakeCommitter) Flush(context.Context) error {
	*f.clock = f.clock.Add(f.flushTook)
	return f.failFlush
}

func (f *fakeCommitter) CommitTransaction(context.Context) error {
	*f.clock = f.clock.Add(f.endTook)
	return f.failCommit
}

// The perf tool splits each commit into waiting for the records and
// EndTxn, and reports the share of the run spent committing; a failed
// commit is returned and not counted.
func TestCommitTimerSplitsFlushAndEndTxn(t *testing.T) {
	clock := time.Unix(0, 0)
	c := newCommitTimer()
	c.now = func() time.Time { return clock }
	f := &fakeCommitter{clock: &clock, flushTook: 40 * time.Millisecond, endTook: 2 * time.Millisecond}
	for range 4 {
		if err := c.commit(context.Background(), f); err != nil {
			t.Fatal(err)
		}
	}
	f.failFlush = errors.New("NOT_ENOUGH_REPLICAS")
	if err := c.commit(context.Background(), f); err == nil || !strings.Contains(err.Error(), "waiting for the transaction's records") {
		t.Fatalf("failed flush: %v", err)
	}
	f.failFlush, f.failCommit = nil, errors.New("PRODUCER_FENCED")
	if err := c.commit(context.Background(), f); err == nil || !errors.Is(err, f.failCommit) {
		t.Fatalf("failed EndTxn: %v", err)
	}
	if c.total.Count() != 4 {
		t.Fatalf("counted %d commits, want the 4 that succeeded", c.total.Count())
	}
	var out bytes.Buffer
	c.print(&out, 1.0) // 4 commits of 42 ms in a 1 s run
	got := out.String()
	for _, want := range []string{"4 transactions committed", "250.0 ms avg transaction", "waiting for records", "EndTxn", "16.8% of the run spent committing"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary %q lacks %q", got, want)
		}
	}
	if m := c.flush.Mean(); m < 39*time.Millisecond || m > 41*time.Millisecond {
		t.Errorf("flush mean %v, want about 40ms", m)
	}
	if m := c.end.Mean(); m < 1900*time.Microsecond || m > 2100*time.Microsecond {
		t.Errorf("EndTxn mean %v, want about 2ms", m)
	}
}

// writeFile writes body to a file in a fresh temporary directory.
func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
