package storage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strand-io/strand/record"
)

// Regression tests from a review of the cleaner against Kafka's: a
// follower that replicates a cleaned leader's gaps, a pass that runs while
// it does, the last marker of a transaction-version-2 producer, and a
// batch whose tombstones went keeping its delete horizon.

func followerBatch(t *testing.T, base int64, ts int64, specs ...string) []byte {
	t.Helper()
	b, err := record.Build(record.BatchOptions{BaseOffset: base, PartitionLeaderEpoch: 0, ProducerID: record.NoProducerID,
		ProducerEpoch: record.NoProducerEpoch, BaseSequence: record.NoSequence}, kvs(ts, specs...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A follower that replicated K=v1 and K's tombstone before its leader
// cleaned them, then a batch after a gap (offsets the leader's cleaner
// removed), must not show K=v1 again once the tombstone's horizon passed:
// the replicated gap must not move this replica's clean checkpoint over
// data its own cleaner never saw.
func TestCleanFollowerGapKeepsTombstonesEffective(t *testing.T) {
	f := newFixture(t, testConfig())
	now := f.nowMs()
	appendAll := func(bs ...[]byte) {
		for _, b := range bs {
			if _, err := f.l.AppendAsFollower(b); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendAll(followerBatch(t, 0, now, "K=v1"), followerBatch(t, 1, now, "K!"))
	f.roll()
	appendAll(followerBatch(t, 10, now, "x=1")) // 2..9 removed by the leader's cleaner
	f.roll()
	appendAll(followerBatch(t, 11, now, "y=1"))
	f.roll()
	if f.l.cleanedTo != 0 {
		t.Fatalf("a replicated gap moved the clean checkpoint to %d", f.l.cleanedTo)
	}
	f.clean(f.cleanOpts())
	f.advanceMs(5000) // past delete.retention.ms
	f.clean(f.cleanOpts())
	if v, ok := committedTable(t, f.l, f.l.LogEndOffset())["K"]; ok {
		t.Fatalf("deleted key K is back after its tombstone went: %s", v)
	}
	// The gaps are still accepted by recovery after a crash.
	leo := f.l.LogEndOffset()
	f.crash(0)
	if f.l.LogEndOffset() != leo || len(f.l.DamagedRanges()) != 0 {
		t.Fatalf("after a crash: log end %d (was %d), damaged %v", f.l.LogEndOffset(), leo, f.l.DamagedRanges())
	}
}

// A replicated gap that lands while this replica's cleaner runs: after
// the swap and a crash, the replicated batches after the gap are still
// read, not fenced as damage.
func TestCleanFollowerGapDuringPass(t *testing.T) {
	f := newFixture(t, testConfig())
	now := f.nowMs()
	app := func(base int64, specs ...string) {
		if _, err := f.l.AppendAsFollower(followerBatch(t, base, now, specs...)); err != nil {
			t.Fatal(err)
		}
	}
	app(0, "a=1")
	app(1, "a=2")
	f.roll()
	app(2, "b=1")
	f.roll()
	app(3, "c=1")
	f.l.swapHook = func(step string) error {
		if step == "written" {
			app(10, "d=1") // 4..9 removed by the leader's cleaner
		}
		return nil
	}
	f.clean(CleanOptions{UpperBound: 3, NowMs: f.nowMs(), DeleteRetentionMs: 1000, MaxSegmentBytes: f.cfg.SegmentBytes})
	f.l.swapHook = nil
	app(11, "e=1")
	if err := f.l.FlushTo(f.l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	leo := f.l.LogEndOffset()
	f.crash(0)
	if f.l.LogEndOffset() != leo || len(f.l.DamagedRanges()) != 0 {
		t.Fatalf("after a crash: log end %d (was %d), damaged %v", f.l.LogEndOffset(), leo, f.l.DamagedRanges())
	}
	tab := committedTable(t, f.l, f.l.LogEndOffset())
	if tab["d"] == "" || tab["e"] == "" {
		t.Fatalf("replicated records lost: %v", tab)
	}
}

// A transaction-version-2 producer whose newest entry is its marker (the
// marker bumped its epoch, so it has no data batch at that epoch): the
// marker stays however long ago its data went, so a producer state rebuilt
// from the segments alone still knows the producer and its epoch (Kafka's
// isBatchLastRecordOfProducer keeps it "to ensure fencing").
func TestCleanKeepsTheLastMarkerOfAProducer(t *testing.T) {
	f := newFixture(t, testConfig())
	p := newProducers(f)
	p.put(7, true, "a=1")
	p.end(7, record.ControlCommit)
	p.put(-1, false, "a=2")
	f.roll()
	p.put(-1, false, "z=1")
	for range 3 {
		f.clean(f.cleanOpts())
		f.advanceMs(5000)
	}
	f.l.Close()
	ents, _ := os.ReadDir(f.dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), SnapshotSuffix) {
			os.Remove(filepath.Join(f.dir, e.Name()))
		}
	}
	f.open(0)
	for _, e := range f.l.Producers() {
		if e.ProducerID == 7 {
			return
		}
	}
	t.Fatal("producer 7 is gone from a producer state rebuilt from the cleaned segments")
}

// Once a batch's tombstones are gone, so is its delete horizon: the log
// must not stay "past its horizon" (eligible) for ever.
func TestCleanDropsTheHorizonWithTheTombstones(t *testing.T) {
	f := newFixture(t, testConfig())
	p := newProducers(f)
	p.put(-1, false, "a=1", "b!")
	p.put(-1, false, "c=1")
	f.roll()
	p.put(-1, false, "d=1")
	f.roll()
	f.clean(f.cleanOpts()) // the tombstone gets its horizon
	f.advanceMs(5000)
	f.clean(f.cleanOpts()) // and goes
	f.advanceMs(5000)
	if st := f.l.CleanableState(f.l.LogEndOffset(), f.nowMs(), 0); st.DeleteHorizonMs >= 0 {
		t.Fatalf("no tombstone or marker left, but the log reports a delete horizon: %+v", st)
	}
	if _, ok := committedTable(t, f.l, f.l.LogEndOffset())["b"]; ok {
		t.Fatal("the tombstone's key is back")
	}
}

// A truncation above the pass's dirty end (only the active segment
// changes) still aborts the pass: the plan chose which batch is each
// producer's last before it, and a producer's batch it drops because a
// later one existed may be its last again once that later one is cut.
func TestCleanAbortsOnATruncationAboveItsEnd(t *testing.T) {
	f := newFixture(t, testConfig())
	p := newProducers(f)
	p.put(-1, false, "a=1")
	p.put(-1, false, "a=2")
	f.roll()
	p.put(-1, false, "b=1")
	p.put(-1, false, "b=2")
	end := f.l.LogEndOffset()
	f.l.swapHook = func(step string) error {
		if step == "written" {
			if err := f.l.TruncateTo(end - 1); err != nil { // in the active segment
				t.Fatal(err)
			}
		}
		return nil
	}
	if _, err := f.l.Clean(context.Background(), f.cleanOpts()); !errors.Is(err, ErrCleanAborted) {
		t.Fatalf("Clean across a truncation of the active segment: %v, want ErrCleanAborted", err)
	}
	f.l.swapHook = nil
	if _, err := f.l.Clean(context.Background(), f.cleanOpts()); err != nil {
		t.Fatalf("the next pass: %v", err)
	}
}
