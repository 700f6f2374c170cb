package broker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/clock"
)

// fakeCleanLog is a cleanerLog whose dirtiness the test sets, recording
// the passes asked of it.
type fakeCleanLog struct {
	mu      sync.Mutex
	state   storage.Cleanable
	err     error              // Clean's answer
	stats   storage.CleanStats // Clean's stats on success
	hold    chan struct{}      // if not nil, Clean waits for it (or ctx)
	calls   []storage.CleanOptions
	running int // passes in progress now
	overlap bool
	asked   []int64 // the upper bounds CleanableState was asked with
}

func (f *fakeCleanLog) CleanableState(upperBound, nowMs, minLag int64) storage.Cleanable {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, upperBound)
	return f.state
}

func (f *fakeCleanLog) Clean(ctx context.Context, o storage.CleanOptions) (storage.CleanStats, error) {
	f.mu.Lock()
	f.calls = append(f.calls, o)
	f.running++
	if f.running > 1 {
		f.overlap = true
	}
	hold := f.hold
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.running--
		f.mu.Unlock()
	}()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return storage.CleanStats{}, storage.ErrCleanAborted
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats, f.err
}

func (f *fakeCleanLog) passes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// dirtyLog is a fake log with this dirty ratio (of 1000 bytes) and, when
// oldestMs is not -1, a dirty record of that age.
func dirtyLog(ratio float64, oldestMs int64) *fakeCleanLog {
	dirty := int64(ratio * 1000)
	return &fakeCleanLog{
		state: storage.Cleanable{DirtyBytes: dirty, CleanBytes: 1000 - dirty, DirtyRatio: ratio, OldestDirtyMs: oldestMs, DeleteHorizonMs: -1},
		stats: storage.CleanStats{FirstDirty: 0, NextDirty: 10},
	}
}

