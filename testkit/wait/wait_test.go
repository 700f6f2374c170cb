package wait

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that records a Fatal instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper()           {}
func (r *recorder) Fatal(args ...any) { r.failed = fmt.Sprint(args...) }

func TestEventuallyWaitsForTheCondition(t *testing.T) {
	var n atomic.Int32
	Eventually(t, 5*time.Second, "three polls", func() bool { return n.Add(1) >= 3 })
	if got := n.Load(); got != 3 {
		t.Fatalf("polled %d times, want 3", got)
	}
}

func TestEventuallyFailsSayingWhatWasAwaited(t *testing.T) {
	r := &recorder{TB: t}
	start := time.Now()
	Eventually(r, 30*time.Millisecond, "the leader", func() bool { return false })
	if time.Since(start) < 30*time.Millisecond {
		t.Fatal("gave up before the timeout")
	}
	if !strings.Contains(r.failed, "the leader") || !strings.Contains(r.failed, "30ms") {
		t.Fatalf("failure %q does not say what was awaited and for how long", r.failed)
	}
}

func TestEventuallyNilReportsTheLastError(t *testing.T) {
	r := &recorder{TB: t}
	var n atomic.Int32
	EventuallyNil(r, 30*time.Millisecond, "a reply", func() error { return fmt.Errorf("attempt %d", n.Add(1)) })
	last := fmt.Sprintf("attempt %d", n.Load())
	if !strings.Contains(r.failed, last) {
		t.Fatalf("failure %q does not carry the last error %q", r.failed, last)
	}
}

func TestUntil(t *testing.T) {
	sentinel := errors.New("not yet")
	if err := UntilNil(10*time.Millisecond, "x", func() error { return sentinel }); !errors.Is(err, sentinel) {
		t.Fatalf("UntilNil = %v, want it to wrap the condition's error", err)
	}
	if err := Until(10*time.Millisecond, "x", func() bool { return false }); err == nil {
		t.Fatal("Until = nil for a condition that never holds")
	}
	if err := Until(time.Second, "x", func() bool { return true }); err != nil {
		t.Fatalf("Until = %v for a condition that holds", err)
	}
}
