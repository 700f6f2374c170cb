package group

import (
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"testing"
)

// spec builds an assignor input: members "m0".. with their topics and
// previous targets.
func spec(topics map[string]int32, members ...assignMember) assignSpec {
	sort.Slice(members, func(i, j int) bool { return members[i].id < members[j].id })
	return assignSpec{members: members, topics: topics}
}

func am(id string, topics ...string) assignMember {
	sort.Strings(topics)
	return assignMember{id: id, topics: topics}
}

// checkComplete fails unless every partition of a subscribed topic is
// assigned exactly once, to a subscriber, and nothing else is assigned.
func checkComplete(t *testing.T, s assignSpec, out map[string]assignment) {
	t.Helper()
	subs := s.subscribers()
	owner := map[string]string{}
	for _, m := range s.members {
		a := out[m.id]
		for topic, ps := range a {
			if !contains(m.topics, topic) {
				t.Fatalf("%s got %s, which it does not subscribe to", m.id, topic)
			}
			for _, p := range ps {
				if p < 0 || p >= s.topics[topic] {
					t.Fatalf("%s got %s-%d, which does not exist", m.id, topic, p)
				}
				k := fmt.Sprintf("%s-%d", topic, p)
				if o, dup := owner[k]; dup {
					t.Fatalf("%s assigned to both %s and %s", k, o, m.id)
				}
				owner[k] = m.id
			}
		}
	}
	for topic, n := range s.topics {
		if len(subs[topic]) == 0 {
			continue
		}
		for p := int32(0); p < n; p++ {
			if _, ok := owner[fmt.Sprintf("%s-%d", topic, p)]; !ok {
				t.Fatalf("%s-%d is assigned to nobody", topic, p)
			}
		}
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// checkBalanced fails if a partition could move from a member to another
// subscriber of its topic holding at least two fewer.
func checkBalanced(t *testing.T, s assignSpec, out map[string]assignment) {
	t.Helper()
	count := map[string]int{}
	for _, m := range s.members {
		count[m.id] = out[m.id].size()
	}
	for _, a := range s.members {
		for topic := range out[a.id] {
			for _, b := range s.members {
				if b.id != a.id && contains(b.topics, topic) && count[a.id]-count[b.id] > 1 {
					t.Fatalf("unbalanced: %s holds %d (with %s), %s subscribes to it and holds %d: %v", a.id, count[a.id], topic, b.id, count[b.id], out)
				}
			}
		}
	}
}

func TestUniformAssignorTable(t *testing.T) {
	cases := []struct {
		name string
		spec assignSpec
		want map[string]int // partition counts
	}{
		{"one member takes all", spec(map[string]int32{"a": 4, "b": 2}, am("m0", "a", "b")), map[string]int{"m0": 6}},
		{"even split", spec(map[string]int32{"a": 6}, am("m0", "a"), am("m1", "a"), am("m2", "a")), map[string]int{"m0": 2, "m1": 2, "m2": 2}},
		{"uneven split at most one apart", spec(map[string]int32{"a": 7}, am("m0", "a"), am("m1", "a"), am("m2", "a")), map[string]int{"m0": 3, "m1": 2, "m2": 2}},
		{"more members than partitions", spec(map[string]int32{"a": 2}, am("m0", "a"), am("m1", "a"), am("m2", "a")), map[string]int{"m0": 1, "m1": 1, "m2": 0}},
		{"member of no topic", spec(map[string]int32{"a": 4}, am("m0", "a"), am("m1")), map[string]int{"m0": 4, "m1": 0}},
		{"topic that does not exist", spec(map[string]int32{"a": 2}, am("m0", "a", "ghost"), am("m1", "ghost")), map[string]int{"m0": 2, "m1": 0}},
		// Heterogeneous: m1 alone takes b; a is split so the counts are even.
		{"heterogeneous", spec(map[string]int32{"a": 6, "b": 2}, am("m0", "a"), am("m1", "a", "b")), map[string]int{"m0": 4, "m1": 4}},
		{"heterogeneous, a topic of its own", spec(map[string]int32{"a": 2, "b": 6}, am("m0", "a"), am("m1", "a", "b"), am("m2", "b")), map[string]int{"m0": 2, "m1": 3, "m2": 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := uniformAssignor{}.assign(tc.spec)
			checkComplete(t, tc.spec, out)
			checkBalanced(t, tc.spec, out)
			got := map[string]int{}
			for id, a := range out {
				got[id] = a.size()
			}
			sum := func(m map[string]int) (n int) {
				for _, v := range m {
					n += v
				}
				return n
			}
			// Which member takes the extra partition is the assignor's
			// choice: compare the counts as a multiset.
			if !reflect.DeepEqual(sortedCounts(got), sortedCounts(tc.want)) || sum(got) != sum(tc.want) {
				t.Fatalf("counts %v, want %v", got, tc.want)
			}
		})
	}
}

func sortedCounts(m map[string]int) []int {
	var out []int
	for _, v := range m {
		out = append(out, v)
	}
	sort.Ints(out)
	return out
}

// TestUniformAssignorSticky: when a member joins or leaves, the members
// that stay keep what they had up to their new share: only as many
// partitions move as balance requires.
func TestUniformAssignorSticky(t *testing.T) {
	topics := map[string]int32{"a": 12, "b": 6}
	s := spec(topics, am("m0", "a", "b"), am("m1", "a", "b"), am("m2", "a", "b"))
	first := uniformAssignor{}.assign(s)
	checkComplete(t, s, first)

	// A fourth member: 18 partitions, 4 or 5 each; each of the three keeps
	// 4 or 5 of its 6 and nothing else moves.
	s2 := spec(topics, withPrev(am("m0", "a", "b"), first["m0"]), withPrev(am("m1", "a", "b"), first["m1"]), withPrev(am("m2", "a", "b"), first["m2"]), am("m3", "a", "b"))
	second := uniformAssignor{}.assign(s2)
	checkComplete(t, s2, second)
	checkBalanced(t, s2, second)
	moved := 0
	for _, id := range []string{"m0", "m1", "m2"} {
		lost := first[id].size() - overlap(first[id], second[id])
		if overlap(first[id], second[id]) != second[id].size() {
			t.Fatalf("%s gained partitions it did not have while shedding: %v → %v", id, first[id], second[id])
		}
		moved += lost
	}
	if moved != second["m3"].size() {
		t.Fatalf("%d partitions moved, want exactly the %d the new member got", moved, second["m3"].size())
	}

	// m1 leaves: its partitions go to the others, who keep theirs.
	s3 := spec(topics, withPrev(am("m0", "a", "b"), second["m0"]), withPrev(am("m2", "a", "b"), second["m2"]), withPrev(am("m3", "a", "b"), second["m3"]))
	third := uniformAssignor{}.assign(s3)
	checkComplete(t, s3, third)
	checkBalanced(t, s3, third)
	for _, id := range []string{"m0", "m2", "m3"} {
		if overlap(second[id], third[id]) != second[id].size() {
			t.Fatalf("%s lost partitions when another member left: %v → %v", id, second[id], third[id])
		}
	}
}

func withPrev(m assignMember, prev assignment) assignMember {
	m.prev = prev
	return m
}

func overlap(a, b assignment) int {
	n := 0
	for t, ps := range a {
		for _, p := range ps {
			if b.has(t, p) {
				n++
			}
		}
	}
	return n
}

// TestUniformAssignorRandom: over random groups (subscriptions, topic
// sizes, previous targets, members coming and going), every assignment is
// complete, balanced and deterministic.
func TestUniformAssignorRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(42))
	for round := 0; round < 300; round++ {
		topics := map[string]int32{}
		for i := 0; i < 1+rng.Intn(4); i++ {
			topics[fmt.Sprintf("t%d", i)] = int32(rng.Intn(9))
		}
		names := sortedKeys(topics)
		var prev map[string]assignment
		for step := 0; step < 4; step++ {
			var ms []assignMember
			for i := 0; i < 1+rng.Intn(6); i++ {
				var ts []string
				for _, n := range names {
					if rng.Intn(3) > 0 {
						ts = append(ts, n)
					}
				}
				id := fmt.Sprintf("m%d", rng.Intn(8))
				dup := false
				for _, m := range ms {
					dup = dup || m.id == id
				}
				if !dup {
					ms = append(ms, withPrev(am(id, ts...), prev[id]))
				}
			}
			s := spec(topics, ms...)
			out := uniformAssignor{}.assign(s)
			checkComplete(t, s, out)
			checkBalanced(t, s, out)
			if again := (uniformAssignor{}).assign(s); !reflect.DeepEqual(again, out) {
				t.Fatalf("round %d: the same input gave %v then %v", round, out, again)
			}
			prev = out
		}
	}
}

