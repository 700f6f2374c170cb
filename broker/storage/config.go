package storage

import (
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Config is a partition log's configuration. Field names follow Kafka's
// topic-level settings (broker-level names in parentheses).
type Config struct {
	// SegmentBytes rolls the active segment at this size (segment.bytes / log.segment.bytes).
	SegmentBytes int64
	// SegmentMs rolls a segment this old (segment.ms / log.roll.ms).
	SegmentMs int64
	// RetentionMs deletes segments whose newest record is older; -1 keeps forever
	// (retention.ms / log.retention.ms).
	RetentionMs int64
	// RetentionBytes deletes the oldest segments beyond this size; -1 no limit
	// (retention.bytes / log.retention.bytes).
	RetentionBytes int64
	// IndexIntervalBytes is the spacing of offset-index entries (index.interval.bytes).
	IndexIntervalBytes int
	// FlushMessages fsyncs after this many messages; 1 = before every
	// acknowledgement (flush.messages / log.flush.interval.messages).
	FlushMessages int64
	// FlushMs fsyncs data older than this (flush.ms / log.flush.interval.ms).
	FlushMs int64
	// ProducerIDExpirationMs forgets idle producers (producer.id.expiration.ms).
	ProducerIDExpirationMs int64
	// Cleanup is cleanup.policy (log.cleanup.policy). The zero value is
	// delete: old segments go by retention.ms and retention.bytes, and the
	// cleaner leaves the log alone.
	Cleanup CleanupPolicy
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio
	// (log.cleaner.min.cleanable.ratio): the cleaner cleans a compacted log
	// once this share of it is dirty.
	MinCleanableDirtyRatio float64
	// MinCompactionLagMs is min.compaction.lag.ms
	// (log.cleaner.min.compaction.lag.ms): a record stays uncompacted at
	// least this long.
	MinCompactionLagMs int64
	// MaxCompactionLagMs is max.compaction.lag.ms
	// (log.cleaner.max.compaction.lag.ms): a record dirty this long makes
	// its log eligible whatever its dirty ratio.
	MaxCompactionLagMs int64
	// DeleteRetentionMs is delete.retention.ms
	// (log.cleaner.delete.retention.ms): how long a tombstone outlives the
	// pass that first cleaned it.
	DeleteRetentionMs int64
	// Stats, if not nil, counts this log's flushes; a broker's logs share one.
	Stats *Stats
	// Files, if not nil, bounds the segment files open; a broker's logs share one.
	Files *FileCache
	// Logger gets recovery's warnings (nil: slog.Default()).
	Logger *slog.Logger
	// FS is the file system the log's files are on (nil: OSFS, the real
	// one). A broker's logs share one; a simulation gives each node its
	// own simulated disk (testkit/simdisk). A log keeps the FS it was
	// opened with: SetConfig does not move it.
	FS FS
}

// CleanupPolicy is a log's cleanup.policy. The zero value is delete.
type CleanupPolicy uint8

const (
	// CleanupDelete deletes old segments by retention.ms and retention.bytes.
	CleanupDelete CleanupPolicy = iota
	// CleanupCompact keeps each key's last record (the cleaner); nothing is
	// deleted by retention.
	CleanupCompact
	// CleanupCompactDelete does both.
	CleanupCompactDelete
)

// Compact reports whether the cleaner compacts the log.
func (p CleanupPolicy) Compact() bool { return p == CleanupCompact || p == CleanupCompactDelete }

// Delete reports whether retention deletes old segments.
func (p CleanupPolicy) Delete() bool { return p != CleanupCompact }

// String is the policy as Kafka writes it.
func (p CleanupPolicy) String() string {
	switch p {
	case CleanupCompact:
		return "compact"
	case CleanupCompactDelete:
		return "compact,delete"
	}
	return "delete"
}

// Stats counts the fsyncs of a broker's logs (Kafka's LogFlushRateAndTimeMs)
// and reports the first of them that failed. The zero value is ready.
type Stats struct {
	Flushes    atomic.Int64 // flushes that fsynced segment files
	FlushNanos atomic.Int64 // the time those fsyncs took
	// RecoveryTruncatedBytes counts the bytes recovery cut from torn tails
	// of active segments; RecoveryFencedBytes those it found damaged in
	// segments it must not cut, kept on disk and no longer served.
	RecoveryTruncatedBytes atomic.Int64
	RecoveryFencedBytes    atomic.Int64

	mu      sync.Mutex
	failed  chan struct{} // closed at the first failed fsync
	failErr error
}

// StorageFailed is closed when an fsync of any log sharing these stats
// fails (the broker's storage is no longer trusted; StorageErr says why).
func (s *Stats) StorageFailed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failedLocked()
}

func (s *Stats) failedLocked() chan struct{} {
	if s.failed == nil {
		s.failed = make(chan struct{})
	}
	return s.failed
}

// StorageErr is the first failed fsync, or nil.
func (s *Stats) StorageErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failErr
}

func (s *Stats) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failErr != nil {
		return
	}
	s.failErr = err
	close(s.failedLocked())
}

// DefaultConfig is Kafka's defaults: 1 GiB segments, 7 days, no size limit,
// and no fsync except on segment roll and clean shutdown (durability comes
// from replication).
func DefaultConfig() Config {
	return Config{
		SegmentBytes:           1 << 30,
		SegmentMs:              int64(7 * 24 * time.Hour / time.Millisecond),
		RetentionMs:            int64(7 * 24 * time.Hour / time.Millisecond),
		RetentionBytes:         -1,
		IndexIntervalBytes:     4096,
		FlushMessages:          math.MaxInt64,
		FlushMs:                math.MaxInt64,
		ProducerIDExpirationMs: int64(24 * time.Hour / time.Millisecond),
		MinCleanableDirtyRatio: 0.5,
		MinCompactionLagMs:     0,
		MaxCompactionLagMs:     math.MaxInt64,
		DeleteRetentionMs:      int64(24 * time.Hour / time.Millisecond),
	}
}

// SyncEveryWrite reports whether every batch must be on disk before the high
// watermark may pass it (flush.messages=1).
func (c Config) SyncEveryWrite() bool { return c.FlushMessages <= 1 }
