package storage

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/strand-io/strand/record"
)

// TestCleanRules has one case per rule of what a pass keeps (cleaner_pass.go).
func TestCleanRules(t *testing.T) {
	const dr = 1000 // delete.retention.ms of the cases
	cases := []struct {
		name string
		run  func(t *testing.T, f *fixture, p *producers)
	}{
		{"the last record of a key stays, earlier ones go", func(t *testing.T, f *fixture, p *producers) {
			p.put(-1, false, "a=1", "b=1") // 0,1
			p.put(-1, false, "a=2")        // 2
			p.put(-1, false, "c=1", "a=3") // 3,4
			p.put(-1, false, "=keyless")   // 5: a compacted topic drops records without a key
			f.roll()
			st := f.clean(f.cleanOpts())
			got, _ := logRecords(t, f.l, f.l.LogEndOffset())
			if s := recStrings(got); s != "1:b=1 3:c=1 4:a=3" {
				t.Fatalf("after cleaning: %s", s)
			}
			if st.FirstDirty != 0 || st.NextDirty != 6 || st.RecordsRead != 6 || st.RecordsWritten != 3 {
				t.Fatalf("stats %+v", st)
			}
		}},
		{"a tombstone stays until its delete horizon, then goes", func(t *testing.T, f *fixture, p *producers) {
			p.put(-1, false, "a=1", "b=1") // 0,1
			p.put(-1, false, "a!")         // 2
			f.roll()
			now := f.nowMs()
			f.clean(f.cleanOpts())
			got, hs := logRecords(t, f.l, f.l.LogEndOffset())
			if s := recStrings(got); s != "1:b=1 2:a!" {
				t.Fatalf("first pass: %s", s)
			}
			if hz, ok := hs[1].DeleteHorizonMs(); !ok || hz != now+dr {
				t.Fatalf("tombstone's batch: horizon %d %v, want %d", hz, ok, now+dr)
			}
			if got[1].Batch.MaxTimestamp != now || hs[0].HasDeleteHorizon() {
				t.Fatalf("timestamps or horizons changed: %+v", hs)
			}
			if c := f.l.CleanableState(f.l.LogEndOffset(), now, 0); c.DeleteHorizonMs != now+dr {
				t.Fatalf("cleanable after the first pass: %+v", c)
			}
			// Before the horizon a pass keeps it, and the horizon does not move.
			f.advanceMs(dr - 1)
			f.clean(f.cleanOpts())
			got, hs = logRecords(t, f.l, f.l.LogEndOffset())
			if s := recStrings(got); s != "1:b=1 2:a!" {
				t.Fatalf("pass before the horizon: %s", s)
			}
			if hz, _ := hs[1].DeleteHorizonMs(); hz != now+dr {
				t.Fatalf("horizon moved to %d", hz)
			}
			f.advanceMs(1)
			f.clean(f.cleanOpts())
			got, _ = logRecords(t, f.l, f.l.LogEndOffset())
			if s := recStrings(got); s != "1:b=1" {
				t.Fatalf("pass at the horizon: %s", s)
			}
			if c := f.l.CleanableState(f.l.LogEndOffset(), now, 0); c.DeleteHorizonMs != -1 {
				t.Fatalf("cleanable after the tombstone went: %+v", c)
			}
		}},
		{"an aborted transaction's records go; its marker once nothing of it is left and the horizon passed", func(t *testing.T, f *fixture, p *producers) {
			p.put(7, true, "a=x", "b=x") // 0,1
			p.put(-1, false, "c=1")      // 2
			abort := p.end(7, record.ControlAbort)
			p.put(7, true, "d=1") // 4
			p.end(7, record.ControlCommit)
			f.roll()
			before := committedTable(t, f.l, f.l.LogEndOffset())
			f.clean(f.cleanOpts())
			got, _ := logRecords(t, f.l, f.l.LogEndOffset())
			if s := recStrings(got); s != "2:c=1 3:marker 4:d=1 5:marker" {
				t.Fatalf("first pass: %s", s)
			}
			// The marker stays this pass (the pass saw the transaction's
			// data), with its .txnindex entry.
			if ab := f.l.AllAborted(); len(ab) != 1 || ab[0].LastOffset != abort {
				t.Fatalf("aborted after the first pass: %+v", ab)
			}
			if after := committedTable(t, f.l, f.l.LogEndOffset()); !reflect.DeepEqual(before, after) {
				t.Fatalf("read_committed table %v, was %v", after, before)
			}
			f.advanceMs(10) // a horizon set now differs from one set by the first pass
			f.clean(f.cleanOpts())
			_, hs := logRecords(t, f.l, f.l.LogEndOffset())
			if hz, ok := hs[1].DeleteHorizonMs(); !ok || !hs[1].IsControl() || hz != f.nowMs()+dr {
				t.Fatalf("second pass: abort marker's horizon %d %v", hz, ok)
			}
			if hs[3].HasDeleteHorizon() {
				t.Fatal("the commit marker of a transaction with data left got a horizon")
			}
			f.advanceMs(dr)
			f.clean(f.cleanOpts())
			got, _ = logRecords(t, f.l, f.l.LogEndOffset())
			if s := recStrings(got); s != "2:c=1 4:d=1 5:marker" {
				t.Fatalf("pass after the horizon: %s", s)
			}
			if ab := f.l.AllAborted(); len(ab) != 0 {
				t.Fatalf("aborted after the marker went: %+v", ab)
			}
			if after := committedTable(t, f.l, f.l.LogEndOffset()); !reflect.DeepEqual(before, after) {
				t.Fatalf("read_committed table %v, was %v", after, before)
			}
		}},
		{"an aborted transaction's records supersede nothing", func(t *testing.T, f *fixture, p *producers) {
			p.put(-1, false, "a=1") // 0
			p.put(7, true, "a=x")   // 1
			p.put(-1, false, "b=1") // 2
			p.end(7, record.ControlAbort)
			p.put(7, true, "c=1") // 4
			p.end(7, record.ControlCommit)
			f.roll()
			f.clean(f.cleanOpts())
			if got := committedTable(t, f.l, f.l.LogEndOffset()); got["a"] != "1@0" {
				t.Fatalf("read_committed table %v: the aborted write of a replaced the committed one", got)
			}
		}},
		{"a committed transaction's marker goes once all its data was superseded and the horizon passed", func(t *testing.T, f *fixture, p *producers) {
			p.put(8, true, "a=t") // 0
			p.end(8, record.ControlCommit)
			p.put(-1, false, "a=2") // 2
			p.put(8, true, "z=1")   // 3
			p.end(8, record.ControlCommit)
			f.roll()
			f.clean(f.cleanOpts())
			got, _ := logRecords(t, f.l, f.l.LogEndOffset())
			if s := recStrings(got); s != "1:marker 2:a=2 3:z=1 4:marker" {
				t.Fatalf("first pass: %s", s)
			}
			f.advanceMs(10)
			f.clean(f.cleanOpts())
			_, hs := logRecords(t, f.l, f.l.LogEndOffset())
			if hz, ok := hs[0].DeleteHorizonMs(); !ok || hz != f.nowMs()+dr {
				t.Fatalf("second pass: the empty transaction's marker has horizon %d %v", hz, ok)
			}
			if hs[3].HasDeleteHorizon() {
				t.Fatal("the marker of a transaction with data left got a horizon")
			}
			f.advanceMs(dr)
			f.clean(f.cleanOpts())
			got, _ = logRecords(t, f.l, f.l.LogEndOffset())
			if s := recStrings(got); s != "2:a=2 3:z=1 4:marker" {
				t.Fatalf("pass after the horizon: %s", s)
			}
		}},
		{"a producer's last batch stays, emptied, and its state survives a restart", func(t *testing.T, f *fixture, p *producers) {
			p.put(9, false, "a=1", "b=1") // 0,1 seq 0..1
			p.put(-1, false, "a=2", "b=2")
			f.roll()
			f.clean(f.cleanOpts())
			got, hs := logRecords(t, f.l, f.l.LogEndOffset())
			if s := recStrings(got); s != "2:a=2 3:b=2" {
				t.Fatalf("after cleaning: %s", s)
			}
			h := hs[0]
			if h.RecordCount != 0 || h.BaseOffset != 0 || h.LastOffset() != 1 || h.ProducerID != 9 || h.BaseSequence != 0 || h.LastSequence() != 1 || h.ProducerEpoch != 0 {
				t.Fatalf("the producer's last batch is %+v", h)
			}
			// Rebuild producer state from the log (no snapshot) and check
			// that a retry of the batch is still a duplicate.
			f.l.Abandon()
			if err := DeleteSnapshotsAbove(f.dir, -1); err != nil {
				t.Fatal(err)
			}
			f.open(0)
			e, ok := f.l.psm.Get(9)
			if !ok || e.LastSequence() != 1 || e.LastOffset() != 1 {
				t.Fatalf("producer 9 after the restart: %+v %v", e, ok)
			}
			b, _ := record.Build(record.BatchOptions{PartitionLeaderEpoch: -1, ProducerID: 9, BaseSequence: 0}, kvs(f.nowMs(), "a=1", "b=1"))
			res, err := f.l.AppendAsLeader(b, 0)
			if err != nil || !res.Duplicate || res.FirstOffset != 0 {
				t.Fatalf("retry of the producer's batch: %+v %v", res, err)
			}
		}},
		{"nothing at or above the upper bound is cleaned", func(t *testing.T, f *fixture, p *producers) {
			p.put(-1, false, "a=1") // 0
			f.roll()
			p.put(-1, false, "a=2") // 1
			p.put(-1, false, "a=3") // 2
			f.roll()
			p.put(-1, false, "a=4") // 3
			f.roll()
			seg2 := mustRead(t, segPath(f.dir, 1, LogSuffix))
			// The bound falls inside the second segment: only the first is
			// cleaned, with what the first holds.
			o := f.cleanOpts()
			o.UpperBound = 2
			st := f.clean(o)
			if st.NextDirty != 1 {
				t.Fatalf("next dirty %d, want 1", st.NextDirty)
			}
			got, _ := logRecords(t, f.l, f.l.LogEndOffset())
			if s := recStrings(got); s != "0:a=1 1:a=2 2:a=3 3:a=4" {
				t.Fatalf("after cleaning below 2: %s", s)
			}
			if !bytes.Equal(seg2, mustRead(t, segPath(f.dir, 1, LogSuffix))) {
				t.Fatal("the segment holding the upper bound was rewritten")
			}
			if c := f.l.CleanableState(2, f.nowMs(), 0); c.FirstDirty != 1 || c.FirstUncleanable != 2 {
				t.Fatalf("cleanable %+v", c)
			}
			o.UpperBound = 3
			f.clean(o)
			got, _ = logRecords(t, f.l, f.l.LogEndOffset())
			if s := recStrings(got); s != "2:a=3 3:a=4" {
				t.Fatalf("after cleaning below 3: %s", s)
			}
		}},
		{"a segment newer than min.compaction.lag.ms stays dirty", func(t *testing.T, f *fixture, p *producers) {
			p.put(-1, false, "a=1") // 0
			f.roll()
			f.advanceMs(5000)
			p.put(-1, false, "a=2") // 1
			f.roll()
			p.put(-1, false, "b=1") // 2
			o := f.cleanOpts()
			o.MinCompactionLagMs = 3000
			if c := f.l.CleanableState(o.UpperBound, o.NowMs, o.MinCompactionLagMs); c.FirstUncleanable != 1 || c.OldestDirtyMs != f.nowMs()-5000 {
				t.Fatalf("cleanable %+v", c)
			}
			f.clean(o)
			got, _ := logRecords(t, f.l, f.l.LogEndOffset())
			if s := recStrings(got); s != "0:a=1 1:a=2 2:b=1" {
				t.Fatalf("with the lag not passed: %s", s)
			}
			f.advanceMs(3000)
			f.clean(f.cleanOpts())
			got, _ = logRecords(t, f.l, f.l.LogEndOffset())
			if s := recStrings(got); s != "1:a=2 2:b=1" {
				t.Fatalf("with the lag passed: %s", s)
			}
		}},
		{"a full key map stops the dirty section at a segment boundary", func(t *testing.T, f *fixture, p *producers) {
			p.put(-1, false, "a=1", "b=1") // 0,1
			f.roll()
			p.put(-1, false, "c=1", "a=2") // 2,3
			f.roll()
			p.put(-1, false, "b=2") // 4
			f.roll()
			o := f.cleanOpts()
			o.MaxMapEntries = 2
			// Each pass takes what fits: {a, b}, then {c, a}, then {b}.
			for i, want := range []struct {
				next int64
				recs string
			}{{2, "0:a=1 1:b=1 2:c=1 3:a=2 4:b=2"}, {4, "1:b=1 2:c=1 3:a=2 4:b=2"}, {5, "2:c=1 3:a=2 4:b=2"}} {
				if st := f.clean(o); st.NextDirty != want.next {
					t.Fatalf("pass %d: next dirty %d, want %d", i, st.NextDirty, want.next)
				}
				got, _ := logRecords(t, f.l, f.l.LogEndOffset())
				if s := recStrings(got); s != want.recs {
					t.Fatalf("after pass %d: %s, want %s", i, s, want.recs)
				}
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			warnings := recoveryLogger(&cfg)
			f := newFixture(t, cfg)
			p := newProducers(f)
			tc.run(t, f, p)
			// Appends go on after cleaning.
			p.put(-1, false, "end=1")
			p.put(-1, false, "end=2")
			checkIndexes(t, f.l)
			// Whatever the pass left, the log reopens to the same records,
			// after a clean shutdown and after a crash with nothing trusted.
			want, _ := logRecords(t, f.l, f.l.LogEndOffset())
			f.reopenClean()
			got, _ := logRecords(t, f.l, f.l.LogEndOffset())
			if recStrings(got) != recStrings(want) {
				t.Fatalf("after a restart: %s, want %s", recStrings(got), recStrings(want))
			}
			// The cleaned segments' gaps are expected: their indexes are
			// trusted, not rebuilt with a warning.
			if w := warnings.String(); w != "" {
				t.Fatalf("warnings on reopening the cleaned log:\n%s", w)
			}
			f.crash(0)
			got, _ = logRecords(t, f.l, f.l.LogEndOffset())
			if recStrings(got) != recStrings(want) {
				t.Fatalf("after a crash: %s, want %s", recStrings(got), recStrings(want))
			}
			if r := f.l.DamagedRanges(); len(r) != 0 {
				t.Fatalf("recovery fenced %v", r)
			}
			checkIndexes(t, f.l)
		})
	}
}

func mustRead(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCleanCrashDuringSwap stops a pass before each step of its end, as a
// crash would, and reopens the log: it holds exactly the old segments or
// exactly the cleaned ones, and reads the same table.
func TestCleanCrashDuringSwap(t *testing.T) {
	history := func(f *fixture) {
		p := newProducers(f)
		for i := 0; i < 40; i++ {
			p.put(-1, false, "k"+string(rune('a'+i%5))+"=v", "x"+string(rune('a'+i%3))+"!")
			if i%7 == 6 {
				f.roll()
			}
		}
		p.put(3, true, "a=t")
		p.end(3, record.ControlAbort)
		f.roll()
	}
	snapshot := func(t *testing.T, dir string) map[string]string {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, e := range ents {
			for _, suf := range []string{LogSuffix, TxnIndexSuffix, cleanedSuffix} {
				if filepath.Ext(e.Name()) == suf {
					out[e.Name()] = string(mustRead(t, filepath.Join(dir, e.Name())))
				}
			}
		}
		return out
	}
	// The reference: the same history cleaned without a crash.
	ref := newFixture(t, testConfig())
	history(ref)
	oldFiles := snapshot(t, ref.dir)
	table := committedTable(t, ref.l, ref.l.LogEndOffset())
	ref.clean(ref.cleanOpts())
	newFiles := snapshot(t, ref.dir)
	if reflect.DeepEqual(oldFiles, newFiles) {
		t.Fatal("cleaning changed nothing; the test proves nothing")
	}
	steps := []struct {
		step      string
		committed bool
	}{{"written", false}, {"manifest", false}, {"remove-old", true}, {"rename-cleaned", true}, {"checkpoint", true}, {"remove-manifest", true}}
	for _, sc := range steps {
		t.Run(sc.step, func(t *testing.T) {
			f := newFixture(t, testConfig())
			history(f)
			f.l.swapHook = func(step string) error {
				if step == sc.step {
					return errCrashForTest
				}
				return nil
			}
			if _, err := f.l.Clean(context.Background(), f.cleanOpts()); !errors.Is(err, errCrashForTest) {
				t.Fatalf("Clean: %v, want the simulated crash", err)
			}
			rp := f.l.RecoveryPoint()
			f.l.Abandon()
			f.open(rp)
			want := oldFiles
			if sc.committed {
				want = newFiles
			}
			if got := snapshot(t, f.dir); !reflect.DeepEqual(got, want) {
				t.Fatalf("after the crash at %s the files are %v, want the %s set", sc.step, keys(got), map[bool]string{false: "old", true: "new"}[sc.committed])
			}
			if _, err := os.Stat(filepath.Join(f.dir, CleanerSwapFile)); !os.IsNotExist(err) {
				t.Fatalf("%s left after recovery: %v", CleanerSwapFile, err)
			}
			if got := committedTable(t, f.l, f.l.LogEndOffset()); !reflect.DeepEqual(got, table) {
				t.Fatalf("table %v, want %v", got, table)
			}
			checkIndexes(t, f.l)
			// The next pass works from there and ends where the reference did.
			f.l.swapHook = nil
			f.clean(f.cleanOpts())
			if got := committedTable(t, f.l, f.l.LogEndOffset()); !reflect.DeepEqual(got, table) {
				t.Fatalf("table after another pass %v, want %v", got, table)
			}
		})
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestCleanAbortsWhenTheLogChanges: a truncation between the pass's
// reading and its swap aborts the pass and leaves no file behind.
func TestCleanAbortsWhenTheLogChanges(t *testing.T) {
	f := newFixture(t, testConfig())
	p := newProducers(f)
	p.put(-1, false, "a=1")
	f.roll()
	p.put(-1, false, "a=2")
	f.roll()
	p.put(-1, false, "a=3")
	f.l.swapHook = func(step string) error {
		if step == "written" {
			if err := f.l.TruncateTo(1); err != nil {
				t.Fatal(err)
			}
		}
		return nil
	}
	if _, err := f.l.Clean(context.Background(), f.cleanOpts()); !errors.Is(err, ErrCleanAborted) {
		t.Fatalf("Clean: %v, want ErrCleanAborted", err)
	}
	ents, _ := os.ReadDir(f.dir)
	for _, e := range ents {
		if filepath.Ext(e.Name()) == cleanedSuffix {
			t.Fatalf("%s left behind", e.Name())
		}
	}
	got, _ := logRecords(t, f.l, f.l.LogEndOffset())
	if s := recStrings(got); s != "0:a=1" {
		t.Fatalf("log after the truncation: %s", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.l.swapHook = nil
	p.put(-1, false, "a=4")
	f.roll()
	if _, err := f.l.Clean(ctx, f.cleanOpts()); !errors.Is(err, ErrCleanAborted) {
		t.Fatalf("Clean with an ended context: %v, want ErrCleanAborted", err)
	}
}

// TestCleanCheckpointFollowsTheLog: the clean checkpoint is persisted, and
// a truncation below it, a restart at a new offset or retention past it
// moves it.
func TestCleanCheckpointFollowsTheLog(t *testing.T) {
	f := newFixture(t, testConfig())
	p := newProducers(f)
	for i := 0; i < 3; i++ {
		p.put(-1, false, "a=1", "b=1")
		f.roll()
	}
	p.put(-1, false, "c=1")
	if st := f.clean(f.cleanOpts()); st.NextDirty != 6 {
		t.Fatalf("next dirty %d, want 6", st.NextDirty)
	}
	if c := f.l.CleanableState(7, f.nowMs(), 0); c.FirstDirty != 6 || c.FirstUncleanable != 6 || c.DirtyBytes != 0 || c.CleanBytes == 0 || c.DirtyRatio != 0 {
		t.Fatalf("cleanable %+v", c)
	}
	f.reopenClean()
	if c := f.l.CleanableState(7, f.nowMs(), 0); c.FirstDirty != 6 {
		t.Fatalf("after a restart: first dirty %d, want 6", c.FirstDirty)
	}
	// Truncation cuts before the batch holding offset 5: at 4.
	if err := f.l.TruncateTo(5); err != nil {
		t.Fatal(err)
	}
	if c := f.l.CleanableState(5, f.nowMs(), 0); c.FirstDirty != 4 {
		t.Fatalf("after truncating to 4: first dirty %d", c.FirstDirty)
	}
	if got := readCleanCheckpoint(nil, f.dir); got != 4 {
		t.Fatalf("checkpoint file after truncating to 4: %d", got)
	}
	if err := f.l.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	if c := f.l.CleanableState(100, f.nowMs(), 0); c.FirstDirty != 100 || readCleanCheckpoint(nil, f.dir) != 100 {
		t.Fatalf("after restarting at 100: %+v, file %d", c, readCleanCheckpoint(nil, f.dir))
	}
}

// TestCleanThrottle: the throttle hears of every byte read and written,
// and its error stops the pass with nothing swapped in.
func TestCleanThrottle(t *testing.T) {
	f := newFixture(t, testConfig())
	p := newProducers(f)
	for i := 0; i < 20; i++ {
		p.put(-1, false, "a=1", "b=2")
		if i%5 == 4 {
			f.roll()
		}
	}
	before, _ := logRecords(t, f.l, f.l.LogEndOffset())
	o := f.cleanOpts()
	var seen int
	o.Throttle = func(ctx context.Context, n int) error {
		seen += n
		return nil
	}
	st := f.clean(o)
	// The map pass reads the dirty section, the rewrite reads everything
	// below the dirty end and writes what stays.
	if want := int(2*st.BytesRead + st.BytesWritten); seen != want {
		t.Fatalf("throttle saw %d bytes, want %d (%+v)", seen, want, st)
	}
	p.put(-1, false, "a=3")
	f.roll()
	stop := errors.New("throttled out")
	o = f.cleanOpts()
	o.Throttle = func(context.Context, int) error { return stop }
	if _, err := f.l.Clean(context.Background(), o); !errors.Is(err, ErrCleanAborted) {
		t.Fatalf("Clean with a failing throttle: %v, want ErrCleanAborted", err)
	}
	after, _ := logRecords(t, f.l, f.l.LogEndOffset()-1)
	if recStrings(after) != recStrings(before[len(before)-2:]) {
		t.Fatalf("log after the stopped pass: %s", recStrings(after))
	}
}

// TestCleanStopsAtADamagedSegment: a segment recovery fenced is never
// read or rewritten; cleaning stops at its base and says why.
func TestCleanStopsAtADamagedSegment(t *testing.T) {
	cfg := testConfig()
	recoveryLogger(&cfg)
	f := newFixture(t, cfg)
	p := newProducers(f)
	for seg := 0; seg < 3; seg++ {
		p.put(-1, false, "a=1", "b=1")
		p.put(-1, false, "a=2")
		f.roll()
	}
	p.put(-1, false, "c=1")
	path := segPath(f.dir, 3, LogSuffix)
	b := mustRead(t, path)
	b[len(b)-3] ^= 0xff // the last batch of the second segment: a CRC mismatch
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f.crash(0)
	if len(f.l.DamagedRanges()) != 1 {
		t.Fatalf("damage %v", f.l.DamagedRanges())
	}
	c := f.l.CleanableState(f.l.LogEndOffset(), f.nowMs(), 0)
	if !c.Damaged || c.FirstUncleanable != 3 {
		t.Fatalf("cleanable %+v", c)
	}
	if st := f.clean(f.cleanOpts()); st.NextDirty != 3 {
		t.Fatalf("next dirty %d, want 3", st.NextDirty)
	}
	if !bytes.Equal(b, mustRead(t, path)) {
		t.Fatal("the damaged segment was rewritten")
	}
	got, _ := logRecords(t, f.l, 3)
	if s := recStrings(got); s != "1:b=1 2:a=2" {
		t.Fatalf("below the damaged segment: %s", s)
	}
}
