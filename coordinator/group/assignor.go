package group

import (
	"sort"
	"strings"
)

// The server-side assignors of consumer groups (group.consumer.assignors):
// given each member's subscribed topics and its previous target, an
// assignor computes every member's next target. Both are deterministic
// (members and partitions in sorted order), so the same inputs give the
// same target on any coordinator.

// assignMember is one member as an assignor sees it.
type assignMember struct {
	id         string
	instanceID string
	topics     []string // subscribed topic ids that exist, sorted
	prev       assignment
}

// assignSpec is an assignor's input: the members sorted by id and the
// partition count of every subscribed topic (by id).
type assignSpec struct {
	members []assignMember
	topics  map[string]int32
}

type partitionAssignor interface {
	name() string
	assign(spec assignSpec) map[string]assignment
}

// Assignor names, Kafka's.
const (
	assignorUniform = "uniform"
	assignorRange   = "range"
)

// DefaultAssignors is group.consumer.assignors' default: the first is the
// one a group uses when no member asks for one.
var DefaultAssignors = []string{assignorUniform, assignorRange}

// assignorNamed returns the assignor of a name, or nil.
func assignorNamed(name string) partitionAssignor {
	switch name {
	case assignorUniform:
		return uniformAssignor{}
	case assignorRange:
		return rangeAssignor{}
	}
	return nil
}

// KnownAssignor reports whether name is an assignor Strand has (for
// group.consumer.assignors).
func KnownAssignor(name string) bool { return assignorNamed(name) != nil }

// homogeneous reports whether every member subscribes to the same topics.
func (s assignSpec) homogeneous() bool {
	for i := 1; i < len(s.members); i++ {
		if strings.Join(s.members[i].topics, ",") != strings.Join(s.members[0].topics, ",") {
			return false
		}
	}
	return true
}

// subscribers lists, per topic id, the indexes of the members subscribed
// to it.
func (s assignSpec) subscribers() map[string][]int {
	out := map[string][]int{}
	for i, m := range s.members {
		for _, t := range m.topics {
			if _, ok := s.topics[t]; ok {
				out[t] = append(out[t], i)
			}
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
