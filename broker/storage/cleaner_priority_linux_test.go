package storage

import (
	"context"
	"testing"
)

// TestCleanPassRunsAtLowPriority: a pass reads and rewrites on a thread of
// niceness cleanerNice (so producers' appends go first on a busy node),
// the throttle is called there too, and the niceness stays on that thread:
// the caller's goroutine, which swaps the segments in under the log's
// lock, runs at its own.
func TestCleanPassRunsAtLowPriority(t *testing.T) {
	before, err := threadNice()
	if err != nil {
		t.Skipf("getpriority: %v", err)
	}
	if before >= cleanerNice {
		t.Skipf("the test already runs at niceness %d", before)
	}
	f := newFixture(t, testConfig())
	p := newProducers(f)
	for i := 0; i < 10; i++ {
		p.put(-1, false, "a=1", "b=2")
		if i%5 == 4 {
			f.roll()
		}
	}
	var inPass, inThrottle []int
	testPassHook = func() {
		n, err := threadNice()
		if err != nil {
			t.Errorf("getpriority in the pass: %v", err)
		}
		inPass = append(inPass, n)
	}
	defer func() { testPassHook = nil }()
	o := f.cleanOpts()
	o.Throttle = func(context.Context, int) error {
		n, _ := threadNice()
		inThrottle = append(inThrottle, n)
		return nil
	}
	if st := f.clean(o); st.BytesRead == 0 {
		t.Fatalf("the pass cleaned nothing: %+v", st)
	}
	if len(inPass) != 1 || inPass[0] != cleanerNice {
		t.Fatalf("niceness in the pass: %v, want [%d]", inPass, cleanerNice)
	}
	for _, n := range inThrottle {
		if n != cleanerNice {
			t.Fatalf("niceness where the throttle ran: %v, want %d", inThrottle, cleanerNice)
		}
	}
	if after, _ := threadNice(); after != before {
		t.Fatalf("the caller's niceness went from %d to %d", before, after)
	}
}