func compactCfg(minRatio float64, maxLagMs int64) storage.Config {
	c := storage.DefaultConfig()
	c.Cleanup = storage.CleanupCompact
	c.MinCleanableDirtyRatio = minRatio
	c.MaxCompactionLagMs = maxLagMs
	return c
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func pk(topic string) storage.PartitionKey { return storage.PartitionKey{Topic: topic} }

// The cleaner takes the dirtiest eligible log: eligible when its dirty
// ratio reaches the topic's min.cleanable.dirty.ratio, or when a dirty
// record is older than max.compaction.lag.ms (whatever the ratio), and
// never a log with no dirty bytes. A log held by a thread is not taken
// again; max-dirty-percent is the chosen log's ratio, 0 when none is
// eligible, and every compacted log's ratio is recorded.
func TestCleanerGrabsDirtiestEligible(t *testing.T) {
	const now = int64(1_000_000)
	below := dirtyLog(0.3, -1)              // under 0.5
	half := dirtyLog(0.5, -1)               // at the ratio: eligible
	dirtiest := dirtyLog(0.9, -1)           // the first choice
	lagged := dirtyLog(0.2, now-60_001)     // past max.compaction.lag.ms=60000
	notLagged := dirtyLog(0.25, now-60_000) // exactly at the lag: not yet
	lowBar := dirtyLog(0.1, -1)             // its topic asks only 0.05
	clean := dirtyLog(0, now-1e9)           // nothing dirty: never, however old
	horizon := dirtyLog(0, -1)              // nothing dirty, but a delete horizon passed (KIP-534)
	horizon.state.DeleteHorizonMs = now
	notYet := dirtyLog(0, -1) // its horizon is still ahead
	notYet.state.DeleteHorizonMs = now + 1
	cands := []cleanCandidate{
		{key: pk("below"), log: below, cfg: compactCfg(0.5, 60_000), upperBound: 7},
		{key: pk("half"), log: half, cfg: compactCfg(0.5, math.MaxInt64)},
		{key: pk("dirtiest"), log: dirtiest, cfg: compactCfg(0.5, math.MaxInt64)},
		{key: pk("lagged"), log: lagged, cfg: compactCfg(0.5, 60_000)},
		{key: pk("notLagged"), log: notLagged, cfg: compactCfg(0.5, 60_000)},
		{key: pk("lowBar"), log: lowBar, cfg: compactCfg(0.05, math.MaxInt64)},
		{key: pk("clean"), log: clean, cfg: compactCfg(0, 1)},
		{key: pk("horizon"), log: horizon, cfg: compactCfg(0.5, math.MaxInt64)},
		{key: pk("notYet"), log: notYet, cfg: compactCfg(0.5, math.MaxInt64)},
	}
	c := newCleaner(DefaultCleanerConfig(), clock.Real, quiet, func() []cleanCandidate { return cands })
	var order []string
	for {
		cand, ok := c.grab(now)
		if !ok {
			break
		}
		if got := c.metrics().MaxDirtyPercent; got != 100*cand.log.(*fakeCleanLog).state.DirtyRatio {
			t.Fatalf("max-dirty-percent %v after choosing %s", got, cand.key.Topic)
		}
		order = append(order, cand.key.Topic)
		if len(order) > len(cands) {
			t.Fatalf("a held log was taken again: %v", order)
		}
	}
	want := []string{"dirtiest", "half", "lagged", "lowBar", "horizon"}
	if len(order) != len(want) {
		t.Fatalf("took %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("took %v, want %v", order, want)
		}
	}
	m := c.metrics()
	if m.MaxDirtyPercent != 0 {
		t.Fatalf("max-dirty-percent %v with nothing eligible, want 0", m.MaxDirtyPercent)
	}
	if len(m.DirtyRatio) != len(cands) || m.DirtyRatio[pk("below")] != 0.3 || m.DirtyRatio[pk("dirtiest")] != 0.9 {
		t.Fatalf("dirty ratios %v", m.DirtyRatio)
	}
	if below.asked[0] != 7 {
		t.Fatalf("CleanableState asked with upper bound %d, want the candidate's 7", below.asked[0])
	}
}

// A pass is given the topic's configs and the broker's: the upper bound,
// delete.retention.ms, min.compaction.lag.ms, segment.bytes, the dedupe
// buffer split over the threads at 24 bytes a key, the clock, and the
// shared throttle.
func TestCleanerPassOptions(t *testing.T) {
	l := dirtyLog(0.9, -1)
	cfg := compactCfg(0.5, math.MaxInt64)
	cfg.DeleteRetentionMs, cfg.MinCompactionLagMs, cfg.SegmentBytes = 1234, 567, 8910
	cc := DefaultCleanerConfig()
	cc.Threads = 2
	clk := clock.NewFake(time.UnixMilli(5_000_000))
	c := newCleaner(cc, clk, quiet, func() []cleanCandidate {
		return []cleanCandidate{{key: pk("t"), log: l, cfg: cfg, upperBound: 42}}
	})
	cand, ok := c.grab(clk.Now().UnixMilli())
	if !ok {
		t.Fatal("nothing grabbed")
	}
	c.clean(context.Background(), 0, cand)
	o := l.calls[0]
	if o.UpperBound != 42 || o.DeleteRetentionMs != 1234 || o.MinCompactionLagMs != 567 || o.MaxSegmentBytes != 8910 ||
		o.NowMs != 5_000_000 || o.MaxMapEntries != 134217728/2/24 || o.Throttle == nil {
		t.Fatalf("options %+v", o)
	}
}

// A log whose pass fails is marked uncleanable: logged, counted in
// uncleanable-partitions-count, never chosen again while it exists, and
// forgotten once it is gone (a recreated partition gets a fresh chance).
// A pass aborted with ErrCleanAborted marks nothing.
func TestCleanerUncleanable(t *testing.T) {
	broken := dirtyLog(0.9, -1)
	broken.err = errors.New("disk on fire")
	aborted := dirtyLog(0.8, -1)
	aborted.err = storage.ErrCleanAborted
	cands := []cleanCandidate{
		{key: pk("broken"), log: broken, cfg: compactCfg(0.5, math.MaxInt64)},
		{key: pk("aborted"), log: aborted, cfg: compactCfg(0.5, math.MaxInt64)},
	}
	var mu sync.Mutex
	c := newCleaner(DefaultCleanerConfig(), clock.Real, quiet, func() []cleanCandidate {
		mu.Lock()
		defer mu.Unlock()
		return append([]cleanCandidate(nil), cands...)
	})
	for i := 0; i < 3; i++ {
		cand, ok := c.grab(0)
		if !ok {
			t.Fatalf("round %d: nothing grabbed", i)
		}
		c.clean(context.Background(), 0, cand)
	}
	if broken.passes() != 1 {
		t.Fatalf("the failed log was cleaned %d times, want once", broken.passes())
	}
	if aborted.passes() != 2 {
		t.Fatalf("the aborted log was cleaned %d times, want 2 (an abort marks nothing)", aborted.passes())
	}
	if n := c.metrics().UncleanablePartitions; n != 1 {
		t.Fatalf("uncleanable-partitions-count %d, want 1", n)
	}
	mu.Lock()
	cands = cands[1:]
	mu.Unlock()
	c.grab(0)
	if n := c.metrics().UncleanablePartitions; n != 0 {
		t.Fatalf("uncleanable-partitions-count %d after the log went, want 0", n)
	}
}

// The gauges from the threads' last passes: cleaner-recopy-percent is
// written over read of all of them, max-clean-time-secs the longest,
// max-buffer-utilization-percent the fullest map.
func TestCleanerPassMetrics(t *testing.T) {
	a, b := dirtyLog(0.9, -1), dirtyLog(0.8, -1)
	a.stats = storage.CleanStats{FirstDirty: 0, NextDirty: 100, BytesRead: 1000, BytesWritten: 200, Elapsed: 3 * time.Second}
	b.stats = storage.CleanStats{FirstDirty: 50, NextDirty: 60, BytesRead: 1000, BytesWritten: 400, Elapsed: time.Second}
	cc := DefaultCleanerConfig()
	cc.Threads, cc.DedupeBufferSize = 2, 2*24*1000 // 1000 keys a thread
	c := newCleaner(cc, clock.Real, quiet, func() []cleanCandidate {
		return []cleanCandidate{{key: pk("a"), log: a, cfg: compactCfg(0.5, math.MaxInt64)}, {key: pk("b"), log: b, cfg: compactCfg(0.5, math.MaxInt64)}}
	})
	first, _ := c.grab(0)
	second, _ := c.grab(0)
	c.clean(context.Background(), 0, first)
	c.clean(context.Background(), 1, second)
	m := c.metrics()
	if m.RecopyPercent != 30 || m.MaxCleanTimeSecs != 3 || m.MaxBufferUtilizationPercent != 10 {
		t.Fatalf("recopy %v%%, max clean time %vs, buffer %v%%: want 30, 3, 10", m.RecopyPercent, m.MaxCleanTimeSecs, m.MaxBufferUtilizationPercent)
	}
}

// With nothing eligible a thread sleeps log.cleaner.backoff.ms before it
// looks again, and stopping wakes it at once. Two threads never clean one
// log together, and each cleans a different one when there are two.
func TestCleanerThreadsBackoffAndStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		surveys := 0
		var cands []cleanCandidate
		cc := DefaultCleanerConfig()
		cc.Threads = 2
		c := newCleaner(cc, clock.Real, quiet, func() []cleanCandidate {
			mu.Lock()
			defer mu.Unlock()
			surveys++
			return append([]cleanCandidate(nil), cands...)
		})
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		c.start(ctx, &wg)
		synctest.Wait()
		count := func() int { mu.Lock(); defer mu.Unlock(); return surveys }
		if n := count(); n != 2 {
			t.Fatalf("%d surveys at start, want one per thread", n)
		}
		time.Sleep(cc.Backoff - time.Millisecond) // virtual time (synctest)
		synctest.Wait()
		if n := count(); n != 2 {
			t.Fatalf("%d surveys before the backoff passed, want 2", n)
		}
		// One log held in Clean: the other thread finds nothing and backs off.
		one, two := dirtyLog(0.9, -1), dirtyLog(0.7, -1)
		hold := make(chan struct{})
		one.hold, two.hold = hold, hold
		mu.Lock()
		cands = []cleanCandidate{{key: pk("one"), log: one, cfg: compactCfg(0.5, math.MaxInt64)}}
		mu.Unlock()
		time.Sleep(time.Millisecond) // virtual time (synctest)
		synctest.Wait()
		if one.passes() != 1 {
			t.Fatalf("%d passes over the dirty log after the backoff, want 1", one.passes())
		}
		time.Sleep(3 * cc.Backoff) // virtual time (synctest)
		synctest.Wait()
		if one.passes() != 1 || one.overlap {
			t.Fatalf("%d passes (overlapping: %v) while the first was running: two threads on one log", one.passes(), one.overlap)
		}
		mu.Lock()
		cands = append(cands, cleanCandidate{key: pk("two"), log: two, cfg: compactCfg(0.5, math.MaxInt64)})
		mu.Unlock()
		time.Sleep(cc.Backoff) // virtual time (synctest)
		synctest.Wait()
		if two.passes() != 1 {
			t.Fatalf("the second log got %d passes while the first was held, want 1 (the idle thread)", two.passes())
		}
		// Stop: both threads are in Clean; ctx ends them and nothing waits
		// for a backoff.
		cancel()
		wg.Wait()
		close(hold)
	})
}

