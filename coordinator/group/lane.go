package group

import (
	"context"
	"time"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// A group's changes are made one at a time, each through its lane: the
// change is planned under the shard lock from the group as it is, its
// records are written (the lock released meanwhile, the lane held so
// nothing else of the group changes), then replayed into memory. Another
// request for the group waits until the lane is free. What only reads a
// group (OffsetFetch, the describes) does not wait: it sees the group as
// it was before the change in flight, never half of one.

// groupChange is a planned change: its records, and done, which runs
// under the shard lock once they are written and replayed (err nil) or
// when the write failed (err set, memory unchanged unless the records
// reached the log: then they are replayed too, see wasAppended). A nil
// change, or one with no records, runs done at once.
type groupChange struct {
	recs []record.Record
	done func(err error)
	// noReplay: done applies the change itself (it needs first, the log
	// offset of the first record, as DeleteGroups does).
	noReplay bool
	first    int64
}

// planFunc plans a change under the shard lock (s.mu held, the group's
// lane free); an error is the request's answer.
type planFunc func(s *shard, now time.Time) (*groupChange, error)

// change runs one change of a group through its lane. It returns the
// write's error (already given to done) or the plan's.
func (c *Coordinator) change(ctx context.Context, groupID string, plan planFunc) error {
	for {
		s, err := c.lockShard(groupID)
		if err != nil {
			return err
		}
		if busy := s.lanes[groupID]; busy != nil {
			s.mu.Unlock()
			select {
			case <-busy:
				continue
			case <-ctx.Done():
				return ctx.Err()
			case <-c.ctx.Done():
				return errs.New(pb.ErrorCode_NOT_COORDINATOR, "the group coordinator is shutting down")
			}
		}
		now := c.clk.Now()
		ch, err := safePlan(plan, s, now)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		if ch == nil || len(ch.recs) == 0 {
			if ch != nil && ch.done != nil {
				ch.done(nil)
			}
			s.mu.Unlock()
			return nil
		}
		lane := make(chan struct{})
		s.lanes[groupID] = lane
		s.mu.Unlock()

		// The group's write, not the caller's: a caller that stops
		// waiting must not leave records in the log that memory lacks.
		first, werr := c.w.write(c.ctx, s, ch.recs, nil, nil)
		ch.first = first

		s.mu.Lock()
		delete(s.lanes, groupID)
		close(lane)
		if s.status != active {
			werr = errs.New(pb.ErrorCode_NOT_COORDINATOR, "broker %d stopped leading %s-%d", c.cfg.NodeID, c.cfg.Topic.Name, s.partition)
		} else if !ch.noReplay && (werr == nil || wasAppended(werr)) {
			c.replayConsumer(s, ch.recs, c.clk.Now())
		}
		if ch.done != nil {
			ch.done(werr)
		}
		s.mu.Unlock()
		return werr
	}
}

// lockShardQuiet is lockShard for the classic membership requests: it
// also waits until no change of the group is being written, so a classic
// request never acts on a group that a change in flight converts.
func (c *Coordinator) lockShardQuiet(ctx context.Context, groupID string) (*shard, error) {
	for {
		s, err := c.lockShard(groupID)
		if err != nil {
			return nil, err
		}
		busy := s.lanes[groupID]
		if busy == nil {
			return s, nil
		}
		s.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.ctx.Done():
			return nil, errs.New(pb.ErrorCode_NOT_COORDINATOR, "the group coordinator is shutting down")
		}
	}
}

// onLaneWait, set by tests only, runs when a request starts waiting for a
// change of its group to be written.
var onLaneWait func(groupID string)

// lockShardJoin is lockShardQuiet for JoinGroup: a deletion being written
// is not waited for (the join is refused meanwhile, not held). The lane
// is checked under the same lock the join then acts under, so no change
// (a conversion to a consumer group, say) is in flight while it does.
func (c *Coordinator) lockShardJoin(ctx context.Context, groupID string) (*shard, error) {
	for {
		s, err := c.lockShard(groupID)
		if err != nil {
			return nil, err
		}
		busy := s.lanes[groupID]
		if g := s.groups[groupID]; busy == nil || (g != nil && g.deleting) {
			return s, nil
		}
		s.mu.Unlock()
		if onLaneWait != nil {
			onLaneWait(groupID)
		}
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.ctx.Done():
			return nil, errs.New(pb.ErrorCode_NOT_COORDINATOR, "the group coordinator is shutting down")
		}
	}
}

// safePlan runs a plan, turning a value that does not encode (a string
// that is not UTF-8) into INVALID_REQUEST instead of a crash.
func safePlan(plan planFunc, s *shard, now time.Time) (ch *groupChange, err error) {
	defer func() {
		if r := recover(); r != nil {
			bv, ok := r.(badValue)
			if !ok {
				panic(r)
			}
			ch, err = nil, errs.New(pb.ErrorCode_INVALID_REQUEST, "the request's strings must be UTF-8: %v", bv.err)
		}
	}()
	return plan(s, now)
}
