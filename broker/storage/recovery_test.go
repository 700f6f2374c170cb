package storage

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/strand-io/strand/record"
)

// positionOf returns the byte position and size of the batch at offset in a segment file.
func positionOf(t *testing.T, path string, offset int64) (pos int64, size int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pos, size, ok := record.FindBatch(data, offset)
	if !ok {
		t.Fatalf("no batch at offset %d in %s", offset, path)
	}
	return pos, size
}

func segPath(dir string, base int64, suffix string) string {
	return filepath.Join(dir, FileName(base)+suffix)
}

// The acceptance test: a crash leaves the active segment cut in
// the middle of its last batch.
func TestCrashRecoveryTornTail(t *testing.T) {
	cuts := []struct {
		name string
		keep func(size int) int // bytes of the last batch left on disk
	}{
		{"one byte of the last batch", func(int) int { return 1 }},
		{"inside the header", func(int) int { return 30 }},
		{"just the header", func(int) int { return record.HeaderSize }},
		{"half the batch", func(n int) int { return n / 2 }},
		{"all but one byte", func(n int) int { return n - 1 }},
	}
	for _, rpFromClose := range []bool{false, true} {
		for _, cut := range cuts {
			name := cut.name
			if rpFromClose {
				name += ", recovery point from an earlier close"
			}
			t.Run(name, func(t *testing.T) {
				cfg := testConfig()
				cfg.SegmentBytes = 2000
				f := newFixture(t, cfg)
				const pid = 11
				var sent, stored [][]byte
				seq := int32(0)
				rp := int64(0)
				for i := 0; i < 30; i++ {
					if i == 8 && rpFromClose {
						f.reopenClean()
						rp = f.l.RecoveryPoint()
					}
					b := buildBatch(t, idem(pid, 0, seq, 3, f.nowMs()+int64(i)))
					sent = append(sent, append([]byte(nil), b...))
					if _, err := f.l.AppendAsLeader(b, int32(i/10)); err != nil {
						t.Fatal(err)
					}
					stored = append(stored, b)
					seq += 3
				}
				leo := f.l.LogEndOffset()
				producersBefore := f.l.Producers()
				epochsBefore := f.l.Epochs()
				if f.l.NumSegments() < 3 {
					t.Fatalf("%d segments", f.l.NumSegments())
				}
				path := activePath(f.l)
				f.l.Abandon()
				st, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				last := stored[len(stored)-1]
				fullSize := st.Size()
				if err := os.Truncate(path, fullSize-int64(len(last))+int64(cut.keep(len(last)))); err != nil {
					t.Fatal(err)
				}

				f.open(rp)
				want := leo - 3
				if got := f.l.LogEndOffset(); got != want {
					t.Fatalf("log end %d after recovery, want %d", got, want)
				}
				if st, _ := os.Stat(path); st.Size() != fullSize-int64(len(last)) {
					t.Fatalf("active segment is %d bytes: the torn batch was not cut off", st.Size())
				}
				got := readBatches(t, f.l, 0, want)
				if !reflect.DeepEqual(got, stored[:len(stored)-1]) {
					t.Fatalf("recovered %d batches that differ from the %d appended before the cut", len(got), len(stored)-1)
				}
				if rp := f.l.RecoveryPoint(); rp > segBases(f.l)[f.l.NumSegments()-1] {
					t.Fatalf("recovery point %d is inside the rescanned active segment", rp)
				}
				checkIndexes(t, f.l)
				for off := int64(0); off < want; off++ {
					res, err := f.l.Read(off, 1, want, true)
					if err != nil || res.FirstOffset != off/3*3 || !bytes.Equal(res.Records, stored[off/3]) {
						t.Fatalf("Read(%d) after recovery: first %d, %v", off, res.FirstOffset, err)
					}
				}
				if !equalEpochs(f.l.Epochs(), epochsBefore) {
					t.Fatalf("epochs %v, want %v", f.l.Epochs(), epochsBefore)
				}
				snaps, _ := ListSnapshots(f.dir)
				for _, s := range snaps {
					if s > want {
						t.Fatalf("snapshot %d above the log end %d survived", s, want)
					}
				}

				// A batch that survived is still a duplicate; the torn one goes in again at the same offset.
				res, err := f.l.AppendAsLeader(append([]byte(nil), sent[28]...), 2)
				if err != nil || !res.Duplicate || res.FirstOffset != 84 || res.LastOffset != 86 {
					t.Fatalf("re-sent surviving batch: %+v %v", res, err)
				}
				res, err = f.l.AppendAsLeader(append([]byte(nil), sent[29]...), 2)
				if err != nil || res.Duplicate || res.FirstOffset != want || res.LastOffset != leo-1 {
					t.Fatalf("re-sent torn batch: %+v %v", res, err)
				}
				if !reflect.DeepEqual(f.l.Producers(), producersBefore) {
					t.Fatalf("producers %+v, want %+v", f.l.Producers(), producersBefore)
				}
				if got := readBatches(t, f.l, 0, leo); !reflect.DeepEqual(got, stored) {
					t.Fatal("the log differs from the one before the crash")
				}
			})
		}
	}
}

