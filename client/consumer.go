package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// Offset positions for Assign and Seek.
const (
	// OffsetEarliest starts at the log start offset.
	OffsetEarliest int64 = -2
	// OffsetLatest starts at the end (the HW, or the LSO under read_committed).
	OffsetLatest int64 = -1
)

// Consumer reads records from assigned partitions (Assign), or from the
// partitions its group gives it (GroupID + Topics). Under ReadCommitted it
// returns only committed records, skips aborted batches and never returns
// control records.
type Consumer struct {
	cfg config
	cl  *cluster

	// refreshing is set while a metadata refresh started by a failed
	// fetch runs; lastRefresh is when the last one ended (Unix nanos).
	refreshing  atomic.Bool
	lastRefresh atomic.Int64
	// retried is set when a fetch answer asked for a retry (a retriable
	// error for the request or a partition): fetch then backs off.
	retried atomic.Bool

	mu       sync.Mutex
	assigned map[TopicPartition]*cpart
	buffered []*Record
	closed   bool
	// failing are the partitions whose last fetch answered an error the
	// consumer retries (reported to OnFetchError).
	failing map[TopicPartition]bool

	group *groupMember
}

type cpart struct {
	tp     TopicPartition
	pos    int64 // next offset to read; <0: needs reset (OffsetEarliest/Latest)
	epoch  int32 // leader epoch last seen
	hw     int64
	lso    int64
	paused bool
}

// NewConsumer returns a consumer; no connection is made until it is used.
// Options that contradict each other are refused with an error saying why.
func NewConsumer(opts ...Opt) (*Consumer, error) {
	cfg := newConfig(opts)
	if err := cfg.validateConsumer(); err != nil {
		return nil, err
	}
	c := &Consumer{cfg: cfg, assigned: map[TopicPartition]*cpart{}}
	c.cl = newCluster(&c.cfg)
	if cfg.groupID != "" {
		c.group = newGroupMember(c)
	}
	return c, nil
}

// Assign replaces the assignment; each partition starts at the given
// offset (OffsetEarliest, OffsetLatest or an exact offset).
func (c *Consumer) Assign(parts map[TopicPartition]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.assigned = map[TopicPartition]*cpart{}
	for tp, off := range parts {
		c.assigned[tp] = &cpart{tp: tp, pos: off, epoch: -1, hw: -1, lso: -1}
	}
	c.buffered = nil
}

// Assignment lists the assigned partitions.
func (c *Consumer) Assignment() []TopicPartition {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]TopicPartition, 0, len(c.assigned))
	for tp := range c.assigned {
		out = append(out, tp)
	}
	sortTPs(out)
	return out
}

func sortTPs(s []TopicPartition) {
	sort.Slice(s, func(i, j int) bool {
		if s[i].Topic != s[j].Topic {
			return s[i].Topic < s[j].Topic
		}
		return s[i].Partition < s[j].Partition
	})
}

// Seek moves a partition's position; buffered records of it are dropped.
func (c *Consumer) Seek(tp TopicPartition, offset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cp := c.assigned[tp]
	if cp == nil {
		return fmt.Errorf("strand: %s is not assigned", tp)
	}
	cp.pos = offset
	keep := c.buffered[:0]
	for _, r := range c.buffered {
		if r.Topic != tp.Topic || r.Partition != tp.Partition {
			keep = append(keep, r)
		}
	}
	c.buffered = keep
	return nil
}

// Position is the offset of the next record Poll will return for tp
// (-1 when not known yet).
func (c *Consumer) Position(tp TopicPartition) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	cp := c.assigned[tp]
	if cp == nil {
		return -1
	}
	for _, r := range c.buffered {
		if r.Topic == tp.Topic && r.Partition == tp.Partition {
			return r.Offset
		}
	}
	if cp.pos < 0 {
		return -1
	}
	return cp.pos
}

// Lag reports, per partition, the HW and LSO of the last fetch.
func (c *Consumer) Marks(tp TopicPartition) (hw, lso int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cp := c.assigned[tp]; cp != nil {
		return cp.hw, cp.lso
	}
	return -1, -1
}

