package group

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// ConsumerGroupHeartbeat is the consumer protocol's one request (KIP-848):
// a member joins (epoch 0), heartbeats at its epoch, leaves (-1), or a
// static member leaves for now (-2). Each heartbeat may
//
//  1. create the member or update its subscription (a change bumps the
//     group epoch; so does a change of the subscribed topics, or of what
//     a regular expression resolves to),
//  2. compute a new target assignment when the group epoch passed the
//     target's, and
//  3. move the member one step towards its target (reconcile.go),
//
// each written to __consumer_offsets before memory changes. The answer
// carries the member's epoch, the heartbeat interval and, when the member
// sent its full state or its assignment changed, the partitions it owns
// now. allow filters what a regular expression resolves to (the topics
// the member's principal may describe; nil: every topic).
//
// Errors: UNSUPPORTED_VERSION (the consumer protocol is not enabled),
// INVALID_REQUEST, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION,
// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
// GROUP_ID_NOT_FOUND (a group of the classic protocol that cannot
// convert), GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID,
// FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID.
func (c *Coordinator) ConsumerGroupHeartbeat(ctx context.Context, req *pb.ConsumerGroupHeartbeatRequest, allow TopicFilter) (*pb.ConsumerGroupHeartbeatResponse, error) {
	fail := func(err error) *pb.ConsumerGroupHeartbeatResponse {
		code, msg := errs.Split(err)
		return &pb.ConsumerGroupHeartbeatResponse{ErrorCode: code, ErrorMessage: msg, MemberEpoch: -1}
	}
	if !c.cfg.ConsumerProtocol {
		return fail(errs.New(pb.ErrorCode_UNSUPPORTED_VERSION, "the consumer group protocol is not enabled on this broker (group.coordinator.rebalance.protocols does not list consumer)")), nil
	}
	if err := c.validateHeartbeat(req); err != nil {
		return fail(err), nil
	}
	var resp *pb.ConsumerGroupHeartbeatResponse
	err := c.change(ctx, req.GroupId, func(s *shard, now time.Time) (*groupChange, error) {
		if req.MemberEpoch < 0 {
			return c.planLeave(s, now, req, &resp)
		}
		return c.planHeartbeat(s, now, req, allow, &resp)
	})
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, err // the front door maps it
		}
		return fail(err), nil
	}
	return resp, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// checkUTF8 refuses strings that are not UTF-8: the consumer group's
// records (protobuf strings) cannot hold them.
func checkUTF8(strs ...string) error {
	for _, s := range strs {
		if !utf8.ValidString(s) {
			return invalidRequest("%q is not valid UTF-8", s)
		}
	}
	return nil
}

func invalidRequest(format string, args ...any) error {
	return errs.New(pb.ErrorCode_INVALID_REQUEST, format, args...)
}

func blank(s *string) bool { return s != nil && strings.TrimSpace(*s) == "" }

