package storage

import (
	"context"
	"errors"
	"time"

	"github.com/strand-io/strand/record"
)

// The log cleaner's API: compaction of a log whose topic has
// cleanup.policy=compact. The broker's cleaner manager (broker package)
// picks the dirtiest log with CleanableState and cleans it with Clean.
// The rules a pass follows and its steps are in cleaner_pass.go, the
// crash-safe swap of the cleaned segments in cleaner_swap.go.

// CleanOptions are one cleaning pass's parameters: the topic's configs and
// the broker's.
type CleanOptions struct {
	// UpperBound: nothing at or above it is cleaned. The caller passes
	// min(high watermark, first unstable offset); the active segment is
	// never cleaned either.
	UpperBound int64
	// NowMs is the cleaner's clock (delete horizons, compaction lag).
	NowMs int64
	// DeleteRetentionMs is delete.retention.ms: how long a tombstone, and
	// a transaction marker whose data is all gone, stay after the pass
	// that first cleaned them (KIP-534's delete horizon).
	DeleteRetentionMs int64
	// MinCompactionLagMs is min.compaction.lag.ms: a segment with a record
	// newer than this stays dirty.
	MinCompactionLagMs int64
	// MaxMapEntries bounds the key → offset map (from
	// log.cleaner.dedupe.buffer.size); a dirty section with more keys is
	// cleaned in part, up to where the map filled.
	MaxMapEntries int
	// MaxSegmentBytes is segment.bytes: cleaned segments are grouped so
	// that one output segment stays below it.
	MaxSegmentBytes int64
	// Throttle, if not nil, is called with the bytes read and written as
	// the pass goes (log.cleaner.io.max.bytes.per.second); an error from
	// it (ctx ended) stops the pass, leaving the log as it was.
	Throttle func(ctx context.Context, bytes int) error
}

// CleanStats describe one pass.
type CleanStats struct {
	// FirstDirty is where the pass's dirty section began; NextDirty the
	// new clean checkpoint (the next pass's FirstDirty).
	FirstDirty, NextDirty         int64
	BytesRead, BytesWritten       int64
	RecordsRead, RecordsWritten   int64
	SegmentsBefore, SegmentsAfter int
	Elapsed                       time.Duration
}

// Cleanable is what the manager needs to choose a log.
type Cleanable struct {
	// FirstDirty is the clean checkpoint (the log start when none).
	FirstDirty int64
	// FirstUncleanable is where cleaning must stop: the smallest of the
	// upper bound, the active segment's base and the base of the first
	// segment with a record newer than min.compaction.lag.ms.
	FirstUncleanable int64
	// CleanBytes are the bytes below FirstDirty, DirtyBytes those in
	// [FirstDirty, FirstUncleanable); DirtyRatio is
	// DirtyBytes / (CleanBytes + DirtyBytes), 0 when both are 0.
	CleanBytes, DirtyBytes int64
	DirtyRatio             float64
	// OldestDirtyMs is the smallest record timestamp in the dirty section
	// ([FirstDirty, log end)), -1 when there is none (for
	// max.compaction.lag.ms). As in Kafka it is taken from the first batch
	// of each dirty segment, not from every record.
	OldestDirtyMs int64
	// DeleteHorizonMs is the earliest delete horizon the last pass left
	// on a batch (a tombstone or an emptied transaction's marker), -1
	// when none or unknown (not kept across restarts): from then on a pass
	// removes something even with no dirty bytes (KIP-534).
	DeleteHorizonMs int64
	// Damaged: a segment recovery fenced stops cleaning at its base
	// (Kafka counts such logs in uncleanable-partitions-count).
	Damaged bool
}

// ErrCleanAborted: the log changed under the pass (truncated, deleted,
// closed) or ctx ended; nothing was swapped in.
var ErrCleanAborted = errors.New("storage: cleaning aborted")

