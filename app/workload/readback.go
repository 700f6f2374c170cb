package workload

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/strand-io/strand/app/verify"
	"github.com/strand-io/strand/client"
)

// drainStage waits until the stage group's committed offsets reach the
// end of every source partition.
//
// A partition whose transaction stays open (LSO below HW) holds the stage
// back for good if nobody ends it: past the hang deadline the wait gives
// up (the read-back reports the partition as hanging).
func (r *run) drainStage(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	tps := r.partitions(r.src)
	behind := ""
	for time.Now().Before(deadline) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ends, err := r.admin.ListOffsets(cctx, tps, client.OffsetLatest, client.ReadCommitted)
		var got map[client.TopicPartition]int64
		if err == nil {
			got, err = r.admin.CommittedOffsets(cctx, r.group, tps)
		}
		cancel()
		if err == nil {
			behind = ""
			open := false
			for _, tp := range tps {
				end := ends[tp]
				if end.LastStableOffset < end.HighWatermark {
					behind = fmt.Sprintf("%s has an open transaction (LSO %d < HW %d)", tp, end.LastStableOffset, end.HighWatermark)
					open = true
					break
				}
				if got[tp] < end.LastStableOffset && end.LastStableOffset > 0 {
					// The last records of a partition may be markers only: the
					// stage's position can stop short of the LSO only by them.
					if !r.onlyMarkersFrom(ctx, tp, got[tp], end.LastStableOffset) {
						behind = fmt.Sprintf("%s committed %d of %d", tp, got[tp], end.LastStableOffset)
						break
					}
				}
			}
			if behind == "" {
				return nil
			}
			if open && time.Now().After(r.hangDeadline) {
				return fmt.Errorf("the stage cannot catch up: %s, %s after the producers stopped", behind, r.cfg.HangGrace)
			}
		} else {
			behind = err.Error()
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	return fmt.Errorf("the stage did not catch up within %s: %s", timeout, behind)
}

// onlyMarkersFrom reports whether tp holds no committed data record in
// [from, to): the stage consumed everything.
func (r *run) onlyMarkersFrom(ctx context.Context, tp client.TopicPartition, from, to int64) bool {
	if from < 0 {
		from = 0
	}
	c, err := r.newReader(client.ReadCommitted, 100*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close(context.WithoutCancel(ctx))
	c.Assign(map[client.TopicPartition]int64{tp: from})
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	for c.Position(tp) < to {
		recs, err := c.Poll(cctx)
		if err != nil {
			return false
		}
		if len(recs) > 0 {
			return false
		}
	}
	return true
}

// readBack waits for every transaction on the topics to end, then reads
// every partition from the start to its end with both isolation levels,
// and collects the stage group's offsets.
func (r *run) readBack(ctx context.Context) (*verify.History, error) {
	var tps []client.TopicPartition
	for _, t := range r.topics() {
		tps = append(tps, r.partitions(t)...)
	}
	// Transactions left open by a dead client end by the coordinator's
	// timeout: wait HangGrace for them. A partition still open then holds
	// a transaction nobody will end: hanging (History.OpenAtEnd).
	h := &verify.History{SourceTopic: r.src, SinkTopic: r.dst, Transform: verify.TransformRule}
	deadline := r.hangDeadline
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ends, err := r.admin.ListOffsets(cctx, tps, client.OffsetLatest, client.ReadCommitted)
		cancel()
		var open []client.TopicPartition
		if err == nil {
			for _, tp := range tps {
				if ends[tp].LastStableOffset != ends[tp].HighWatermark {
					open = append(open, tp)
				}
			}
			if len(open) == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				return nil, fmt.Errorf("the partitions' ends cannot be read: %w", err)
			}
			for _, tp := range open {
				o := verify.OpenPartition{TP: verify.TP{Topic: tp.Topic, Partition: tp.Partition}, HighWatermark: ends[tp].HighWatermark,
					LastStableOffset: ends[tp].LastStableOffset, Waited: time.Since(r.hangDeadline.Add(-r.cfg.HangGrace)).Seconds(),
					Blocking: r.blocking(ctx, tp, ends[tp].LastStableOffset)}
				r.logf("workload: %s is hanging: LSO %d < HW %d after %.0fs; %s", tp, o.LastStableOffset, o.HighWatermark, o.Waited, o.Blocking)
				h.OpenAtEnd = append(h.OpenAtEnd, o)
			}
			break
		}
		if err := sleep(ctx, time.Second); err != nil {
			return nil, err
		}
	}
	for _, iso := range []client.IsolationLevel{client.ReadCommitted, client.ReadUncommitted} {
		reads, err := r.readAll(ctx, tps, iso)
		if err != nil {
			return nil, err
		}
		h.Reads = append(h.Reads, reads...)
	}
	if r.dst != "" {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		got, err := r.admin.CommittedOffsets(cctx, r.group, r.partitions(r.src))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("group offsets: %w", err)
		}
		for _, tp := range r.partitions(r.src) {
			if off, ok := got[tp]; ok && off >= 0 {
				h.GroupOffsets = append(h.GroupOffsets, verify.TPOffset{TP: verify.TP{Topic: tp.Topic, Partition: tp.Partition}, Offset: off})
			}
		}
	}
	r.mu.Lock()
	h.Txns = append(h.Txns, r.txns...)
	h.Reads = append(h.Reads, r.reads...)
	h.Incarnations = append(h.Incarnations, r.incarnations...)
	h.Spans = append(h.Spans, r.spans...)
	r.mu.Unlock()
	sort.SliceStable(h.Txns, func(i, j int) bool { return h.Txns[i].Begin.Before(h.Txns[j].Begin) })
	return h, nil
}

