package storage

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	pb "github.com/strand-io/strand/proto/strand/v1"
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

// recoveryLogger captures a log's WARNs.
func recoveryLogger(cfg *Config) *bytes.Buffer {
	var buf bytes.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&lockedWriter{w: &buf}, nil))
	return &buf
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// readEach reads every batch of stored one by one, skipping those skip
// names, and checks each comes back byte for byte.
func readEach(t *testing.T, l *Log, stored [][]byte, skip func(h record.Header) bool) {
	t.Helper()
	leo := l.LogEndOffset()
	for i, b := range stored {
		h := headerOfBatch(t, b)
		if skip(h) {
			continue
		}
		res, err := l.Read(h.BaseOffset, 1<<20, leo, true)
		if err != nil {
			t.Fatalf("batch %d (offset %d): %v", i, h.BaseOffset, err)
		}
		it := record.NewIter(res.Records)
		if !it.Next() || !bytes.Equal(it.Batch(), b) {
			t.Fatalf("batch %d (offset %d) differs after recovery", i, h.BaseOffset)
		}
	}
}

// A bit flipped in a sealed middle segment (a disk fault: sealed segments
// were fsynced at roll) costs the batch it hit and nothing else: the
// segment is not cut, the later segments are kept, every other batch is
// still served, reads of the damaged batch say where the damage is, and
// the damage is logged, counted and remembered across clean restarts.
func TestRecoveryBitFlipInSealedSegmentKeepsLaterSegments(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1500
	cfg.Stats = new(Stats)
	logs := recoveryLogger(&cfg)
	f := newFixture(t, cfg)
	var stored [][]byte
	for i := 0; i < 40; i++ {
		b := buildBatch(t, idem(5, 0, int32(2*i), 2, f.nowMs()+int64(i)))
		if _, err := f.l.AppendAsLeader(b, int32(i/15)); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, b)
	}
	bases := segBases(f.l)
	leo := f.l.LogEndOffset()
	epochs := f.l.Epochs()
	if len(bases) < 4 {
		t.Fatalf("segments %v", bases)
	}
	// Flip a bit in the records of the third batch of segment 1.
	target := bases[1] + 4
	path := segPath(f.dir, bases[1], LogSuffix)
	pos, size := positionOf(t, path, target)
	f.l.Abandon()
	flipByte(t, path, pos+int64(size)-5)

	for _, reopen := range []string{"crash recovery from 0", "clean reopen"} {
		if reopen == "clean reopen" {
			f.reopenClean()
		} else {
			f.open(0)
		}
		if got := f.l.LogEndOffset(); got != leo {
			t.Fatalf("%s: log end %d, want %d", reopen, got, leo)
		}
		if got := segFiles(t, f.dir); !equalInt64s(got, bases) {
			t.Fatalf("%s: segment files %v, want %v", reopen, got, bases)
		}
		readEach(t, f.l, stored, func(h record.Header) bool { return h.BaseOffset == target })
		_, err := f.l.Read(target, 1<<20, leo, true)
		wantCode(t, err, pb.ErrorCode_KAFKA_STORAGE_ERROR)
		if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "CRC") {
			t.Fatalf("%s: the refusal does not say where and why: %v", reopen, err)
		}
		// A read from before the damage stops short of it.
		res, err := f.l.Read(bases[1], 1<<20, leo, true)
		if err != nil || int64(len(res.Records)) != pos {
			t.Fatalf("%s: read from %d: %d bytes (%v), want the %d bytes before the damage", reopen, bases[1], len(res.Records), err, pos)
		}
		if got := f.l.DamagedRanges(); len(got) != 1 || got[0] != [2]int64{target, target + 2} {
			t.Fatalf("%s: damaged ranges %v", reopen, got)
		}
		if !equalEpochs(f.l.Epochs(), epochs) {
			t.Fatalf("%s: epochs %v, want %v", reopen, f.l.Epochs(), epochs)
		}
	}
	if got := cfg.Stats.RecoveryFencedBytes.Load(); got != 2*int64(size) {
		t.Fatalf("fenced bytes counted %d, want %d (the batch, found at both opens)", got, 2*size)
	}
	if got := cfg.Stats.RecoveryTruncatedBytes.Load(); got != 0 {
		t.Fatalf("truncated bytes %d, want 0", got)
	}
	warn := logs.String()
	for _, want := range []string{"level=WARN", path, fmt.Sprintf("fromOffset=%d", target), fmt.Sprintf("position=%d", pos), fmt.Sprintf("bytes=%d", size)} {
		if !strings.Contains(warn, want) {
			t.Fatalf("the WARN lacks %q:\n%s", want, warn)
		}
	}
	// New appends go on after the kept segments.
	if res := f.appendLeader(plain(1, f.nowMs())); res.FirstOffset != leo {
		t.Fatalf("next append at %d, want %d", res.FirstOffset, leo)
	}
}

