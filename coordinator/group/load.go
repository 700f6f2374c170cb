package group

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// load rebuilds a shard from its partition, log start to log end, then
// serves it once the partition's high watermark has reached that end. Until
// then its groups answer COORDINATOR_LOAD_IN_PROGRESS. The wait is for a
// new leader whose log ends with records the previous leader wrote and never
// had acknowledged (an offset commit, a member's join): a follower that
// lacks them can still be elected after this node, which loses them, and an
// offset served from such a record could vanish after a consumer resumed
// from it. Usually the HW is there at once, or with the followers' next fetch.
// Markers that land during the load are read by it (OnTxnMarker ignores a
// loading shard); the load ends, under the shard lock, only when it has
// read everything up to the current log end.
func (c *Coordinator) load(ctx context.Context, s *shard) {
	defer c.wg.Done()
	start := c.clk.Now()
	l := s.p.Log
	off := l.LogStartOffset()
	var batches, records int
	for attempt := 0; ; {
		if ctx.Err() != nil {
			return
		}
		end := l.LogEndOffset()
		if off >= end {
			if hw := s.p.HighWatermark(); hw < end {
				c.lg.Info("waiting for the ISR to have the loaded groups before serving them", "partition", s.partition, "hw", hw, "logEnd", end)
				if err := s.p.WaitForHW(ctx, end-1, s.leaderEpoch); err != nil {
					return
				}
			}
			s.mu.Lock()
			if s.status != loading {
				s.mu.Unlock()
				return
			}
			if off >= l.LogEndOffset() {
				c.startSessions(s, c.clk.Now())
				s.status = active
				n := len(s.groups)
				s.mu.Unlock()
				c.lg.Info("loaded groups", "partition", s.partition, "leaderEpoch", s.leaderEpoch, "groups", n,
					"batches", batches, "records", records, "took", c.clk.Now().Sub(start))
				return
			}
			s.mu.Unlock()
			continue
		}
		res, err := l.Read(off, loadBufferSize, end, true)
		if err != nil {
			if errs.CodeOf(err) == pb.ErrorCode_OFFSET_OUT_OF_RANGE && off < res.LogStart {
				off = res.LogStart // retention moved the start
				continue
			}
			attempt++
			c.lg.Warn("load groups: read failed, retrying", "partition", s.partition, "offset", off, "err", err)
			if !c.pause(ctx, time.Duration(min(attempt, 10))*50*time.Millisecond) {
				return
			}
			continue
		}
		if len(res.Records) == 0 {
			// No batch in [off, end): the log cleaner removed the last
			// batches below the log end (its offsets are gaps). Kafka's
			// loader stops at such a read too; a batch appended since is
			// read by the next round, which sees the new log end.
			off = end
			continue
		}
		attempt = 0
		s.mu.Lock()
		if s.status != loading {
			s.mu.Unlock()
			return
		}
		it := record.NewIter(res.Records)
		for it.Next() {
			h := it.Header()
			if h.NextOffset() <= off {
				continue
			}
			batches++
			records += c.applyBatch(s, h, it.Batch())
			off = h.NextOffset()
		}
		if err := it.Err(); err != nil {
			c.lg.Error("load groups: corrupt batch skipped", "partition", s.partition, "offset", off, "err", err)
			off = max(off+1, res.FirstOffset+1)
		}
		s.mu.Unlock()
	}
}