// damagedLog builds a log of several segments with idempotent and
// transactional producers, epochs, and aborted transactions whose markers
// are in a sealed segment and in the active one.
type logState struct {
	leo       int64
	batches   [][]byte
	aborted   []AbortedTxn
	epochs    []EpochEntry
	producers []ProducerEntry
	maxTs     []int64
	bases     []int64
	fuo       int64
	indexes   string // every segment's offset index, and the time index of all but the active one
}

func indexDump(l *Log) string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var b strings.Builder
	for i, s := range l.segs {
		fmt.Fprintf(&b, "segment %d: index %v %v", s.base, s.idx.rel, s.idx.pos)
		if i < len(l.segs)-1 {
			fmt.Fprintf(&b, " timeindex %v %v", s.tix.ts, s.tix.rel)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func captureState(t *testing.T, l *Log) logState {
	t.Helper()
	s := logState{
		leo:       l.LogEndOffset(),
		aborted:   l.AllAborted(),
		epochs:    l.Epochs(),
		producers: l.Producers(),
		maxTs:     segMaxTimestamps(l),
		bases:     segBases(l),
		indexes:   indexDump(l),
	}
	s.batches = readBatches(t, l, l.LogStartOffset(), s.leo)
	// Open transactions only: which completed ones still wait for the HW
	// is not persisted (Partition tells a reopened log its HW).
	s.fuo, _ = l.FirstUndecidedOffset()
	return s
}

func compareState(t *testing.T, when string, got, want logState) {
	t.Helper()
	if got.leo != want.leo {
		t.Fatalf("%s: log end %d, want %d", when, got.leo, want.leo)
	}
	if !reflect.DeepEqual(got.batches, want.batches) {
		t.Fatalf("%s: batches differ", when)
	}
	if !reflect.DeepEqual(got.aborted, want.aborted) {
		t.Fatalf("%s: aborted transactions %+v, want %+v", when, got.aborted, want.aborted)
	}
	if !equalEpochs(got.epochs, want.epochs) {
		t.Fatalf("%s: epochs %v, want %v", when, got.epochs, want.epochs)
	}
	if !reflect.DeepEqual(got.producers, want.producers) {
		t.Fatalf("%s: producers\n%+v\nwant\n%+v", when, got.producers, want.producers)
	}
	if !equalInt64s(got.bases, want.bases) {
		t.Fatalf("%s: segments %v, want %v", when, got.bases, want.bases)
	}
	if !equalInt64s(got.maxTs, want.maxTs) {
		t.Fatalf("%s: segment max timestamps %v, want %v", when, got.maxTs, want.maxTs)
	}
	if got.indexes != want.indexes {
		t.Fatalf("%s: indexes\n%s\nwant\n%s", when, got.indexes, want.indexes)
	}
	if got.fuo != want.fuo {
		t.Fatalf("%s: first undecided offset %d, want %d", when, got.fuo, want.fuo)
	}
}

// buildRichLog: producers 1 (idempotent), 2 and 3 (transactional), plain
// batches, epochs 0, 1 and 4; producer 2 aborts in an early segment,
// producer 3 commits, producer 2 aborts again in the active segment, and
// producer 3 leaves a transaction open.
func buildRichLog(t *testing.T, f *fixture) {
	t.Helper()
	ts := f.nowMs()
	seq1 := int32(0)
	epoch := int32(0)
	data := func(i int) {
		f.appendLeaderEpoch(idem(1, 0, seq1, 2, ts+int64(i)), epoch)
		seq1 += 2
		f.appendLeaderEpoch(plain(1, ts+int64(i)), epoch)
	}
	mark := func(pid int64, pe int16, typ record.ControlType) {
		if _, err := f.l.AppendMarker(pid, pe, 3, typ, epoch); err != nil {
			t.Fatal(err)
		}
	}
	f.appendLeaderEpoch(txnb(2, 0, 0, 2, ts), epoch)
	f.appendLeaderEpoch(txnb(3, 0, 0, 2, ts), epoch)
	for i := 0; i < 6; i++ {
		data(i)
	}
	mark(2, 1, record.ControlAbort)
	epoch = 1
	for i := 6; i < 12; i++ {
		data(i)
	}
	mark(3, 1, record.ControlCommit)
	f.appendLeaderEpoch(txnb(2, 1, 0, 3, ts+20), epoch)
	epoch = 4
	for i := 12; i < 20; i++ {
		data(i)
	}
	f.appendLeaderEpoch(txnb(3, 1, 0, 1, ts+30), epoch)
	for i := 20; i < 24; i++ {
		data(i)
	}
	mark(2, 2, record.ControlAbort)
	if f.l.NumSegments() < 4 {
		t.Fatalf("only %d segments", f.l.NumSegments())
	}
	ab := f.l.AllAborted()
	if len(ab) != 2 {
		t.Fatalf("aborted %+v", ab)
	}
	bases := segBases(f.l)
	if ab[0].LastOffset >= bases[len(bases)-1] || ab[1].LastOffset < bases[len(bases)-1] {
		t.Fatalf("markers at %d and %d, segments %v: want one sealed and one active", ab[0].LastOffset, ab[1].LastOffset, bases)
	}
}

func richConfig() Config {
	c := testConfig()
	c.SegmentBytes = 1200
	return c
}

// A clean Close and Open keeps everything, including the .txnindex entries
// of the active segment (which Open rescans).
func TestCleanCloseKeepsEverything(t *testing.T) {
	f := newFixture(t, richConfig())
	buildRichLog(t, f)
	want := captureState(t, f.l)
	files := map[string][]byte{}
	ents, _ := os.ReadDir(f.dir)
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(f.dir, e.Name()))
		files[e.Name()] = b
	}
	for i := 0; i < 3; i++ {
		f.reopenClean()
		compareState(t, "after a clean reopen", captureState(t, f.l), want)
		checkIndexes(t, f.l)
	}
	// The segment files and their txn indexes are what they were.
	for name, b := range files {
		if filepath.Ext(name) != LogSuffix && filepath.Ext(name) != TxnIndexSuffix {
			continue
		}
		got, err := os.ReadFile(filepath.Join(f.dir, name))
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("%s changed across clean reopens (%v)", name, err)
		}
	}
	// Still a working log: the open transaction ends, a duplicate is recognised.
	m, err := f.l.AppendMarker(3, 2, 3, record.ControlAbort, 4)
	if err != nil || m.Completed == nil || !m.Completed.Aborted || len(f.l.AllAborted()) != 3 {
		t.Fatalf("abort after reopen: %+v, %+v", m, f.l.AllAborted())
	}
}

