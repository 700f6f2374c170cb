package group

import (
	"time"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// Members leaving a consumer group: a leave heartbeat (-1), a static
// member leaving for now (-2), and the coordinator fencing a member whose
// session or revocation time ran out.

// consumerGroupOf is the consumer group of an id, or GROUP_ID_NOT_FOUND.
func consumerGroupOf(s *shard, groupID string) (*group, error) {
	g := s.groups[groupID]
	if g == nil {
		return nil, errs.New(pb.ErrorCode_GROUP_ID_NOT_FOUND, "Group %s not found.", groupID)
	}
	if g.cg == nil {
		return nil, errs.New(pb.ErrorCode_GROUP_ID_NOT_FOUND, "Group %s is not a consumer group.", groupID)
	}
	return g, nil
}

// planLeave plans a leave heartbeat (Kafka's consumerGroupLeave).
func (c *Coordinator) planLeave(s *shard, now time.Time, req *pb.ConsumerGroupHeartbeatRequest, out **pb.ConsumerGroupHeartbeatResponse) (*groupChange, error) {
	g, err := consumerGroupOf(s, req.GroupId)
	if err != nil {
		return nil, err
	}
	cg := g.cg
	resp := &pb.ConsumerGroupHeartbeatResponse{MemberId: req.MemberId, MemberEpoch: req.MemberEpoch}
	var m *cmember
	if req.InstanceId == nil {
		if m = cg.members[req.MemberId]; m == nil {
			return nil, unknownMember(req.MemberId, req.GroupId)
		}
	} else {
		if m = cg.staticMember(*req.InstanceId); m == nil {
			return nil, errs.New(pb.ErrorCode_UNKNOWN_MEMBER_ID, "Instance id %s is unknown.", *req.InstanceId)
		}
		if m.id != req.MemberId {
			return nil, errs.New(pb.ErrorCode_FENCED_INSTANCE_ID, "Static member %s with instance id %s was fenced by member %s.", req.MemberId, *req.InstanceId, m.id)
		}
		if req.MemberEpoch == staticLeaveEpoch {
			// The member keeps its partitions (they wait for it, until its
			// session ends); what it was revoking is free.
			n := m.clone()
			n.epoch, n.revoking = staticLeaveEpoch, assignment{}
			c.lg.Info("static member left the consumer group for now", "group", req.GroupId, "member", m.id, "group.instance.id", m.instanceID)
			return &groupChange{recs: []record.Record{recCurrent(req.GroupId, n)}, done: func(err error) {
				if err == nil {
					*out = resp
					if gg := s.groups[req.GroupId]; gg != nil && gg.cg != nil && gg.cg.members[n.id] != nil {
						gg.cg.members[n.id].revokeBy = time.Time{}
					}
				}
			}}, nil
		}
	}
	c.lg.Info("member left the consumer group", "group", req.GroupId, "member", m.id)
	ch := c.planFence(s, g, m, now, "the member left the group")
	done := ch.done
	ch.done = func(err error) {
		if err == nil {
			*out = resp
		}
		done(err)
	}
	return ch, nil
}

// planFence plans a member's removal (Kafka's consumerGroupFenceMember):
// when it is the last member of the consumer protocol and others remain,
// all of the classic protocol, the group converts back to a classic group
// (convert.go); else its records are deleted, the subscription is
// recomputed without it, and the group epoch moves.
func (c *Coordinator) planFence(s *shard, g *group, m *cmember, now time.Time, why string) *groupChange {
	cg := g.cg
	if c.canDowngrade(cg, m.id) {
		return c.toClassic(s, g, m.id, now, why)
	}
	recs := memberTombstones(g.id, m.id)
	regexes := map[string]*resolvedRegex{}
	for re, r := range cg.regexes {
		regexes[re] = r
	}
	if m.regex != "" && cg.regexUsers(m.regex) == 1 {
		recs = append(recs, tombstone(cgMemberKey(keyCGRegex, g.id, m.regex)))
		delete(regexes, m.regex)
	}
	im := c.image()
	sub := subscriptionFor(cg.subscribedTopics(m.id, nil, regexes), im)
	if !sameSubscription(sub, cg.subscription) {
		recs = append(recs, recSubscription(g.id, sub))
	}
	recs = append(recs, recGroupEpoch(g.id, cg.epoch+1))
	return &groupChange{recs: recs, done: func(error) {}}
}

// fenceIfStill removes a member the sweep found past a deadline, if it
// still is once its group's lane is free (its heartbeat may have come in
// meanwhile).
func (c *Coordinator) fenceIfStill(groupID, memberID string, due func(m *cmember, now time.Time) (bool, string)) {
	_ = c.change(c.ctx, groupID, func(s *shard, now time.Time) (*groupChange, error) {
		g := s.groups[groupID]
		if g == nil || g.cg == nil {
			return nil, nil
		}
		m := g.cg.members[memberID]
		if m == nil {
			return nil, nil
		}
		ok, why := due(m, now)
		if !ok {
			return nil, nil
		}
		c.lg.Info("member fenced from the consumer group", "group", groupID, "member", memberID, "reason", why)
		return c.planFence(s, g, m, now, why), nil
	})
}
