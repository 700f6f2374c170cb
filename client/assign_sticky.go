package client

import "sort"

// stickyAssignor is "cooperative-sticky": a balanced assignment that keeps
// every member's partitions where balance allows, computed in four steps:
//
//  1. Claims: each member's previous partitions (its subscription's list)
//     that it still subscribes to and that still exist. A partition claimed
//     twice goes to the newer generation (the first member by id on a tie).
//  2. Every unclaimed partition goes, in order, to the eligible member with
//     the fewest partitions (the first by id on a tie).
//  3. While some member has at least two more partitions than another that
//     could take one of them, one moves (one it did not claim first, else
//     its highest); each move lowers the sum of squared loads, so this ends,
//     with loads differing by at most one when subscriptions are equal.
//  4. Cooperative protocol: a partition planned for one member but still
//     held by another is left out this round. Its holder sees it missing,
//     revokes it and rejoins; in the next round it is unclaimed and step 2
//     places it. So no partition ever has two owners.
type stickyAssignor struct{}

func (stickyAssignor) name() string      { return "cooperative-sticky" }
func (stickyAssignor) cooperative() bool { return true }

func (stickyAssignor) assign(members []memberSubscription, partitions map[string]int32) map[string][]TopicPartition {
	ms := append([]memberSubscription(nil), members...)
	sort.Slice(ms, func(i, j int) bool { return ms[i].memberID < ms[j].memberID })
	eligible := func(i int, tp TopicPartition) bool {
		return tp.Partition >= 0 && tp.Partition < partitions[tp.Topic] && subscribes(&ms[i], tp.Topic)
	}
	type claim struct {
		member int
		gen    int32
		held   bool
	}
	claims := map[TopicPartition]claim{}
	for i := range ms {
		for _, tp := range ms[i].owned {
			if !eligible(i, tp) {
				continue
			}
			if c, ok := claims[tp]; !ok || ms[i].generation > c.gen {
				claims[tp] = claim{member: i, gen: ms[i].generation, held: ms[i].held}
			}
		}
	}
	assigned := make([]map[TopicPartition]bool, len(ms))
	for i := range assigned {
		assigned[i] = map[TopicPartition]bool{}
	}
	for tp, c := range claims {
		assigned[c.member][tp] = true
	}
	// 2. unclaimed partitions to the least loaded eligible member.
	for _, topic := range sortedTopics(ms, partitions) {
		for p := int32(0); p < partitions[topic]; p++ {
			tp := TopicPartition{Topic: topic, Partition: p}
			if _, ok := claims[tp]; ok {
				continue
			}
			best := -1
			for i := range ms {
				if eligible(i, tp) && (best < 0 || len(assigned[i]) < len(assigned[best])) {
					best = i
				}
			}
			if best >= 0 {
				assigned[best][tp] = true
			}
		}
	}
	// 3. balance.
	for moved := true; moved; {
		moved = false
		byLoad := make([]int, len(ms))
		for i := range byLoad {
			byLoad[i] = i
		}
		sort.SliceStable(byLoad, func(a, b int) bool { return len(assigned[byLoad[a]]) < len(assigned[byLoad[b]]) })
	search:
		for si := len(byLoad) - 1; si >= 0; si-- {
			src := byLoad[si]
			for _, dst := range byLoad {
				if len(assigned[src])-len(assigned[dst]) < 2 {
					break
				}
				if tp, ok := movable(assigned[src], src, dst, eligible, func(tp TopicPartition) bool {
					c, ok := claims[tp]
					return ok && c.member == src
				}); ok {
					delete(assigned[src], tp)
					assigned[dst][tp] = true
					moved = true
					break search
				}
			}
		}
	}
	// 4. leave out what another member still holds.
	out := make(map[string][]TopicPartition, len(ms))
	for i := range ms {
		list := []TopicPartition{}
		for tp := range assigned[i] {
			if c, ok := claims[tp]; ok && c.held && c.member != i {
				continue
			}
			list = append(list, tp)
		}
		out[ms[i].memberID] = sortTPList(list)
	}
	return out
}

// movable picks the partition of src to give dst: one src did not claim
// before this rebalance if there is one, else src's highest.
func movable(set map[TopicPartition]bool, src, dst int, eligible func(int, TopicPartition) bool, claimedBySrc func(TopicPartition) bool) (TopicPartition, bool) {
	var cands []TopicPartition
	for tp := range set {
		if eligible(dst, tp) {
			cands = append(cands, tp)
		}
	}
	if len(cands) == 0 {
		return TopicPartition{}, false
	}
	sortTPs(cands)
	for i := len(cands) - 1; i >= 0; i-- {
		if !claimedBySrc(cands[i]) {
			return cands[i], true
		}
	}
	return cands[len(cands)-1], true
}