func TestRangeAssignor(t *testing.T) {
	rs := func(ps ...int32) []int32 { return ps }
	cases := []struct {
		name string
		spec assignSpec
		want map[string]assignment
	}{
		{"co-partitioned", spec(map[string]int32{"a": 3, "b": 3}, am("m0", "a", "b"), am("m1", "a", "b")),
			map[string]assignment{"m0": {"a": rs(0, 1), "b": rs(0, 1)}, "m1": {"a": rs(2), "b": rs(2)}}},
		{"more members than partitions", spec(map[string]int32{"a": 2}, am("m0", "a"), am("m1", "a"), am("m2", "a")),
			map[string]assignment{"m0": {"a": rs(0)}, "m1": {"a": rs(1)}, "m2": {}}},
		{"heterogeneous: each topic over its own subscribers", spec(map[string]int32{"a": 4, "b": 2}, am("m0", "a"), am("m1", "a", "b"), am("m2", "b")),
			map[string]assignment{"m0": {"a": rs(0, 1)}, "m1": {"a": rs(2, 3), "b": rs(0)}, "m2": {"b": rs(1)}}},
		{"static members first, by instance id", spec(map[string]int32{"a": 3},
			assignMember{id: "m0", topics: []string{"a"}}, assignMember{id: "m1", instanceID: "z", topics: []string{"a"}}, assignMember{id: "m2", instanceID: "b", topics: []string{"a"}}),
			map[string]assignment{"m2": {"a": rs(0)}, "m1": {"a": rs(1)}, "m0": {"a": rs(2)}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := rangeAssignor{}.assign(tc.spec)
			checkComplete(t, tc.spec, out)
			for id, want := range tc.want {
				if !out[id].equal(want) {
					t.Fatalf("%s got %v, want %v (all: %v)", id, out[id], want, out)
				}
			}
		})
	}
}
