package storage

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/wait"
)

func dirtySegments(l *Log) int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	n := 0
	for _, s := range l.segs {
		if s.dirty {
			n++
		}
	}
	return n
}

func TestFlushToMovesRecoveryPoint(t *testing.T) {
	f := newFixture(t, testConfig())
	var calls atomic.Int32
	f.l.OnFlush(func() { calls.Add(1) })
	for i := 0; i < 10; i++ {
		f.appendLeader(plain(1, f.nowMs()))
	}
	if rp := f.l.RecoveryPoint(); rp != 0 {
		t.Fatalf("recovery point %d before any flush", rp)
	}
	if dirtySegments(f.l) != 1 {
		t.Fatal("the active segment should have unsynced bytes")
	}
	if err := f.l.FlushTo(5); err != nil {
		t.Fatal(err)
	}
	if rp := f.l.RecoveryPoint(); rp != 10 {
		t.Fatalf("recovery point %d after FlushTo(5), want the log end 10", rp)
	}
	if dirtySegments(f.l) != 0 || calls.Load() != 1 {
		t.Fatalf("%d dirty segments, %d flush callbacks", dirtySegments(f.l), calls.Load())
	}
	// Already covered: no fsync, no callback.
	if err := f.l.FlushTo(7); err != nil || calls.Load() != 1 {
		t.Fatalf("FlushTo below the recovery point: %v, %d callbacks", err, calls.Load())
	}
	f.appendLeader(plain(3, f.nowMs()))
	if err := f.l.Flush(); err != nil || f.l.RecoveryPoint() != 13 || calls.Load() != 2 {
		t.Fatalf("Flush: %v, recovery point %d, %d callbacks", err, f.l.RecoveryPoint(), calls.Load())
	}
	// What was flushed survives a crash reopened at that recovery point.
	f.crash(f.l.RecoveryPoint())
	if f.l.LogEndOffset() != 13 {
		t.Fatalf("log end %d", f.l.LogEndOffset())
	}
}

func TestFlushMessagesOne(t *testing.T) {
	cfg := testConfig()
	cfg.FlushMessages = 1
	cfg.SegmentBytes = 800
	f := newFixture(t, cfg)
	var calls atomic.Int32
	f.l.OnFlush(func() { calls.Add(1) })
	for i := 0; i < 20; i++ {
		r := f.appendLeader(plain(2, f.nowMs()))
		if rp, de := f.l.RecoveryPoint(), f.l.DurableEnd(); rp != r.LastOffset+1 || de != rp {
			t.Fatalf("append %d: recovery point %d, durable end %d, want %d", i, rp, de, r.LastOffset+1)
		}
		if dirtySegments(f.l) != 0 {
			t.Fatalf("append %d left unsynced bytes", i)
		}
	}
	if calls.Load() < 15 {
		t.Fatalf("only %d flushes for 20 appends", calls.Load())
	}
	f.appendLeader(txnb(1, 0, 0, 1, f.nowMs()))
	m := f.marker(1, 1, record.ControlAbort)
	if m.AlreadyDone || f.l.DurableEnd() != m.Offset+1 {
		t.Fatal("marker not flushed")
	}
}

// With flush.messages=1 the durable end (what may count towards the HW)
// is the recovery point: it covers appends only once they are fsynced.
func TestDurableEndFollowsFlushes(t *testing.T) {
	f := newFixture(t, testConfig())
	for i := 0; i < 5; i++ {
		f.appendLeader(plain(1, f.nowMs()))
	}
	if f.l.DurableEnd() != 5 {
		t.Fatalf("without flush.messages=1 the durable end is the log end: %d", f.l.DurableEnd())
	}
	cfg := f.l.Config()
	cfg.FlushMessages = 1
	f.l.SetConfig(cfg)
	if de := f.l.DurableEnd(); de != 0 {
		t.Fatalf("durable end %d before any fsync, want 0", de)
	}
	// The callback runs after the flush released its locks; an append
	// under flush.messages=1 returns once its batch is durable, which can
	// be before the background flusher ran the callback.
	var mu sync.Mutex
	var seen []int64
	f.l.OnFlush(func() {
		mu.Lock()
		seen = append(seen, f.l.DurableEnd())
		mu.Unlock()
	})
	seenNow := func(n int) []int64 {
		var s []int64
		_ = wait.Until(5*time.Second, "the flush callbacks", func() bool {
			mu.Lock()
			s = append([]int64(nil), seen...)
			mu.Unlock()
			return len(s) >= n
		})
		return s
	}
	if err := f.l.Flush(); err != nil {
		t.Fatal(err)
	}
	if de, s := f.l.DurableEnd(), seenNow(1); de != 5 || len(s) != 1 || s[0] != 5 {
		t.Fatalf("durable end %d after the flush (callback saw %v)", de, s)
	}
	f.appendLeader(plain(1, f.nowMs()))
	if de, s := f.l.DurableEnd(), seenNow(2); de != 6 || len(s) != 2 || s[1] != 6 {
		t.Fatalf("durable end %d, callback saw %v", de, s)
	}
}

