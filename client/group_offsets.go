package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// A group member's offsets: commits (explicit, of what was polled, and
// automatic) and reading the committed offsets back.

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