// CleanableState reports how dirty the log is.
func (l *Log) CleanableState(upperBound, nowMs, minCompactionLagMs int64) Cleanable {
	l.mu.RLock()
	defer l.mu.RUnlock()
	firstDirty, fu := l.cleanBoundsLocked(upperBound, nowMs, minCompactionLagMs)
	c := Cleanable{FirstDirty: firstDirty, FirstUncleanable: fu, OldestDirtyMs: -1, DeleteHorizonMs: l.deleteHorizonMs}
	active := l.active()
	for _, s := range l.segs {
		c.Damaged = c.Damaged || s.damaged
		switch {
		case s.next <= firstDirty && s != active:
			c.CleanBytes += s.size
		case s.next <= fu && s != active:
			c.DirtyBytes += s.size
		}
		// As Kafka does for max.compaction.lag.ms: the dirty segments'
		// first batch timestamps stand for the oldest dirty record.
		if s.next > firstDirty && s.size > 0 {
			pos := int64(0)
			if s.base < firstDirty {
				p, _, ok, err := s.findBatch(firstDirty)
				if err != nil || !ok {
					continue
				}
				pos = p
			}
			if s.skipDamaged(pos) {
				continue
			}
			hb, err := s.readAt(pos, record.HeaderSize)
			if err != nil {
				continue
			}
			h, _ := record.ParseHeader(hb)
			ts := h.FirstTimestamp
			if h.LogAppendTime() || h.HasDeleteHorizon() {
				ts = h.MaxTimestamp
			}
			if ts >= 0 && (c.OldestDirtyMs < 0 || ts < c.OldestDirtyMs) {
				c.OldestDirtyMs = ts
			}
		}
	}
	if total := c.CleanBytes + c.DirtyBytes; total > 0 {
		c.DirtyRatio = float64(c.DirtyBytes) / float64(total)
	}
	return c
}

// Clean compacts the log once (the rules are at the top of this file).
// The reading and writing happen without the log's lock, so reads and
// appends go on; only the swap takes it.
func (l *Log) Clean(ctx context.Context, o CleanOptions) (CleanStats, error) {
	start := time.Now()
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	p, err := l.planClean(o)
	if err != nil {
		return CleanStats{}, err
	}
	st := CleanStats{FirstDirty: p.firstDirty, NextDirty: p.firstDirty, SegmentsBefore: len(p.segs) - 1}
	if len(p.segs) < 2 {
		st.Elapsed = time.Since(start)
		return st, nil
	}
	// The reading and rewriting take no lock of the log's; the plan before
	// and the swap after do.
	outs, c, newCheckpoint, err := l.readAndRewrite(ctx, p, o, &st)
	if err != nil {
		removeOutputs(outs)
		return st, l.abortedIfChanged(p, err)
	}
	err = l.swapHook.step("written")
	if err == nil {
		err = l.swapCleaned(p, outs, newCheckpoint, c.horizon)
	}
	if err != nil {
		if !errors.Is(err, errCrashForTest) {
			removeOutputs(outs)
		}
		return st, err
	}
	st.NextDirty = newCheckpoint
	st.SegmentsAfter = len(outs)
	st.Elapsed = time.Since(start)
	return st, nil
}

// readAndRewrite builds the key map over the dirty section and writes the
// cleaned segments (without the log's lock). On an error the outputs
// written so far are returned for removal.
func (l *Log) readAndRewrite(ctx context.Context, p *cleanPlan, o CleanOptions, st *CleanStats) ([]*output, *cleaner, int64, error) {
	keys, mapEnd, err := l.buildOffsetMap(ctx, p, o, st)
	if err != nil {
		return nil, nil, 0, err
	}
	// The map filled early: only the segments below where it stopped.
	if mapEnd < p.end {
		k := 0
		for k < len(p.segs)-1 && p.segs[k+1].base <= mapEnd {
			k++
		}
		p.segs, p.sizes, p.nexts, p.end = p.segs[:k+1], p.sizes[:k+1], p.nexts[:k+1], p.segs[k].base
		st.SegmentsBefore = k
	}
	newCheckpoint := max(p.firstDirty, p.end)
	c := &cleaner{l: l, p: p, o: o, keys: keys, st: st, observed: map[AbortedTxn]bool{}, committed: map[int64]bool{}, horizon: -1}
	outs, err := c.rewrite(ctx)
	return outs, c, newCheckpoint, err
}
