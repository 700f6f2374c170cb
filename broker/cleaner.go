package broker

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/clock"
)

// CleanerConfig is the broker's log cleaner configuration, with Kafka's
// names and defaults (the topic-level knobs are in storage.Config).
type CleanerConfig struct {
	// Enable is log.cleaner.enable: without it compacted topics are never
	// cleaned and grow.
	Enable bool
	// Threads is log.cleaner.threads: how many logs are cleaned at once.
	Threads int
	// DedupeBufferSize is log.cleaner.dedupe.buffer.size: the memory of
	// the key → offset maps, shared by the threads.
	DedupeBufferSize int64
	// IOMaxBytesPerSecond is log.cleaner.io.max.bytes.per.second: the
	// bytes the threads together read and write per second (Kafka's
	// default, Double.MAX_VALUE, is no limit).
	IOMaxBytesPerSecond float64
	// Backoff is log.cleaner.backoff.ms: a thread's sleep when no log
	// needs cleaning.
	Backoff time.Duration
}

// DefaultCleanerConfig is Kafka's defaults.
func DefaultCleanerConfig() CleanerConfig {
	return CleanerConfig{
		Enable:              true,
		Threads:             1,
		DedupeBufferSize:    128 << 20,
		IOMaxBytesPerSecond: math.MaxFloat64,
		Backoff:             15 * time.Second,
	}
}

// bytesPerMapEntry is what one key costs in Kafka's SkimpyOffsetMap: a
// 16-byte MD5 of the key and an 8-byte offset. The dedupe buffer divided
// by it bounds the keys one pass can remember.
const bytesPerMapEntry = 24

// cleanerLog is what the cleaner needs of a log: *storage.Log, or a fake
// in tests.
type cleanerLog interface {
	CleanableState(upperBound, nowMs, minCompactionLagMs int64) storage.Cleanable
	Clean(ctx context.Context, o storage.CleanOptions) (storage.CleanStats, error)
}

// cleanCandidate is a compacted log of this broker as one survey sees it.
type cleanCandidate struct {
	key storage.PartitionKey
	log cleanerLog
	cfg storage.Config
	// upperBound is min(HW, first unstable offset): nothing a reader
	// could still see change, and no open transaction, is cleaned.
	upperBound int64
}

// CleanerMetrics are the cleaner's gauges, under Kafka's names (LogCleaner
// and LogCleanerManager).
type CleanerMetrics struct {
	// MaxDirtyPercent (max-dirty-percent): the dirty share of the last log
	// chosen, 0 when the last survey found nothing to clean.
	MaxDirtyPercent float64
	// RecopyPercent (cleaner-recopy-percent): bytes written over bytes read
	// by each thread's last pass, together.
	RecopyPercent float64
	// MaxCleanTimeSecs (max-clean-time-secs): the longest of the threads'
	// last passes.
	MaxCleanTimeSecs float64
	// MaxBufferUtilizationPercent (max-buffer-utilization-percent): the
	// fullest key map of the threads' last passes. CleanStats does not say
	// how many keys the map held, so this counts the offsets the pass
	// cleaned past (NextDirty − FirstDirty), an upper bound of the keys.
	MaxBufferUtilizationPercent float64
	// UncleanablePartitions (uncleanable-partitions-count): logs whose
	// cleaning failed; they are skipped until the partition is deleted.
	UncleanablePartitions int
	// DirtyRatio is each compacted log's dirty ratio at the last survey.
	DirtyRatio map[storage.PartitionKey]float64
}

// lastPass is one thread's last finished pass, for the gauges.
type lastPass struct {
	stats   storage.CleanStats
	mapSize int
}

// cleaner is the broker's log cleaner (Kafka's LogCleaner and
// LogCleanerManager): Threads goroutines, each taking the dirtiest
// compacted log that no other thread holds and cleaning it. Every replica
// cleans its own log, leader or follower, as in Kafka. The Manager owns
// it: the goroutines run under the Manager's context and WaitGroup.
type cleaner struct {
	cfg        CleanerConfig
	clk        clock.Clock
	lg         *slog.Logger
	candidates func() []cleanCandidate
	throttle   *byteThrottle

	// backoff is log.cleaner.backoff.ms in force (a dynamic broker
	// config); backoffChanged is closed and replaced when it changes, so
	// a thread sleeping the old one looks again at once.
	backoffMu      sync.Mutex
	backoff        time.Duration
	backoffChanged chan struct{}

	mu          sync.Mutex
	inProgress  map[cleanerLog]bool
	uncleanable map[cleanerLog]storage.PartitionKey
	dirty       map[storage.PartitionKey]float64
	maxDirty    float64
	last        []lastPass
}

func newCleaner(cfg CleanerConfig, clk clock.Clock, lg *slog.Logger, candidates func() []cleanCandidate) *cleaner {
	if cfg.Threads < 1 {
		cfg.Threads = 1
	}
	return &cleaner{
		cfg: cfg, clk: clk, lg: lg, candidates: candidates,
		throttle: newByteThrottle(cfg.IOMaxBytesPerSecond, clk),
		backoff:  cfg.Backoff, backoffChanged: make(chan struct{}),
		inProgress:  map[cleanerLog]bool{},
		uncleanable: map[cleanerLog]storage.PartitionKey{},
		dirty:       map[storage.PartitionKey]float64{},
		last:        make([]lastPass, cfg.Threads),
	}
}

