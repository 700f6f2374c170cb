package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/planted"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// GroupMetadata identifies a consumer's membership, for
// SendOffsetsToTransaction: the group coordinator refuses a transactional
// commit from a member of an older generation (KIP-447 fencing).
type GroupMetadata struct {
	GroupID         string
	GenerationID    int32
	MemberID        string
	GroupInstanceID string
}

// joinResult is what a join round hands to Poll: the new generation's
// assignment with the committed offsets of the partitions it adds, or why
// there is none.
type joinResult struct {
	generation int32
	protocol   string
	assignment []TopicPartition
	offsets    map[TopicPartition]int64
	// lost: the coordinator no longer knows this member or generation; the
	// partitions held must be dropped (not revoked) before rejoining.
	lost bool
	err  error
}

// groupMember is a Consumer's membership in its group (the classic
// protocol). The join/sync rounds and heartbeats run in its own goroutines;
// everything that touches the consumer's partitions — revoking, assigning,
// the rebalance callbacks, commits before revocation — runs in Poll, on the
// application's goroutine, as in Kafka's consumer.
//
// Rebalance protocol: cooperative when every configured assignor is
// cooperative (Kafka's rule), else eager. Eager members give up all their
// partitions before rejoining; cooperative members keep them, give up only
// what the new assignment no longer has, and then rejoin once more so
// those partitions can move (two rounds, never two owners at once).
type groupMember struct {
	c           *Consumer
	cfg         *config
	lg          *slog.Logger
	subscribe   bool // Topics given: join and be assigned; else commits only
	cooperative bool

	ctx    context.Context // the membership's life; Close ends it
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu         sync.Mutex
	coord      *pb.Coordinator
	memberID   string
	generation int32
	protocol   string
	inSession  bool // a generation is in force: heartbeat it
	joining    bool
	needRejoin bool
	lost       bool
	closed     bool
	hbStarted  bool
	committing bool
	owned      map[TopicPartition]bool // the assignment Poll applied
	ownedGen   int32
	previous   []TopicPartition // eager: the partitions given up before joining (a stickiness hint)
	lastCommit time.Time
	committed  map[TopicPartition]int64
	results    chan joinResult
	retryAt    time.Time // after a failed join, the next attempt waits until then
	failures   int
	// fenced: another process joined with this consumer's
	// group.instance.id (FENCED_INSTANCE_ID). As in Kafka's consumer it is
	// fatal: the member never rejoins (that would fence the other process
	// in turn), drops its partitions, and Poll returns this error.
	fenced error
}

func newGroupMember(c *Consumer) *groupMember {
	ctx, cancel := context.WithCancel(context.Background())
	coop := len(c.cfg.assignors) > 0
	for _, n := range c.cfg.assignors {
		if a, ok := assignorByName(n); !ok || !a.cooperative() {
			coop = false
		}
	}
	return &groupMember{c: c, cfg: &c.cfg, lg: c.cl.lg.With("group", c.cfg.groupID), subscribe: len(c.cfg.topics) > 0, cooperative: coop,
		ctx: ctx, cancel: cancel, generation: -1, ownedGen: -1, needRejoin: true, owned: map[TopicPartition]bool{},
		committed: map[TopicPartition]int64{}, results: make(chan joinResult, 1), lastCommit: c.cfg.clock.Now()}
}

// GroupMetadata is the consumer's current membership (generation -1 and no
// member id outside a generation, or without a group).
func (c *Consumer) GroupMetadata() GroupMetadata {
	if c.group == nil {
		return GroupMetadata{GenerationID: -1, GroupInstanceID: c.cfg.instanceID}
	}
	g := c.group
	g.mu.Lock()
	defer g.mu.Unlock()
	return GroupMetadata{GroupID: c.cfg.groupID, GenerationID: g.generation, MemberID: g.memberID, GroupInstanceID: c.cfg.instanceID}
}

// CommitOffsets commits offsets (the next offset to read, per partition)
// for the consumer's group, as a member of its current generation — or, for
// a consumer with a GroupID but no Topics, as a standalone consumer
// (generation -1), which the coordinator accepts while the group has no
// members. It retries retriable answers (the coordinator moving or
// loading, …) until ctx ends; then the error matches ctx's error and the
// last answer. It returns at once ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID /
// REBALANCE_IN_PROGRESS when the generation moved on (the partitions may
// belong to someone else by now), ErrFencedInstanceID (wrapped) when this
// static member was fenced, and any other answer that is not retriable
// (a partition's, such as UNKNOWN_TOPIC_OR_PARTITION); a plain error
// without a GroupID.
func (c *Consumer) CommitOffsets(ctx context.Context, offsets map[TopicPartition]int64) error {
	if c.group == nil {
		return errors.New("strand: CommitOffsets needs a consumer with a GroupID")
	}
	return c.group.commit(ctx, offsets)
}

