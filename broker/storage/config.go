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
	// Stats, if not nil, counts this log's flushes; a broker's logs share one.
	Stats *Stats
	// Files, if not nil, bounds the segment files open; a broker's logs share one.
	Files *FileCache
	// Logger gets recovery's warnings (nil: slog.Default()).
	Logger *slog.Logger
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
	}
}

// SyncEveryWrite reports whether every batch must be on disk before the high
// watermark may pass it (flush.messages=1).
func (c Config) SyncEveryWrite() bool { return c.FlushMessages <= 1 }