// Stopping wakes a thread in its backoff at once (no 15 s wait).
// In a synctest bubble (clock.Real reads the bubble's virtual time) the
// threads are seen to be asleep in their backoff, and stopping must take
// no time at all.
func TestCleanerStopWakesBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCleaner(DefaultCleanerConfig(), clock.Real, quiet, func() []cleanCandidate { return nil })
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		c.start(ctx, &wg)
		synctest.Wait() // both threads asleep in their backoff
		start := time.Now()
		cancel()
		wg.Wait()
		if d := time.Since(start); d != 0 {
			t.Fatalf("stopping took %v of virtual time", d)
		}
	})
}

// The throttle holds the threads together to the byte rate: 2000 bytes at
// 1000 B/s take two seconds whether one caller or two interleaved send
// them; waits under 10 ms are skipped but the bytes stay booked; an ended
// ctx stops a wait; the default (Double.MAX_VALUE) never waits.
func TestByteThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, callers := range []int{1, 2} {
			th := newByteThrottle(1000, clock.Real)
			start := time.Now()
			var wg sync.WaitGroup
			for i := 0; i < callers; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := 0; j < 2000/callers/5; j++ {
						if err := th.Throttle(context.Background(), 5); err != nil {
							t.Error(err)
						}
					}
				}()
			}
			wg.Wait()
			// The last booking ends at 2 s; it may be up to the slack early.
			if d := time.Since(start); d < 2*time.Second-throttleSlack || d > 2*time.Second {
				t.Fatalf("%d callers: 2000 bytes at 1000 B/s took %v, want 2 s", callers, d)
			}
		}
		th := newByteThrottle(1, clock.Real)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		if err := th.Throttle(ctx, 1000); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Fatalf("throttle under an ending ctx: %v after %v, want the ctx's error after 1 s", err, time.Since(start))
		}
		if err := th.Throttle(ctx, 1); err == nil {
			t.Fatal("throttle with an ended ctx answered nil")
		}
		free := newByteThrottle(math.MaxFloat64, clock.Real)
		start = time.Now()
		for i := 0; i < 1000; i++ {
			if err := free.Throttle(context.Background(), 1<<30); err != nil {
				t.Fatal(err)
			}
		}
		if time.Since(start) != 0 {
			t.Fatalf("the unlimited throttle waited %v", time.Since(start))
		}
	})
}

