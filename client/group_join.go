package client

import (
	"context"
	"fmt"
	"time"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/planted"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// A group member's membership: the join/sync round (and, as leader, the
// assignment), static-member fencing, and the heartbeat loop.

// runJoin is one rebalance from this member's side: JoinGroup (the leader
// computes the assignment), SyncGroup, then the committed offsets of the
// partitions it gains. It retries what a rebalance in progress asks for.
func (g *groupMember) runJoin(sub subscription) joinResult {
	meta := encodeSubscription(sub)
	for attempt := 0; ; attempt++ {
		// A first JoinGroup is answered MEMBER_ID_REQUIRED and the second
		// goes at once; a round that keeps being sent back (the group
		// rebalancing, this member forgotten) backs off.
		if attempt >= 2 && g.cfg.sleep(g.ctx, backoff(g.cfg, attempt-2)) != nil {
			return joinResult{err: g.ctx.Err()}
		}
		g.mu.Lock()
		memberID := g.memberID
		g.mu.Unlock()
		req := &pb.JoinGroupRequest{GroupId: g.cfg.groupID, SessionTimeoutMs: int32(g.cfg.sessionTimeout / time.Millisecond),
			RebalanceTimeoutMs: int32(g.cfg.rebalanceTimeout / time.Millisecond), MemberId: memberID, GroupInstanceId: g.cfg.instanceID,
			ProtocolType: "consumer", ClientId: g.cfg.clientID}
		for _, n := range g.cfg.assignors {
			req.Protocols = append(req.Protocols, &pb.GroupProtocol{Name: n, Metadata: meta})
		}
		var jr *pb.JoinGroupResponse
		err := g.call(g.ctx, g.cfg.rebalanceTimeout+g.cfg.requestTimeout, "JoinGroup", rpc(&jr, func(ctx context.Context, gc pb.GroupsClient) (*pb.JoinGroupResponse, error) {
			return gc.JoinGroup(ctx, req)
		}))
		switch code := errs.CodeOf(err); code {
		case pb.ErrorCode_NONE:
		case pb.ErrorCode_MEMBER_ID_REQUIRED:
			g.setMember(jr.MemberId, -1)
			continue
		case pb.ErrorCode_UNKNOWN_MEMBER_ID, pb.ErrorCode_ILLEGAL_GENERATION:
			if r, lost := g.forgotten(sub); lost {
				return r
			}
			continue
		case pb.ErrorCode_REBALANCE_IN_PROGRESS:
			continue
		default:
			// FENCED_INSTANCE_ID among them: apply makes it final.
			return joinResult{err: err}
		}
		g.setMember(jr.MemberId, jr.GenerationId)
		var assignments []*pb.GroupAssignment
		if jr.Leader == jr.MemberId {
			if assignments, err = g.computeAssignment(g.ctx, jr.ProtocolName, jr.Members); err != nil {
				return joinResult{err: err}
			}
		}
		var sr *pb.SyncGroupResponse
		sreq := &pb.SyncGroupRequest{GroupId: g.cfg.groupID, GenerationId: jr.GenerationId, MemberId: jr.MemberId, GroupInstanceId: g.instanceID(), Assignments: assignments}
		err = g.call(g.ctx, g.cfg.rebalanceTimeout+g.cfg.requestTimeout, "SyncGroup", rpc(&sr, func(ctx context.Context, gc pb.GroupsClient) (*pb.SyncGroupResponse, error) {
			return gc.SyncGroup(ctx, sreq)
		}))
		switch code := errs.CodeOf(err); code {
		case pb.ErrorCode_NONE:
		case pb.ErrorCode_REBALANCE_IN_PROGRESS:
			continue
		case pb.ErrorCode_UNKNOWN_MEMBER_ID, pb.ErrorCode_ILLEGAL_GENERATION:
			if r, lost := g.forgotten(sub); lost {
				return r
			}
			continue
		default:
			return joinResult{err: err}
		}
		tps, err := decodeAssignment(sr.Assignment)
		if err != nil {
			return joinResult{err: fmt.Errorf("the leader's %w", err)}
		}
		g.mu.Lock()
		g.inSession, g.protocol = true, jr.ProtocolName
		g.mu.Unlock()
		held := map[TopicPartition]bool{}
		if sub.held {
			for _, tp := range sub.owned {
				held[tp] = true
			}
		}
		var fresh []TopicPartition
		for _, tp := range tps {
			if !held[tp] {
				fresh = append(fresh, tp)
			}
		}
		offsets, err := g.fetchCommitted(g.ctx, fresh)
		if err != nil {
			return joinResult{err: err}
		}
		return joinResult{generation: jr.GenerationId, protocol: jr.ProtocolName, assignment: tps, offsets: offsets}
	}
}

// forgotten handles UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION during a
// round: rejoin as a new member, after dropping the partitions still held.
func (g *groupMember) forgotten(sub subscription) (joinResult, bool) {
	g.setMember("", -1)
	return joinResult{lost: true}, sub.held && len(sub.owned) > 0
}

func (g *groupMember) setMember(id string, generation int32) {
	g.mu.Lock()
	g.memberID, g.generation = id, generation
	g.mu.Unlock()
}

// instanceID is the group.instance.id every call of the member names, so
// the coordinator can fence an old incarnation of a static member.
func (g *groupMember) instanceID() string {
	if planted.On(planted.ClientIgnoresInstanceFencing) {
		return ""
	}
	return g.cfg.instanceID
}

// fence makes FENCED_INSTANCE_ID final: no more heartbeats or rejoins,
// and Poll drops the partitions and returns the error.
func (g *groupMember) fence(err error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fenced == nil {
		g.fenced = fmt.Errorf("strand: group.instance.id %q of group %q was taken over by another member (is a second consumer running with it?): %w", g.cfg.instanceID, g.cfg.groupID, err)
		g.lg.Error("fenced: another consumer joined with this group.instance.id; this consumer stops", "group.instance.id", g.cfg.instanceID, "err", err)
	}
	g.needRejoin, g.inSession, g.lost, g.generation = false, false, true, -1
	return g.fenced
}

// computeAssignment is the leader's part: decode every member's
// subscription, learn the partition counts, run the chosen assignor.
func (g *groupMember) computeAssignment(ctx context.Context, protocol string, members []*pb.GroupMember) ([]*pb.GroupAssignment, error) {
	a, ok := assignorByName(protocol)
	if !ok {
		return nil, fmt.Errorf("the group chose protocol %q, which this consumer does not have", protocol)
	}
	subs := make([]memberSubscription, 0, len(members))
	topics := map[string]bool{}
	for _, m := range members {
		s, err := decodeSubscription(m.Metadata)
		if err != nil {
			g.lg.Warn("member's subscription unreadable; it gets nothing", "member", m.MemberId, "err", err)
		}
		subs = append(subs, memberSubscription{memberID: m.MemberId, instanceID: m.GroupInstanceId, subscription: s})
		for _, t := range s.topics {
			topics[t] = true
		}
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	rctx, cancel := context.WithTimeout(ctx, g.cfg.requestTimeout)
	defer cancel()
	if err := g.c.cl.refresh(rctx, names); err != nil {
		return nil, fmt.Errorf("metadata for the assignment: %w", err)
	}
	counts := map[string]int32{}
	g.c.cl.mu.Lock()
	for _, t := range names {
		if ti := g.c.cl.topics[t]; ti != nil && ti.err == nil {
			counts[t] = int32(len(ti.partitions))
		}
	}
	g.c.cl.mu.Unlock()
	plan := a.assign(subs, counts)
	out := make([]*pb.GroupAssignment, 0, len(members))
	for _, m := range members {
		out = append(out, &pb.GroupAssignment{MemberId: m.MemberId, Assignment: encodeAssignment(plan[m.MemberId])})
	}
	return out, nil
}

// heartbeatLoop heartbeats every heartbeat.interval.ms while a generation
// is in force; its answers ask Poll to rejoin, or to drop lost partitions.
func (g *groupMember) heartbeatLoop() {
	defer g.wg.Done()
	t := g.cfg.clock.NewTicker(g.cfg.heartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-t.C():
		}
		g.mu.Lock()
		id, gen, ok := g.memberID, g.generation, g.inSession && g.memberID != ""
		g.mu.Unlock()
		if !ok {
			continue
		}
		ctx, cancel := context.WithTimeout(g.ctx, min(g.cfg.requestTimeout, g.cfg.sessionTimeout))
		var hr *pb.HeartbeatResponse
		err := g.call(ctx, g.cfg.requestTimeout, "Heartbeat", rpc(&hr, func(ctx context.Context, gc pb.GroupsClient) (*pb.HeartbeatResponse, error) {
			return gc.Heartbeat(ctx, &pb.HeartbeatRequest{GroupId: g.cfg.groupID, GenerationId: gen, MemberId: id, GroupInstanceId: g.instanceID()})
		}))
		cancel()
		code := errs.CodeOf(err)
		if err == nil || g.ctx.Err() != nil {
			continue
		}
		if code == pb.ErrorCode_FENCED_INSTANCE_ID {
			g.mu.Lock()
			current := g.generation == gen && g.memberID == id
			g.mu.Unlock()
			if current {
				g.fence(err)
			}
			continue
		}
		if !g.generationRefused(gen, id, code) {
			g.lg.Debug("heartbeat failed", "err", err)
		}
	}
}

// generationRefused records the group's refusal of generation gen of
// member id (a heartbeat's, or a transactional offset commit's answer):
// REBALANCE_IN_PROGRESS makes the next Poll rejoin; UNKNOWN_MEMBER_ID and
// ILLEGAL_GENERATION also lose the partitions (the next Poll drops them
// without committing: another member may own them already), and an unknown
// member rejoins as a new one. It reports whether code was one of these;
// an answer for a generation this member has left already changes nothing.
func (g *groupMember) generationRefused(gen int32, id string, code pb.ErrorCode) bool {
	switch code {
	case pb.ErrorCode_REBALANCE_IN_PROGRESS, pb.ErrorCode_UNKNOWN_MEMBER_ID, pb.ErrorCode_ILLEGAL_GENERATION:
	default:
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.inSession || g.generation != gen || g.memberID != id {
		return true
	}
	g.needRejoin = true
	if code != pb.ErrorCode_REBALANCE_IN_PROGRESS {
		g.lost, g.inSession, g.generation = true, false, -1
		if code == pb.ErrorCode_UNKNOWN_MEMBER_ID {
			g.memberID = ""
		}
	}
	return true
}