// pause waits d on the coordinator's clock; false if ctx ended first.
func (c *Coordinator) pause(ctx context.Context, d time.Duration) bool {
	t := c.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// applyBatch replays one batch of the log into the shard (s.mu held) and
// returns how many records it applied. A marker settles its producer's
// pending offsets exactly as OnTxnMarker does live.
func (c *Coordinator) applyBatch(s *shard, h record.Header, batch []byte) int {
	now := c.clk.Now()
	if h.IsControl() {
		typ, _, err := record.ReadControlBatch(batch)
		if err != nil {
			c.lg.Warn("load groups: unreadable control batch skipped", "partition", s.partition, "offset", h.BaseOffset, "err", err)
			return 0
		}
		s.settle(h.ProducerID, typ == record.ControlCommit)
		return 1
	}
	_, recs, err := record.Decode(batch)
	if err != nil {
		c.lg.Warn("load groups: undecodable batch skipped", "partition", s.partition, "offset", h.BaseOffset, "err", err)
		return 0
	}
	txnPID := int64(-1)
	if h.IsTransactional() {
		txnPID = h.ProducerID
	}
	for _, r := range recs {
		if err := c.applyRecord(s, r, now, txnPID); err != nil {
			c.lg.Warn("load groups: record skipped", "partition", s.partition, "offset", r.Offset, "err", err)
		}
	}
	return len(recs)
}

// applyRecord replays one record (s.mu held). txnPID is the producer of
// the record's transactional batch, -1 when it is not transactional: an
// offset commit in a transactional batch is pending until that producer's
// marker, whatever its key type (older logs have type 1 keys).
func (c *Coordinator) applyRecord(s *shard, r record.Record, now time.Time, txnPID int64) error {
	k, err := decodeKey(r.Key)
	if err != nil {
		return err
	}
	switch k.typ {
	case keyOffsetCommit, keyPendingTxnCommit:
		g := s.group(k.group, now, r.Value != nil)
		if g == nil {
			return nil
		}
		p := tp{k.topic, k.partition}
		pending := k.typ == keyPendingTxnCommit || txnPID >= 0
		if r.Value == nil {
			if !pending {
				g.dropOffset(p, r.Offset)
			}
			return nil
		}
		var v pb.OffsetCommitValue
		if err := proto.Unmarshal(r.Value, &v); err != nil {
			return err
		}
		e := offsetEntry{offset: v.Offset, leaderEpoch: v.LeaderEpoch, metadata: v.Metadata, commitMs: v.CommitTimestampMs, logOffset: r.Offset}
		if !pending {
			g.applyCommitted(p, e)
			return nil
		}
		for _, h := range r.Headers {
			if h.Key == txnIDHeader {
				e.txnID = string(h.Value)
			}
		}
		pid := txnPID
		if pid < 0 {
			pid = k.pid
		}
		s.addPending(g, p, pid, e)
	case keyGroupMetadata:
		return c.applyGroupMetadata(s, k.group, r.Value, now)
	default:
		return c.applyConsumerRecord(s, k, r.Value, now)
	}
	return nil
}

// applyGroupMetadata replays a classic group's membership record (type
// 2): a value installs it, a tombstone empties the group, which is gone
// when nothing else is left of it: no offsets, committed or pending
// (DeleteGroups tombstoned them first). A group converted to a consumer
// group (its records follow) keeps its offsets, and its transactions'
// pending ones, in the same group object.
func (c *Coordinator) applyGroupMetadata(s *shard, id string, value []byte, now time.Time) error {
	g := s.group(id, now, value != nil)
	if g == nil {
		return nil
	}
	if value == nil {
		g.restore(&pb.GroupMetadataValue{}, now)
		g.generation = 0
		if g.cg == nil && !g.holdsOffsets() {
			delete(s.groups, id)
		}
		return nil
	}
	var v pb.GroupMetadataValue
	if err := proto.Unmarshal(value, &v); err != nil {
		return err
	}
	if g.cg != nil {
		c.lg.Warn("classic group metadata for a consumer group; the consumer group is dropped", "group", id, "members", len(g.cg.members))
		g.cg = nil
	}
	g.restore(&v, now)
	return nil
}

// startSessions starts every loaded member's session at now (s.mu held):
// a new coordinator gives each member a full session to find it, and a
// consumer group member that was revoking its full rebalance timeout.
func (c *Coordinator) startSessions(s *shard, now time.Time) {
	for _, g := range s.groups {
		for _, m := range g.members {
			m.lastHeartbeat = now
		}
		if g.cg != nil {
			for _, m := range g.cg.members {
				m.revokeBy = time.Time{}
				c.touchMember(m, now)
			}
		}
	}
}