// start runs the threads until ctx ends; wg tracks them.
func (c *cleaner) start(ctx context.Context, wg *sync.WaitGroup) {
	for i := 0; i < c.cfg.Threads; i++ {
		wg.Add(1)
		go func(thread int) {
			defer wg.Done()
			c.run(ctx, thread)
		}(i)
	}
}

// mapEntries is one thread's share of the dedupe buffer, in keys.
func (c *cleaner) mapEntries() int {
	n := c.cfg.DedupeBufferSize / int64(c.cfg.Threads) / bytesPerMapEntry
	return int(min(max(n, 1), math.MaxInt32))
}

func (c *cleaner) run(ctx context.Context, thread int) {
	for ctx.Err() == nil {
		cand, ok := c.grab(c.clk.Now().UnixMilli())
		if !ok {
			c.sleep(ctx)
			continue
		}
		if progressed := c.clean(ctx, thread, cand); !progressed {
			// A pass that moved nothing (the log's dirty section cannot be
			// cleaned yet) would be chosen again at once: wait instead.
			c.sleep(ctx)
		}
	}
}

// sleep waits log.cleaner.backoff.ms on the cleaner's clock, or until ctx
// ends or the backoff is changed (Kafka restarts its cleaner threads on a
// change, so they too look again at once).
func (c *cleaner) sleep(ctx context.Context) {
	c.backoffMu.Lock()
	d, changed := c.backoff, c.backoffChanged
	c.backoffMu.Unlock()
	t := c.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C():
	case <-changed:
	}
}

// setBackoff changes log.cleaner.backoff.ms (altered at run time).
func (c *cleaner) setBackoff(d time.Duration) {
	c.backoffMu.Lock()
	defer c.backoffMu.Unlock()
	if d == c.backoff {
		return
	}
	c.backoff = d
	close(c.backoffChanged)
	c.backoffChanged = make(chan struct{})
}

// backoffNow is log.cleaner.backoff.ms in force.
func (c *cleaner) backoffNow() time.Duration {
	c.backoffMu.Lock()
	defer c.backoffMu.Unlock()
	return c.backoff
}

// grab surveys the compacted logs, records their dirty ratios, and takes
// the dirtiest eligible one that no thread holds and whose cleaning never
// failed: eligible when its dirty ratio reaches min.cleanable.dirty.ratio,
// or when a dirty record is older than max.compaction.lag.ms (Kafka's
// LogCleanerManager.grabFilthiestCompactedLog).
func (c *cleaner) grab(nowMs int64) (cleanCandidate, bool) {
	cands := c.candidates()
	// The logs are asked outside c.mu: a log busy swapping segments in
	// must not hold up the other threads or a metrics scrape.
	states := make([]storage.Cleanable, len(cands))
	for i, cand := range cands {
		states[i] = cand.log.CleanableState(cand.upperBound, nowMs, cand.cfg.MinCompactionLagMs)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	live := make(map[cleanerLog]bool, len(cands))
	dirty := make(map[storage.PartitionKey]float64, len(cands))
	var best cleanCandidate
	bestRatio, found := -1.0, false
	for i, cand := range cands {
		live[cand.log] = true
		st := states[i]
		dirty[cand.key] = st.DirtyRatio
		if c.inProgress[cand.log] {
			continue
		}
		if _, bad := c.uncleanable[cand.log]; bad {
			continue
		}
		if !eligible(st, cand.cfg, nowMs) {
			continue
		}
		if st.DirtyRatio > bestRatio {
			best, bestRatio, found = cand, st.DirtyRatio, true
		}
	}
	// A log no longer here (deleted, or no longer compacted) is forgotten:
	// recreated, it gets a fresh chance.
	for l := range c.uncleanable {
		if !live[l] {
			delete(c.uncleanable, l)
		}
	}
	c.dirty = dirty
	if !found {
		c.maxDirty = 0
		return cleanCandidate{}, false
	}
	c.maxDirty = bestRatio
	c.inProgress[best.log] = true
	return best, true
}

// eligible: some bytes are dirty, and either enough of them or one record
// has waited past max.compaction.lag.ms; or a tombstone or transaction
// marker the last pass kept has reached its delete horizon (KIP-534: a log
// with nothing new written must still lose them).
func eligible(st storage.Cleanable, cfg storage.Config, nowMs int64) bool {
	if st.DeleteHorizonMs >= 0 && st.DeleteHorizonMs <= nowMs {
		return true
	}
	if st.DirtyBytes <= 0 {
		return false
	}
	if st.DirtyRatio >= cfg.MinCleanableDirtyRatio {
		return true
	}
	// 0 is no valid max.compaction.lag.ms (Kafka's floor is 1): a Config
	// not built from DefaultConfig has no maximum lag, like Long.MAX.
	return st.OldestDirtyMs >= 0 && cfg.MaxCompactionLagMs > 0 && cfg.MaxCompactionLagMs < math.MaxInt64 &&
		nowMs-st.OldestDirtyMs > cfg.MaxCompactionLagMs
}

// clean runs one pass over cand's log and releases it; it reports whether
// the pass moved the log's clean checkpoint.
func (c *cleaner) clean(ctx context.Context, thread int, cand cleanCandidate) bool {
	opts := storage.CleanOptions{
		UpperBound:         cand.upperBound,
		NowMs:              c.clk.Now().UnixMilli(),
		DeleteRetentionMs:  cand.cfg.DeleteRetentionMs,
		MinCompactionLagMs: cand.cfg.MinCompactionLagMs,
		MaxMapEntries:      c.mapEntries(),
		MaxSegmentBytes:    cand.cfg.SegmentBytes,
		Throttle:           c.throttle.Throttle,
	}
	stats, err := cand.log.Clean(ctx, opts)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.inProgress, cand.log)
	switch {
	case errors.Is(err, storage.ErrCleanAborted):
		// The log changed under the pass or the broker is stopping:
		// nothing was swapped in, and the next survey looks again.
		return true
	case err != nil:
		c.uncleanable[cand.log] = cand.key
		c.lg.Error("log cleaning failed; the partition is marked uncleanable and skipped until it is deleted",
			"partition", cand.key.String(), "err", err)
		return true
	}
	c.last[thread] = lastPass{stats: stats, mapSize: opts.MaxMapEntries}
	c.lg.Info("cleaned log", "partition", cand.key.String(), "firstDirty", stats.FirstDirty, "nextDirty", stats.NextDirty,
		"bytesRead", stats.BytesRead, "bytesWritten", stats.BytesWritten, "segmentsBefore", stats.SegmentsBefore,
		"segmentsAfter", stats.SegmentsAfter, "took", stats.Elapsed)
	return stats.NextDirty > stats.FirstDirty
}

