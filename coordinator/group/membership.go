package group

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/planted"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// JoinGroup adds or refreshes a member and waits (a long poll) until the
// rebalance completes: every known member has rejoined, or the largest
// rebalance timeout of the members passed (members that did not rejoin are
// removed). The first rebalance of an empty group also waits
// group.initial.rebalance.delay.ms, longer for each member that arrives
// meanwhile, up to the rebalance timeout. An empty member id gets a new id.
// The leader's answer lists the members with their metadata for the chosen
// protocol: one every member supports, by vote of each member's first
// preference.
//
// A static member (group.instance.id) that rejoins with an empty member
// id replaces its previous incarnation: the old member id is fenced, and
// unless the group's protocol would change the member keeps its
// assignment without a rebalance (KIP-345; see keepStaticMember).
//
// Errors: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID,
// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL,
// INVALID_SESSION_TIMEOUT, REBALANCE_IN_PROGRESS (a newer JoinGroup of the
// same member replaced this one).
func (c *Coordinator) JoinGroup(ctx context.Context, req *pb.JoinGroupRequest) (*pb.JoinGroupResponse, error) {
	resp, ch := c.join(ctx, req)
	for tries := 0; resp == toConsumerGroupJoin; tries++ {
		r, err := c.joinConsumerGroup(ctx, req)
		switch {
		case err == errNotConsumerGroup && tries < 3:
			resp, ch = c.join(ctx, req)
			continue
		case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			return nil, err
		case err != nil:
			return joinError(err, req.MemberId), nil
		}
		return r, nil
	}
	if ch == nil {
		return resp, nil
	}
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err() // the front door maps it (a gRPC caller sees CANCELLED or DEADLINE_EXCEEDED)
	case <-c.ctx.Done():
		return &pb.JoinGroupResponse{ErrorCode: pb.ErrorCode_NOT_COORDINATOR, ErrorMessage: "the group coordinator is shutting down", GenerationId: -1}, nil
	}
}

// toConsumerGroupJoin and toConsumerGroupSync are what join and sync
// answer for a group of the consumer protocol: the caller hands the
// request to the consumer group (classic_members.go).
var (
	toConsumerGroupJoin = &pb.JoinGroupResponse{}
	toConsumerGroupSync = &pb.SyncGroupResponse{}
)

func joinError(err error, memberID string) *pb.JoinGroupResponse {
	code, msg := errs.Split(err)
	return &pb.JoinGroupResponse{ErrorCode: code, ErrorMessage: msg, MemberId: memberID, GenerationId: -1}
}

