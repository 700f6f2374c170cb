package client

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

func members(n int, topics ...string) []memberSubscription {
	out := make([]memberSubscription, n)
	for i := range out {
		out[i] = memberSubscription{memberID: fmt.Sprintf("m%02d", i), subscription: subscription{topics: topics, generation: -1}}
	}
	return out
}

func counts(plan map[string][]TopicPartition) map[string]int {
	out := map[string]int{}
	for m, tps := range plan {
		out[m] = len(tps)
	}
	return out
}

// checkComplete fails unless every partition of the topics is assigned
// exactly once (want total) and no member has two more than another.
func checkPlan(t *testing.T, plan map[string][]TopicPartition, total int, balanced bool) {
	t.Helper()
	seen := map[TopicPartition]string{}
	lo, hi := 1<<30, -1
	for m, tps := range plan {
		for _, tp := range tps {
			if o, dup := seen[tp]; dup {
				t.Fatalf("%v assigned to %s and %s", tp, o, m)
			}
			seen[tp] = m
		}
		lo, hi = min(lo, len(tps)), max(hi, len(tps))
	}
	if len(seen) != total {
		t.Fatalf("%d partitions assigned, want %d: %v", len(seen), total, plan)
	}
	if balanced && hi-lo > 1 {
		t.Fatalf("unbalanced: %v", counts(plan))
	}
}

func TestRangeAssignor(t *testing.T) {
	ms := members(3, "a", "b")
	ms[0].memberID, ms[1].memberID, ms[2].memberID = "z", "x", "y" // sorted: x, y, z
	plan := rangeAssignor{}.assign(ms, map[string]int32{"a": 7, "b": 2})
	want := map[string][]TopicPartition{
		"x": {{"a", 0}, {"a", 1}, {"a", 2}, {"b", 0}},
		"y": {{"a", 3}, {"a", 4}, {"b", 1}},
		"z": {{"a", 5}, {"a", 6}},
	}
	if !reflect.DeepEqual(plan, want) {
		t.Fatalf("range plan %v, want %v", plan, want)
	}
	// Static members sort first, by instance id.
	ms[2].instanceID = "pod-0"
	plan = rangeAssignor{}.assign(ms, map[string]int32{"a": 3})
	if !reflect.DeepEqual(plan["y"], []TopicPartition{{"a", 0}}) {
		t.Fatalf("static member first: %v", plan)
	}
	// Members only get topics they subscribe to.
	ms = members(2, "a")
	ms[1].topics = []string{"b"}
	plan = rangeAssignor{}.assign(ms, map[string]int32{"a": 2, "b": 1, "c": 5})
	checkPlan(t, plan, 3, false)
	if len(plan["m00"]) != 2 || plan["m01"][0].Topic != "b" {
		t.Fatalf("subscriptions ignored: %v", plan)
	}
}

func TestStickyBalancedAndDeterministic(t *testing.T) {
	for n := 1; n <= 7; n++ {
		for parts := int32(0); parts <= 13; parts += 3 {
			ms := members(n, "t")
			plan := stickyAssignor{}.assign(ms, map[string]int32{"t": parts})
			checkPlan(t, plan, int(parts), true)
			// Input order does not matter.
			rev := append([]memberSubscription(nil), ms...)
			for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
				rev[i], rev[j] = rev[j], rev[i]
			}
			if again := (stickyAssignor{}).assign(rev, map[string]int32{"t": parts}); !reflect.DeepEqual(again, plan) {
				t.Fatalf("not deterministic: %v vs %v", plan, again)
			}
		}
	}
}

// round feeds a plan back as the members' owned partitions (the eager
// hint form when held is false).
func round(ms []memberSubscription, plan map[string][]TopicPartition, gen int32, held bool) {
	for i := range ms {
		ms[i].owned, ms[i].generation, ms[i].held = plan[ms[i].memberID], gen, held
	}
}