// readAll reads tps from the start to their end (LSO or HW) with iso.
func (r *run) readAll(ctx context.Context, tps []client.TopicPartition, iso client.IsolationLevel) ([]verify.Read, error) {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	ends, err := r.admin.ListOffsets(cctx, tps, client.OffsetLatest, iso)
	if err != nil {
		return nil, err
	}
	c, err := r.newReader(iso, 100*time.Millisecond)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	assign := map[client.TopicPartition]int64{}
	for _, tp := range tps {
		assign[tp] = client.OffsetEarliest
	}
	c.Assign(assign)
	name := map[client.IsolationLevel]string{client.ReadCommitted: "final-rc", client.ReadUncommitted: "final-ru"}[iso]
	var out []verify.Read
	for {
		done := true
		for _, tp := range tps {
			end := ends[tp].HighWatermark
			if iso == client.ReadCommitted {
				end = ends[tp].LastStableOffset
			}
			if c.Position(tp) < end {
				done = false
			}
		}
		if done {
			return out, nil
		}
		recs, err := c.Poll(cctx)
		if err != nil {
			if cctx.Err() != nil {
				return nil, fmt.Errorf("%s read-back did not finish: %w", name, err)
			}
			continue
		}
		for _, rec := range recs {
			out = append(out, verify.Read{Reader: name, ReadCommitted: iso == client.ReadCommitted, Final: true,
				TP: verify.TP{Topic: rec.Topic, Partition: rec.Partition}, Offset: rec.Offset, Value: string(rec.Value)})
		}
	}
}

// liveReader follows every partition with read_committed while the
// workload runs; it checks that nothing is visible before its commit.
func (r *run) liveReader(ctx context.Context, stop <-chan struct{}) {
	var c recordReader
	positions := map[client.TopicPartition]int64{}
	var tps []client.TopicPartition
	for _, t := range r.topics() {
		tps = append(tps, r.partitions(t)...)
	}
	for _, tp := range tps {
		positions[tp] = client.OffsetEarliest
	}
	defer func() {
		if c != nil {
			c.Close(context.WithoutCancel(ctx))
		}
	}()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		if c == nil {
			var err error
			c, err = r.newReader(client.ReadCommitted, 200*time.Millisecond)
			if err != nil {
				sleep(ctx, time.Second)
				continue
			}
			c.Assign(positions)
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		recs, err := c.Poll(pctx)
		cancel()
		now := time.Now()
		if len(recs) > 0 {
			r.mu.Lock()
			for _, rec := range recs {
				r.reads = append(r.reads, verify.Read{Reader: "live-rc", ReadCommitted: true, Time: now,
					TP: verify.TP{Topic: rec.Topic, Partition: rec.Partition}, Offset: rec.Offset, Value: string(rec.Value)})
			}
			r.mu.Unlock()
			r.liveReads.Add(int64(len(recs)))
		}
		for _, tp := range tps {
			if p := c.Position(tp); p >= 0 {
				positions[tp] = p
			}
		}
		if err != nil && ctx.Err() == nil && pctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			// Recreate the consumer from its positions after a hard error.
			c.Close(context.WithoutCancel(ctx))
			c = nil
			sleep(ctx, 500*time.Millisecond)
		}
	}
}
