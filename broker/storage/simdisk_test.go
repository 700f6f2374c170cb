package storage

import (
	"context"
	"errors"
	"math/rand"
	"reflect"
	"testing"

	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/simdisk"
)

// onSimDisk puts the fixture's log on a new simulated disk.
func onSimDisk(cfg Config) (Config, *simdisk.FS) {
	d := simdisk.New(nil)
	cfg.FS = d
	return cfg, d
}

// Recovery tests that hold for any file system run on the real one and on
// a simulated disk (which, without a Crash, keeps every write as the page
// cache does across a kill -9).
func TestRecoveryOnBothDisks(t *testing.T) {
	for _, disk := range []string{"os", "simdisk"} {
		cfg := func(c Config) Config {
			if disk == "simdisk" {
				c, _ = onSimDisk(c)
			}
			return c
		}
		t.Run(disk+"/from zero rebuilds everything", func(t *testing.T) {
			f := newFixture(t, cfg(richConfig()))
			buildRichLog(t, f)
			want := captureState(t, f.l)
			f.crash(0)
			compareState(t, "after recovery from 0", captureState(t, f.l), want)
			checkIndexes(t, f.l)
			f.reopenClean()
			compareState(t, "after recovery and a clean reopen", captureState(t, f.l), want)
			checkIndexes(t, f.l)
		})
		t.Run(disk+"/keeps the recovery point", func(t *testing.T) {
			c := cfg(testConfig())
			c.SegmentBytes = 1000
			f := newFixture(t, c)
			for i := 0; i < 30; i++ {
				f.appendLeader(plain(2, f.nowMs()))
			}
			f.reopenClean()
			if rp, leo := f.l.RecoveryPoint(), f.l.LogEndOffset(); rp != leo {
				t.Fatalf("after a clean reopen the recovery point is %d, want the log end %d", rp, leo)
			}
			f.crash(0)
			bases := segBases(f.l)
			if rp := f.l.RecoveryPoint(); rp != bases[len(bases)-1] {
				t.Fatalf("after crash recovery from 0 the recovery point is %d, want the active segment's base %d", rp, bases[len(bases)-1])
			}
		})
	}
}

// appendUnflushedTail appends, in the active segment (rolls fsync), an
// idempotent batch, a transaction of producer 2 and its abort marker
// (a .txnindex entry) and a plain batch, none fsynced.
func appendUnflushedTail(t *testing.T, f *fixture) {
	t.Helper()
	c := f.l.Config()
	c.SegmentBytes = 1 << 20
	f.l.SetConfig(c)
	ts := f.nowMs() + 100
	f.appendLeaderEpoch(idem(1, 0, 48, 2, ts), 4)
	f.appendLeaderEpoch(txnb(2, 2, 0, 2, ts), 4)
	if _, err := f.l.AppendMarker(2, 3, 3, record.ControlAbort, 4); err != nil {
		t.Fatal(err)
	}
	f.appendLeaderEpoch(plain(3, ts), 4)
}

// A crash of the disk loses what was not fsynced: recovery comes back to
// exactly what the last flush made durable (batches, producer state,
// aborted transactions, epochs, indexes), whatever recovery point the
// broker's checkpoint gives, and nothing that was flushed is lost.
func TestSimDiskCrashKeepsExactlyTheFlushedPrefix(t *testing.T) {
	for _, fromZero := range []bool{false, true} {
		cfg, disk := onSimDisk(richConfig())
		f := newFixture(t, cfg)
		buildRichLog(t, f)
		if err := f.l.FlushTo(f.l.LogEndOffset()); err != nil {
			t.Fatal(err)
		}
		want := captureState(t, f.l)
		rp := f.l.RecoveryPoint()
		if rp != want.leo {
			t.Fatalf("recovery point %d after a flush to %d", rp, want.leo)
		}
		appendUnflushedTail(t, f)
		if leo := f.l.LogEndOffset(); leo <= want.leo || len(f.l.AllAborted()) != 3 {
			t.Fatalf("the tail did not go in: log end %d, aborted %+v", leo, f.l.AllAborted())
		}
		f.l.Abandon()
		disk.Crash()
		if fromZero {
			rp = 0
		}
		f.open(rp)
		compareState(t, "after the crash", captureState(t, f.l), want)
		checkIndexes(t, f.l)
		// The log goes on from there.
		f.appendLeaderEpoch(idem(1, 0, 48, 2, f.nowMs()), 4)
		f.reopenClean()
		if got, w := f.l.LogEndOffset(), want.leo+2; got != w {
			t.Fatalf("log end %d after an append and a clean reopen, want %d", got, w)
		}
	}
}

