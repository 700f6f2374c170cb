package verify

import (
	"testing"
	"time"
)

func TestLongestCommitGap(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	s := func(x float64) time.Time { return t0.Add(time.Duration(x * float64(time.Second))) }
	var txns []Txn
	for _, x := range []float64{1, 2, 3, 10, 11, 12, 12.5} {
		txns = append(txns, Txn{Outcome: Committed, End: s(x)})
	}
	// Aborted and unfinished transactions are not commits.
	txns = append(txns, Txn{Outcome: Aborted, End: s(6)}, Txn{Outcome: Unknown, End: s(7)}, Txn{Outcome: Committed})
	for _, tc := range []struct {
		name             string
		from, to         float64
		wantFrom, wantTo float64
	}{
		{"whole run", 1, 12.5, 3, 10},
		{"a fault inside the stop is charged the whole stop", 5, 6, 3, 10},
		{"a window after the stop", 10.5, 12.5, 10, 11},
		{"no commit after the window: up to its end", 12.6, 20, 12.5, 20},
		{"before any commit: from the window's start", 0, 0.5, 0, 1},
	} {
		g := LongestCommitGap(txns, s(tc.from), s(tc.to))
		if !g.From.Equal(s(tc.wantFrom)) || !g.To.Equal(s(tc.wantTo)) {
			t.Errorf("%s: gap %v-%v, want %v-%v", tc.name, g.From.Sub(t0).Seconds(), g.To.Sub(t0).Seconds(), tc.wantFrom, tc.wantTo)
		}
	}
	if got := FirstCommit(txns); !got.Equal(s(1)) {
		t.Errorf("FirstCommit %v", got.Sub(t0))
	}
}
