package main

import (
	"testing"
	"time"
)

// TestFailoverFigures: the first commit counts only a transaction begun at
// or after the fault, and the longest gap runs from a second before the
// fault to the window's end, the silence at the end included.
func TestFailoverFigures(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	cs := []commitTimes{
		{at(-900), at(-800)},
		{at(-100), at(50)},   // begun before the fault, committed after it
		{at(60), at(4060)},   // the first begun after: 4.06 s
		{at(4070), at(4100)}, // then quick commits
		{at(4110), at(4200)},
	}
	first, gap := failoverFigures(cs, t0, at(10000))
	if first != 4060*time.Millisecond {
		t.Errorf("first commit after %s, want 4.06 s", first)
	}
	if gap != 5800*time.Millisecond { // from the last commit at 4.2 s to the end at 10 s
		t.Errorf("longest gap %s, want 5.8 s", gap)
	}
	first, gap = failoverFigures(nil, t0, at(30000))
	if first != 30*time.Second || gap != 31*time.Second {
		t.Errorf("no commit: first %s, gap %s; want 30 s and 31 s", first, gap)
	}
}
