package storage

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/record"
)

// kvs builds records from "key=value" ("key!" is a tombstone, "=value" a
// keyless record).
func kvs(ts int64, specs ...string) []record.Record {
	recs := make([]record.Record, len(specs))
	for i, s := range specs {
		r := record.Record{Timestamp: ts + int64(i)}
		if k, ok := strings.CutSuffix(s, "!"); ok {
			r.Key = []byte(k)
		} else {
			k, v, _ := strings.Cut(s, "=")
			if k != "" {
				r.Key = []byte(k)
			}
			r.Value = []byte(v)
		}
		recs[i] = r
	}
	return recs
}

// producers writes batches for test producers: plain ones (pid -1),
// idempotent and transactional ones, keeping their sequences and epochs.
type producers struct {
	f     *fixture
	seq   map[int64]int32
	epoch map[int64]int16
	open  map[int64]bool
}

func newProducers(f *fixture) *producers {
	return &producers{f: f, seq: map[int64]int32{}, epoch: map[int64]int16{}, open: map[int64]bool{}}
}

// put appends one batch of pid (-1: no producer id) and returns its result.
func (p *producers) put(pid int64, txn bool, specs ...string) AppendResult {
	p.f.t.Helper()
	opts := record.BatchOptions{PartitionLeaderEpoch: record.NoPartitionLeader, ProducerID: pid, ProducerEpoch: record.NoProducerEpoch, BaseSequence: record.NoSequence}
	if pid >= 0 {
		opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = p.epoch[pid], p.seq[pid], txn
	}
	b, err := record.Build(opts, kvs(p.f.nowMs(), specs...))
	if err != nil {
		p.f.t.Fatal(err)
	}
	res, err := p.f.l.AppendAsLeader(b, 0)
	if err != nil {
		p.f.t.Fatalf("append %v: %v", specs, err)
	}
	if pid >= 0 {
		p.seq[pid] += int32(len(specs))
		if txn {
			p.open[pid] = true
		}
	}
	return res
}

// end writes pid's COMMIT or ABORT marker (with the bumped epoch, as
// transaction version 2 does).
func (p *producers) end(pid int64, typ record.ControlType) int64 {
	p.f.t.Helper()
	p.epoch[pid]++
	p.seq[pid] = 0
	delete(p.open, pid)
	res, err := p.f.l.AppendMarker(pid, p.epoch[pid], 0, typ, 0)
	if err != nil || res.AlreadyDone {
		p.f.t.Fatalf("marker %v for %d: %+v %v", typ, pid, res, err)
	}
	return res.Offset
}

// rec is one record as a reader sees it.
type rec struct {
	Offset  int64
	Key     string
	Value   string
	Tomb    bool
	Control bool
	Batch   record.Header
}

func (r rec) String() string {
	switch {
	case r.Control:
		return fmt.Sprintf("%d:marker", r.Offset)
	case r.Tomb:
		return fmt.Sprintf("%d:%s!", r.Offset, r.Key)
	}
	return fmt.Sprintf("%d:%s=%s", r.Offset, r.Key, r.Value)
}