// A crash that tears the unflushed tail (some of it reached the disk, the
// last write cut short) is recovered to a prefix of the batches appended:
// the torn batch goes, the flushed ones stay, and the indexes agree.
func TestSimDiskTornTailIsTruncated(t *testing.T) {
	var torn int
	for seed := int64(0); seed < 20; seed++ {
		cfg, disk := onSimDisk(testConfig())
		cfg.SegmentBytes = 1 << 20
		f := newFixture(t, cfg)
		var stored [][]byte
		for i := 0; i < 10; i++ {
			b := buildBatch(t, idem(7, 0, int32(3*i), 3, f.nowMs()))
			if _, err := f.l.AppendAsLeader(b, 0); err != nil { // assigns b's offsets
				t.Fatal(err)
			}
			stored = append(stored, b)
			if i == 3 {
				if err := f.l.FlushTo(f.l.LogEndOffset()); err != nil {
					t.Fatal(err)
				}
			}
		}
		path := activePath(f.l)
		f.l.Abandon()
		disk.CrashTorn(rand.New(rand.NewSource(seed)))
		onDisk, _ := disk.Durable(path)
		f.open(0)
		leo := f.l.LogEndOffset()
		if leo < 12 || leo > 30 || leo%3 != 0 {
			t.Fatalf("seed %d: log end %d, want a batch boundary in [12, 30]", seed, leo)
		}
		n := int(leo / 3)
		if got := readBatches(t, f.l, 0, leo); !reflect.DeepEqual(got, stored[:n]) {
			t.Fatalf("seed %d: recovered batches differ from the first %d appended", seed, n)
		}
		var size int
		for _, b := range stored[:n] {
			size += len(b)
		}
		if len(onDisk) != size {
			torn++
		}
		if st, err := disk.Stat(path); err != nil || st.Size() != int64(size) {
			t.Fatalf("seed %d: the segment is %v bytes after recovery (%v), want %d", seed, st, err, size)
		}
		checkIndexes(t, f.l)
		if ps := f.l.Producers(); len(ps) != 1 || ps[0].LastSequence() != int32(3*n-1) {
			t.Fatalf("seed %d: producers %+v after recovering %d batches", seed, ps, n)
		}
		f.l.Abandon()
		f.l = nil
	}
	if torn == 0 {
		t.Fatal("no seed tore a batch")
	}
}

// Under flush.messages=1 the leader's durable end (what the HW may count)
// stops at the fsynced end: a crash while later appends wait for their
// fsync loses only those, never an offset the durable end had passed.
func TestSimDiskFlushMessagesOneLosesNothingAcknowledged(t *testing.T) {
	cfg, disk := onSimDisk(testConfig())
	cfg.FlushMessages = 1
	cfg.SegmentBytes = 1 << 20
	f := newFixture(t, cfg)
	hold := make(chan struct{})
	entered := make(chan struct{}, 16)
	var holding bool
	f.l.SetSyncHookForTesting(func(fl File) error {
		if holding {
			entered <- struct{}{}
			<-hold
			return errors.New("the node lost power during the fsync")
		}
		return fl.Sync()
	})
	var stored [][]byte
	for i := 0; i < 5; i++ {
		b := buildBatch(t, idem(9, 0, int32(2*i), 2, f.nowMs()))
		if _, err := f.l.AppendAsLeaderDeferred(b, 0); err != nil { // assigns b's offsets
			t.Fatal(err)
		}
		stored = append(stored, b)
	}
	if _, err := f.l.WaitDurable(context.Background(), 9, nil); err != nil {
		t.Fatal(err)
	}
	acked := f.l.DurableEnd()
	if acked != 10 {
		t.Fatalf("durable end %d, want 10", acked)
	}
	f.l.flushMu.Lock() // no flush between here and the hook's switch
	holding = true
	f.l.flushMu.Unlock()
	for i := 5; i < 8; i++ {
		if _, err := f.l.AppendAsLeaderDeferred(buildBatch(t, idem(9, 0, int32(2*i), 2, f.nowMs())), 0); err != nil {
			t.Fatal(err)
		}
	}
	<-entered // the flusher is in the fsync of the last three batches
	if d, leo := f.l.DurableEnd(), f.l.LogEndOffset(); d != acked || leo != 16 {
		t.Fatalf("durable end %d, log end %d before the crash", d, leo)
	}
	disk.Crash()
	close(hold)
	f.l.Abandon()
	f.open(0)
	if leo := f.l.LogEndOffset(); leo != acked {
		t.Fatalf("log end %d after the crash, want the acknowledged %d", leo, acked)
	}
	if got := readBatches(t, f.l, 0, acked); !reflect.DeepEqual(got, stored) {
		t.Fatal("the acknowledged batches differ after the crash")
	}
	if ps := f.l.Producers(); len(ps) != 1 || ps[0].LastSequence() != 9 {
		t.Fatalf("producers %+v", ps)
	}
}