// validateHeartbeat checks a heartbeat's fields as Kafka does, before the
// group is looked at.
func (c *Coordinator) validateHeartbeat(req *pb.ConsumerGroupHeartbeatRequest) error {
	strs := []string{req.MemberId, req.ClientId, req.ClientHost, deref(req.InstanceId), deref(req.RackId), deref(req.SubscribedTopicRegex), deref(req.ServerAssignor)}
	if req.SubscribedTopicNames != nil {
		strs = append(strs, req.SubscribedTopicNames.Names...)
	}
	if err := checkUTF8(strs...); err != nil {
		return err
	}
	if (req.Version >= 1 || req.MemberEpoch > 0 || req.MemberEpoch == leaveEpoch || req.MemberEpoch == staticLeaveEpoch) && strings.TrimSpace(req.MemberId) == "" {
		return invalidRequest("MemberId can't be empty.")
	}
	if strings.TrimSpace(req.GroupId) == "" {
		return invalidRequest("GroupId can't be empty.")
	}
	if blank(req.InstanceId) {
		return invalidRequest("InstanceId can't be empty.")
	}
	if blank(req.RackId) {
		return invalidRequest("RackId can't be empty.")
	}
	switch {
	case req.MemberEpoch == 0:
		if req.RebalanceTimeoutMs == -1 {
			return invalidRequest("RebalanceTimeoutMs must be provided in first request.")
		}
		if req.TopicPartitions == nil || len(req.TopicPartitions.Topics) > 0 {
			return invalidRequest("TopicPartitions must be empty when (re-)joining.")
		}
		if req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil {
			return invalidRequest("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
		}
	case req.MemberEpoch == staticLeaveEpoch:
		if req.InstanceId == nil {
			return invalidRequest("InstanceId can't be null.")
		}
	case req.MemberEpoch < staticLeaveEpoch:
		return invalidRequest("MemberEpoch is invalid.")
	}
	if req.ServerAssignor != nil && !slices.Contains(c.cfg.ConsumerAssignors, *req.ServerAssignor) {
		return errs.New(pb.ErrorCode_UNSUPPORTED_ASSIGNOR, "ServerAssignor %s is not supported. Supported assignors: %s.", *req.ServerAssignor, strings.Join(c.cfg.ConsumerAssignors, ", "))
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		if _, err := compileRegex(*req.SubscribedTopicRegex); err != nil {
			return err
		}
	}
	return nil
}

// newConsumerMemberID is a member id as KIP-1082's clients make them: 16
// random bytes in URL-safe base64.
func newConsumerMemberID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// ownedFromPB is the partitions a heartbeat reports, nil when it does not.
func ownedFromPB(o *pb.OwnedPartitions) assignment {
	if o == nil {
		return nil
	}
	return assignmentFromPB(o.Topics)
}

// fencedEpoch is FENCED_MEMBER_EPOCH with Kafka's message.
func fencedEpoch(received, known int32) error {
	rel := "greater"
	if received < known {
		rel = "smaller"
	}
	return errs.New(pb.ErrorCode_FENCED_MEMBER_EPOCH, "The consumer group member has a %s member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.",
		rel, received, known)
}

// checkMemberEpoch accepts a heartbeat's epoch: the member's own; its
// previous one when the partitions it reports are all still its own (the
// answer that moved it on was lost); or 0, a member rejoining after it
// was fenced, which is let in again as it is (Kafka's fix for members
// fenced while the coordinator still knows them).
func checkMemberEpoch(m *cmember, received int32, owned assignment) error {
	switch {
	case received == 0 || received == m.epoch:
		return nil
	case received > m.epoch:
		return fencedEpoch(received, m.epoch)
	case received != m.prevEpoch || owned == nil || !owned.subsetOf(m.assigned):
		return fencedEpoch(received, m.epoch)
	}
	return nil
}

// unknownMember is UNKNOWN_MEMBER_ID with Kafka's message.
func unknownMember(memberID, groupID string) error {
	return errs.New(pb.ErrorCode_UNKNOWN_MEMBER_ID, "Member %s is not a member of group %s.", memberID, groupID)
}

// heartbeatPlan is one heartbeat's change, built against the group as it
// is before it (which may be a group this change creates or converts).
type heartbeatPlan struct {
	c     *Coordinator
	s     *shard
	gid   string
	g     *group
	cg    *consumerGroup
	now   time.Time
	im    *metadata.Image
	recs  []record.Record
	allow TopicFilter
	fresh bool // cg is not in memory yet (created or converted by this change)
	// The regular expressions as this change leaves them, and whether it
	// resolved them again.
	regexV         map[string]*resolvedRegex
	regexRefreshed bool
	// The subscription and the group epoch as this change leaves them.
	sub   map[string]topicMeta
	epoch int32
}

func (c *Coordinator) planHeartbeat(s *shard, now time.Time, req *pb.ConsumerGroupHeartbeatRequest, allow TopicFilter, out **pb.ConsumerGroupHeartbeatResponse) (*groupChange, error) {
	p := &heartbeatPlan{c: c, s: s, gid: req.GroupId, g: s.groups[req.GroupId], now: now, im: c.image(), allow: allow}
	join := req.MemberEpoch == 0
	if err := p.consumerGroup(join); err != nil {
		return nil, err
	}
	cg := p.cg
	memberID := req.MemberId
	if c.cfg.ConsumerMaxSize > 0 && len(cg.members) >= c.cfg.ConsumerMaxSize && (memberID == "" || cg.members[memberID] == nil) {
		return nil, errs.New(pb.ErrorCode_GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum capacity of %d members.", c.cfg.ConsumerMaxSize)
	}
	if memberID == "" {
		memberID = newConsumerMemberID()
	}
	owned := ownedFromPB(req.TopicPartitions)

	// The member, as it is before this heartbeat.
	var member *cmember
	replaced := ""
	if req.InstanceId == nil {
		member = cg.members[memberID]
		if member == nil {
			if !join {
				return nil, unknownMember(memberID, p.gid)
			}
			member = newCMember(memberID)
			c.lg.Info("member joins the consumer group", "group", p.gid, "member", memberID, "protocol", "consumer")
		} else if err := checkMemberEpoch(member, req.MemberEpoch, owned); err != nil {
			return nil, err
		}
	} else {
		var err error
		if member, replaced, err = p.staticMember(memberID, *req.InstanceId, req.MemberEpoch, owned, join, false); err != nil {
			return nil, err
		}
	}

	// 1. The member's subscription.
	upd := member.clone()
	if req.InstanceId != nil {
		upd.instanceID = *req.InstanceId
	}
	if req.RackId != nil {
		upd.rackID = *req.RackId
	}
	if req.RebalanceTimeoutMs != -1 {
		upd.rebalanceTimeoutMs = req.RebalanceTimeoutMs
	}
	if req.ServerAssignor != nil {
		upd.assignor = *req.ServerAssignor
	}
	if req.SubscribedTopicNames != nil {
		upd.names = slices.Clone(req.SubscribedTopicNames.Names)
		sort.Strings(upd.names)
		upd.names = slices.Compact(upd.names)
	}
	if req.SubscribedTopicRegex != nil {
		upd.regex = *req.SubscribedTopicRegex
	}
	upd.clientID, upd.clientHost, upd.classic = req.ClientId, req.ClientHost, nil

	bump := cg.epoch == 0
	if !upd.sameMetadata(member) || cg.members[member.id] == nil {
		p.recs = append(p.recs, recMember(p.gid, upd))
		// A changed subscription, by names or by expression, moves the
		// group epoch (Kafka's hasMemberSubscriptionChanged).
		if !slices.Equal(upd.names, member.names) || upd.regex != member.regex {
			bump = true
		}
	}
	rebump, err := p.regexes(member, upd, replaced)
	if err != nil {
		return nil, err
	}
	bump = bump || rebump
	p.subscriptionAndEpoch(bump, replaced, upd)

	// 2. and 3.
	target, targetEpoch := p.targetFor(upd, replaced)
	next := reconcile(upd, targetEpoch, target, cg.partitionEpoch, owned)
	if (cg.members[next.id] == nil && replaced == "") || !next.sameAssignmentState(member) {
		p.recs = append(p.recs, recCurrent(p.gid, next))
	}

	resp := &pb.ConsumerGroupHeartbeatResponse{MemberId: next.id, MemberEpoch: next.epoch, HeartbeatIntervalMs: int32(c.cfg.ConsumerHeartbeatInterval.Milliseconds())}
	full := join || (req.RebalanceTimeoutMs != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.TopicPartitions != nil)
	if full || !next.assigned.equal(member.assigned) {
		resp.Assignment = &pb.OwnedPartitions{Topics: next.assigned.pb()}
	}
	metaOffset := p.im.Offset
	return &groupChange{recs: p.recs, done: func(err error) {
		if err != nil {
			return
		}
		*out = resp
		p.afterChange(next.id, metaOffset)
	}}, nil
}

// afterChange sets a member's timers once its heartbeat is in memory: its
// session starts again, and entering memberUnrevoked starts the time it
// has to revoke (its rebalance timeout).
func (p *heartbeatPlan) afterChange(memberID string, metaOffset int64) {
	g := p.s.groups[p.gid]
	if g == nil || g.cg == nil {
		return
	}
	g.cg.metaOffset = metaOffset
	if p.regexRefreshed {
		g.cg.regexRefresh = p.now
	}
	if m := g.cg.members[memberID]; m != nil {
		p.c.touchMember(m, p.now)
	}
}

// touchMember restarts a member's session and keeps its revocation
// deadline in step with its state.
func (c *Coordinator) touchMember(m *cmember, now time.Time) {
	m.lastSeen = now
	switch {
	case m.state != memberUnrevoked || m.classic != nil || m.epoch < 0:
		m.revokeBy = time.Time{}
	case m.revokeBy.IsZero() || m.revokeEpoch != m.epoch:
		m.revokeBy = now.Add(time.Duration(max(m.rebalanceTimeoutMs, 0)) * time.Millisecond)
		m.revokeEpoch = m.epoch
	}
}

func newCMember(id string) *cmember {
	return &cmember{id: id, prevEpoch: -1, rebalanceTimeoutMs: -1, assigned: assignment{}, revoking: assignment{}}
}

// consumerGroup finds the consumer group a heartbeat is for (Kafka's
// getOrMaybeCreateConsumerGroup): an existing one; for a join, a new one
// in place of nothing or of an empty classic group (its membership record
// deleted; its offsets stay), or the conversion of a classic group whose
// members use the consumer embedded protocol (convert.go).
func (p *heartbeatPlan) consumerGroup(create bool) error {
	g := p.g
	switch {
	case g != nil && g.cg != nil:
		p.cg = g.cg
	case g == nil && !create:
		return errs.New(pb.ErrorCode_GROUP_ID_NOT_FOUND, "Consumer group %s not found.", p.gid)
	case g == nil || (create && len(g.members) == 0 && !g.deleting):
		if g != nil {
			p.recs = append(p.recs, tombstone(groupKey(p.gid)))
		}
		p.cg, p.fresh = newConsumerGroup(), true
	case !create:
		return errs.New(pb.ErrorCode_GROUP_ID_NOT_FOUND, "Group %s is not a consumer group.", p.gid)
	default:
		cg, recs, err := p.c.fromClassic(g, p.im)
		if err != nil {
			return err
		}
		p.recs = append(p.recs, recs...)
		p.cg, p.fresh = cg, true
	}
	p.regexV = map[string]*resolvedRegex{}
	for re, r := range p.cg.regexes {
		p.regexV[re] = r
	}
	return nil
}

// staticMember finds or makes the member of a static heartbeat or join
// (Kafka's getOrMaybeSubscribeStaticConsumerGroupMember). A join with an
// instance id another member holds replaces that member, if it left for
// now (epoch -2) or either of them uses the classic protocol (else
// UNRELEASED_INSTANCE_ID): the new member takes its assignment and target,
// at epoch 0. A rejoin with the holder's own member id is the same member.
// It returns the member and the id of the member it replaces.
func (p *heartbeatPlan) staticMember(memberID, instanceID string, epoch int32, owned assignment, join, classic bool) (*cmember, string, error) {
	cg := p.cg
	existing := cg.staticMember(instanceID)
	if !join {
		if existing == nil {
			return nil, "", errs.New(pb.ErrorCode_UNKNOWN_MEMBER_ID, "Instance id %s is unknown.", instanceID)
		}
		if existing.id != memberID {
			return nil, "", errs.New(pb.ErrorCode_FENCED_INSTANCE_ID, "Static member %s with instance id %s was fenced by member %s.", memberID, instanceID, existing.id)
		}
		if !classic {
			if err := checkMemberEpoch(existing, epoch, owned); err != nil {
				return nil, "", err
			}
		}
		return existing, "", nil
	}
	switch {
	case existing == nil:
		if m := cg.members[memberID]; m != nil {
			return m, "", nil
		}
		p.c.lg.Info("static member joins the consumer group", "group", p.gid, "member", memberID, "group.instance.id", instanceID)
		return newCMember(memberID), "", nil
	case existing.id == memberID:
		return existing, "", nil
	case !classic && existing.classic == nil && existing.epoch != staticLeaveEpoch:
		return nil, "", errs.New(pb.ErrorCode_UNRELEASED_INSTANCE_ID, "Static member %s with instance id %s cannot join the group because the instance id is owned by %s member.",
			memberID, instanceID, existing.id)
	}
	n := existing.clone()
	n.id, n.epoch, n.prevEpoch = memberID, 0, 0
	p.recs = append(p.recs, memberTombstones(p.gid, existing.id)...)
	p.recs = append(p.recs, recMember(p.gid, n), recTarget(p.gid, n.id, cg.target[existing.id]), recCurrent(p.gid, n))
	p.c.lg.Info("static member rejoins the consumer group in place of its previous member", "group", p.gid, "group.instance.id", instanceID,
		"member", memberID, "replaced", existing.id)
	return n, existing.id, nil
}

// regexes handles a change of the member's regular expression and
// resolves the group's expressions again when due (Kafka's
// maybeUpdateRegularExpressions, resolving here and now): a new
// expression at once, the others when topics came or went since they were
// resolved, at most every RegexRefreshInterval. It reports whether the
// group epoch must move. replaced is the member a static member replaces
// in this heartbeat ("" for none): its expression is the member's own.
func (p *heartbeatPlan) regexes(member, upd *cmember, replaced string) (bool, error) {
	cg := p.cg
	bump, refresh := false, false
	// The expressions the group uses once this heartbeat is in.
	used := map[string]bool{}
	for id, m := range cg.members {
		if id != upd.id && id != replaced && m.regex != "" {
			used[m.regex] = true
		}
	}
	if upd.regex != "" {
		used[upd.regex] = true
	}
	if member.regex != upd.regex {
		if _, resolved := p.regexV[member.regex]; member.regex != "" && resolved && !used[member.regex] {
			// Nobody subscribes to it any more: its resolution goes.
			p.recs = append(p.recs, tombstone(cgMemberKey(keyCGRegex, p.gid, member.regex)))
			delete(p.regexV, member.regex)
		}
		if upd.regex != "" {
			if _, ok := p.regexV[upd.regex]; !ok {
				refresh = true
			} else {
				bump = true
			}
		}
	}
	if len(used) == 0 {
		return bump, nil
	}
	changedAt := p.c.names.lastChange(p.im)
	if !refresh && p.now.Sub(cg.regexRefresh) >= p.c.cfg.RegexRefreshInterval {
		for re := range used {
			if r := p.regexV[re]; r == nil || r.version < changedAt {
				refresh = true
			}
		}
	}
	if !refresh {
		return bump, nil
	}
	for _, re := range sortedKeys(used) {
		compiled, err := compileRegex(re)
		if err != nil {
			p.c.lg.Warn("a consumer group's regular expression no longer compiles; it matches nothing", "group", p.gid, "regex", re, "err", err)
			continue
		}
		topics := resolveRegex(compiled, p.im, p.allow)
		old := p.regexV[re]
		r := &resolvedRegex{topics: topics, version: p.im.Offset, atMs: p.now.UnixMilli()}
		if old == nil || !slices.Equal(old.topics, topics) || old.version < changedAt {
			if old == nil || !slices.Equal(old.topics, topics) {
				bump = true
			}
			p.recs = append(p.recs, recRegex(p.gid, re, r))
			p.regexV[re] = r
		}
	}
	p.regexRefreshed = true
	return bump, nil
}

// subscriptionAndEpoch recomputes the group's subscribed topics when the
// heartbeat changed the subscriptions or the image moved since the last
// time, records them when they differ, and bumps the group epoch when
// either did.
func (p *heartbeatPlan) subscriptionAndEpoch(bump bool, replaced string, upd *cmember) {
	cg := p.cg
	p.sub, p.epoch = cg.subscription, cg.epoch
	if bump || p.regexRefreshed || cg.metaOffset != p.im.Offset {
		sub := subscriptionFor(cg.subscribedTopics(replaced, upd, p.regexV), p.im)
		if !sameSubscription(sub, cg.subscription) {
			p.recs = append(p.recs, recSubscription(p.gid, sub))
			p.sub, bump = sub, true
		}
	}
	if bump {
		p.epoch++
		p.recs = append(p.recs, recGroupEpoch(p.gid, p.epoch))
		p.c.lg.Info("consumer group epoch bumped", "group", p.gid, "epoch", p.epoch)
	}
}

// targetFor is the member's target and its epoch: a new target for the
// whole group when the group epoch passed the target's, else the current
// one (a static member replacing another has the other's).
func (p *heartbeatPlan) targetFor(upd *cmember, replaced string) (assignment, int32) {
	cg := p.cg
	if p.epoch <= cg.assignmentEpoch {
		id := upd.id
		if replaced != "" {
			id = replaced
		}
		return cg.target[id], cg.assignmentEpoch
	}
	name := cg.preferredAssignor(upd)
	if name == "" {
		name = p.c.cfg.ConsumerAssignors[0]
	}
	a := assignorNamed(name)
	if a == nil {
		a = uniformAssignor{}
	}
	recs, next := buildTarget(targetInput{group: p.gid, cg: cg, epoch: p.epoch, updated: upd, replaced: replaced,
		subscription: p.sub, regexes: p.regexV, assignor: a})
	p.recs = append(p.recs, recs...)
	p.c.lg.Info("computed a new target assignment", "group", p.gid, "epoch", p.epoch, "assignor", a.name(), "members", len(next))
	return next[upd.id], p.epoch
}
