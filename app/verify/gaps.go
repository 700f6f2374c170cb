package verify

import (
	"slices"
	"time"
)

// Gap is an interval with no transaction committed in it: from one
// commit's acknowledgement (or the window's start) to the next (or the
// window's end).
type Gap struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// Seconds is the gap's length.
func (g Gap) Seconds() float64 { return g.To.Sub(g.From).Seconds() }

// LongestCommitGap is the longest interval without a committed
// transaction (any producer's, or the stage's) that overlaps [from, to]:
// it may begin at the last commit before from and end at the first commit
// after to, so a fault that stops commits is charged the whole stop. With
// no commit after to, the gap ends at to. Commit times are the moments
// the commits were acknowledged (Txn.End).
func LongestCommitGap(txns []Txn, from, to time.Time) Gap {
	var ends []time.Time
	for _, t := range txns {
		if t.Outcome == Committed && !t.End.IsZero() {
			ends = append(ends, t.End)
		}
	}
	slices.SortFunc(ends, func(a, b time.Time) int { return a.Compare(b) })
	prev := from
	i, _ := slices.BinarySearchFunc(ends, from, func(a, b time.Time) int { return a.Compare(b) })
	if i > 0 {
		prev = ends[i-1]
	}
	var best Gap
	for ; i < len(ends); i++ {
		c := ends[i]
		if c.Sub(prev) > best.To.Sub(best.From) {
			best = Gap{From: prev, To: c}
		}
		prev = c
		if !c.Before(to) {
			return best
		}
	}
	if to.Sub(prev) > best.To.Sub(best.From) {
		best = Gap{From: prev, To: to}
	}
	return best
}

// FirstCommit is when the first transaction's commit was acknowledged
// (zero with none).
func FirstCommit(txns []Txn) time.Time {
	var first time.Time
	for _, t := range txns {
		if t.Outcome == Committed && !t.End.IsZero() && (first.IsZero() || t.End.Before(first)) {
			first = t.End
		}
	}
	return first
}
