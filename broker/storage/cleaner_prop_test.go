package storage

import (
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"sync"
	"testing"

	"github.com/strand-io/strand/record"
)

// TestCleanPreservesTheCommittedTable is the cleaner's property: for a
// random history of keys, values, tombstones, transactions committed,
// aborted and left open, idempotent and plain producers, what a
// read_committed reader rebuilds as a key → value table (with each
// value's offset) below the last stable offset is the same before and
// after one or two passes, with the delete horizon passed or not; and the
// cleaned log reopens (after a crash, recovering everything) to the same
// table and the same producer state.
func TestCleanPreservesTheCommittedTable(t *testing.T) {
	seeds := 25
	if testing.Short() {
		seeds = 8
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			cfg := testConfig()
			cfg.SegmentBytes = 1024
			f := newFixture(t, cfg)
			rng := rand.New(rand.NewSource(seed))
			p := newProducers(f)
			randomHistory(rng, f, p, 150+rng.Intn(150))
			f.l.OnHighWatermarkUpdated(f.l.LogEndOffset())
			bound := f.l.LogEndOffset()
			if fu, ok := f.l.FirstUnstableOffset(); ok {
				bound = fu
			}
			want := committedTable(t, f.l, bound)
			producersBefore := producerSummary(f.l)
			o := f.cleanOpts()
			o.UpperBound = bound
			o.MaxSegmentBytes = int64(256 + rng.Intn(2048))
			if rng.Intn(3) == 0 {
				o.MaxMapEntries = 2 + rng.Intn(6)
			}
			for pass := 0; pass < 2; pass++ {
				f.clean(o)
				if got := committedTable(t, f.l, bound); !reflect.DeepEqual(got, want) {
					t.Fatalf("pass %d: table\n%v\nwant\n%v", pass, got, want)
				}
				checkIndexes(t, f.l)
				if rng.Intn(2) == 0 {
					f.advanceMs(o.DeleteRetentionMs)
				}
				o.NowMs = f.nowMs()
			}
			sizeAfter := f.l.Size()
			f.crash(0)
			if got := committedTable(t, f.l, bound); !reflect.DeepEqual(got, want) {
				t.Fatalf("after a crash: table\n%v\nwant\n%v", got, want)
			}
			if r := f.l.DamagedRanges(); len(r) != 0 {
				t.Fatalf("recovery fenced %v", r)
			}
			if f.l.Size() != sizeAfter {
				t.Fatalf("recovery changed the size from %d to %d", sizeAfter, f.l.Size())
			}
			if got := producerSummary(f.l); !reflect.DeepEqual(got, producersBefore) {
				t.Fatalf("producers after a crash:\n%v\nwant\n%v", got, producersBefore)
			}
		})
	}
}

// producerSummary is what deduplication and transactions need of each
// producer: its epoch, last sequence and last offset, and its open
// transaction.
func producerSummary(l *Log) map[int64]string {
	out := map[int64]string{}
	for _, e := range l.Producers() {
		out[e.ProducerID] = fmt.Sprintf("epoch %d lastSeq %d lastOffset %d txn %d", e.Epoch, e.LastSequence(), e.LastOffset(), e.CurrentTxnFirstOffset)
	}
	return out
}

// randomHistory appends n random steps: batches of plain, idempotent and
// transactional producers over a few keys (some tombstones, a few keyless
// records), commits and aborts, rolls and clock ticks.
func randomHistory(rng *rand.Rand, f *fixture, p *producers, n int) {
	const keys = 8
	txnPids := []int64{21, 22, 23}
	recs := func(step int) []string {
		var out []string
		for i := 0; i < 1+rng.Intn(3); i++ {
			k := fmt.Sprintf("k%d", rng.Intn(keys))
			switch r := rng.Intn(20); {
			case r < 4:
				out = append(out, k+"!")
			case r == 4:
				out = append(out, fmt.Sprintf("=nokey%d", step))
			default:
				out = append(out, fmt.Sprintf("%s=v%d.%d", k, step, i))
			}
		}
		return out
	}
	for step := 0; step < n; step++ {
		switch r := rng.Intn(100); {
		case r < 30:
			p.put(-1, false, recs(step)...)
		case r < 45:
			p.put(11+int64(rng.Intn(2)), false, recs(step)...)
		case r < 70:
			p.put(txnPids[rng.Intn(len(txnPids))], true, recs(step)...)
		case r < 85:
			pid := txnPids[rng.Intn(len(txnPids))]
			if p.open[pid] {
				typ := record.ControlCommit
				if rng.Intn(5) < 2 {
					typ = record.ControlAbort
				}
				p.end(pid, typ)
			}
		case r < 90:
			f.roll()
		default:
			f.advanceMs(int64(rng.Intn(600)))
		}
	}
	if rng.Intn(2) == 0 {
		for _, pid := range txnPids {
			if p.open[pid] {
				p.end(pid, record.ControlCommit)
			}
		}
	}
	f.roll()
	// Two batches in the active segment (which is never cleaned), so that
	// it has index files for checkIndexes.
	p.put(-1, false, "tail=1")
	p.put(-1, false, "tail=2")
}