// metrics returns the gauges now.
func (c *cleaner) metrics() CleanerMetrics {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := CleanerMetrics{MaxDirtyPercent: 100 * c.maxDirty, UncleanablePartitions: len(c.uncleanable),
		DirtyRatio: make(map[storage.PartitionKey]float64, len(c.dirty))}
	for k, v := range c.dirty {
		m.DirtyRatio[k] = v
	}
	var read, written int64
	for _, p := range c.last {
		read += p.stats.BytesRead
		written += p.stats.BytesWritten
		m.MaxCleanTimeSecs = max(m.MaxCleanTimeSecs, p.stats.Elapsed.Seconds())
		if p.mapSize > 0 {
			used := float64(max(p.stats.NextDirty-p.stats.FirstDirty, 0))
			m.MaxBufferUtilizationPercent = max(m.MaxBufferUtilizationPercent, min(100, 100*used/float64(p.mapSize)))
		}
	}
	m.RecopyPercent = 100 * float64(written) / float64(max(read, 1))
	return m
}

// byteThrottle holds the threads together to a byte rate
// (log.cleaner.io.max.bytes.per.second). Each call books its bytes on a
// shared timeline at the rate and waits until the booking is due, so the
// threads' total stays at the rate whatever their number.
type byteThrottle struct {
	rate  float64 // bytes per second; 0 or less, or MaxFloat64, for none
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	mu   sync.Mutex
	free time.Time // when the bytes booked so far are paid for
}

// throttleSlack: waits shorter than this are skipped (the bytes stay
// booked), so small reads do not each cost a timer.
const throttleSlack = 10 * time.Millisecond

func newByteThrottle(rate float64, clk clock.Clock) *byteThrottle {
	return &byteThrottle{rate: rate, now: clk.Now, sleep: func(ctx context.Context, d time.Duration) error {
		t := clk.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C():
			return nil
		}
	}}
}

// unlimited: Kafka's default, Double.MAX_VALUE bytes per second. t.mu
// is held (the rate changes at run time: setRate).
func (t *byteThrottle) unlimited() bool {
	return t.rate <= 0 || t.rate >= math.MaxFloat64 || math.IsInf(t.rate, 1) || math.IsNaN(t.rate)
}

// Throttle is CleanOptions.Throttle: it waits until n more bytes fit the
// rate, and fails once ctx has ended.
func (t *byteThrottle) Throttle(ctx context.Context, n int) error {
	if err := ctx.Err(); err != nil || n <= 0 {
		return err
	}
	t.mu.Lock()
	if t.unlimited() {
		t.mu.Unlock()
		return nil
	}
	now := t.now()
	if t.free.Before(now) {
		// Idle time is not saved up for a later burst.
		t.free = now
	}
	t.free = t.free.Add(time.Duration(float64(n) / t.rate * float64(time.Second)))
	wait := t.free.Sub(now)
	t.mu.Unlock()
	if wait < throttleSlack {
		return nil
	}
	return t.sleep(ctx, wait)
}