func TestStickyKeepsPartitions(t *testing.T) {
	ms := members(3, "t")
	plan := stickyAssignor{}.assign(ms, map[string]int32{"t": 6})
	round(ms, plan, 1, false)
	// A fourth member: only what balance needs moves (6 over 4 = 2,2,1,1: one partition).
	ms = append(ms, memberSubscription{memberID: "m03", subscription: subscription{topics: []string{"t"}, generation: -1}})
	next := stickyAssignor{}.assign(ms, map[string]int32{"t": 6})
	checkPlan(t, next, 6, true)
	moved := 0
	for _, m := range ms[:3] {
		kept := map[TopicPartition]bool{}
		for _, tp := range next[m.memberID] {
			kept[tp] = true
		}
		for _, tp := range plan[m.memberID] {
			if !kept[tp] {
				moved++
			}
		}
	}
	if moved != 1 {
		t.Fatalf("%d partitions moved, want 1: %v -> %v", moved, plan, next)
	}
	// A member leaves: its partitions spread, nobody else's move.
	round(ms, next, 2, false)
	gone := ms[1]
	rest := append([]memberSubscription{ms[0]}, ms[2:]...)
	after := stickyAssignor{}.assign(rest, map[string]int32{"t": 6})
	checkPlan(t, after, 6, true)
	for _, m := range rest {
		have := map[TopicPartition]bool{}
		for _, tp := range after[m.memberID] {
			have[tp] = true
		}
		for _, tp := range next[m.memberID] {
			if !have[tp] {
				t.Fatalf("%s lost %v though only %s left", m.memberID, tp, gone.memberID)
			}
		}
	}
	// Newer generation wins a double claim; an unsubscribed claim is dropped.
	ms = members(2, "t")
	ms[0].owned, ms[0].generation = []TopicPartition{{"t", 0}, {"t", 1}}, 3
	ms[1].owned, ms[1].generation = []TopicPartition{{"t", 0}, {"x", 0}}, 4
	plan = stickyAssignor{}.assign(ms, map[string]int32{"t": 2, "x": 1})
	if !reflect.DeepEqual(plan["m01"], []TopicPartition{{"t", 0}}) || !reflect.DeepEqual(plan["m00"], []TopicPartition{{"t", 1}}) {
		t.Fatalf("claims: %v", plan)
	}
}

// TestCooperativeNeverDoubleAssigns simulates the cooperative protocol over
// random membership changes: each round a member keeps only what it was
// assigned (revoking the rest), and a partition is never assigned to a
// member while another still holds it. Revocations trigger another round;
// the group settles balanced with everything assigned.
func TestCooperativeNeverDoubleAssigns(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	parts := map[string]int32{"a": 6, "b": 5}
	held := map[string][]TopicPartition{} // member -> partitions it holds
	var live []string
	next := 0
	gen := int32(0)
	for step := 0; step < 60; step++ {
		switch {
		case len(live) < 2 || rng.IntN(3) == 0:
			live = append(live, fmt.Sprintf("m%03d", next))
			next++
		case rng.IntN(2) == 0:
			i := rng.IntN(len(live))
			delete(held, live[i])
			live = append(live[:i], live[i+1:]...)
		}
		for rounds := 0; ; rounds++ {
			if rounds > 3 {
				t.Fatalf("step %d: no convergence after %d rounds", step, rounds)
			}
			gen++
			ms := make([]memberSubscription, len(live))
			for i, id := range live {
				ms[i] = memberSubscription{memberID: id, subscription: subscription{topics: []string{"a", "b"}, owned: held[id], generation: gen - 1, held: true}}
			}
			plan := stickyAssignor{}.assign(ms, parts)
			owner := map[TopicPartition]string{}
			for id, tps := range held {
				for _, tp := range tps {
					owner[tp] = id
				}
			}
			revoked := false
			for _, id := range live {
				for _, tp := range plan[id] {
					if o, ok := owner[tp]; ok && o != id {
						t.Fatalf("step %d: %v assigned to %s while %s holds it", step, tp, id, o)
					}
				}
				if len(plan[id]) < len(held[id]) {
					revoked = true
				} else {
					have := map[TopicPartition]bool{}
					for _, tp := range plan[id] {
						have[tp] = true
					}
					for _, tp := range held[id] {
						if !have[tp] {
							revoked = true
						}
					}
				}
				held[id] = plan[id]
			}
			if !revoked {
				checkPlan(t, plan, 11, true)
				break
			}
		}
	}
}