// allBatches reads every batch below upTo with repeated Reads, checking
// CRCs; unlike readBatches it accepts the gaps a cleaned log has, also at
// its end.
func allBatches(t testing.TB, l *Log, upTo int64) [][]byte {
	t.Helper()
	out, err := readAllBatches(l, upTo)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func readAllBatches(l *Log, upTo int64) ([][]byte, error) {
	var out [][]byte
	for off := l.LogStartOffset(); off < upTo; {
		res, err := l.Read(off, 1<<20, upTo, true)
		if err != nil {
			return nil, fmt.Errorf("Read(%d): %v", off, err)
		}
		if len(res.Records) == 0 {
			break
		}
		it := record.NewIter(res.Records)
		it.Verify = true
		for it.Next() {
			h := it.Header()
			if h.BaseOffset < off {
				return nil, fmt.Errorf("Read(%d) returned a batch at %d", off, h.BaseOffset)
			}
			out = append(out, append([]byte(nil), it.Batch()...))
			off = h.NextOffset()
		}
		if it.Err() != nil || len(it.Rest()) != 0 {
			return nil, fmt.Errorf("Read(%d): %v, %d bytes of a partial batch", off, it.Err(), len(it.Rest()))
		}
	}
	return out, nil
}

// logRecords returns every record of the log below upTo, as a
// read_uncommitted reader sees them (markers included), and the batches'
// headers.
func logRecords(t testing.TB, l *Log, upTo int64) ([]rec, []record.Header) {
	t.Helper()
	var out []rec
	var hs []record.Header
	for _, b := range allBatches(t, l, upTo) {
		h, recs, err := record.Decode(b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		hs = append(hs, h)
		for _, r := range recs {
			out = append(out, rec{Offset: r.Offset, Key: string(r.Key), Value: string(r.Value), Tomb: r.Value == nil, Control: h.IsControl(), Batch: h})
		}
	}
	return out, hs
}

func recStrings(rs []rec) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.String()
	}
	return strings.Join(s, " ")
}

// committedTable is what a read_committed consumer of [log start, upTo)
// rebuilds as a table, the way Kafka's fetcher filters: the aborted
// transactions from CollectAborted, a producer's data skipped from the
// first offset of one of its aborted transactions until its ABORT marker.
// Each key maps to its value and the offset it was read at; tombstones
// remove keys.
func committedTable(t testing.TB, l *Log, upTo int64) map[string]string {
	t.Helper()
	table, err := readCommittedTable(l, upTo)
	if err != nil {
		t.Fatal(err)
	}
	return table
}

func readCommittedTable(l *Log, upTo int64) (map[string]string, error) {
	start := l.LogStartOffset()
	aborted := l.CollectAborted(start, upTo)
	sort.Slice(aborted, func(i, j int) bool { return aborted[i].FirstOffset < aborted[j].FirstOffset })
	abortedPids := map[int64]bool{}
	table := map[string]string{}
	batches, err := readAllBatches(l, upTo)
	if err != nil {
		return nil, err
	}
	for _, b := range batches {
		h, recs, err := record.Decode(b)
		if err != nil {
			return nil, err
		}
		for len(aborted) > 0 && aborted[0].FirstOffset <= h.LastOffset() {
			abortedPids[aborted[0].ProducerID] = true
			aborted = aborted[1:]
		}
		if h.IsControl() {
			if typ, _, err := record.ReadControlBatch(b); err == nil && typ == record.ControlAbort {
				delete(abortedPids, h.ProducerID)
			}
			continue
		}
		if h.IsTransactional() && abortedPids[h.ProducerID] {
			continue
		}
		for _, r := range recs {
			if r.Key == nil {
				continue
			}
			if r.Value == nil {
				delete(table, string(r.Key))
			} else {
				table[string(r.Key)] = fmt.Sprintf("%s@%d", r.Value, r.Offset)
			}
		}
	}
	return table, nil
}

// cleanOpts are a pass's options at the fixture's clock, cleaning up to
// the log end.
func (f *fixture) cleanOpts() CleanOptions {
	return CleanOptions{UpperBound: f.l.LogEndOffset(), NowMs: f.nowMs(), DeleteRetentionMs: 1000, MaxSegmentBytes: f.cfg.SegmentBytes}
}

func (f *fixture) clean(o CleanOptions) CleanStats {
	f.t.Helper()
	st, err := f.l.Clean(context.Background(), o)
	if err != nil {
		f.t.Fatalf("Clean(%+v): %v", o, err)
	}
	return st
}

func (f *fixture) roll() {
	f.t.Helper()
	if err := f.l.Roll(); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) advanceMs(ms int64) { f.clk.Advance(time.Duration(ms) * time.Millisecond) }