// join does JoinGroup's work under the shard lock, once no change of the
// group is being written: either an answer now, or the channel the answer
// will arrive on.
func (c *Coordinator) join(ctx context.Context, req *pb.JoinGroupRequest) (*pb.JoinGroupResponse, <-chan *pb.JoinGroupResponse) {
	session := time.Duration(req.SessionTimeoutMs) * time.Millisecond
	if session < c.cfg.GroupMinSessionTimeout || session > c.cfg.GroupMaxSessionTimeout {
		return joinError(errs.New(pb.ErrorCode_INVALID_SESSION_TIMEOUT, "session.timeout.ms=%d is outside [group.min.session.timeout.ms=%d, group.max.session.timeout.ms=%d]",
			req.SessionTimeoutMs, c.cfg.GroupMinSessionTimeout.Milliseconds(), c.cfg.GroupMaxSessionTimeout.Milliseconds()), req.MemberId), nil
	}
	rebalance := time.Duration(req.RebalanceTimeoutMs) * time.Millisecond
	if rebalance <= 0 {
		rebalance = session
	}
	if req.ProtocolType == "" || len(req.Protocols) == 0 {
		return joinError(errs.New(pb.ErrorCode_INCONSISTENT_GROUP_PROTOCOL, "a member needs a protocol type and at least one protocol (got type %q, %d protocols)", req.ProtocolType, len(req.Protocols)), req.MemberId), nil
	}
	if !validKeyString(req.GroupId) {
		return joinError(errs.New(pb.ErrorCode_INVALID_GROUP_ID, "the group id is %d bytes, longer than 32767", len(req.GroupId)), req.MemberId), nil
	}
	s, err := c.lockShardJoin(ctx, req.GroupId)
	if err != nil {
		return joinError(err, req.MemberId), nil
	}
	defer s.mu.Unlock()
	if g := s.groups[req.GroupId]; g != nil && g.cg != nil {
		return toConsumerGroupJoin, nil
	}
	now := c.clk.Now()
	g := s.group(req.GroupId, now, req.MemberId == "")
	if g == nil {
		return joinError(errs.New(pb.ErrorCode_UNKNOWN_MEMBER_ID, "group %q has no members on this coordinator, so member %q is unknown; rejoin with an empty member id", req.GroupId, req.MemberId), req.MemberId), nil
	}
	if g.deleting {
		return joinError(errs.New(pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, "group %q is being deleted; retry", req.GroupId), req.MemberId), nil
	}
	var m *member
	if req.MemberId != "" {
		if m, err = identify(g, req.MemberId, req.GroupInstanceId); err != nil {
			return joinError(err, req.MemberId), nil
		}
	}
	if !g.compatible(req.MemberId, req.ProtocolType, req.Protocols) {
		return joinError(errs.New(pb.ErrorCode_INCONSISTENT_GROUP_PROTOCOL, "group %q runs protocol type %q with protocols %v; this member offers type %q with %v",
			req.GroupId, g.protocolType, keys(g.supportedProtocols(req.MemberId)), req.ProtocolType, names(req.Protocols)), req.MemberId), nil
	}
	if len(g.members) == 0 {
		g.protocolType = req.ProtocolType
	}
	if m == nil {
		if old := g.byInstance(req.GroupInstanceId); old != nil {
			// A static member restarted: its new id replaces the old one,
			// whose calls are fenced (KIP-345).
			fenced := pb.ErrorCode_FENCED_INSTANCE_ID
			if planted.On(planted.StaleInstanceIDAnsweredUnknownMember) {
				fenced = pb.ErrorCode_UNKNOWN_MEMBER_ID
			}
			why := fmt.Sprintf("group.instance.id %q rejoined group %q with a new member id", req.GroupInstanceId, g.id)
			old.answerJoin(&pb.JoinGroupResponse{ErrorCode: fenced, ErrorMessage: why, MemberId: old.id, GenerationId: -1})
			old.answerSync(&pb.SyncGroupResponse{ErrorCode: fenced, ErrorMessage: why})
			unchanged := sameProtocols(old.protocols, req.Protocols) || sameMetadata(old, req.Protocols, g.protocol)
			wasLeader := g.leader == old.id
			prev := staticSnapshot{id: old.id, clientID: old.clientID, clientHost: old.clientHost, protocols: old.protocols, session: old.sessionTimeout, rebalance: old.rebalanceTimeout}
			leaderBefore := g.leader
			g.renameMember(old, newMemberID(req.ClientId))
			m = old
			m.sessionTimeout, m.rebalanceTimeout, m.clientID, m.protocols, m.lastHeartbeat = session, rebalance, req.ClientId, req.Protocols, now
			m.clientHost = req.ClientHost
			var keep bool
			if planted.On(planted.StaticRejoinRebalances) {
				keep = unchanged && !wasLeader
			} else {
				// Kafka's rule: the group rebalances only if the protocol
				// it would choose changes. The member's metadata (its
				// owned partitions, say) may differ after a restart; the
				// leader sees it at the next rebalance.
				keep = g.selectProtocol() == g.protocol
			}
			if g.state == Stable && keep {
				// Nothing changed for the group: hand back the current generation.
				if planted.On(planted.StaticRejoinNotPersisted) {
					return &pb.JoinGroupResponse{GenerationId: g.generation, ProtocolName: g.protocol, Leader: g.leader, MemberId: m.id}, nil
				}
				return nil, c.keepStaticMember(s, g, m, prev, leaderBefore, now)
			}
		} else {
			m = &member{id: newMemberID(req.ClientId), instanceID: req.GroupInstanceId}
			g.addMember(m)
			if g.initialDelay && g.state == PreparingRebalance {
				// group.initial.rebalance.delay.ms: wait for more members.
				if nb := now.Add(c.cfg.InitialRebalanceDelay); nb.Before(g.rebalanceDeadline) {
					g.joinNotBefore = nb
				} else {
					g.joinNotBefore = g.rebalanceDeadline
				}
			}
		}
	}
	m.clientID, m.clientHost, m.sessionTimeout, m.rebalanceTimeout, m.protocols = req.ClientId, req.ClientHost, session, rebalance, req.Protocols
	m.lastHeartbeat = now
	m.answerJoin(&pb.JoinGroupResponse{ErrorCode: pb.ErrorCode_REBALANCE_IN_PROGRESS, ErrorMessage: "a newer JoinGroup of this member replaced this one", MemberId: m.id, GenerationId: -1})
	m.answerSync(&pb.SyncGroupResponse{ErrorCode: pb.ErrorCode_REBALANCE_IN_PROGRESS, ErrorMessage: "the member rejoined the group"})
	m.joined = true
	ch := make(chan *pb.JoinGroupResponse, 1)
	m.joinCh = ch
	if g.state != PreparingRebalance {
		c.prepareRebalance(s, g, now, fmt.Sprintf("member %s joined", m.id))
	}
	c.maybeCompleteJoin(s, g, now)
	return nil, ch
}

