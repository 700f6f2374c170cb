// Package txn is the transaction coordinator (Kafka's transaction protocol,
// version 2, KIP-890): for each transactional id it owns, the leader of the
// id's __transaction_state partition keeps a TransactionMetadata, appends
// every transition to that partition (replicated, acks=all) before its
// memory changes, and drives COMMIT/ABORT markers to the partitions of each
// transaction.
package txn

import "fmt"

// State is a transaction's state, with Kafka's internal ids (the values in
// the transaction log).
type State int32

const (
	Empty             State = 0
	Ongoing           State = 1
	PrepareCommit     State = 2
	PrepareAbort      State = 3
	CompleteCommit    State = 4
	CompleteAbort     State = 5
	Dead              State = 6
	PrepareEpochFence State = 7
)

var stateNames = map[State]string{
	Empty: "Empty", Ongoing: "Ongoing", PrepareCommit: "PrepareCommit", PrepareAbort: "PrepareAbort",
	CompleteCommit: "CompleteCommit", CompleteAbort: "CompleteAbort", Dead: "Dead", PrepareEpochFence: "PrepareEpochFence",
}

// String is the name Kafka's admin tools print.
func (s State) String() string {
	if n, ok := stateNames[s]; ok {
		return n
	}
	return fmt.Sprintf("Unknown(%d)", int32(s))
}

// ParseState reads a state name (as printed).
func ParseState(name string) (State, bool) {
	for s, n := range stateNames {
		if n == name {
			return s, true
		}
	}
	return 0, false
}

// AllStates lists every state, in id order.
func AllStates() []State {
	return []State{Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead, PrepareEpochFence}
}

// validPrevious is Kafka's table of the states each state may follow
// (Kafka 4.5's TransactionState.VALID_PREVIOUS_STATES): under transaction
// version 2 an empty transaction may be committed or aborted, so
// PREPARE_COMMIT and PREPARE_ABORT may follow EMPTY and COMPLETE_*.
var validPrevious = map[State][]State{
	Empty:             {Empty, CompleteCommit, CompleteAbort},
	Ongoing:           {Ongoing, Empty, CompleteCommit, CompleteAbort},
	PrepareCommit:     {Ongoing, Empty, CompleteCommit, CompleteAbort},
	PrepareAbort:      {Ongoing, PrepareEpochFence, Empty, CompleteCommit, CompleteAbort},
	CompleteCommit:    {PrepareCommit},
	CompleteAbort:     {PrepareAbort},
	Dead:              {Empty, CompleteAbort, CompleteCommit},
	PrepareEpochFence: {Ongoing},
}

// CanTransition reports whether from → to is legal.
func CanTransition(from, to State) bool {
	for _, p := range validPrevious[to] {
		if p == from {
			return true
		}
	}
	return false
}

// IsPrepare reports PrepareCommit / PrepareAbort.
func (s State) IsPrepare() bool { return s == PrepareCommit || s == PrepareAbort }

// IsComplete reports the states with no transaction open.
func (s State) IsComplete() bool { return s == Empty || s == CompleteCommit || s == CompleteAbort }
