package group

import (
	"sort"
	"strings"
	"time"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// Online conversion between the protocols (group.consumer.migration.policy,
// Kafka's rules). An empty group converts freely: a ConsumerGroupHeartbeat
// to an empty classic group, or a JoinGroup to an empty consumer group,
// deletes the other kind's membership record (offsets stay) and starts
// afresh. A classic group with members converts when a
// ConsumerGroupHeartbeat joins it (upgrade): its members become members of
// the consumer group at its generation, keeping their assignments, and go
// on with JoinGroup, SyncGroup and Heartbeat (classic_members.go). When the
// last member of the consumer protocol leaves and only classic members
// remain, the group becomes a classic group again (downgrade), at its
// group epoch, each member's target assignment as its assignment, and
// rebalances. Each conversion is one change: the old kind's tombstones,
// then the new kind's records.

// fromClassic builds the consumer group a classic group with members
// becomes (Kafka's validateOnlineUpgrade and ConsumerGroup.fromClassicGroup)
// and the records of the conversion. Beyond Kafka's rules, the classic
// group must be Stable with no request of it in flight: a group in the
// middle of a rebalance has no assignment both sides agree on, so the
// heartbeat is answered COORDINATOR_NOT_AVAILABLE (retriable) until it is.
func (c *Coordinator) fromClassic(g *group, im *metadata.Image) (*consumerGroup, []record.Record, error) {
	notConsumer := func(why string) error {
		c.lg.Info("cannot upgrade a classic group to a consumer group", "group", g.id, "reason", why)
		return errs.New(pb.ErrorCode_GROUP_ID_NOT_FOUND, "Group %s is not a consumer group (%s).", g.id, why)
	}
	switch {
	case !c.upgradeEnabled():
		return nil, nil, notConsumer("the online upgrade is disabled by group.consumer.migration.policy=" + c.cfg.MigrationPolicy)
	case g.protocolType != "consumer":
		return nil, nil, notConsumer("the group does not use the consumer embedded protocol")
	case c.cfg.ConsumerMaxSize > 0 && len(g.members) > c.cfg.ConsumerMaxSize:
		return nil, nil, notConsumer("the group size exceeds group.consumer.max.size")
	case g.state != Stable || g.syncing || g.deleting || !g.quiet():
		return nil, nil, errs.New(pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, "group %s is rebalancing under the classic protocol (%s); it converts to a consumer group once stable, retry", g.id, g.state)
	}
	malformed := func() error {
		return errs.New(pb.ErrorCode_GROUP_ID_NOT_FOUND, "Cannot upgrade the classic group %s to consumer group because the embedded consumer protocol is malformed.", g.id)
	}
	cg := newConsumerGroup()
	cg.epoch, cg.assignmentEpoch = g.generation, g.generation
	for _, id := range g.order {
		m := g.members[id]
		sub, err := decodeClassicSubscription(m.metadataFor(g.protocol))
		if err != nil {
			c.lg.Warn("cannot upgrade a classic group: a subscription does not decode", "group", g.id, "member", id, "err", err)
			return nil, nil, malformed()
		}
		asg, err := decodeClassicAssignment(m.assignment)
		if err != nil {
			c.lg.Warn("cannot upgrade a classic group: an assignment does not decode", "group", g.id, "member", id, "err", err)
			return nil, nil, malformed()
		}
		strs := append([]string{id, m.instanceID, m.clientID, m.clientHost, sub.rack}, sub.topics...)
		for _, p := range m.protocols {
			strs = append(strs, p.Name)
		}
		if checkUTF8(strs...) != nil {
			return nil, nil, notConsumer("a member's ids are not UTF-8")
		}
		if len(asg.userData) > 0 {
			return nil, nil, errs.New(pb.ErrorCode_GROUP_ID_NOT_FOUND, "Cannot upgrade the classic group %s to consumer group because a custom assignor is in use.", g.id)
		}
		assigned := byTopicID(asg.partitions, im)
		names := append([]string(nil), sub.topics...)
		sort.Strings(names)
		cm := &cmember{id: id, instanceID: m.instanceID, rackID: sub.rack, clientID: m.clientID, clientHost: m.clientHost,
			rebalanceTimeoutMs: int32(m.rebalanceTimeout / time.Millisecond), names: names,
			classic: &classicInfo{sessionTimeoutMs: int32(m.sessionTimeout / time.Millisecond), protocols: m.protocols},
			epoch:   g.generation, prevEpoch: g.generation, state: memberStable, assigned: assigned, revoking: assignment{}}
		cm.setAssignEpochs(nil, g.generation)
		cg.target[id] = assigned
		if err := cg.putMember(cm); err != nil {
			c.lg.Warn("cannot upgrade a classic group: two members hold one partition", "group", g.id, "err", err)
			return nil, nil, malformed()
		}
	}
	recs := append([]record.Record{tombstone(groupKey(g.id))}, cg.groupRecords(g.id)...)
	c.lg.Info("upgrading a classic group to a consumer group", "group", g.id, "generation", g.generation, "members", len(g.members))
	return cg, recs, nil
}

// quiet reports whether no member of a classic group has a JoinGroup or
// SyncGroup waiting.
func (g *group) quiet() bool {
	for _, m := range g.members {
		if m.joinCh != nil || m.syncCh != nil {
			return false
		}
	}
	return true
}

// byTopicID turns partitions by topic name into an assignment by topic
// id; topics the image does not have are left out.
func byTopicID(parts map[string][]int32, im *metadata.Image) assignment {
	a := assignment{}
	for name, ps := range parts {
		if t := im.Topics[name]; t != nil && t.ID != "" {
			a[t.ID] = append(a[t.ID], ps...)
		}
	}
	return a.normalized()
}

// byTopicName turns an assignment into partitions by topic name; topics
// the image no longer has are left out.
func byTopicName(a assignment, im *metadata.Image) map[string][]int32 {
	names := topicNamesByID(im)
	out := map[string][]int32{}
	for id, ps := range a {
		if n, ok := names[id]; ok {
			out[n] = append(out[n], ps...)
		}
	}
	return out
}

func topicNamesByID(im *metadata.Image) map[string]string {
	out := make(map[string]string, len(im.Topics))
	for name, t := range im.Topics {
		out[t.ID] = name
	}
	return out
}

// canDowngrade reports whether removing a member converts the group to a
// classic group (Kafka's validateOnlineDowngradeWithFencedMember): it is
// the last member of the consumer protocol, others remain, and the policy
// allows it.
func (c *Coordinator) canDowngrade(cg *consumerGroup, leaving string) bool {
	m := cg.members[leaving]
	if m == nil || m.classic != nil || len(cg.members) <= 1 || cg.numClassic() != len(cg.members)-1 {
		return false
	}
	if !c.downgradeEnabled() {
		c.lg.Info("cannot downgrade a consumer group to a classic group: the online downgrade is disabled", "group.consumer.migration.policy", c.cfg.MigrationPolicy)
		return false
	}
	return true
}

// classicValue is the classic membership a consumer group becomes
// without leaving (Kafka's ClassicGroup.fromConsumerGroup): its classic
// members (and joining, a classic member taking leaving's place) at the
// group epoch, each with its target assignment in the embedded protocol's
// encoding; the protocol is the one they vote for.
func classicValue(cg *consumerGroup, leaving string, joining *cmember, im *metadata.Image, now time.Time) *pb.GroupMetadataValue {
	tmp := newGroup("", now)
	members := map[string]*cmember{}
	for id, m := range cg.members {
		if id != leaving {
			members[id] = m
		}
	}
	if joining != nil {
		members[joining.id] = joining
	}
	for _, id := range sortedKeys(members) {
		m := members[id]
		var protos []*pb.GroupProtocol
		if m.classic != nil {
			protos = m.classic.protocols
		}
		tmp.addMember(&member{id: id, protocols: protos})
	}
	protocol := ""
	if len(tmp.order) > 0 {
		protocol = tmp.selectProtocol()
	}
	v := &pb.GroupMetadataValue{ProtocolType: "consumer", Generation: cg.epoch, Protocol: protocol, CurrentStateTimestampMs: now.UnixMilli()}
	for _, id := range tmp.order {
		m := members[id]
		targetOf := id
		if joining != nil && id == joining.id {
			targetOf = leaving
		}
		var sub []byte
		var session int32
		if m.classic != nil {
			session = m.classic.sessionTimeoutMs
			for _, p := range m.classic.protocols {
				if p.Name == protocol {
					sub = p.Metadata
				}
			}
		}
		v.Members = append(v.Members, &pb.GroupMetadataMember{MemberId: id, GroupInstanceId: m.instanceID, ClientId: m.clientID, ClientHost: m.clientHost,
			RebalanceTimeoutMs: m.rebalanceTimeoutMs, SessionTimeoutMs: session, Subscription: sub,
			Assignment: encodeClassicAssignment(protocolVersion(sub), byTopicName(cg.target[targetOf], im))})
	}
	return v
}

// toClassic plans the downgrade of a consumer group whose last member of
// the consumer protocol, leaving, is removed: the consumer group's
// tombstones, then its classic membership; once in memory the members
// keep the protocols they joined with, their sessions start again and the
// group rebalances.
func (c *Coordinator) toClassic(s *shard, g *group, leaving string, now time.Time, why string) *groupChange {
	cg := g.cg
	im := c.image()
	v := classicValue(cg, leaving, nil, im, now)
	recs := cg.groupTombstones(g.id, nil)
	recs = append(recs, record.Record{Key: groupKey(g.id), Value: marshalValue(v)})
	protocols := map[string][]*pb.GroupProtocol{}
	for id, m := range cg.members {
		if m.classic != nil {
			protocols[id] = m.classic.protocols
		}
	}
	c.lg.Info("downgrading a consumer group to a classic group", "group", g.id, "epoch", cg.epoch, "members", len(cg.members)-1, "leaving", leaving)
	return &groupChange{recs: recs, done: func(err error) {
		if err != nil {
			return
		}
		c.afterDowngrade(s, g.id, protocols, c.clk.Now(), "the group became a classic group: "+strings.TrimSpace(why))
	}}
}

// afterDowngrade sets up a group just converted to the classic protocol:
// its members' protocols as they joined with them (the record keeps only
// the group's one), their sessions from now, and a rebalance.
func (c *Coordinator) afterDowngrade(s *shard, groupID string, protocols map[string][]*pb.GroupProtocol, now time.Time, why string) {
	g := s.groups[groupID]
	if g == nil || g.cg != nil {
		return
	}
	for id, m := range g.members {
		if ps := protocols[id]; len(ps) > 0 {
			m.protocols = ps
		}
		m.lastHeartbeat = now
	}
	if g.state == Stable {
		c.prepareRebalance(s, g, now, why)
	}
}