// CommitPolled commits the position of every assigned partition: the
// offset after the last record Poll returned (past control records), so a
// restarted member of the group resumes right after what was polled. Its
// errors are CommitOffsets'.
func (c *Consumer) CommitPolled(ctx context.Context) error {
	if c.group == nil {
		return errors.New("strand: CommitPolled needs a consumer with a GroupID")
	}
	return c.group.commit(ctx, c.group.positions(c.Assignment()))
}

// Committed returns the group's committed offsets of tps (-1: none). It
// waits while a transactional commit of one of them is pending
// (require_stable), and retries retriable answers, until ctx ends; then
// the error matches ctx's error and the last answer
// (UNSTABLE_OFFSET_COMMIT, NOT_COORDINATOR, …). Other answers are
// returned at once.
func (c *Consumer) Committed(ctx context.Context, tps []TopicPartition) (map[TopicPartition]int64, error) {
	if c.group == nil {
		return nil, errors.New("strand: Committed needs a consumer with a GroupID")
	}
	return c.group.fetchCommitted(ctx, tps)
}

// positions is the current position of each partition that has one.
func (g *groupMember) positions(tps []TopicPartition) map[TopicPartition]int64 {
	out := map[TopicPartition]int64{}
	for _, tp := range tps {
		if p := g.c.Position(tp); p >= 0 {
			out[tp] = p
		}
	}
	return out
}

// poll is Poll's group step: apply a finished rebalance, drop lost
// partitions, start a rebalance when one is needed, auto-commit.
func (g *groupMember) poll(ctx context.Context) error {
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if !g.subscribe {
		g.maybeAutoCommit(g.c.Assignment())
		return nil
	}
	var err error
	select {
	case r := <-g.results:
		err = g.apply(ctx, r)
	default:
	}
	g.mu.Lock()
	lost, start, fenced := g.lost, g.needRejoin && !g.joining && !g.cfg.clock.Now().Before(g.retryAt) && g.fenced == nil, g.fenced
	g.mu.Unlock()
	if lost {
		g.dropLost()
	}
	if fenced != nil {
		return fenced
	}
	if start {
		g.startJoin(ctx)
	}
	g.mu.Lock()
	waiting := g.joining && len(g.owned) == 0
	owned := g.ownedList()
	g.mu.Unlock()
	if waiting {
		// Nothing to read until the rebalance ends: wait for it a while.
		t := g.cfg.clock.NewTimer(g.cfg.fetchMaxWait)
		select {
		case r := <-g.results:
			err = errors.Join(err, g.apply(ctx, r))
		case <-t.C():
		case <-ctx.Done():
		}
		t.Stop()
	}
	g.maybeAutoCommit(owned)
	return err
}

func (g *groupMember) ownedList() []TopicPartition {
	out := make([]TopicPartition, 0, len(g.owned))
	for tp := range g.owned {
		out = append(out, tp)
	}
	return sortTPList(out)
}

