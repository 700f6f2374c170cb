package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/strand-io/strand/errs"
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
	if waiting && err == nil {
		// Nothing to read until the rebalance ends: wait for it a while
		// (an error from a rebalance that ended above is answered at once,
		// not joined with the next attempt's).
		t := g.cfg.clock.NewTimer(g.cfg.fetchMaxWait)
		select {
		case r := <-g.results:
			err = g.apply(ctx, r)
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
	sub := subscription{topics: g.cfg.topics, owned: g.ownedList(), generation: g.ownedGen, held: true, isolation: g.cfg.isolation}
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