// errMovedOn refuses a classic membership write whose group moved on
// (another generation, state or kind) before it was appended.
var errMovedOn = errors.New("the group moved on before the write")

// sameMetadata reports whether protos offer the group's protocol name
// with the metadata m has for it (a member restored from the log knows
// only that one).
func sameMetadata(m *member, protos []*pb.GroupProtocol, name string) bool {
	if name == "" || !m.supports(name) {
		return false
	}
	for _, p := range protos {
		if p.Name == name {
			return string(p.Metadata) == string(m.metadataFor(name))
		}
	}
	return false
}

// staticSnapshot is what a static member's rejoin changed, to undo it if
// the new member id cannot be stored.
type staticSnapshot struct {
	id, clientID       string
	clientHost         string
	protocols          []*pb.GroupProtocol
	session, rebalance time.Duration
}

// keepStaticMember ends the rejoin of a restarted static member that
// changes nothing for the group (Kafka's updateStaticMemberAndRebalance in
// Stable): the membership with its new member id is written first, so a
// coordinator failover cannot bring the old id back; then the member is
// answered the current generation and keeps its assignment, and no other
// member rebalances. The leader of the answer is the leader before the
// rejoin, so a restarted leader does not compute an assignment the Stable
// group would ignore. If the write fails the old member id is put back and
// the member is answered the error (it retries). If the group moves on
// meanwhile (a rebalance, another restart of the instance, leadership
// lost), whatever moved it answers the member.
func (c *Coordinator) keepStaticMember(s *shard, g *group, m *member, prev staticSnapshot, leaderBefore string, now time.Time) <-chan *pb.JoinGroupResponse {
	ch := make(chan *pb.JoinGroupResponse, 1)
	// Waiting like a rejoined member: a rebalance that starts before the
	// write ends counts it as joined and answers it.
	m.joinCh, m.joined = ch, true
	gen, newID := g.generation, m.id
	val, err := proto.Marshal(g.metadataValue(now))
	if err != nil {
		c.lg.Error("encode group metadata", "group", g.id, "err", err)
	}
	movedOn := func() bool { // s.mu held
		return s.status != active || s.groups[g.id] != g || g.cg != nil || m.joinCh != ch || g.state != Stable || g.generation != gen || m.id != newID
	}
	write := func() {
		werr := err
		if werr == nil {
			// Appended only if the group has not moved on meanwhile
			// (checked as it is appended), so an older membership never
			// lands after a newer one.
			_, werr = c.w.write(c.ctx, s, []record.Record{{Key: groupKey(g.id), Value: val}}, nil, func() error {
				if movedOn() {
					return errMovedOn
				}
				return nil
			})
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if movedOn() {
			return
		}
		m.joined = false
		if werr != nil {
			g.renameMember(m, prev.id)
			m.clientID, m.clientHost, m.protocols, m.sessionTimeout, m.rebalanceTimeout = prev.clientID, prev.clientHost, prev.protocols, prev.session, prev.rebalance
			code, msg := errs.Split(werr)
			m.answerJoin(&pb.JoinGroupResponse{ErrorCode: code, ErrorMessage: "storing the static member's new member id failed: " + msg, GenerationId: -1})
			return
		}
		m.lastHeartbeat = c.clk.Now()
		m.answerJoin(&pb.JoinGroupResponse{GenerationId: g.generation, ProtocolName: g.protocol, Leader: leaderBefore, MemberId: m.id})
		c.lg.Info("static member rejoined without a rebalance", "group", g.id, "group.instance.id", m.instanceID, "member", m.id, "replaced", prev.id, "generation", g.generation)
	}
	if !c.goBackground(write) {
		m.joined = false
		m.answerJoin(&pb.JoinGroupResponse{ErrorCode: pb.ErrorCode_NOT_COORDINATOR, ErrorMessage: "the group coordinator is shutting down", GenerationId: -1})
	}
	return ch
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func names(ps []*pb.GroupProtocol) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

// prepareRebalance starts a rebalance: members waiting for an assignment
// are told to rejoin, and the join phase gets its deadline.
func (c *Coordinator) prepareRebalance(s *shard, g *group, now time.Time, reason string) {
	if g.state == CompletingRebalance {
		for _, m := range g.members {
			m.answerSync(&pb.SyncGroupResponse{ErrorCode: pb.ErrorCode_REBALANCE_IN_PROGRESS, ErrorMessage: "the group is rebalancing again: " + reason})
		}
	}
	wasEmpty := g.state == Empty
	if !c.setState(g, PreparingRebalance, now) {
		return
	}
	g.syncing = false
	g.rebalanceDeadline = now.Add(g.maxRebalanceTimeout())
	g.joinNotBefore, g.initialDelay = time.Time{}, false
	if wasEmpty && c.cfg.InitialRebalanceDelay > 0 {
		g.initialDelay = true
		g.joinNotBefore = now.Add(c.cfg.InitialRebalanceDelay)
		if g.joinNotBefore.After(g.rebalanceDeadline) {
			g.joinNotBefore = g.rebalanceDeadline
		}
	}
	c.lg.Debug("preparing rebalance", "group", g.id, "generation", g.generation, "reason", reason)
}

// maybeCompleteJoin ends the join phase once every member has rejoined (and
// the initial delay passed), or at the rebalance deadline.
func (c *Coordinator) maybeCompleteJoin(s *shard, g *group, now time.Time) {
	if g.state != PreparingRebalance || now.Before(g.joinNotBefore) {
		return
	}
	if g.allJoined() || !now.Before(g.rebalanceDeadline) {
		c.completeJoin(s, g, now)
	}
}

// completeJoin removes the members that did not rejoin, starts the next
// generation and answers every waiting JoinGroup. A group left without
// members becomes Empty (written to the log after the change).
func (c *Coordinator) completeJoin(s *shard, g *group, now time.Time) {
	for _, m := range g.members {
		if !m.joined {
			g.removeMember(m, pb.ErrorCode_UNKNOWN_MEMBER_ID, fmt.Sprintf("member %s did not rejoin group %s within the rebalance timeout", m.id, g.id))
		}
	}
	g.generation++
	g.initialDelay = false
	if len(g.members) == 0 {
		g.protocol, g.leader = "", ""
		if c.setState(g, Empty, now) {
			c.persistAsync(s, g, g.metadataValue(now))
		}
		return
	}
	g.protocol = g.selectProtocol()
	if g.leader == "" {
		g.leader = g.order[0]
	}
	if !c.setState(g, CompletingRebalance, now) {
		return
	}
	var all []*pb.GroupMember
	for _, id := range g.order {
		m := g.members[id]
		all = append(all, &pb.GroupMember{MemberId: m.id, GroupInstanceId: m.instanceID, Metadata: m.metadataFor(g.protocol), ClientId: m.clientID})
	}
	for _, m := range g.members {
		r := &pb.JoinGroupResponse{GenerationId: g.generation, ProtocolName: g.protocol, Leader: g.leader, MemberId: m.id}
		if m.id == g.leader {
			r.Members = all
		}
		m.joined = false
		m.lastHeartbeat = now
		m.assignment = nil
		m.answerJoin(r)
	}
	c.lg.Debug("rebalance joined", "group", g.id, "generation", g.generation, "protocol", g.protocol, "members", len(g.members), "leader", g.leader)
}

// expire removes members whose session ran out (a member waiting in
// JoinGroup or SyncGroup is not expired), then moves the group on: a
// rebalance if it was stable, the end of the join phase when due.
func (c *Coordinator) expire(s *shard, g *group, now time.Time) {
	if g.state == Dead || g.state == Empty {
		return
	}
	removed := false
	for _, m := range g.members {
		if m.joinCh != nil || m.syncCh != nil || (g.state == PreparingRebalance && m.joined) {
			continue
		}
		if now.Sub(m.lastHeartbeat) > m.sessionTimeout {
			c.lg.Info("member session expired", "group", g.id, "member", m.id, "session.timeout.ms", m.sessionTimeout.Milliseconds())
			g.removeMember(m, pb.ErrorCode_UNKNOWN_MEMBER_ID, fmt.Sprintf("no heartbeat from member %s within session.timeout.ms=%d", m.id, m.sessionTimeout.Milliseconds()))
			removed = true
		}
	}
	if removed && (g.state == Stable || g.state == CompletingRebalance) {
		c.prepareRebalance(s, g, now, "a member's session expired")
	}
	c.maybeCompleteJoin(s, g, now)
}

// persistAsync writes a group's membership in the background (the Empty
// transition, which Kafka also writes after the change). It is skipped if
// the group has moved to another generation by the time it runs, so an
// older membership never lands after a newer one.
func (c *Coordinator) persistAsync(s *shard, g *group, v *pb.GroupMetadataValue) {
	val, err := proto.Marshal(v)
	if err != nil {
		c.lg.Error("encode group metadata", "group", g.id, "err", err)
		return
	}
	rec := record.Record{Key: groupKey(g.id), Value: val}
	c.goBackground(func() {
		// Through the group's lane: a conversion of the empty group to a
		// consumer group does not interleave with this write.
		err := c.change(c.ctx, g.id, func(s2 *shard, now time.Time) (*groupChange, error) {
			if s2 != s || s.groups[g.id] != g || g.cg != nil || g.generation != v.Generation || g.state != Empty {
				return nil, nil
			}
			return &groupChange{recs: []record.Record{rec}, noReplay: true}, nil
		})
		if err != nil && c.ctx.Err() == nil {
			c.lg.Warn("write group metadata", "group", g.id, "err", err)
		}
	})
}

// SyncGroup delivers assignments: the leader's call carries them for every
// member; they are written to the log, then every member waiting in
// SyncGroup gets its own and the group is Stable. Members that call before
// the leader wait; once Stable a call answers at once.
//
// Errors: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, UNKNOWN_MEMBER_ID,
// FENCED_INSTANCE_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS,
// COORDINATOR_NOT_AVAILABLE (the write failed; rejoin).
func (c *Coordinator) SyncGroup(ctx context.Context, req *pb.SyncGroupRequest) (*pb.SyncGroupResponse, error) {
	resp, ch, write := c.sync(ctx, req)
	for tries := 0; resp == toConsumerGroupSync; tries++ {
		r, err := c.syncConsumerGroup(ctx, req)
		switch {
		case err == errNotConsumerGroup && tries < 3:
			resp, ch, write = c.sync(ctx, req)
			continue
		case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			return nil, err
		case err != nil:
			return syncError(err), nil
		}
		return r, nil
	}
	if write != nil {
		// The group's write, not the caller's: a leader that gives up
		// waiting does not fail the generation.
		write(c.ctx)
	}
	if ch == nil {
		return resp, nil
	}
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err() // the front door maps it (a gRPC caller sees CANCELLED or DEADLINE_EXCEEDED)
	case <-c.ctx.Done():
		return &pb.SyncGroupResponse{ErrorCode: pb.ErrorCode_NOT_COORDINATOR, ErrorMessage: "the group coordinator is shutting down"}, nil
	}
}

func syncError(err error) *pb.SyncGroupResponse {
	code, msg := errs.Split(err)
	return &pb.SyncGroupResponse{ErrorCode: code, ErrorMessage: msg}
}

// identify finds the member a request names (Kafka's current-member
// check, KIP-345). A group.instance.id, when given, must belong to the
// member id: one that belongs to another member id now answers
// FENCED_INSTANCE_ID — the instance restarted (this is its old
// incarnation) or another process uses the same id — and one the group
// does not know answers UNKNOWN_MEMBER_ID. The member id must be in the
// group.
func identify(g *group, memberID, instanceID string) (*member, error) {
	if instanceID != "" {
		cur := g.byInstance(instanceID)
		switch {
		case cur == nil:
			return nil, errs.New(pb.ErrorCode_UNKNOWN_MEMBER_ID, "group.instance.id %q is not in group %q (it left, or its session timed out)", instanceID, g.id)
		case cur.id != memberID:
			if planted.On(planted.StaleInstanceIDAnsweredUnknownMember) {
				return nil, errs.New(pb.ErrorCode_UNKNOWN_MEMBER_ID, "member %q is not in group %q (it left, or its session timed out)", memberID, g.id)
			}
			return nil, errs.New(pb.ErrorCode_FENCED_INSTANCE_ID, "group.instance.id %q of group %q belongs to member %q now, not %q: another process with this instance id joined", instanceID, g.id, cur.id, memberID)
		}
	}
	m := g.members[memberID]
	if m == nil {
		return nil, errs.New(pb.ErrorCode_UNKNOWN_MEMBER_ID, "member %q is not in group %q (it left, or its session timed out)", memberID, g.id)
	}
	return m, nil
}

// checkMember finds a member of the current generation, or the error.
func checkMember(g *group, groupID, memberID, instanceID string, generation int32) (*member, error) {
	if g == nil || g.state == Dead {
		return nil, errs.New(pb.ErrorCode_UNKNOWN_MEMBER_ID, "group %q has no members on this coordinator", groupID)
	}
	m, err := identify(g, memberID, instanceID)
	if err != nil {
		return nil, err
	}
	if generation != g.generation {
		return nil, errs.New(pb.ErrorCode_ILLEGAL_GENERATION, "group %q is at generation %d, the request is for generation %d", groupID, g.generation, generation)
	}
	return m, nil
}

func (c *Coordinator) sync(ctx context.Context, req *pb.SyncGroupRequest) (*pb.SyncGroupResponse, <-chan *pb.SyncGroupResponse, func(context.Context)) {
	s, err := c.lockShardQuiet(ctx, req.GroupId)
	if err != nil {
		return syncError(err), nil, nil
	}
	defer s.mu.Unlock()
	now := c.clk.Now()
	g := s.groups[req.GroupId]
	if g != nil && g.cg != nil {
		return toConsumerGroupSync, nil, nil
	}
	m, err := checkMember(g, req.GroupId, req.MemberId, req.GroupInstanceId, req.GenerationId)
	if err != nil {
		return syncError(err), nil, nil
	}
	switch g.state {
	case PreparingRebalance:
		return syncError(errs.New(pb.ErrorCode_REBALANCE_IN_PROGRESS, "group %q is rebalancing; rejoin", g.id)), nil, nil
	case Stable:
		m.lastHeartbeat = now
		return &pb.SyncGroupResponse{Assignment: m.assignment, ProtocolName: g.protocol}, nil, nil
	case CompletingRebalance:
	default:
		return syncError(errs.New(pb.ErrorCode_UNKNOWN_MEMBER_ID, "group %q is %s", g.id, g.state)), nil, nil
	}
	m.lastHeartbeat = now
	m.answerSync(&pb.SyncGroupResponse{ErrorCode: pb.ErrorCode_REBALANCE_IN_PROGRESS, ErrorMessage: "a newer SyncGroup of this member replaced this one"})
	ch := make(chan *pb.SyncGroupResponse, 1)
	m.syncCh = ch
	if m.id != g.leader || g.syncing {
		return nil, ch, nil
	}
	g.syncing = true
	given := map[string][]byte{}
	for _, a := range req.Assignments {
		given[a.MemberId] = a.Assignment
	}
	v := g.metadataValue(now)
	for _, vm := range v.Members {
		vm.Assignment = given[vm.MemberId]
	}
	gen := g.generation
	movedOn := func() bool { // s.mu held
		return s.status != active || s.groups[g.id] != g || g.cg != nil || g.state != CompletingRebalance || g.generation != gen
	}
	write := func(ctx context.Context) {
		val, err := proto.Marshal(v)
		if err == nil {
			// Appended only if the rebalance has not moved on meanwhile
			// (checked as it is appended), so an older membership never
			// lands after a newer one.
			_, err = c.w.write(ctx, s, []record.Record{{Key: groupKey(g.id), Value: val}}, nil, func() error {
				if movedOn() {
					return errMovedOn
				}
				return nil
			})
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if movedOn() {
			return // the rebalance moved on; waiting calls were answered then
		}
		g.syncing = false
		now := c.clk.Now()
		if err != nil {
			code, msg := errs.Split(err)
			for _, m := range g.members {
				m.answerSync(&pb.SyncGroupResponse{ErrorCode: code, ErrorMessage: "storing the assignment failed: " + msg})
			}
			c.prepareRebalance(s, g, now, "storing the assignment failed")
			return
		}
		for _, m := range g.members {
			m.assignment = given[m.id]
		}
		if c.setState(g, Stable, now) {
			for _, m := range g.members {
				m.answerSync(&pb.SyncGroupResponse{Assignment: m.assignment, ProtocolName: g.protocol})
				m.lastHeartbeat = now
			}
			c.lg.Debug("group stable", "group", g.id, "generation", g.generation, "members", len(g.members))
		}
	}
	return nil, ch, write
}

// Heartbeat keeps a member's session alive. During a join phase it answers
// REBALANCE_IN_PROGRESS (rejoin).
//
// Errors: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, UNKNOWN_MEMBER_ID,
// FENCED_INSTANCE_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS.
func (c *Coordinator) Heartbeat(ctx context.Context, req *pb.HeartbeatRequest) (*pb.HeartbeatResponse, error) {
	out := func(err error) (*pb.HeartbeatResponse, error) {
		code, msg := errs.Split(err)
		return &pb.HeartbeatResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	s, err := c.lockShardQuiet(ctx, req.GroupId)
	if err != nil {
		return out(err)
	}
	if g := s.groups[req.GroupId]; g != nil && g.cg != nil {
		s.mu.Unlock()
		r, err := c.heartbeatConsumerGroup(ctx, req)
		switch {
		case err == errNotConsumerGroup:
			return c.Heartbeat(ctx, req)
		case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			return nil, err
		case err != nil:
			return out(err)
		}
		return r, nil
	}
	defer s.mu.Unlock()
	g := s.groups[req.GroupId]
	m, err := checkMember(g, req.GroupId, req.MemberId, req.GroupInstanceId, req.GenerationId)
	if err != nil {
		return out(err)
	}
	switch g.state {
	case Empty:
		return out(errs.New(pb.ErrorCode_UNKNOWN_MEMBER_ID, "group %q is empty", g.id))
	case PreparingRebalance:
		m.lastHeartbeat = c.clk.Now()
		return out(errs.New(pb.ErrorCode_REBALANCE_IN_PROGRESS, "group %q is rebalancing (generation %d); rejoin", g.id, g.generation))
	}
	m.lastHeartbeat = c.clk.Now()
	return &pb.HeartbeatResponse{}, nil
}

// LeaveGroup removes a member at once (no session timeout to wait for) and
// rebalances the rest. A static member may be named by its
// group.instance.id alone (an administrator removing it).
//
// Errors: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, UNKNOWN_MEMBER_ID,
// FENCED_INSTANCE_ID.
func (c *Coordinator) LeaveGroup(ctx context.Context, req *pb.LeaveGroupRequest) (*pb.LeaveGroupResponse, error) {
	out := func(err error) (*pb.LeaveGroupResponse, error) {
		code, msg := errs.Split(err)
		return &pb.LeaveGroupResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	s, err := c.lockShardQuiet(ctx, req.GroupId)
	if err != nil {
		return out(err)
	}
	if g := s.groups[req.GroupId]; g != nil && g.cg != nil {
		s.mu.Unlock()
		r, err := c.leaveConsumerGroup(ctx, req)
		switch {
		case err == errNotConsumerGroup:
			return c.LeaveGroup(ctx, req)
		case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			return nil, err
		case err != nil:
			return out(err)
		}
		return r, nil
	}
	defer s.mu.Unlock()
	g := s.groups[req.GroupId]
	if g == nil || g.state == Dead || req.MemberId == "" && req.GroupInstanceId == "" {
		return out(errs.New(pb.ErrorCode_UNKNOWN_MEMBER_ID, "member %q is not in group %q", req.MemberId, req.GroupId))
	}
	var m *member
	if req.MemberId == "" {
		// An administrator removing a static member by its
		// group.instance.id alone (Kafka's removeMembersFromConsumerGroup).
		if m = g.byInstance(req.GroupInstanceId); m == nil {
			return out(errs.New(pb.ErrorCode_UNKNOWN_MEMBER_ID, "group.instance.id %q is not in group %q", req.GroupInstanceId, req.GroupId))
		}
	} else if m, err = identify(g, req.MemberId, req.GroupInstanceId); err != nil {
		return out(err)
	}
	now := c.clk.Now()
	g.removeMember(m, pb.ErrorCode_UNKNOWN_MEMBER_ID, "the member left the group")
	switch g.state {
	case Stable, CompletingRebalance:
		c.prepareRebalance(s, g, now, fmt.Sprintf("member %s left", m.id))
	}
	c.maybeCompleteJoin(s, g, now)
	return &pb.LeaveGroupResponse{}, nil
}

// DescribeGroups reports each group's state, protocol, generation and
// members. A group this coordinator does not know is reported Dead; a
// consumer group is described in the classic shape (describeClassicShape),
// its group type "consumer".
func (c *Coordinator) DescribeGroups(ctx context.Context, req *pb.DescribeGroupsRequest) (*pb.DescribeGroupsResponse, error) {
	resp := &pb.DescribeGroupsResponse{}
	im := c.image()
	for _, id := range req.GroupIds {
		d := &pb.GroupDescription{GroupId: id, CoordinatorId: c.cfg.NodeID}
		resp.Groups = append(resp.Groups, d)
		s, err := c.lockShard(id)
		if err != nil {
			d.ErrorCode, _ = errs.Split(err)
			continue
		}
		g := s.groups[id]
		switch {
		case g == nil:
			d.State, d.GroupType = Dead.String(), groupTypeClassic
		case g.cg != nil:
			c.describeClassicShape(d, g, im)
		default:
			d.GroupType = groupTypeClassic
			d.State, d.ProtocolType, d.Protocol, d.GenerationId = g.state.String(), g.protocolType, g.protocol, g.generation
			for _, mid := range g.order {
				m := g.members[mid]
				d.Members = append(d.Members, &pb.GroupMember{MemberId: m.id, GroupInstanceId: m.instanceID, ClientId: m.clientID, ClientHost: m.clientHost, Metadata: m.metadataFor(g.protocol), Assignment: m.assignment})
			}
		}
		s.mu.Unlock()
	}
	return resp, nil
}
