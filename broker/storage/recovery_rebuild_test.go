package storage

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Derived files recovery rebuilds from the segments when they are
// damaged, missing or wrong: offset and time indexes, producer snapshots,
// the leader-epoch checkpoint.

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

// A corrupt producer snapshot is not used, and said so: one WARN per
// snapshot naming its file and why it does not load; state comes from an
// older one or from replaying the log.
func TestRecoveryIgnoresCorruptSnapshots(t *testing.T) {
	for _, which := range []string{"newest", "all"} {
		t.Run(which, func(t *testing.T) {
			cfg := richConfig()
			logs := recoveryLogger(&cfg)
			f := newFixture(t, cfg)
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
			logs.Reset()
			f.open(rp)
			compareState(t, "after reopening with corrupt snapshots", captureState(t, f.l), want)
			warned := 0
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "level=WARN") && strings.Contains(line, "producer-state snapshot does not load") {
					warned++
					if !strings.Contains(line, "CRC mismatch") || !strings.Contains(line, ".snapshot") {
						t.Errorf("the warning names neither the file nor why: %s", line)
					}
				}
			}
			if warned == 0 {
				t.Errorf("no warning for %d corrupt snapshots; the log:\n%s", len(victims), logs.String())
			}
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
