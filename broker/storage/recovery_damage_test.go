package storage

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// Damage found by recovery: a flipped bit, an unreadable or misnumbered
// batch. What cannot be read is fenced off, never silently dropped with
// what follows it.

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