func TestFlushMessagesN(t *testing.T) {
	cfg := testConfig()
	cfg.FlushMessages = 5
	f := newFixture(t, cfg)
	for i := 0; i < 4; i++ {
		f.appendLeader(plain(1, f.nowMs()))
	}
	if rp := f.l.RecoveryPoint(); rp != 0 {
		t.Fatalf("flushed after %d of 5 messages (recovery point %d)", 4, rp)
	}
	f.appendLeader(plain(1, f.nowMs()))
	if rp := f.l.RecoveryPoint(); rp != 5 {
		t.Fatalf("recovery point %d after 5 messages", rp)
	}
	f.appendLeader(plain(3, f.nowMs()))
	if rp := f.l.RecoveryPoint(); rp != 5 {
		t.Fatalf("recovery point %d after 3 more", rp)
	}
	f.appendLeader(plain(2, f.nowMs()))
	if rp := f.l.RecoveryPoint(); rp != 10 {
		t.Fatalf("recovery point %d after 5 more", rp)
	}
}

func TestFlushMs(t *testing.T) {
	cfg := testConfig()
	cfg.FlushMs = 1000
	f := newFixture(t, cfg)
	f.appendLeader(plain(1, f.nowMs()))
	f.clk.Advance(999 * time.Millisecond)
	f.appendLeader(plain(1, f.nowMs()))
	if rp := f.l.RecoveryPoint(); rp != 0 {
		t.Fatalf("flushed before flush.ms: %d", rp)
	}
	f.clk.Advance(time.Millisecond)
	f.appendLeader(plain(1, f.nowMs()))
	if rp := f.l.RecoveryPoint(); rp != 3 {
		t.Fatalf("recovery point %d after flush.ms", rp)
	}
}

// Many goroutines append, flush, read and apply retention at once; every
// FlushTo that returns covers its target, offsets are unique, and the log
// reads back whole.
func TestConcurrentFlushTo(t *testing.T) {
	for _, flushMessages := range []int64{1, math.MaxInt64} {
		t.Run("", func(t *testing.T) {
			cfg := testConfig()
			cfg.SegmentBytes = 4000
			cfg.FlushMessages = flushMessages
			f := newFixture(t, cfg)
			const writers, perWriter, flushers = 8, 40, 8
			var wg sync.WaitGroup
			offsets := make(chan int64, writers*perWriter)
			errc := make(chan error, 100)
			stop := make(chan struct{})
			batches := make([][][]byte, writers)
			for w := range batches {
				for i := 0; i < perWriter; i++ {
					batches[w] = append(batches[w], buildBatch(t, idem(int64(w), 0, int32(i), 1, 1)))
				}
			}
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for i := 0; i < perWriter; i++ {
						r, err := f.l.AppendAsLeader(batches[w][i], 0)
						if err != nil {
							errc <- err
							return
						}
						offsets <- r.FirstOffset
					}
				}(w)
			}
			var bg sync.WaitGroup
			for g := 0; g < flushers; g++ {
				bg.Add(1)
				go func() {
					defer bg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						target := f.l.LogEndOffset()
						if err := f.l.FlushTo(target); err != nil {
							errc <- err
							return
						}
						if rp := f.l.RecoveryPoint(); rp < target {
							errc <- errors.New("FlushTo returned before its target was covered")
							return
						}
					}
				}()
			}
			bg.Add(2)
			go func() { // a reader
				defer bg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					start := f.l.LogStartOffset()
					if _, err := f.l.Read(start, 4096, f.l.LogEndOffset(), true); err != nil && errs.CodeOf(err) != pb.ErrorCode_OFFSET_OUT_OF_RANGE {
						errc <- err
						return
					}
				}
			}()
			go func() { // retention keeping ~3 segments
				defer bg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := f.l.DeleteRetention(f.l.LogEndOffset()); err != nil {
						errc <- err
						return
					}
				}
			}()
			c := f.l.Config()
			c.RetentionBytes = 3 * cfg.SegmentBytes
			f.l.SetConfig(c)
			wg.Wait()
			close(stop)
			bg.Wait()
			close(errc)
			for err := range errc {
				t.Fatal(err)
			}
			close(offsets)
			seen := map[int64]bool{}
			for o := range offsets {
				if seen[o] {
					t.Fatalf("offset %d handed out twice", o)
				}
				seen[o] = true
			}
			if len(seen) != writers*perWriter || f.l.LogEndOffset() != writers*perWriter {
				t.Fatalf("%d offsets, log end %d", len(seen), f.l.LogEndOffset())
			}
			if err := f.l.Flush(); err != nil || f.l.RecoveryPoint() != f.l.LogEndOffset() {
				t.Fatalf("final flush: %v, recovery point %d", err, f.l.RecoveryPoint())
			}
			readBatches(t, f.l, f.l.LogStartOffset(), f.l.LogEndOffset())
			checkIndexes(t, f.l)
		})
	}
}

// With flush.messages=1 a recovered log is durable as soon as it is open,
// so the high watermark need not wait for the next append.
func TestFlushMessagesOneAfterRecovery(t *testing.T) {
	cfg := testConfig()
	cfg.FlushMessages = 1
	f := newFixture(t, cfg)
	for i := 0; i < 5; i++ {
		f.appendLeader(plain(1, f.nowMs()))
	}
	f.crash(0)
	if de := f.l.DurableEnd(); de != 5 || f.l.RecoveryPoint() != 5 {
		t.Fatalf("durable end %d, recovery point %d after recovery, want 5", de, f.l.RecoveryPoint())
	}
}