func TestSubscriptionAndAssignmentFormats(t *testing.T) {
	s := subscription{topics: []string{"b", "a"}, owned: []TopicPartition{{"b", 2}, {"a", 1}, {"b", 0}}, generation: 7, held: true, isolation: ReadCommitted}
	b := encodeSubscription(s)
	want := "0001" + "00000002" + "000161" + "000162" + // version, topics a, b
		"00000002" + "000161" + "00000001" + "00000001" + "000162" + "00000002" + "00000000" + "00000002" + // owned
		"00000007" + "01" + "01" // generation, held, isolation
	if got := fmt.Sprintf("%x", b); got != want {
		t.Fatalf("subscription bytes\n got %s\nwant %s", got, want)
	}
	got, err := decodeSubscription(b)
	if err != nil || !reflect.DeepEqual(got.topics, []string{"a", "b"}) || got.generation != 7 || !got.held || got.isolation != ReadCommitted ||
		!reflect.DeepEqual(got.owned, []TopicPartition{{"a", 1}, {"b", 0}, {"b", 2}}) {
		t.Fatalf("decode %+v %v", got, err)
	}
	// A later version with more fields after version 1's still reads.
	later := append(append([]byte{0, 2}, b[2:]...), 9, 9, 9)
	if _, err := decodeSubscription(later); err != nil {
		t.Fatalf("version 2: %v", err)
	}
	// Version 0 (an older SDK) has no isolation byte.
	v0 := append([]byte{0, 0}, b[2:len(b)-1]...)
	if got, err := decodeSubscription(v0); err != nil || !got.held || got.isolation != ReadUncommitted {
		t.Fatalf("version 0: %+v %v", got, err)
	}
	// Tools read the advertised isolation level only from this exact shape.
	if iso, ok := MemberIsolation("consumer", b); !ok || iso != ReadCommitted {
		t.Fatalf("MemberIsolation = %v %v", iso, ok)
	}
	if iso, ok := MemberIsolation("consumer", encodeSubscription(subscription{topics: []string{"a"}, generation: -1})); !ok || iso != ReadUncommitted {
		t.Fatalf("MemberIsolation read_uncommitted = %v %v", iso, ok)
	}
	for name, m := range map[string][]byte{"version 0": v0, "version 2": later, "trailing byte": append(append([]byte(nil), b...), 0),
		"bad isolation byte": append(append([]byte(nil), b[:len(b)-1]...), 7)} {
		if _, ok := MemberIsolation("consumer", m); ok {
			t.Fatalf("MemberIsolation accepted %s", name)
		}
	}
	if _, ok := MemberIsolation("connect", b); ok {
		t.Fatal("MemberIsolation accepted another protocol type")
	}
	for i := 0; i < len(b); i++ {
		if _, err := decodeSubscription(b[:i]); err == nil {
			t.Fatalf("truncated subscription (%d bytes) accepted", i)
		}
	}
	a := encodeAssignment([]TopicPartition{{"t", 3}, {"t", 1}})
	tps, err := decodeAssignment(a)
	if err != nil || !reflect.DeepEqual(tps, []TopicPartition{{"t", 1}, {"t", 3}}) {
		t.Fatalf("assignment %v %v", tps, err)
	}
	if tps, err := decodeAssignment(nil); err != nil || tps != nil {
		t.Fatalf("empty assignment %v %v", tps, err)
	}
	if _, err := decodeAssignment([]byte{0, 0, 0x7f, 0xff, 0xff, 0xff}); err == nil {
		t.Fatal("absurd count accepted")
	}
}