// Damage in a sealed segment that nothing after it in the segment can be
// found past (a garbled header, the file cut short) fences the rest of
// that segment up to the next one's base; the later segments are served.
func TestRecoveryUnreadableSealedTailIsFenced(t *testing.T) {
	for _, damage := range []string{"garbled header", "file cut short"} {
		t.Run(damage, func(t *testing.T) {
			cfg := testConfig()
			cfg.SegmentBytes = 1000
			cfg.Stats = new(Stats)
			f := newFixture(t, cfg)
			var stored [][]byte
			for i := 0; i < 30; i++ {
				b := buildBatch(t, plain(2, f.nowMs()))
				if _, err := f.l.AppendAsLeader(b, 0); err != nil {
					t.Fatal(err)
				}
				stored = append(stored, b)
			}
			bases := segBases(f.l)
			leo := f.l.LogEndOffset()
			path := segPath(f.dir, bases[1], LogSuffix)
			pos, _ := positionOf(t, path, bases[1]+2)
			st, _ := os.Stat(path)
			f.l.Abandon()
			if damage == "garbled header" {
				b, _ := os.ReadFile(path)
				b[pos+16] = 0x7f // magic
				b[pos+8] = 0x7f  // batchLength
				if err := os.WriteFile(path, b, 0o644); err != nil {
					t.Fatal(err)
				}
			} else if err := os.Truncate(path, pos+10); err != nil {
				t.Fatal(err)
			}
			f.open(0)
			if got := f.l.LogEndOffset(); got != leo {
				t.Fatalf("log end %d, want %d", got, leo)
			}
			if got := segFiles(t, f.dir); !equalInt64s(got, bases) {
				t.Fatalf("segment files %v, want %v", got, bases)
			}
			if got := f.l.DamagedRanges(); len(got) != 1 || got[0] != [2]int64{bases[1] + 2, bases[2]} {
				t.Fatalf("damaged ranges %v, want [%d %d)", got, bases[1]+2, bases[2])
			}
			readEach(t, f.l, stored, func(h record.Header) bool { return h.BaseOffset >= bases[1]+2 && h.BaseOffset < bases[2] })
			for off := bases[1] + 2; off < bases[2]; off++ {
				_, err := f.l.Read(off, 1<<20, leo, true)
				wantCode(t, err, pb.ErrorCode_KAFKA_STORAGE_ERROR)
			}
			want := st.Size() - pos
			if damage == "file cut short" {
				want = 10
			}
			if got := cfg.Stats.RecoveryFencedBytes.Load(); got != want {
				t.Fatalf("fenced bytes %d, want %d", got, want)
			}
			if fi, _ := os.Stat(path); damage == "garbled header" && fi.Size() != st.Size() {
				t.Fatalf("the damaged segment was cut to %d bytes from %d", fi.Size(), st.Size())
			}
		})
	}
}

// A damaged batch in the middle of the active segment followed by good
// ones (its baseOffset, outside the CRC, flipped) is fenced, not
// truncated: the batches after it are kept.
func TestRecoveryBadBaseOffsetInActiveSegmentIsFenced(t *testing.T) {
	f := newFixture(t, testConfig())
	var stored [][]byte
	for i := 0; i < 6; i++ {
		b := buildBatch(t, plain(2, f.nowMs()))
		if _, err := f.l.AppendAsLeader(b, 0); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, b)
	}
	path := activePath(f.l)
	pos, _ := positionOf(t, path, 6)
	f.l.Abandon()
	flipByte(t, path, pos+2) // baseOffset 6 + 2^40
	f.open(0)
	if got := f.l.LogEndOffset(); got != 12 {
		t.Fatalf("log end %d, want 12", got)
	}
	readEach(t, f.l, stored, func(h record.Header) bool { return h.BaseOffset == 6 })
	_, err := f.l.Read(6, 1<<20, 12, true)
	wantCode(t, err, pb.ErrorCode_KAFKA_STORAGE_ERROR)
	if res := f.appendLeader(plain(1, f.nowMs())); res.FirstOffset != 12 {
		t.Fatalf("next append at %d", res.FirstOffset)
	}
	// A follower truncating into the fenced range cuts where it starts.
	if err := f.l.TruncateTo(7); err != nil {
		t.Fatal(err)
	}
	if got, d := f.l.LogEndOffset(), f.l.DamagedRanges(); got != 6 || len(d) != 0 {
		t.Fatalf("after truncating into the fence: log end %d, damaged %v", got, d)
	}
	if _, err := os.Stat(filepath.Join(f.dir, DamagedSegmentsFile)); !os.IsNotExist(err) {
		t.Fatalf("%s survives the damage: %v", DamagedSegmentsFile, err)
	}
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

