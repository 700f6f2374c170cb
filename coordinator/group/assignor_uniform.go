package group

import "sort"

// uniformAssignor is Kafka's default consumer group assignor ("uniform"):
// every partition of the subscribed topics goes to one of its subscribers,
// the members' partition counts as even as their subscriptions allow, and
// as few partitions move as that takes (sticky).
//
//  1. Each member keeps the partitions of its previous target that it
//     still subscribes to and that still exist.
//  2. Each partition nobody has goes to the subscriber holding the fewest
//     (topics with the fewest subscribers first, so members that can take
//     them get them before members with more choice fill up).
//  3. While a partition can move from a member to another subscriber of
//     its topic holding at least two fewer, it moves; every move lowers
//     the spread, so this ends, and then no member holds two more than any
//     other member that could take one of its partitions.
//
// With every member on the same topics that is at most one apart, each
// keeping up to its share of what it had.
type uniformAssignor struct{}

func (uniformAssignor) name() string { return assignorUniform }

func (uniformAssignor) assign(spec assignSpec) map[string]assignment {
	n := len(spec.members)
	out := make(map[string]assignment, n)
	if n == 0 {
		return out
	}
	subs := spec.subscribers()
	subscribed := make([]map[string]bool, n)
	for i, m := range spec.members {
		subscribed[i] = map[string]bool{}
		for _, t := range m.topics {
			subscribed[i][t] = true
		}
	}
	// owner[topic][partition] = member index, -1 free.
	owner := map[string][]int{}
	for t, count := range spec.topics {
		if len(subs[t]) == 0 {
			continue
		}
		o := make([]int, count)
		for p := range o {
			o[p] = -1
		}
		owner[t] = o
	}
	counts := make([]int, n)

	// 1. Stickiness.
	for i, m := range spec.members {
		for _, t := range sortedKeys(m.prev) {
			if !subscribed[i][t] || owner[t] == nil {
				continue
			}
			for _, p := range m.prev[t] {
				if p >= 0 && int(p) < len(owner[t]) && owner[t][p] == -1 {
					owner[t][p] = i
					counts[i]++
				}
			}
		}
	}

	// 2. The free partitions, to the least loaded subscriber.
	topics := sortedKeys(owner)
	sort.SliceStable(topics, func(a, b int) bool { return len(subs[topics[a]]) < len(subs[topics[b]]) })
	for _, t := range topics {
		for p, o := range owner[t] {
			if o != -1 {
				continue
			}
			best := leastLoaded(subs[t], counts, -1)
			owner[t][p] = best
			counts[best]++
		}
	}

	// 3. Balance.
	for moved := true; moved; {
		moved = false
		for _, t := range topics {
			o := owner[t]
			for p := len(o) - 1; p >= 0; p-- {
				a := o[p]
				b := leastLoaded(subs[t], counts, a)
				if b < 0 || counts[a]-counts[b] <= 1 {
					continue
				}
				o[p] = b
				counts[a]--
				counts[b]++
				moved = true
			}
		}
	}

	for _, m := range spec.members {
		out[m.id] = assignment{}
	}
	for _, t := range topics {
		for p, i := range owner[t] {
			id := spec.members[i].id
			out[id][t] = append(out[id][t], int32(p))
		}
	}
	return out
}

// leastLoaded is the member among candidates (indexes, ascending) holding
// the fewest partitions, the first of equals; skip is left out; -1 when
// none is left.
func leastLoaded(candidates []int, counts []int, skip int) int {
	best := -1
	for _, i := range candidates {
		if i == skip {
			continue
		}
		if best == -1 || counts[i] < counts[best] {
			best = i
		}
	}
	return best
}