// After a crash with the recovery point at 0 every segment is rescanned,
// and the result is the same log.
func TestCrashRecoveryFromZeroRebuildsEverything(t *testing.T) {
	f := newFixture(t, richConfig())
	buildRichLog(t, f)
	want := captureState(t, f.l)
	f.crash(0)
	compareState(t, "after recovery from 0", captureState(t, f.l), want)
	checkIndexes(t, f.l)
	f.reopenClean()
	compareState(t, "after recovery and a clean reopen", captureState(t, f.l), want)
	checkIndexes(t, f.l)
}

// Opening a log never lowers its recovery point below the checkpoint's:
// a clean close leaves it at the log end, and the next Open keeps it
// there (it used to drop to the active segment's base on every start).
func TestRecoveryKeepsRecoveryPoint(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1000
	f := newFixture(t, cfg)
	for i := 0; i < 30; i++ {
		f.appendLeader(plain(2, f.nowMs()))
	}
	f.reopenClean()
	if rp, leo := f.l.RecoveryPoint(), f.l.LogEndOffset(); rp != leo {
		t.Fatalf("after a clean reopen the recovery point is %d, want the log end %d", rp, leo)
	}
	// After a crash from an older checkpoint, every segment sealed (and
	// fsynced) at roll is below the recovery point.
	f.crash(0)
	bases := segBases(f.l)
	if rp := f.l.RecoveryPoint(); rp != bases[len(bases)-1] {
		t.Fatalf("after crash recovery from 0 the recovery point is %d, want the active segment's base %d", rp, bases[len(bases)-1])
	}
}

// Segments below the recovery point are trusted, not re-read: damage
// there (which only a disk fault could cause after an fsync) is not seen
// by Open, while the same damage above the recovery point is.
func TestRecoveryPointLimitsRescan(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1000
	f := newFixture(t, cfg)
	for i := 0; i < 30; i++ {
		f.appendLeader(plain(2, f.nowMs()))
	}
	bases := segBases(f.l)
	rp := f.l.RecoveryPoint()
	if rp != bases[len(bases)-1] || len(bases) < 3 {
		t.Fatalf("recovery point %d, segments %v", rp, bases)
	}
	pos, size := positionOf(t, segPath(f.dir, bases[0], LogSuffix), 2)
	f.l.Abandon()
	flipByte(t, segPath(f.dir, bases[0], LogSuffix), pos+int64(size)-1)
	f.open(rp)
	if f.l.LogEndOffset() != 60 {
		t.Fatalf("trusted segment rescanned: log end %d", f.l.LogEndOffset())
	}
	if d := f.l.DamagedRanges(); len(d) != 0 {
		t.Fatalf("trusted segment rescanned: damaged %v", d)
	}
	f.crash(0)
	if f.l.LogEndOffset() != 60 {
		t.Fatalf("rescan from 0: log end %d, want 60 (nothing cut)", f.l.LogEndOffset())
	}
	if d := f.l.DamagedRanges(); len(d) != 1 || d[0] != [2]int64{2, 4} {
		t.Fatalf("rescan from 0: damaged %v, want [2 4)", d)
	}
}