func flipByte(t *testing.T, path string, pos int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[pos] ^= 0x01
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRecoveryRebuildsDamagedIndexes(t *testing.T) {
	type damage struct {
		name   string
		suffix string
		fn     func(b []byte) []byte
	}
	garbage := func(n int) func([]byte) []byte {
		return func([]byte) []byte {
			out := make([]byte, n)
			x := uint32(2463534242)
			for i := range out {
				x ^= x << 13
				x ^= x >> 17
				x ^= x << 5
				out[i] = byte(x)
			}
			return out
		}
	}
	damages := []damage{
		{"garbage .index", IndexSuffix, garbage(800)},
		{".index cut mid-entry", IndexSuffix, func(b []byte) []byte { return b[:len(b)-3] }},
		{".index empty", IndexSuffix, func([]byte) []byte { return nil }},
		{".index missing its last entries", IndexSuffix, func(b []byte) []byte { return b[:len(b)-2*offsetIndexEntry] }},
		{".index pointing at the wrong place", IndexSuffix, func(b []byte) []byte {
			b = append([]byte(nil), b...)
			b[len(b)-1] += 4
			return b
		}},
		{"garbage .timeindex", TimeIndexSuffix, garbage(600)},
		{".timeindex cut mid-entry", TimeIndexSuffix, func(b []byte) []byte { return b[:len(b)-5] }},
		{".timeindex empty", TimeIndexSuffix, func([]byte) []byte { return nil }},
		{".timeindex missing its last entry", TimeIndexSuffix, func(b []byte) []byte { return b[:len(b)-timeIndexEntry] }},
		{"garbage .txnindex", TxnIndexSuffix, garbage(68)},
		{".txnindex cut mid-entry", TxnIndexSuffix, func(b []byte) []byte { return b[:len(b)-1] }},
		{".txnindex with a bad version", TxnIndexSuffix, func(b []byte) []byte {
			b = append([]byte(nil), b...)
			b[1] = 7
			return b
		}},
	}
	for _, d := range damages {
		t.Run(d.name, func(t *testing.T) {
			f := newFixture(t, richConfig())
			buildRichLog(t, f)
			want := captureState(t, f.l)
			if err := f.l.Close(); err != nil {
				t.Fatal(err)
			}
			rp := f.l.RecoveryPoint()
			// Damage the sealed segment holding the first aborted marker.
			seg := want.bases[0]
			for _, b := range want.bases {
				if b <= want.aborted[0].LastOffset {
					seg = b
				}
			}
			path := segPath(f.dir, seg, d.suffix)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, d.fn(b), 0o644); err != nil {
				t.Fatal(err)
			}
			f.open(rp)
			compareState(t, "after reopening with a damaged index", captureState(t, f.l), want)
			checkIndexes(t, f.l)
			got, err := os.ReadFile(path)
			if d.suffix == TxnIndexSuffix {
				if err != nil || !bytes.Equal(got, b) {
					t.Fatalf(".txnindex was not rebuilt: %d bytes, want %d (%v)", len(got), len(b), err)
				}
			}
			for _, c := range want.batches {
				h := headerOfBatch(t, c)
				off, _, ok, err := f.l.OffsetForTimestamp(h.MaxTimestamp, want.leo)
				if err != nil || !ok || off > h.LastOffset() {
					t.Fatalf("OffsetForTimestamp(%d) = %d %v %v", h.MaxTimestamp, off, ok, err)
				}
			}
		})
	}
}

// A corrupt producer snapshot is ignored; state comes from an older one
// or from replaying the log.
func TestRecoveryIgnoresCorruptSnapshots(t *testing.T) {
	for _, which := range []string{"newest", "all"} {
		t.Run(which, func(t *testing.T) {
			f := newFixture(t, richConfig())
			buildRichLog(t, f)
			want := captureState(t, f.l)
			if err := f.l.Close(); err != nil {
				t.Fatal(err)
			}
			rp := f.l.RecoveryPoint()
			snaps, _ := ListSnapshots(f.dir)
			if len(snaps) < 3 {
				t.Fatalf("snapshots %v", snaps)
			}
			victims := snaps
			if which == "newest" {
				// The snapshot at the active segment's base is the one Open wants.
				victims = []int64{want.bases[len(want.bases)-1]}
			}
			for _, o := range victims {
				flipByte(t, SnapshotPath(f.dir, o), 10)
			}
			f.open(rp)
			compareState(t, "after reopening with corrupt snapshots", captureState(t, f.l), want)
			for _, o := range victims {
				if _, err := LoadSnapshot(SnapshotPath(f.dir, o)); err == nil {
					t.Fatalf("corrupt snapshot %d still loads", o)
				}
			}
		})
	}
}

