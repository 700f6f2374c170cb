package client

import "sort"

// rangeAssignor is Kafka's RangeAssignor: per topic, the partitions in
// order are cut into consecutive ranges, one per subscribed member, members
// sorted by id (static members by group.instance.id, first); when the
// partitions do not divide evenly the first members get one more.
type rangeAssignor struct{}

func (rangeAssignor) name() string      { return "range" }
func (rangeAssignor) cooperative() bool { return false }

// memberLess orders members as Kafka's MemberInfo does.
func memberLess(a, b *memberSubscription) bool {
	switch {
	case a.instanceID != "" && b.instanceID != "":
		return a.instanceID < b.instanceID
	case a.instanceID != "":
		return true
	case b.instanceID != "":
		return false
	}
	return a.memberID < b.memberID
}

func (rangeAssignor) assign(members []memberSubscription, partitions map[string]int32) map[string][]TopicPartition {
	out := map[string][]TopicPartition{}
	for i := range members {
		out[members[i].memberID] = nil
	}
	for _, topic := range sortedTopics(members, partitions) {
		var subs []*memberSubscription
		for i := range members {
			if subscribes(&members[i], topic) {
				subs = append(subs, &members[i])
			}
		}
		sort.Slice(subs, func(i, j int) bool { return memberLess(subs[i], subs[j]) })
		n := partitions[topic]
		per, extra := n/int32(len(subs)), n%int32(len(subs))
		next := int32(0)
		for i, m := range subs {
			cnt := per
			if int32(i) < extra {
				cnt++
			}
			for p := next; p < next+cnt; p++ {
				out[m.memberID] = append(out[m.memberID], TopicPartition{Topic: topic, Partition: p})
			}
			next += cnt
		}
	}
	return out
}
