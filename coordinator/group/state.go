package group

import "fmt"

// State is a group's state in the classic protocol.
//
//	Empty ──join──▶ PreparingRebalance ──all joined / rebalance timeout──▶ CompletingRebalance
//	  ▲                 ▲   │ (no member left)                                   │ leader's SyncGroup written
//	  └─────────────────┼───┘                                                    ▼
//	                    └──────────── join, leave, session expiry ──────────── Stable
//
// Dead is a group whose partition this coordinator no longer leads (or
// that was removed); nothing leaves Dead.
type State int8

const (
	// Empty: no members; committed offsets may still exist.
	Empty State = iota
	// PreparingRebalance: waiting for the members to (re)join.
	PreparingRebalance
	// CompletingRebalance: joined; waiting for the leader's assignment.
	CompletingRebalance
	// Stable: every member has its assignment; heartbeats keep it alive.
	Stable
	// Dead: the group is gone from this coordinator.
	Dead
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

// String is the name DescribeGroups reports (Kafka's names).
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("Unknown(%d)", int8(s))
}

// AllStates lists every state.
func AllStates() []State {
	return []State{Empty, PreparingRebalance, CompletingRebalance, Stable, Dead}
}

// validPrevious is Kafka's table of the states each state may follow.
var validPrevious = map[State][]State{
	Empty:               {PreparingRebalance},
	PreparingRebalance:  {Empty, Stable, CompletingRebalance},
	CompletingRebalance: {PreparingRebalance},
	Stable:              {CompletingRebalance},
	Dead:                {Empty, PreparingRebalance, CompletingRebalance, Stable, Dead},
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