// log.cleaner.backoff.ms is a dynamic broker config: a change reaches the
// running threads at once. A thread sleeping the old backoff (an hour)
// looks again when it changes, and from then on sleeps the new one.
func TestCleanerBackoffChangesLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var cands []cleanCandidate
		cc := DefaultCleanerConfig()
		cc.Backoff = time.Hour
		c := newCleaner(cc, clock.Real, quiet, func() []cleanCandidate {
			mu.Lock()
			defer mu.Unlock()
			return append([]cleanCandidate(nil), cands...)
		})
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		c.start(ctx, &wg)
		defer func() { cancel(); wg.Wait() }()
		synctest.Wait()
		// Passes that move nothing: the thread then sleeps its backoff.
		one := dirtyLog(0.9, -1)
		one.stats = storage.CleanStats{}
		mu.Lock()
		cands = []cleanCandidate{{key: pk("one"), log: one, cfg: compactCfg(0.5, math.MaxInt64)}}
		mu.Unlock()
		time.Sleep(time.Minute) // virtual time (synctest)
		synctest.Wait()
		if one.passes() != 0 {
			t.Fatalf("%d passes a minute into an hour's backoff, want 0", one.passes())
		}
		c.setBackoff(time.Second)
		synctest.Wait()
		if one.passes() != 1 {
			t.Fatalf("%d passes once the backoff changed, want 1 (the sleeping thread looks again)", one.passes())
		}
		if c.backoffNow() != time.Second {
			t.Fatalf("backoff %v", c.backoffNow())
		}
		// The next survey comes a second later, not an hour.
		two := dirtyLog(0.8, -1)
		two.stats = storage.CleanStats{}
		mu.Lock()
		cands = []cleanCandidate{{key: pk("two"), log: two, cfg: compactCfg(0.5, math.MaxInt64)}}
		mu.Unlock()
		time.Sleep(time.Second + time.Millisecond) // virtual time (synctest)
		synctest.Wait()
		if two.passes() != 1 {
			t.Fatalf("%d passes over a new dirty log after the new backoff, want 1", two.passes())
		}
	})
}