// TestCleanWhileReadingAndAppending: readers see the same table below the
// bound before, during and after passes, while appends go on above it
// (run with -race).
func TestCleanWhileReadingAndAppending(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1024
	f := newFixture(t, cfg)
	p := newProducers(f)
	randomHistory(rand.New(rand.NewSource(99)), f, p, 200)
	f.l.OnHighWatermarkUpdated(f.l.LogEndOffset())
	bound := f.l.LogEndOffset()
	if fu, ok := f.l.FirstUnstableOffset(); ok {
		bound = fu
	}
	want := committedTable(t, f.l, bound)
	o := f.cleanOpts()
	o.UpperBound = bound

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				got, err := readCommittedTable(f.l, bound)
				if err != nil {
					t.Errorf("read during cleaning: %v", err)
					return
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("table during cleaning %v, want %v", got, want)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			b, err := record.Build(record.BatchOptions{PartitionLeaderEpoch: -1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, kvs(0, fmt.Sprintf("new%d=1", i)))
			if err == nil {
				_, err = f.l.AppendAsLeader(b, 0)
			}
			if err != nil {
				t.Errorf("append during cleaning: %v", err)
				return
			}
		}
	}()
	for pass := 0; pass < 3; pass++ {
		st, err := f.l.Clean(context.Background(), o)
		if err != nil {
			t.Errorf("pass %d: %v", pass, err)
		}
		if pass == 0 && st.RecordsWritten >= st.RecordsRead {
			t.Errorf("the first pass removed nothing (%+v): the test needs it to", st)
		}
	}
	close(stop)
	wg.Wait()
	if got := committedTable(t, f.l, bound); !reflect.DeepEqual(got, want) {
		t.Fatalf("table after cleaning %v, want %v", got, want)
	}
}

// TestFollowerReplicatesACleanedLog: a follower fetching a cleaned log
// takes its gaps (Kafka's followers only need increasing offsets), serves
// the same table, and recovers it after a crash without fencing anything.
func TestFollowerReplicatesACleanedLog(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1024
	f := newFixture(t, cfg)
	p := newProducers(f)
	randomHistory(rand.New(rand.NewSource(7)), f, p, 200)
	f.l.OnHighWatermarkUpdated(f.l.LogEndOffset())
	for pass := 0; pass < 2; pass++ {
		o := f.cleanOpts()
		if fu, ok := f.l.FirstUnstableOffset(); ok {
			o.UpperBound = fu
		}
		f.clean(o)
		f.advanceMs(o.DeleteRetentionMs)
	}
	leaderEnd := f.l.LogEndOffset()
	want, _ := logRecords(t, f.l, leaderEnd)
	if int64(len(want)) > leaderEnd*2/3 {
		t.Fatalf("cleaning left %d of %d offsets: the test needs gaps", len(want), leaderEnd)
	}

	g := &fixture{t: t, dir: t.TempDir() + "/t-0", clk: f.clk, cfg: cfg}
	g.open(0)
	t.Cleanup(func() { g.l.Abandon() })
	for off := int64(0); off < leaderEnd; {
		res, err := f.l.Read(off, 700, leaderEnd, true)
		if err != nil || len(res.Records) == 0 {
			// a gap at the end of a segment: the next segment's batches
			// are past it; a reader asks from the end of what it has
			t.Fatalf("leader read at %d: %v (%d bytes)", off, err, len(res.Records))
		}
		if _, err := g.l.AppendAsFollower(res.Records); err != nil {
			t.Fatalf("follower append at %d: %v", off, err)
		}
		off = g.l.LogEndOffset()
	}
	if got, _ := logRecords(t, g.l, leaderEnd); recStrings(got) != recStrings(want) {
		t.Fatalf("follower:\n%s\nleader:\n%s", recStrings(got), recStrings(want))
	}
	g.crash(0)
	if r := g.l.DamagedRanges(); len(r) != 0 {
		t.Fatalf("the follower's recovery fenced %v", r)
	}
	if got, _ := logRecords(t, g.l, leaderEnd); recStrings(got) != recStrings(want) {
		t.Fatalf("follower after a crash:\n%s\nleader:\n%s", recStrings(got), recStrings(want))
	}
}