func TestRecoveryRebuildsEpochCheckpoint(t *testing.T) {
	for name, damage := range map[string]func(path string) error{
		"missing":    os.Remove,
		"garbage":    func(p string) error { return os.WriteFile(p, []byte("nonsense\x00\x01"), 0o644) },
		"count":      func(p string) error { return os.WriteFile(p, []byte("0\n5\n0 0\n"), 0o644) },
		"decreasing": func(p string) error { return os.WriteFile(p, []byte("0\n2\n4 0\n1 10\n"), 0o644) },
		"empty":      func(p string) error { return os.WriteFile(p, nil, 0o644) },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, richConfig())
			buildRichLog(t, f)
			want := captureState(t, f.l)
			if len(want.epochs) != 3 {
				t.Fatalf("epochs %v", want.epochs)
			}
			if err := f.l.Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(f.dir, EpochCheckpointFile)
			if err := damage(path); err != nil {
				t.Fatal(err)
			}
			f.open(f.l.RecoveryPoint())
			compareState(t, "after rebuilding the epoch checkpoint", captureState(t, f.l), want)
			onDisk, err := ReadEpochCheckpoint(path)
			if err != nil || !equalEpochs(onDisk, want.epochs) {
				t.Fatalf("checkpoint on disk %v %v, want %v", onDisk, err, want.epochs)
			}
		})
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

// A leader-epoch checkpoint that lies is not trusted: epochs starting
// beyond the log end are dropped, and one naming an epoch the log does
// not hold (or not increasing) is rebuilt from the batches; each with a
// WARN. Trusting a made-up epoch 999 would ignore every real epoch after
// it (AssignEpoch refuses epochs not above the latest).
func TestRecoveryDistrustsLyingEpochCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		name string
		file func(want []EpochEntry, leo int64) string
		warn string
	}{
		{"epochs beyond the log end", func(want []EpochEntry, leo int64) string {
			s := fmt.Sprintf("0\n%d\n", len(want)+2)
			for _, e := range want {
				s += fmt.Sprintf("%d %d\n", e.Epoch, e.StartOffset)
			}
			return s + fmt.Sprintf("998 %d\n999 %d\n", leo+10, leo+1000)
		}, "beyond the log end"},
		{"a made-up epoch inside the log", func(want []EpochEntry, leo int64) string {
			return fmt.Sprintf("0\n2\n%d %d\n999 %d\n", want[0].Epoch, want[0].StartOffset, leo-1)
		}, "not to be trusted"},
		{"an epoch at the wrong offset", func(want []EpochEntry, leo int64) string {
			return fmt.Sprintf("0\n2\n%d %d\n%d %d\n", want[0].Epoch, want[0].StartOffset, want[1].Epoch, want[1].StartOffset+1)
		}, "not to be trusted"},
		{"not monotonic", func(want []EpochEntry, leo int64) string {
			return fmt.Sprintf("0\n3\n%d %d\n%d %d\n%d %d\n", want[0].Epoch, want[0].StartOffset, want[2].Epoch, want[1].StartOffset, want[1].Epoch, want[2].StartOffset)
		}, "not to be trusted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := richConfig()
			logs := recoveryLogger(&cfg)
			f := newFixture(t, cfg)
			buildRichLog(t, f)
			want := captureState(t, f.l)
			if err := f.l.Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(f.dir, EpochCheckpointFile)
			if err := os.WriteFile(path, []byte(tc.file(want.epochs, want.leo)), 0o644); err != nil {
				t.Fatal(err)
			}
			f.open(f.l.RecoveryPoint())
			if !equalEpochs(f.l.Epochs(), want.epochs) {
				t.Fatalf("epochs %v, want %v", f.l.Epochs(), want.epochs)
			}
			if onDisk, err := ReadEpochCheckpoint(path); err != nil || !equalEpochs(onDisk, want.epochs) {
				t.Fatalf("checkpoint on disk %v %v, want %v", onDisk, err, want.epochs)
			}
			if w := logs.String(); !strings.Contains(w, "level=WARN") || !strings.Contains(w, tc.warn) {
				t.Fatalf("no WARN %q:\n%s", tc.warn, w)
			}
			next := want.epochs[len(want.epochs)-1].Epoch + 1
			if err := f.l.AssignEpoch(next); err != nil || f.l.LatestEpoch() != next {
				t.Fatalf("a new leader epoch %d after the load: latest %d (%v)", next, f.l.LatestEpoch(), err)
			}
		})
	}
}
