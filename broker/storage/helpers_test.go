package storage

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// t0 is where every fake clock of these tests starts.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var testKey = PartitionKey{Topic: "t", Partition: 0}

// testConfig is the default configuration with small segments, an index
// entry for every batch and no retention.
func testConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 4096
	c.IndexIntervalBytes = 1
	c.RetentionMs = -1
	c.RetentionBytes = -1
	// Two open segment files at most: every test runs with the file cache
	// closing and reopening files under it.
	c.Files = NewFileCache(2)
	return c
}

// fixture is a log in a temporary directory with a fake clock.
type fixture struct {
	t   *testing.T
	dir string
	clk *clock.Fake
	cfg Config
	l   *Log
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: filepath.Join(t.TempDir(), DirName("t", 0)), clk: clock.NewFake(t0), cfg: cfg}
	f.open(0)
	t.Cleanup(func() {
		if f.l != nil {
			f.l.Abandon()
		}
	})
	return f
}

// open opens the log at the fixture's directory with the recovery point rp.
func (f *fixture) open(rp int64) *Log {
	f.t.Helper()
	l, err := Open(f.dir, testKey, f.cfg, rp, f.clk)
	if err != nil {
		f.t.Fatalf("Open(rp=%d): %v", rp, err)
	}
	f.l = l
	return l
}

// reopenClean closes the log and opens it again with the recovery point Close left.
func (f *fixture) reopenClean() *Log {
	f.t.Helper()
	if err := f.l.Close(); err != nil {
		f.t.Fatalf("Close: %v", err)
	}
	rp := f.l.RecoveryPoint()
	if rp != f.l.leoLocked() {
		f.t.Fatalf("after Close the recovery point is %d, want the log end %d", rp, f.l.leoLocked())
	}
	return f.open(rp)
}

// crash abandons the log as kill -9 would and reopens it with recovery point rp.
func (f *fixture) crash(rp int64) *Log {
	f.t.Helper()
	f.l.Abandon()
	return f.open(rp)
}

// nowMs is the fake clock in Unix milliseconds.
func (f *fixture) nowMs() int64 { return f.clk.Now().UnixMilli() }

// batchSpec describes a client batch to build.
type batchSpec struct {
	pid       int64
	epoch     int16
	seq       int32
	txn       bool
	n         int
	valueSize int
	ts        int64 // timestamp of the first record; record i gets ts+i
	comp      record.Compression
}

// plain is a batch from a producer without idempotence.
func plain(n int, ts int64) batchSpec {
	return batchSpec{pid: record.NoProducerID, epoch: record.NoProducerEpoch, seq: record.NoSequence, n: n, valueSize: 20, ts: ts}
}

// idem is a batch of an idempotent producer.
func idem(pid int64, epoch int16, seq int32, n int, ts int64) batchSpec {
	return batchSpec{pid: pid, epoch: epoch, seq: seq, n: n, valueSize: 20, ts: ts}
}

// txnb is a transactional batch.
func txnb(pid int64, epoch int16, seq int32, n int, ts int64) batchSpec {
	s := idem(pid, epoch, seq, n, ts)
	s.txn = true
	return s
}

func buildBatch(t testing.TB, s batchSpec) []byte {
	t.Helper()
	recs := make([]record.Record, s.n)
	for i := range recs {
		v := bytes.Repeat([]byte{byte('a' + i%26)}, s.valueSize)
		recs[i] = record.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: v, Timestamp: s.ts + int64(i)}
	}
	b, err := record.Build(record.BatchOptions{
		BaseOffset:           0,
		PartitionLeaderEpoch: record.NoPartitionLeader,
		Compression:          s.comp,
		ProducerID:           s.pid,
		ProducerEpoch:        s.epoch,
		BaseSequence:         s.seq,
		Transactional:        s.txn,
	}, recs)
	if err != nil {
		t.Fatalf("record.Build: %v", err)
	}
	return b
}

// appendLeader builds and appends one batch as leader at epoch 0.
func (f *fixture) appendLeader(s batchSpec) AppendResult {
	f.t.Helper()
	return f.appendLeaderEpoch(s, 0)
}

func (f *fixture) appendLeaderEpoch(s batchSpec, epoch int32) AppendResult {
	f.t.Helper()
	res, err := f.l.AppendAsLeader(buildBatch(f.t, s), epoch)
	if err != nil {
		f.t.Fatalf("AppendAsLeader(%+v): %v", s, err)
	}
	return res
}

func (f *fixture) marker(pid int64, epoch int16, typ record.ControlType) MarkerResult {
	f.t.Helper()
	res, err := f.l.AppendMarker(pid, epoch, 0, typ, 0)
	if err != nil {
		f.t.Fatalf("AppendMarker(%d, %d, %v): %v", pid, epoch, typ, err)
	}
	return res
}