// Poll returns up to max.poll.records records, waiting up to
// fetch.max.wait.ms (or until ctx ends) when none are buffered. It returns
// an empty slice and nil when nothing arrived in time. A group consumer
// joins its group, applies rebalances (calling the OnPartitions…
// callbacks) and commits automatically from Poll.
//
// Like Kafka's poll, it keeps going through retriable errors (a leader
// moved, the coordinator is loading, the group is rebalancing): they are
// retried at the next Poll. It returns ctx's error when ctx ended and it
// has nothing to return; a fetch error that is not retriable (an
// OFFSET_OUT_OF_RANGE with AutoOffsetReset(ResetNone), a partition that
// cannot be read) or a refused offset lookup, wrapping the broker's error;
// a join error that is not retriable (INCONSISTENT_GROUP_PROTOCOL,
// INVALID_SESSION_TIMEOUT, …); a plain error when a partition it is given
// has no committed offset under AutoOffsetReset(ResetNone);
// ErrFencedInstanceID (wrapped) once another consumer took over this one's
// GroupInstanceID, and from then on; ErrClosed after Close.
func (c *Consumer) Poll(ctx context.Context) ([]*Record, error) {
	if c.group != nil {
		if err := c.group.poll(ctx); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if len(c.buffered) == 0 {
		c.mu.Unlock()
		if err := c.fetch(ctx); err != nil {
			return nil, err
		}
		c.mu.Lock()
	}
	n := min(len(c.buffered), c.cfg.maxPollRecords)
	out := c.buffered[:n:n]
	c.buffered = c.buffered[n:]
	c.mu.Unlock()
	if c.group != nil {
		c.group.consumed(out)
	}
	if n == 0 && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return out, nil
}

// fetch resets unknown positions, then fetches once from every leader.
func (c *Consumer) fetch(ctx context.Context) error {
	if err := c.resetPositions(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	byLeader := map[int32][]*pb.FetchPartition{}
	var unknown []TopicPartition
	for tp, cp := range c.assigned {
		if cp.pos < 0 || cp.paused {
			continue
		}
		leader, epoch := c.cl.leader(tp)
		if leader < 0 {
			unknown = append(unknown, tp)
			continue
		}
		byLeader[leader] = append(byLeader[leader], &pb.FetchPartition{Topic: tp.Topic, Partition: tp.Partition, FetchOffset: cp.pos,
			CurrentLeaderEpoch: epoch, PartitionMaxBytes: c.cfg.maxPartitionBytes})
	}
	c.mu.Unlock()
	if len(unknown) > 0 {
		topics := map[string]bool{}
		for _, tp := range unknown {
			topics[tp.Topic] = true
		}
		names := make([]string, 0, len(topics))
		for t := range topics {
			names = append(names, t)
		}
		rctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout)
		_ = c.cl.refresh(rctx, names)
		cancel()
	}
	if len(byLeader) == 0 {
		return c.cfg.sleep(ctx, min(c.cfg.fetchMaxWait, 100*time.Millisecond))
	}
	iso := pb.IsolationLevel_READ_UNCOMMITTED
	if c.cfg.isolation == ReadCommitted {
		iso = pb.IsolationLevel_READ_COMMITTED
	}
	type result struct {
		resp *pb.FetchResponse
		err  error
	}
	results := make(chan result, len(byLeader))
	for leader, parts := range byLeader {
		go func(leader int32, parts []*pb.FetchPartition) {
			cc, err := c.cl.brokerConn(leader)
			if err != nil {
				results <- result{err: err}
				return
			}
			rctx, cancel := context.WithTimeout(ctx, c.cfg.fetchMaxWait+c.cfg.requestTimeout)
			defer cancel()
			resp, err := pb.NewConsumerClient(cc).Fetch(rctx, &pb.FetchRequest{ReplicaId: -1, MaxWaitMs: int32(c.cfg.fetchMaxWait / time.Millisecond),
				MinBytes: c.cfg.fetchMinBytes, MaxBytes: c.cfg.fetchMaxBytes, IsolationLevel: iso, Partitions: parts})
			results <- result{resp, err}
		}(leader, parts)
	}
	var firstErr error
	failed := 0
	for range byLeader {
		r := <-results
		if r.err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			c.cl.lg.Debug("fetch failed", "err", r.err)
			go c.refreshSoon()
			failed++
			continue
		}
		if err := c.handleFetch(r.resp); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	// A round that failed and brought nothing waits retry.backoff before
	// the next (Kafka's consumer backs off a node whose fetch failed): a
	// leader that is down, or answers NOT_LEADER_OR_FOLLOWER until the
	// metadata catches up, fails a fetch at once, and Poll in a loop would
	// send them as fast as the CPU allows.
	if retried := c.retried.Swap(false); (failed > 0 || retried) && firstErr == nil {
		c.mu.Lock()
		empty := len(c.buffered) == 0
		c.mu.Unlock()
		if empty {
			return c.cfg.sleep(ctx, c.cfg.retryBackoff)
		}
	}
	return firstErr
}

// refreshSoon refreshes the metadata after a failed fetch or a partition
// error the consumer retries. At most one runs at a time, and none within retry.backoff of the last
// one's end: every failed fetch asks for one, and a leader that is down
// fails fetches as fast as they are sent.
func (c *Consumer) refreshSoon() {
	if !c.refreshing.CompareAndSwap(false, true) {
		return
	}
	defer c.refreshing.Store(false)
	if time.Since(time.Unix(0, c.lastRefresh.Load())) < c.cfg.retryBackoff {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.requestTimeout)
	defer cancel()
	_ = c.cl.refresh(ctx, nil)
	c.lastRefresh.Store(time.Now().UnixNano())
}

// fetchReport is one partition's outcome for OnFetchError (err nil: a
// partition reported failing fetched cleanly).
type fetchReport struct {
	tp  TopicPartition
	err error
}

func (c *Consumer) handleFetch(resp *pb.FetchResponse) error {
	var reports []fetchReport
	err := c.handleFetchLocked(resp, &reports)
	if f := c.cfg.onFetchError; f != nil {
		for _, r := range reports {
			f(r.tp, r.err)
		}
	}
	return err
}

// noteFetch records tp's outcome for OnFetchError: a retried error, or
// (err nil) a clean answer after one. Called with c.mu held.
func (c *Consumer) noteFetch(reports *[]fetchReport, tp TopicPartition, err error) {
	if c.cfg.onFetchError == nil {
		return
	}
	if err != nil {
		if c.failing == nil {
			c.failing = map[TopicPartition]bool{}
		}
		c.failing[tp] = true
		*reports = append(*reports, fetchReport{tp, err})
	} else if c.failing[tp] {
		delete(c.failing, tp)
		*reports = append(*reports, fetchReport{tp, nil})
	}
}

func (c *Consumer) handleFetchLocked(resp *pb.FetchResponse, reports *[]fetchReport) error {
	if err := errs.FromCode(resp.ErrorCode, resp.ErrorMessage); err != nil {
		// The whole request was refused (a fetch session's error,
		// INVALID_REQUEST): retriable ones are tried again, as a
		// partition's are.
		if errs.IsRetriable(err) {
			c.retried.Store(true)
			go c.refreshSoon()
			return nil
		}
		return fmt.Errorf("fetch: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var firstErr error
	for _, pr := range resp.Partitions {
		tp := TopicPartition{pr.Topic, pr.Partition}
		cp := c.assigned[tp]
		if cp == nil {
			continue
		}
		switch pr.ErrorCode {
		case pb.ErrorCode_NONE:
		case pb.ErrorCode_OFFSET_OUT_OF_RANGE:
			// As Kafka's consumer, say so: a reset re-reads or skips
			// records, and an operator needs to know why.
			c.cl.lg.Info("fetch position out of range; resetting", "partition", tp.String(), "position", cp.pos,
				"logStart", pr.LogStartOffset, "highWatermark", pr.HighWatermark, "reset", c.cfg.offsetReset, "msg", pr.ErrorMessage)
			switch c.cfg.offsetReset {
			case ResetEarliest:
				cp.pos = OffsetEarliest
			case ResetLatest:
				cp.pos = OffsetLatest
			default:
				if firstErr == nil {
					firstErr = fmt.Errorf("%s at offset %d: %w", tp, cp.pos, errs.FromCode(pr.ErrorCode, pr.ErrorMessage))
				}
			}
			continue
		default:
			err := errs.FromCode(pr.ErrorCode, pr.ErrorMessage)
			if errs.IsRetriable(err) {
				c.noteFetch(reports, tp, err)
				c.cl.markStale(tp)
				c.retried.Store(true)
				go c.refreshSoon()
				continue
			}
			if firstErr == nil {
				firstErr = fmt.Errorf("fetch %s: %w", tp, err)
			}
			continue
		}
		c.noteFetch(reports, tp, nil)
		cp.hw, cp.lso = pr.HighWatermark, pr.LastStableOffset
		recs, next, err := decodeFetched(tp, pr, cp.pos, c.cfg.isolation == ReadCommitted)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		c.buffered = append(c.buffered, recs...)
		if next > cp.pos {
			cp.pos = next
		}
	}
	return firstErr
}

// decodeFetched turns fetched batches into records from offset on. Under
// read_committed it drops the batches of aborted transactions (using the
// aborted list of the response, as Kafka's consumer does) and every control
// batch. It returns the position after the last batch.
func decodeFetched(tp TopicPartition, pr *pb.FetchPartitionResponse, from int64, readCommitted bool) ([]*Record, int64, error) {
	aborted := append([]*pb.AbortedTransaction(nil), pr.AbortedTransactions...)
	sort.Slice(aborted, func(i, j int) bool { return aborted[i].FirstOffset < aborted[j].FirstOffset })
	abortedPIDs := map[int64]bool{}
	var out []*Record
	next := from
	it := record.NewIter(pr.Records)
	for it.Next() {
		h := it.Header()
		if h.NextOffset() <= from {
			continue
		}
		next = h.NextOffset()
		if readCommitted {
			for len(aborted) > 0 && aborted[0].FirstOffset <= h.LastOffset() {
				abortedPIDs[aborted[0].ProducerId] = true
				aborted = aborted[1:]
			}
			if h.IsControl() {
				if typ, _, err := record.ReadControlBatch(it.Batch()); err == nil && typ == record.ControlAbort {
					delete(abortedPIDs, h.ProducerID)
				}
				continue
			}
			if h.IsTransactional() && abortedPIDs[h.ProducerID] {
				continue
			}
		} else if h.IsControl() {
			continue
		}
		_, recs, err := record.Decode(it.Batch())
		if err != nil {
			return out, next, fmt.Errorf("%s at offset %d: %w", tp, h.BaseOffset, err)
		}
		for _, r := range recs {
			if r.Offset < from {
				continue
			}
			rec := &Record{Topic: tp.Topic, Partition: tp.Partition, Key: r.Key, Value: r.Value, Offset: r.Offset,
				Timestamp: time.UnixMilli(r.Timestamp), LeaderEpoch: h.PartitionLeaderEpoch, ProducerID: h.ProducerID,
				ProducerEpoch: h.ProducerEpoch, Transactional: h.IsTransactional()}
			for _, hd := range r.Headers {
				rec.Headers = append(rec.Headers, Header{Key: hd.Key, Value: hd.Value})
			}
			out = append(out, rec)
		}
	}
	if err := it.Err(); err != nil {
		return out, next, fmt.Errorf("%s: %w", tp, err)
	}
	return out, next, nil
}

// resetPositions resolves OffsetEarliest/OffsetLatest positions with ListOffsets.
func (c *Consumer) resetPositions(ctx context.Context) error {
	c.mu.Lock()
	var need []*cpart
	for _, cp := range c.assigned {
		if cp.pos < 0 {
			need = append(need, cp)
		}
	}
	c.mu.Unlock()
	if len(need) == 0 {
		return nil
	}
	adm := &Admin{cfg: c.cfg, cl: c.cl}
	var tps []TopicPartition
	want := map[TopicPartition]int64{}
	for _, cp := range need {
		tps = append(tps, cp.tp)
		want[cp.tp] = cp.pos
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout)
	defer cancel()
	earliest, errE := adm.listOffsets(rctx, tps, OffsetEarliest, c.cfg.isolation)
	latest, errL := adm.listOffsets(rctx, tps, OffsetLatest, c.cfg.isolation)
	if err := errors.Join(errE, errL); err != nil && len(earliest) == 0 && len(latest) == 0 {
		return nil // retriable, or ctx ended: retried at the next poll
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var firstErr error
	for tp, w := range want {
		cp := c.assigned[tp]
		if cp == nil || cp.pos != w {
			continue
		}
		src := latest
		if w == OffsetEarliest {
			src = earliest
		}
		o, ok := src[tp]
		switch {
		case !ok:
		case o.Err == nil:
			cp.pos = o.Offset
		case firstErr == nil:
			// Not retriable (listOffsets retried the others): the
			// partition has no position to read from.
			firstErr = fmt.Errorf("strand: resetting the offset of %s: %w", tp, o.Err)
		}
	}
	return firstErr
}

// Close leaves the group (if any) and releases connections. With
// auto-commit on, a group consumer first commits its positions and
// returns that commit's error (see CommitOffsets), if any.
func (c *Consumer) Close(ctx context.Context) error {
	var err error
	if c.group != nil {
		err = c.group.close(ctx)
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cl.close()
	return err
}
