package group

import "sort"

// rangeAssignor is Kafka's "range" consumer group assignor: per topic, its
// subscribers in a fixed order (static members first by instance id, then
// the others by member id) each take a contiguous range of partitions,
// the first (partitions mod subscribers) of them one more. Members with
// the same subscription over topics with as many partitions get the same
// partition numbers of every topic (co-partitioning, for joins), and a
// static member keeps its ranges across restarts while the group and the
// topics stay the same. It is not otherwise sticky: a member joining
// shifts the ranges of those after it.
type rangeAssignor struct{}

func (rangeAssignor) name() string { return assignorRange }

func (rangeAssignor) assign(spec assignSpec) map[string]assignment {
	out := make(map[string]assignment, len(spec.members))
	order := make([]int, len(spec.members))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ma, mb := spec.members[order[a]], spec.members[order[b]]
		switch {
		case ma.instanceID != "" && mb.instanceID != "":
			return ma.instanceID < mb.instanceID
		case ma.instanceID != "":
			return true
		case mb.instanceID != "":
			return false
		}
		return ma.id < mb.id
	})
	rank := make([]int, len(spec.members))
	for r, i := range order {
		rank[i] = r
		out[spec.members[i].id] = assignment{}
	}
	subs := spec.subscribers()
	for _, t := range sortedKeys(subs) {
		ms := append([]int(nil), subs[t]...)
		sort.Slice(ms, func(a, b int) bool { return rank[ms[a]] < rank[ms[b]] })
		count := int(spec.topics[t])
		quota, extra := count/len(ms), count%len(ms)
		next := 0
		for k, i := range ms {
			n := quota
			if k < extra {
				n++
			}
			if n == 0 {
				continue
			}
			ps := make([]int32, 0, n)
			for p := next; p < next+n; p++ {
				ps = append(ps, int32(p))
			}
			next += n
			out[spec.members[i].id][t] = ps
		}
	}
	return out
}