// startJoin launches a join round. Eager members first commit (auto-commit)
// and revoke everything they hold.
func (g *groupMember) startJoin(ctx context.Context) {
	g.mu.Lock()
	owned := g.ownedList()
	g.mu.Unlock()
	if !g.cooperative && len(owned) > 0 {
		g.revoke(ctx, owned)
		g.mu.Lock()
		g.previous, g.owned = owned, map[TopicPartition]bool{}
		g.mu.Unlock()
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	sub := subscription{topics: g.cfg.topics, owned: g.ownedList(), generation: g.ownedGen, held: true}
	if !g.cooperative {
		sub.owned, sub.held = g.previous, false
	}
	g.joining, g.needRejoin, g.inSession = true, false, false
	g.wg.Add(1)
	g.mu.Unlock()
	go func() {
		defer g.wg.Done()
		g.results <- g.runJoin(sub)
	}()
}

// revoke gives up partitions: their positions are committed (auto-commit),
// OnPartitionsRevoked runs, and the consumer stops reading them.
func (g *groupMember) revoke(ctx context.Context, tps []TopicPartition) {
	if len(tps) == 0 {
		return
	}
	if g.cfg.autoCommit {
		cctx, cancel := context.WithTimeout(ctx, g.cfg.requestTimeout)
		if err := g.commit(cctx, g.positions(tps)); err != nil {
			g.lg.Warn("commit before revoking partitions failed", "partitions", tps, "err", err)
		}
		cancel()
	}
	if g.cfg.onRevoked != nil {
		g.cfg.onRevoked(tps)
	}
	g.c.unassign(tps)
}

// dropLost drops every partition without committing: the member is out of
// the group, someone else may own them already.
func (g *groupMember) dropLost() {
	g.mu.Lock()
	owned := g.ownedList()
	g.owned, g.previous, g.lost, g.ownedGen = map[TopicPartition]bool{}, nil, false, -1
	g.mu.Unlock()
	if len(owned) == 0 {
		return
	}
	g.lg.Warn("partitions lost: the group no longer knows this member's generation", "partitions", owned)
	switch {
	case g.cfg.onLost != nil:
		g.cfg.onLost(owned)
	case g.cfg.onRevoked != nil:
		g.cfg.onRevoked(owned)
	}
	g.c.unassign(owned)
}

// apply installs a join round's outcome (on Poll's goroutine).
func (g *groupMember) apply(ctx context.Context, r joinResult) error {
	if errors.Is(r.err, errs.FencedInstanceID) {
		g.mu.Lock()
		g.joining = false
		g.mu.Unlock()
		err := g.fence(r.err)
		g.dropLost()
		return err
	}
	g.mu.Lock()
	g.joining = false
	if r.err != nil || r.lost {
		g.needRejoin = true
		if r.lost {
			g.lost = true
		}
		if r.err != nil && g.ctx.Err() == nil && ctx.Err() == nil {
			g.failures++
			g.retryAt = g.cfg.clock.Now().Add(backoff(g.cfg, g.failures))
		}
		g.mu.Unlock()
		switch {
		case r.err == nil, g.ctx.Err() != nil, errors.Is(r.err, context.Canceled), errors.Is(r.err, context.DeadlineExceeded):
		case errs.IsRetriable(r.err):
			// As Kafka's poll: a retriable error is retried (the next
			// Poll rejoins), not returned.
			g.lg.Debug("joining the group failed; retrying", "err", r.err)
		default:
			return fmt.Errorf("strand: joining group %q: %w", g.cfg.groupID, r.err)
		}
		return nil
	}
	g.failures = 0
	assigned := map[TopicPartition]bool{}
	for _, tp := range r.assignment {
		assigned[tp] = true
	}
	var revoked []TopicPartition
	for tp := range g.owned {
		if !assigned[tp] {
			revoked = append(revoked, tp)
		}
	}
	g.mu.Unlock()
	sortTPs(revoked)
	g.revoke(ctx, revoked)

	g.mu.Lock()
	var added []TopicPartition
	starts := map[TopicPartition]int64{}
	var noOffset []TopicPartition
	for _, tp := range r.assignment {
		if g.owned[tp] {
			continue
		}
		added = append(added, tp)
		off, ok := r.offsets[tp]
		switch {
		case ok && off >= 0:
			starts[tp] = off
		case g.cfg.offsetReset == ResetEarliest:
			starts[tp] = OffsetEarliest
		case g.cfg.offsetReset == ResetLatest:
			starts[tp] = OffsetLatest
		default:
			noOffset = append(noOffset, tp)
		}
	}
	g.owned, g.ownedGen, g.previous = assigned, r.generation, nil
	if len(revoked) > 0 && g.cooperative {
		g.needRejoin = true // the second round moves what was revoked
	}
	if !g.hbStarted && !g.closed {
		g.hbStarted = true
		g.wg.Add(1)
		go g.heartbeatLoop()
	}
	g.mu.Unlock()
	g.c.assign(starts)
	g.lg.Debug("assignment applied", "generation", r.generation, "protocol", r.protocol, "assigned", len(r.assignment), "added", len(added), "revoked", len(revoked))
	if g.cfg.onAssigned != nil {
		g.cfg.onAssigned(sortTPList(added))
	}
	if len(noOffset) > 0 {
		return fmt.Errorf("strand: no committed offset for %v in group %q and auto.offset.reset=none", noOffset, g.cfg.groupID)
	}
	return nil
}

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

// fetchCommitted reads committed offsets with require_stable, retrying
// while a transactional commit of one of them is pending.
func (g *groupMember) fetchCommitted(ctx context.Context, tps []TopicPartition) (map[TopicPartition]int64, error) {
	out := map[TopicPartition]int64{}
	if len(tps) == 0 {
		return out, nil
	}
	req := &pb.OffsetFetchRequest{GroupId: g.cfg.groupID, RequireStable: true}
	for _, tp := range tps {
		req.Partitions = append(req.Partitions, &pb.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	for attempt := 0; ; attempt++ {
		var resp *pb.OffsetFetchResponse
		err := g.call(ctx, g.cfg.requestTimeout, "OffsetFetch", rpc(&resp, func(ctx context.Context, gc pb.GroupsClient) (*pb.OffsetFetchResponse, error) {
			return gc.OffsetFetch(ctx, req)
		}))
		if err != nil {
			return nil, err
		}
		var unstable error
		for _, p := range resp.Partitions {
			tp := TopicPartition{p.Topic, p.Partition}
			switch p.ErrorCode {
			case pb.ErrorCode_NONE:
				out[tp] = p.Offset
			case pb.ErrorCode_UNSTABLE_OFFSET_COMMIT:
				unstable = errs.FromCode(p.ErrorCode, p.ErrorMessage)
			default:
				return nil, fmt.Errorf("committed offset of %s: %w", tp, errs.FromCode(p.ErrorCode, p.ErrorMessage))
			}
		}
		if unstable == nil {
			return out, nil
		}
		g.lg.Debug("committed offsets unstable, retrying", "err", unstable)
		if g.cfg.sleep(ctx, backoff(g.cfg, attempt)) != nil {
			return nil, fmt.Errorf("committed offsets: %w", expired(ctx, unstable))
		}
	}
}

// commit sends an OffsetCommit as the current member (standalone without Topics).
func (g *groupMember) commit(ctx context.Context, offsets map[TopicPartition]int64) error {
	if len(offsets) == 0 {
		return nil
	}
	g.mu.Lock()
	if g.fenced != nil {
		defer g.mu.Unlock()
		return g.fenced
	}
	req := &pb.OffsetCommitRequest{GroupId: g.cfg.groupID, GenerationId: -1}
	if g.subscribe {
		req.GenerationId, req.MemberId, req.GroupInstanceId = g.generation, g.memberID, g.instanceID()
	}
	g.mu.Unlock()
	for tp, off := range offsets {
		req.Offsets = append(req.Offsets, &pb.PartitionOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: off, LeaderEpoch: -1})
	}
	var resp *pb.OffsetCommitResponse
	err := g.call(ctx, g.cfg.requestTimeout, "OffsetCommit", func(ctx context.Context, gc pb.GroupsClient) (pb.ErrorCode, string, error) {
		var err error
		resp, err = gc.OffsetCommit(ctx, req)
		if err != nil {
			return 0, "", err
		}
		// Coordinator errors come per partition and are the same for all.
		for _, p := range resp.Partitions {
			if p.ErrorCode != pb.ErrorCode_NONE {
				return p.ErrorCode, p.ErrorMessage, nil
			}
		}
		return pb.ErrorCode_NONE, "", nil
	})
	if errors.Is(err, errs.FencedInstanceID) {
		return g.fence(err)
	}
	if err != nil {
		return fmt.Errorf("strand: commit of group %q: %w", g.cfg.groupID, err)
	}
	g.mu.Lock()
	for tp, off := range offsets {
		g.committed[tp] = off
	}
	g.mu.Unlock()
	return nil
}

// maybeAutoCommit commits, in the background, the positions that changed
// since the last commit, every auto.commit.interval.ms.
func (g *groupMember) maybeAutoCommit(tps []TopicPartition) {
	if !g.cfg.autoCommit {
		return
	}
	g.mu.Lock()
	due := g.cfg.clock.Now().Sub(g.lastCommit) >= g.cfg.autoCommitEvery && !g.committing && !g.closed && (!g.subscribe || g.inSession)
	if !due {
		g.mu.Unlock()
		return
	}
	g.lastCommit = g.cfg.clock.Now()
	g.mu.Unlock()
	offsets := g.positions(tps)
	g.mu.Lock()
	for tp, off := range offsets {
		if g.committed[tp] == off {
			delete(offsets, tp)
		}
	}
	if len(offsets) == 0 {
		g.mu.Unlock()
		return
	}
	g.committing = true
	g.wg.Add(1)
	g.mu.Unlock()
	go func() {
		defer g.wg.Done()
		ctx, cancel := context.WithTimeout(g.ctx, g.cfg.requestTimeout)
		defer cancel()
		if err := g.commit(ctx, offsets); err != nil && g.ctx.Err() == nil {
			g.lg.Info("auto-commit failed (retried at the next interval)", "err", err)
		}
		g.mu.Lock()
		g.committing = false
		g.mu.Unlock()
	}()
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
		g.mu.Lock()
		if g.inSession && g.generation == gen && g.memberID == id {
			switch code {
			case pb.ErrorCode_REBALANCE_IN_PROGRESS:
				g.needRejoin = true
			case pb.ErrorCode_UNKNOWN_MEMBER_ID, pb.ErrorCode_ILLEGAL_GENERATION:
				g.needRejoin, g.lost, g.inSession, g.generation = true, true, false, -1
				if code == pb.ErrorCode_UNKNOWN_MEMBER_ID {
					g.memberID = ""
				}
			default:
				g.lg.Debug("heartbeat failed", "err", err)
			}
		}
		g.mu.Unlock()
	}
}

// consumed is told what Poll returned; positions already say it all.
func (g *groupMember) consumed([]*Record) {}

// close leaves the group: it stops the rebalance and heartbeat goroutines,
// commits the positions (auto-commit), revokes the partitions, and sends
// LeaveGroup so the others rebalance at once (static members do not leave:
// their session keeps their assignment across a restart).
func (g *groupMember) close(ctx context.Context) error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	g.mu.Unlock()
	g.cancel()
	g.wg.Wait()
	select {
	case <-g.results: // a round nobody will apply
	default:
	}
	g.mu.Lock()
	owned, inSession, memberID, fenced := g.ownedList(), g.inSession, g.memberID, g.fenced != nil
	g.mu.Unlock()
	if fenced {
		// The membership belongs to another process now; its partitions
		// were dropped (reported lost) when the fencing was seen.
		return nil
	}
	if !g.subscribe {
		owned, inSession = g.c.Assignment(), true
	}
	var err error
	if g.cfg.autoCommit && len(owned) > 0 && (inSession || memberID != "") {
		// Mid-rebalance the old generation may still commit; only an
		// error of a settled generation is the caller's.
		if cerr := g.commit(ctx, g.positions(owned)); cerr != nil && inSession {
			err = cerr
		} else if cerr != nil {
			g.lg.Info("commit at close, during a rebalance, failed", "err", cerr)
		}
	}
	if g.subscribe && len(owned) > 0 && g.cfg.onRevoked != nil {
		g.cfg.onRevoked(owned)
	}
	if g.subscribe && memberID != "" && g.cfg.instanceID == "" {
		var lr *pb.LeaveGroupResponse
		lerr := g.call(ctx, g.cfg.requestTimeout, "LeaveGroup", rpc(&lr, func(ctx context.Context, gc pb.GroupsClient) (*pb.LeaveGroupResponse, error) {
			return gc.LeaveGroup(ctx, &pb.LeaveGroupRequest{GroupId: g.cfg.groupID, MemberId: memberID})
		}))
		if lerr != nil && !errors.Is(lerr, errs.UnknownMemberID) {
			g.lg.Info("LeaveGroup failed; the member will expire after session.timeout.ms", "err", lerr)
		}
	}
	return err
}

// assign adds partitions to the consumer at the given start positions.
func (c *Consumer) assign(starts map[TopicPartition]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for tp, pos := range starts {
		c.assigned[tp] = &cpart{tp: tp, pos: pos, epoch: -1, hw: -1, lso: -1}
	}
}

// unassign removes partitions and their buffered records.
func (c *Consumer) unassign(tps []TopicPartition) {
	drop := map[TopicPartition]bool{}
	for _, tp := range tps {
		drop[tp] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for tp := range drop {
		delete(c.assigned, tp)
	}
	keep := c.buffered[:0]
	for _, r := range c.buffered {
		if !drop[TopicPartition{r.Topic, r.Partition}] {
			keep = append(keep, r)
		}
	}
	c.buffered = keep
}
