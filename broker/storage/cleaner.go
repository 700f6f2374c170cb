package storage

import (
	"context"
	"errors"
	"time"
)

// The log cleaner's API (issue 20): compaction of a log whose topic has
// cleanup.policy=compact. The broker's cleaner manager (broker package)
// picks the dirtiest log with CleanableState and cleans it with Clean.
// The pass itself is in cleaner_pass.go, the crash-safe swap of the
// cleaned segments in cleaner_swap.go.

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
	// max.compaction.lag.ms).
	OldestDirtyMs int64
}

// ErrCleanAborted: the log changed under the pass (truncated, deleted,
// closed) or ctx ended; nothing was swapped in.
var ErrCleanAborted = errors.New("storage: cleaning aborted")
