package storage

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/wait"
)

// gatedSync is a segment fsync that tests can hold: every call announces
// itself on entered and waits for release.
type gatedSync struct {
	calls   atomic.Int32
	entered chan struct{}
	release chan struct{}
}

func newGatedSync() *gatedSync {
	return &gatedSync{entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (g *gatedSync) sync(f File) error {
	g.calls.Add(1)
	g.entered <- struct{}{}
	<-g.release
	return f.Sync()
}

// newGatedFixture is a flush.messages=1 log whose segment fsyncs are held
// by a gatedSync.
func newGatedFixture(t *testing.T) (*fixture, *gatedSync) {
	cfg := testConfig()
	cfg.FlushMessages = 1
	f := newFixture(t, cfg)
	g := newGatedSync()
	f.l.syncHook = g.sync
	return f, g
}

func (f *fixture) appendDeferred(s batchSpec) AppendResult {
	f.t.Helper()
	res, err := f.l.AppendAsLeaderDeferred(buildBatch(f.t, s), 0)
	if err != nil {
		f.t.Fatalf("AppendAsLeaderDeferred: %v", err)
	}
	return res
}

func flusherRunning(l *Log) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.flusherRunning
}

// Under flush.messages=1 a leader append returns before its fsync; appends
// made while an fsync runs share the next one; WaitDurable and the durable
// end (what counts towards the HW) follow the fsyncs, not the appends.
func TestDeferredLeaderFlushGroupsAppends(t *testing.T) {
	f, g := newGatedFixture(t)

	r1 := f.appendDeferred(plain(2, f.nowMs()))
	if !r1.FlushDeferred {
		t.Fatal("flush.messages=1: the append did not defer its fsync")
	}
	select {
	case <-g.entered: // the background fsync of r1 runs, and is held
	case <-time.After(5 * time.Second):
		t.Fatal("no background fsync started")
	}
	// More appends while that fsync is held: they do not wait for it.
	r2 := f.appendDeferred(plain(3, f.nowMs()))
	r3 := f.appendDeferred(plain(1, f.nowMs()))
	if de := f.l.DurableEnd(); de != 0 {
		t.Fatalf("durable end %d while the first fsync is held, want 0", de)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	done, err := f.l.WaitDurable(ctx, r1.LastOffset, nil)
	cancel()
	if done || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitDurable before the fsync: done %v, err %v", done, err)
	}

	close(g.release) // every fsync from now on passes
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if done, err := f.l.WaitDurable(ctx, r3.LastOffset, nil); !done || err != nil {
		t.Fatalf("WaitDurable(%d): done %v, err %v", r3.LastOffset, done, err)
	}
	if rp := f.l.RecoveryPoint(); rp != r3.LastOffset+1 {
		t.Fatalf("recovery point %d, want %d", rp, r3.LastOffset+1)
	}
	// One fsync for r1, one for r2 and r3 together.
	if n := g.calls.Load(); n != 2 {
		t.Fatalf("%d fsyncs for three appends (r2 at %d, r3 at %d), want 2", n, r2.FirstOffset, r3.FirstOffset)
	}
	wait.Eventually(t, 5*time.Second, "the background flusher to end with nothing left to flush", func() bool { return !flusherRunning(f.l) })
	// Without flush.messages=1 nothing is deferred: the HW never waits
	// for fsyncs there.
	c := f.l.Config()
	c.FlushMessages = 1 << 62
	f.l.SetConfig(c)
	if r := f.appendDeferred(plain(1, f.nowMs())); r.FlushDeferred {
		t.Fatal("deferred without flush.messages=1")
	}
}

// A failed fsync is reported to every waiter and is not retried: a later
// fsync must not move the recovery point over pages Linux may have
// dropped.
func TestDeferredFlushFailureIsSticky(t *testing.T) {
	cfg := testConfig()
	cfg.FlushMessages = 1
	f := newFixture(t, cfg)
	var fail atomic.Bool
	fail.Store(true)
	var calls atomic.Int32
	f.l.syncHook = func(fl File) error {
		calls.Add(1)
		if fail.Load() {
			return errors.New("input/output error")
		}
		return fl.Sync()
	}
	st := new(Stats)
	c := f.l.Config()
	c.Stats = st
	f.l.SetConfig(c)
	r := f.appendDeferred(plain(1, f.nowMs()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done, err := f.l.WaitDurable(ctx, r.LastOffset, nil)
	if done {
		t.Fatal("durable after a failed fsync")
	}
	wantCode(t, err, pb.ErrorCode_KAFKA_STORAGE_ERROR)
	select {
	case <-st.StorageFailed():
	default:
		t.Fatal("the broker's stats did not report the failed fsync")
	}
	if serr := st.StorageErr(); serr == nil || !strings.Contains(serr.Error(), testKey.String()) {
		t.Fatalf("StorageErr %v, want the partition named", serr)
	}

	fail.Store(false)
	before := calls.Load()
	// The failed log takes no more writes: not as leader, not as follower,
	// no roll (a roll's seal would fsync and move the recovery point).
	_, err = f.l.AppendAsLeaderDeferred(buildBatch(t, plain(1, f.nowMs())), 0)
	wantCode(t, err, pb.ErrorCode_KAFKA_STORAGE_ERROR)
	follower := buildBatch(t, plain(1, f.nowMs()))
	record.SetBaseOffset(follower, f.l.LogEndOffset())
	_, err = f.l.AppendAsFollower(follower)
	wantCode(t, err, pb.ErrorCode_KAFKA_STORAGE_ERROR)
	wantCode(t, f.l.Roll(), pb.ErrorCode_KAFKA_STORAGE_ERROR)
	wantCode(t, f.l.Flush(), pb.ErrorCode_KAFKA_STORAGE_ERROR)
	if end := f.l.LogEndOffset(); end != r.LastOffset+1 {
		t.Fatalf("log end %d after the failure, want %d", end, r.LastOffset+1)
	}
	if rp, de := f.l.RecoveryPoint(), f.l.DurableEnd(); rp != 0 || de != 0 {
		t.Fatalf("recovery point %d, durable end %d after a failed fsync, want 0", rp, de)
	}
	if n := calls.Load(); n != before {
		t.Fatalf("the failed log fsynced again (%d more calls)", n-before)
	}
	// Close does not vouch for those offsets either.
	if err := f.l.Close(); err != nil {
		t.Fatal(err)
	}
	if rp := f.l.RecoveryPoint(); rp != 0 {
		t.Fatalf("Close moved the recovery point to %d after a failed fsync", rp)
	}
}

// Close waits for the background flusher, and a waiter learns the log
// closed instead of waiting out its deadline.
func TestCloseEndsTheFlusher(t *testing.T) {
	f, g := newGatedFixture(t)
	r := f.appendDeferred(plain(1, f.nowMs()))
	<-g.entered
	closed := make(chan error, 1)
	go func() { closed <- f.l.Close() }()
	time.AfterFunc(20*time.Millisecond, func() { close(g.release) })
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	if flusherRunning(f.l) {
		t.Fatal("the flusher outlived Close")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The held fsync completed before Close's own, so the batch is durable.
	if done, err := f.l.WaitDurable(ctx, r.LastOffset, nil); !done || err != nil {
		t.Fatalf("after Close: done %v, err %v", done, err)
	}
	if done, err := f.l.WaitDurable(ctx, r.LastOffset+1, nil); done || errs.CodeOf(err) != pb.ErrorCode_KAFKA_STORAGE_ERROR {
		t.Fatalf("waiting past the end of a closed log: done %v, err %v", done, err)
	}
}

// A retry of a batch whose fsync is still running is a duplicate: it gets
// the original offsets, and must wait for that fsync as well (an acks=1
// retry after a timed-out first try would otherwise be answered from the
// page cache).
func TestDeferredDuplicateWaitsForTheOriginalsFsync(t *testing.T) {
	f, g := newGatedFixture(t)
	b := idem(7, 0, 0, 3, f.nowMs())
	r1 := f.appendDeferred(b)
	<-g.entered
	r2 := f.appendDeferred(b)
	if !r2.Duplicate || r2.FirstOffset != r1.FirstOffset {
		t.Fatalf("retry: %+v, want a duplicate of %+v", r2, r1)
	}
	if !r2.FlushDeferred {
		t.Fatal("the duplicate of an unfsynced batch did not wait for its fsync")
	}
	close(g.release)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if done, err := f.l.WaitDurable(ctx, r2.LastOffset, nil); !done || err != nil {
		t.Fatalf("WaitDurable: done %v, err %v", done, err)
	}
	// Once on disk, a duplicate has nothing to wait for.
	if r3 := f.appendDeferred(b); !r3.Duplicate || r3.FlushDeferred {
		t.Fatalf("duplicate of a fsynced batch: %+v", r3)
	}
}

// A follower's truncation can cut deferred appends whose fsync has not run
// (a leader demoted mid-flush): the flusher must then stop at the new log
// end, not fsync forever towards offsets that are gone.
func TestFlusherEndsAfterTruncationBelowDeferredEnd(t *testing.T) {
	for range 20 { // the truncation and the flusher race for flushMu
		f, g := newGatedFixture(t)
		rA := f.appendDeferred(plain(2, f.nowMs()))
		<-g.entered
		f.appendDeferred(plain(3, f.nowMs()))
		truncated := make(chan error, 1)
		go func() { truncated <- f.l.TruncateTo(rA.LastOffset + 1) }()
		close(g.release)
		if err := <-truncated; err != nil {
			t.Fatal(err)
		}
		wait.Eventually(t, 2*time.Second, "the flusher to stop after a truncation below its target", func() bool { return !flusherRunning(f.l) })
		if end, rp := f.l.LogEndOffset(), f.l.RecoveryPoint(); end != rA.LastOffset+1 || rp != end {
			t.Fatalf("log end %d, recovery point %d, want both %d", end, rp, rA.LastOffset+1)
		}
		f.l.Abandon()
	}
}
