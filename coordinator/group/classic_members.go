package group

import (
	"context"
	"errors"
	"slices"
	"sort"
	"time"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// Members of the classic protocol in a consumer group (after an online
// upgrade, or a classic consumer joining a consumer group): they go on
// with JoinGroup, SyncGroup, Heartbeat and LeaveGroup, answered from the
// consumer group as Kafka does. A JoinGroup is a full heartbeat: its
// subscription (from the embedded consumer protocol) updates the member,
// the target is recomputed if due, and the member is reconciled with the
// partitions its subscription says it owns; it is answered at once with
// the member's epoch as the generation and no leader. SyncGroup hands the
// member its current assignment in the embedded protocol's encoding.
// Heartbeat answers REBALANCE_IN_PROGRESS while the member must rejoin:
// the group epoch moved past it, it has partitions to revoke, or
// partitions it waited for are free.

// errNotConsumerGroup tells JoinGroup the group is no consumer group (any
// more): the classic path takes the request.
var errNotConsumerGroup = errors.New("not a consumer group")

// joinConsumerGroup answers a JoinGroup to a consumer group. An empty
// consumer group is deleted first (its offsets stay) and the classic path
// takes the join (errNotConsumerGroup), as it does when the group is no
// consumer group by the time its lane is free.
func (c *Coordinator) joinConsumerGroup(ctx context.Context, req *pb.JoinGroupRequest) (*pb.JoinGroupResponse, error) {
	var resp *pb.JoinGroupResponse
	classic := false
	err := c.change(ctx, req.GroupId, func(s *shard, now time.Time) (*groupChange, error) {
		g := s.groups[req.GroupId]
		if g == nil || g.cg == nil {
			classic = true
			return nil, nil
		}
		if len(g.cg.members) == 0 {
			c.lg.Info("an empty consumer group becomes a classic group", "group", g.id)
			return &groupChange{recs: g.cg.groupTombstones(g.id, nil), done: func(err error) { classic = err == nil }}, nil
		}
		return c.planClassicJoin(s, g, now, req, &resp)
	})
	if classic {
		return nil, errNotConsumerGroup
	}
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// supportsClassicProtocols reports whether a classic member with these
// protocols may join the consumer group (Kafka's rule): protocol type
// "consumer", and a protocol every classic member already there has.
func (cg *consumerGroup) supportsClassicProtocols(protocolType string, protocols []*pb.GroupProtocol) bool {
	if protocolType != "consumer" || len(protocols) == 0 {
		return false
	}
	n := cg.numClassic()
	for _, p := range protocols {
		have := 0
		for _, m := range cg.members {
			if m.classic != nil && slices.ContainsFunc(m.classic.protocols, func(q *pb.GroupProtocol) bool { return q.Name == p.Name }) {
				have++
			}
		}
		if have == n {
			return true
		}
	}
	return false
}

// planClassicJoin plans a classic member's JoinGroup to a consumer group
// (Kafka's classicGroupJoinToConsumerGroup).
func (c *Coordinator) planClassicJoin(s *shard, g *group, now time.Time, req *pb.JoinGroupRequest, out **pb.JoinGroupResponse) (*groupChange, error) {
	cg := g.cg
	memberID := req.MemberId
	unknown := memberID == ""
	if unknown {
		memberID = newMemberID(req.ClientId)
	}
	if c.cfg.ConsumerMaxSize > 0 && len(cg.members) >= c.cfg.ConsumerMaxSize && cg.members[memberID] == nil {
		return nil, errs.New(pb.ErrorCode_GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum capacity of %d members.", c.cfg.ConsumerMaxSize)
	}
	if !cg.supportsClassicProtocols(req.ProtocolType, req.Protocols) {
		return nil, errs.New(pb.ErrorCode_INCONSISTENT_GROUP_PROTOCOL, "Member %s's protocols are not supported.", memberID)
	}
	sub, err := decodeClassicSubscription(req.Protocols[0].Metadata)
	if err != nil {
		return nil, errs.New(pb.ErrorCode_INCONSISTENT_GROUP_PROTOCOL, "the subscription of protocol %q does not decode as the consumer embedded protocol: %v", req.Protocols[0].Name, err)
	}
	strs := append([]string{memberID, req.GroupInstanceId, req.ClientId, req.ClientHost, sub.rack}, sub.topics...)
	for _, p := range req.Protocols {
		strs = append(strs, p.Name)
	}
	if err := checkUTF8(strs...); err != nil {
		return nil, err
	}
	p := &heartbeatPlan{c: c, s: s, gid: g.id, g: g, cg: cg, now: now, im: c.image(), regexV: map[string]*resolvedRegex{}}
	for re, r := range cg.regexes {
		p.regexV[re] = r
	}
	var member *cmember
	replaced := ""
	if req.GroupInstanceId == "" {
		if member = cg.members[memberID]; member == nil {
			member = newCMember(memberID)
			c.lg.Info("member joins the consumer group", "group", g.id, "member", memberID, "protocol", "classic")
		}
	} else if member, replaced, err = p.staticMember(memberID, req.GroupInstanceId, -1, nil, unknown, true); err != nil {
		return nil, err
	}

	upd := member.clone()
	upd.instanceID = req.GroupInstanceId
	if sub.rack != "" {
		upd.rackID = sub.rack
	}
	if req.RebalanceTimeoutMs != -1 {
		upd.rebalanceTimeoutMs = req.RebalanceTimeoutMs
	}
	upd.names = append([]string(nil), sub.topics...)
	sort.Strings(upd.names)
	upd.names = slices.Compact(upd.names)
	upd.clientID, upd.clientHost = req.ClientId, req.ClientHost
	upd.classic = &classicInfo{sessionTimeoutMs: req.SessionTimeoutMs, protocols: req.Protocols}

	bump := false
	if !upd.sameMetadata(member) || cg.members[member.id] == nil {
		p.recs = append(p.recs, recMember(g.id, upd))
		bump = !slices.Equal(upd.names, member.names)
	}
	p.subscriptionAndEpoch(bump, replaced, upd)
	target, targetEpoch := p.targetFor(upd, replaced)
	owned := byTopicID(sub.owned, p.im)
	next := reconcile(upd, targetEpoch, target, cg.partitionEpoch, owned)
	if (cg.members[next.id] == nil && replaced == "") || !next.sameAssignmentState(member) {
		p.recs = append(p.recs, recCurrent(g.id, next))
	}

	resp := &pb.JoinGroupResponse{MemberId: next.id, GenerationId: next.epoch, ProtocolName: req.Protocols[0].Name}
	if replaced != "" && c.canDowngradeReplaced(cg, replaced) {
		// The last member of the consumer protocol is replaced by this
		// classic one: the group becomes a classic group, this member in
		// the other's place with its assignment.
		v := classicValue(cg, replaced, next, p.im, now)
		p.recs = append(p.recs, cg.groupTombstones(g.id, map[string]string{replaced: next.id})...)
		p.recs = append(p.recs, record.Record{Key: groupKey(g.id), Value: marshalValue(v)})
		resp.GenerationId = v.Generation
		protocols := map[string][]*pb.GroupProtocol{next.id: req.Protocols}
		for id, m := range cg.members {
			if m.classic != nil {
				protocols[id] = m.classic.protocols
			}
		}
		c.lg.Info("downgrading a consumer group to a classic group: a classic static member replaced the last consumer one", "group", g.id, "member", next.id)
		return &groupChange{recs: p.recs, done: func(err error) {
			if err != nil {
				return
			}
			*out = resp
			if gg := s.groups[g.id]; gg != nil && gg.cg == nil {
				for id, m := range gg.members {
					if ps := protocols[id]; len(ps) > 0 {
						m.protocols = ps
					}
					m.lastHeartbeat = c.clk.Now()
				}
			}
		}}, nil
	}
	rebalance := time.Duration(max(req.RebalanceTimeoutMs, req.SessionTimeoutMs)) * time.Millisecond
	metaOffset := p.im.Offset
	return &groupChange{recs: p.recs, done: func(err error) {
		if err != nil {
			return
		}
		*out = resp
		p.afterChange(next.id, metaOffset)
		if gg := s.groups[g.id]; gg != nil && gg.cg != nil {
			if m := gg.cg.members[next.id]; m != nil {
				m.joinBy, m.syncBy = time.Time{}, now.Add(rebalance)
			}
		}
	}}, nil
}

// canDowngradeReplaced reports whether a classic static member replacing
// another converts the group (Kafka's
// validateOnlineDowngradeWithReplacedMemberId): every other member uses
// the classic protocol, and the policy allows it.
func (c *Coordinator) canDowngradeReplaced(cg *consumerGroup, replaced string) bool {
	m := cg.members[replaced]
	return m != nil && m.classic == nil && cg.numClassic() == len(cg.members)-1 && c.downgradeEnabled()
}

// classicMemberOf finds the classic member a SyncGroup, Heartbeat or
// LeaveGroup names in a consumer group (Kafka's
// validateConsumerGroupMember and throwIfMemberDoesNotUseClassicProtocol).
func classicMemberOf(g *group, memberID, instanceID string) (*cmember, error) {
	cg := g.cg
	var m *cmember
	if instanceID == "" {
		if m = cg.members[memberID]; m == nil {
			return nil, unknownMember(memberID, g.id)
		}
	} else {
		if m = cg.staticMember(instanceID); m == nil {
			return nil, errs.New(pb.ErrorCode_UNKNOWN_MEMBER_ID, "Member with instance id %s is not a member of group %s.", instanceID, g.id)
		}
		if m.id != memberID {
			return nil, errs.New(pb.ErrorCode_FENCED_INSTANCE_ID, "Static member %s with instance id %s was fenced by member %s.", memberID, instanceID, m.id)
		}
	}
	if m.classic == nil {
		return nil, errs.New(pb.ErrorCode_UNKNOWN_MEMBER_ID, "Member %s does not use the classic protocol.", m.id)
	}
	return m, nil
}

func generationMatches(m *cmember, generation int32) error {
	if m.epoch != generation {
		return errs.New(pb.ErrorCode_ILLEGAL_GENERATION, "The request generation id %d is not equal to the member epoch %d of member %s.", generation, m.epoch, m.id)
	}
	return nil
}

// mustRejoin reports whether a classic member is to rejoin, and sets the
// time it has to (its rebalance timeout) if it was not already set.
func (c *Coordinator) mustRejoin(cg *consumerGroup, m *cmember, now time.Time) bool {
	if m.epoch < cg.epoch || m.state == memberUnrevoked || (m.state == memberUnreleased && !cg.waitingOnUnreleased(m)) {
		if m.joinBy.IsZero() {
			m.joinBy = now.Add(time.Duration(max(m.rebalanceTimeoutMs, 0)) * time.Millisecond)
		}
		return true
	}
	return false
}

// syncConsumerGroup answers a classic member's SyncGroup in a consumer
// group (Kafka's classicGroupSyncToConsumerGroup).
func (c *Coordinator) syncConsumerGroup(ctx context.Context, req *pb.SyncGroupRequest) (*pb.SyncGroupResponse, error) {
	var resp *pb.SyncGroupResponse
	err := c.change(ctx, req.GroupId, func(s *shard, now time.Time) (*groupChange, error) {
		g := s.groups[req.GroupId]
		if g == nil || g.cg == nil {
			return nil, errNotConsumerGroup
		}
		m, err := classicMemberOf(g, req.MemberId, req.GroupInstanceId)
		if err != nil {
			return nil, err
		}
		if err := generationMatches(m, req.GenerationId); err != nil {
			return nil, err
		}
		// The epoch moved past the member, and it is not revoking: it
		// rejoins to catch up first.
		if g.cg.epoch > m.epoch && m.state != memberUnrevoked {
			if m.joinBy.IsZero() {
				m.joinBy = now.Add(time.Duration(max(m.rebalanceTimeoutMs, 0)) * time.Millisecond)
			}
			return nil, errs.New(pb.ErrorCode_REBALANCE_IN_PROGRESS, "A new rebalance is triggered in group %s and member %s should rejoin to catch up.", g.id, m.id)
		}
		m.syncBy, m.lastSeen = time.Time{}, now
		first := m.classic.protocols[0]
		resp = &pb.SyncGroupResponse{ProtocolName: first.Name,
			Assignment: encodeClassicAssignment(protocolVersion(first.Metadata), byTopicName(m.assigned, c.image()))}
		return nil, nil
	})
	return resp, err
}

// heartbeatConsumerGroup answers a classic member's Heartbeat in a
// consumer group (Kafka's classicGroupHeartbeatToConsumerGroup).
func (c *Coordinator) heartbeatConsumerGroup(ctx context.Context, req *pb.HeartbeatRequest) (*pb.HeartbeatResponse, error) {
	resp := &pb.HeartbeatResponse{}
	err := c.change(ctx, req.GroupId, func(s *shard, now time.Time) (*groupChange, error) {
		g := s.groups[req.GroupId]
		if g == nil || g.cg == nil {
			return nil, errNotConsumerGroup
		}
		m, err := classicMemberOf(g, req.MemberId, req.GroupInstanceId)
		if err != nil {
			return nil, err
		}
		if err := generationMatches(m, req.GenerationId); err != nil {
			return nil, err
		}
		m.lastSeen = now
		if c.mustRejoin(g.cg, m, now) {
			resp.ErrorCode = pb.ErrorCode_REBALANCE_IN_PROGRESS
			resp.ErrorMessage = "the consumer group " + g.id + " is rebalancing; rejoin"
		}
		return nil, nil
	})
	return resp, err
}

// leaveConsumerGroup removes a classic member from a consumer group
// (Kafka's classicGroupLeaveToConsumerGroup): a static one may be named by
// its instance id alone.
func (c *Coordinator) leaveConsumerGroup(ctx context.Context, req *pb.LeaveGroupRequest) (*pb.LeaveGroupResponse, error) {
	err := c.change(ctx, req.GroupId, func(s *shard, now time.Time) (*groupChange, error) {
		g := s.groups[req.GroupId]
		if g == nil || g.cg == nil {
			return nil, errNotConsumerGroup
		}
		cg := g.cg
		var m *cmember
		if req.GroupInstanceId == "" {
			if m = cg.members[req.MemberId]; m == nil {
				return nil, unknownMember(req.MemberId, g.id)
			}
		} else {
			if m = cg.staticMember(req.GroupInstanceId); m == nil {
				return nil, errs.New(pb.ErrorCode_UNKNOWN_MEMBER_ID, "Instance id %s is unknown.", req.GroupInstanceId)
			}
			if req.MemberId != "" && m.id != req.MemberId {
				return nil, errs.New(pb.ErrorCode_FENCED_INSTANCE_ID, "Static member %s with instance id %s was fenced by member %s.", req.MemberId, req.GroupInstanceId, m.id)
			}
		}
		if m.classic == nil {
			return nil, errs.New(pb.ErrorCode_UNKNOWN_MEMBER_ID, "Member %s does not use the classic protocol.", m.id)
		}
		c.lg.Info("classic member left the consumer group", "group", g.id, "member", m.id)
		recs := memberTombstones(g.id, m.id)
		sub := subscriptionFor(cg.subscribedTopics(m.id, nil, cg.regexes), c.image())
		if !sameSubscription(sub, cg.subscription) {
			recs = append(recs, recSubscription(g.id, sub))
		}
		recs = append(recs, recGroupEpoch(g.id, cg.epoch+1))
		return &groupChange{recs: recs}, nil
	})
	if err != nil {
		return nil, err
	}
	return &pb.LeaveGroupResponse{}, nil
}