// readBatches reads every batch in [from, upTo) with repeated Reads and
// returns them split, checking each one's CRC.
func readBatches(t testing.TB, l *Log, from, upTo int64) [][]byte {
	t.Helper()
	var out [][]byte
	for off := from; off < upTo; {
		res, err := l.Read(off, 1<<20, upTo, true)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(res.Records) == 0 {
			t.Fatalf("Read(%d, upTo %d) returned nothing", off, upTo)
		}
		it := record.NewIter(res.Records)
		it.Verify = true
		n := 0
		for it.Next() {
			h := it.Header()
			if h.BaseOffset != off && n == 0 && res.FirstOffset != h.BaseOffset {
				t.Fatalf("Read(%d): FirstOffset %d but the first batch starts at %d", off, res.FirstOffset, h.BaseOffset)
			}
			out = append(out, append([]byte(nil), it.Batch()...))
			off = h.NextOffset()
			n++
		}
		if it.Err() != nil {
			t.Fatalf("Read(%d): %v", off, it.Err())
		}
		if len(it.Rest()) != 0 {
			t.Fatalf("Read returned %d bytes of a partial batch", len(it.Rest()))
		}
	}
	return out
}

func headerOfBatch(t testing.TB, b []byte) record.Header {
	t.Helper()
	h, err := record.Validate(b)
	if err != nil {
		t.Fatalf("record.Validate: %v", err)
	}
	return h
}

// wantCode fails unless err carries code.
func wantCode(t testing.TB, err error, code pb.ErrorCode) {
	t.Helper()
	if got := errs.CodeOf(err); got != code {
		t.Fatalf("error %v: code %v, want %v", err, got, code)
	}
}

// segFiles lists the base offsets of the .log files in dir.
func segFiles(t testing.TB, dir string) []int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range ents {
		if b, ok := parseBase(e.Name(), LogSuffix); ok {
			out = append(out, b)
		}
	}
	return out
}

// checkIndexes verifies every segment's offset and time index in memory
// and on disk: each offset-index entry points at the header of the batch
// with that base offset, entries increase, the time index's timestamps
// increase and never exceed the segment's max, and the files hold what
// memory holds (after a flush).
func checkIndexes(t testing.TB, l *Log) {
	t.Helper()
	if err := l.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.segs {
		if len(s.idx.rel) != len(s.idx.pos) {
			t.Fatalf("segment %d: index has %d offsets and %d positions", s.base, len(s.idx.rel), len(s.idx.pos))
		}
		for i := range s.idx.rel {
			off := s.base + int64(s.idx.rel[i])
			pos := int64(s.idx.pos[i])
			hb, err := s.readAt(pos, record.HeaderSize)
			if err != nil {
				t.Fatalf("segment %d: index entry %d (%d@%d): %v", s.base, i, off, pos, err)
			}
			h, _ := record.ParseHeader(hb)
			if h.BaseOffset != off {
				t.Fatalf("segment %d: index entry %d says offset %d is at %d, the batch there starts at %d", s.base, i, off, pos, h.BaseOffset)
			}
			if off >= s.next {
				t.Fatalf("segment %d: index entry %d beyond the segment end %d", s.base, off, s.next)
			}
		}
		for i := range s.tix.ts {
			if i > 0 && s.tix.ts[i] <= s.tix.ts[i-1] {
				t.Fatalf("segment %d: time index does not increase at %d", s.base, i)
			}
			if s.tix.ts[i] > s.maxTs {
				t.Fatalf("segment %d: time index entry %d beyond the segment max %d", s.base, s.tix.ts[i], s.maxTs)
			}
			if off := s.base + int64(s.tix.rel[i]); off >= s.next {
				t.Fatalf("segment %d: time index offset %d beyond the segment end %d", s.base, off, s.next)
			}
		}
		onDisk, err := readOffsetIndex(l.fs, s.idx.path)
		if err != nil {
			t.Fatalf("segment %d: %v", s.base, err)
		}
		if len(onDisk) != len(s.idx.rel) {
			t.Fatalf("segment %d: .index file has %d entries, memory %d", s.base, len(onDisk), len(s.idx.rel))
		}
		for i, e := range onDisk {
			if e.Offset != s.base+int64(s.idx.rel[i]) || e.Position != int64(s.idx.pos[i]) {
				t.Fatalf("segment %d: .index entry %d is %+v on disk", s.base, i, e)
			}
		}
		tOnDisk, err := readTimeIndex(l.fs, s.tix.path)
		if err != nil {
			t.Fatalf("segment %d: %v", s.base, err)
		}
		if len(tOnDisk) != len(s.tix.ts) {
			t.Fatalf("segment %d: .timeindex file has %d entries, memory %d", s.base, len(tOnDisk), len(s.tix.ts))
		}
	}
}

// segMaxTimestamps returns each segment's max timestamp as the log sees it.
func segMaxTimestamps(l *Log) []int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []int64
	for _, s := range l.segs {
		out = append(out, s.maxTs)
	}
	return out
}

func segBases(l *Log) []int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []int64
	for _, s := range l.segs {
		out = append(out, s.base)
	}
	return out
}

// activePath is the active segment's .log file.
func activePath(l *Log) string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.active().path
}
