package group

import (
	"slices"

	"github.com/strand-io/strand/record"
)

// targetInput is what a new target assignment is computed from: the
// group as it is, the member a heartbeat adds or changes (nil: none), the
// member a static member replaces ("" for none), the subscribed topics
// and the regular expressions as the change leaves them.
type targetInput struct {
	group        string
	cg           *consumerGroup
	epoch        int32
	updated      *cmember
	replaced     string
	subscription map[string]topicMeta
	regexes      map[string]*resolvedRegex
	assignor     partitionAssignor
}

// buildTarget computes the target assignment of every member at the new
// epoch (Kafka's TargetAssignmentBuilder): each member's input is its
// subscription (the topics it names and those its regular expression
// resolved to, that the group's subscription knows) and its previous
// target (a static member replacing another starts from the other's). It
// returns a record per member whose target changed, then the target epoch
// record, and every member's new target.
func buildTarget(in targetInput) ([]record.Record, map[string]assignment) {
	members := map[string]*cmember{}
	for id, m := range in.cg.members {
		if id != in.replaced {
			members[id] = m
		}
	}
	if in.updated != nil {
		members[in.updated.id] = in.updated
	}
	topics := map[string]int32{}
	idOf := map[string]string{}
	for name, t := range in.subscription {
		topics[t.id] = t.partitions
		idOf[name] = t.id
	}
	spec := assignSpec{topics: topics}
	for _, id := range sortedKeys(members) {
		m := members[id]
		prev := in.cg.target[id]
		if in.updated != nil && id == in.updated.id && in.replaced != "" {
			prev = in.cg.target[in.replaced]
		}
		spec.members = append(spec.members, assignMember{id: id, instanceID: m.instanceID, topics: memberTopicIDs(m, in.regexes, idOf), prev: prev})
	}
	next := in.assignor.assign(spec)
	var recs []record.Record
	for _, am := range spec.members {
		a := next[am.id].normalized()
		next[am.id] = a
		if old, ok := in.cg.target[am.id]; !ok || !old.equal(a) {
			recs = append(recs, recTarget(in.group, am.id, a))
		}
	}
	recs = append(recs, recTargetEpoch(in.group, in.epoch))
	return recs, next
}

// memberTopicIDs are the ids of the topics a member subscribes to (by name
// or through its regular expression) that the group's subscription has.
func memberTopicIDs(m *cmember, regexes map[string]*resolvedRegex, idOf map[string]string) []string {
	set := map[string]bool{}
	for _, n := range m.names {
		if id, ok := idOf[n]; ok {
			set[id] = true
		}
	}
	if r := regexes[m.regex]; m.regex != "" && r != nil {
		for _, n := range r.topics {
			if id, ok := idOf[n]; ok {
				set[id] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}
