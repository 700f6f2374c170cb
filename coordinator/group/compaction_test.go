package group

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"sort"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/broker/storage/storagetest"
	"github.com/strand-io/strand/clock"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// compactBatches is what Kafka's log cleaner leaves of a fully cleanable
// log (every transaction decided, all below the LSO), for the load to be
// checked against. Records of aborted transactions go, and do not count
// as a key's latest record; of the rest only the last record of each key
// stays. With pastHorizon (delete.retention.ms elapsed since the first
// cleaning) the tombstones go too, and so does the marker of a
// transaction none of whose data is left; before it both stay. Offsets are
// kept: each kept record becomes a batch of its own at its own offset,
// with its batch's producer fields.
func compactBatches(t testing.TB, batches [][]byte, pastHorizon bool) [][]byte {
	t.Helper()
	type batch struct {
		h    record.Header
		raw  []byte
		recs []record.Record
		ctl  record.ControlType
	}
	var bs []batch
	for _, raw := range batches {
		for it := record.NewIter(raw); it.Next(); {
			b := batch{h: it.Header(), raw: it.Batch()}
			if b.h.IsControl() {
				typ, _, err := record.ReadControlBatch(b.raw)
				if err != nil {
					t.Fatal(err)
				}
				b.ctl = typ
			} else {
				_, recs, err := record.Decode(b.raw)
				if err != nil {
					t.Fatal(err)
				}
				b.recs = recs
			}
			bs = append(bs, b)
		}
	}
	// Aborted transactions: a producer's transactional batches up to its
	// ABORT marker.
	aborted := make([]bool, len(bs))
	open := map[int64][]int{}
	for i, b := range bs {
		switch {
		case b.h.IsControl():
			if b.ctl == record.ControlAbort {
				for _, j := range open[b.h.ProducerID] {
					aborted[j] = true
				}
			}
			delete(open, b.h.ProducerID)
		case b.h.IsTransactional():
			open[b.h.ProducerID] = append(open[b.h.ProducerID], i)
		}
	}
	last := map[string]int64{}
	for i, b := range bs {
		if aborted[i] {
			continue
		}
		for _, r := range b.recs {
			last[string(r.Key)] = r.Offset
		}
	}
	var out [][]byte
	kept := map[int64]bool{} // producer → some data of its current transaction kept
	for i, b := range bs {
		if b.h.IsControl() {
			if !pastHorizon || kept[b.h.ProducerID] {
				out = append(out, b.raw)
			}
			delete(kept, b.h.ProducerID)
			continue
		}
		if aborted[i] {
			continue
		}
		for _, r := range b.recs {
			if last[string(r.Key)] != r.Offset || (r.Value == nil && pastHorizon) {
				continue
			}
			opts := b.h.Options()
			opts.BaseOffset = r.Offset
			nb, err := record.Build(opts, []record.Record{r})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, nb)
			if b.h.IsTransactional() {
				kept[b.h.ProducerID] = true
			}
		}
	}
	return out
}

// loadedState replays batches as a coordinator loading its partition does
// and describes every group it ends with.
func loadedState(t testing.TB, batches [][]byte) map[string]string {
	t.Helper()
	c := &Coordinator{clk: clock.NewFake(time.Unix(1_700_000_000, 0)), lg: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s := newShard(0, nil, 0)
	for _, raw := range batches {
		for it := record.NewIter(raw); it.Next(); {
			c.applyBatch(s, it.Header(), it.Batch())
		}
	}
	return describeShard(s)
}

// describeShard renders every group of a shard for comparison.
func describeShard(s *shard) map[string]string {
	out := map[string]string{}
	for id, g := range s.groups {
		members := make([]string, 0, len(g.members))
		for m := range g.members {
			members = append(members, m)
		}
		sort.Strings(members)
		offs := make([]string, 0, len(g.offsets))
		for p, e := range g.offsets {
			offs = append(offs, fmt.Sprintf("%s-%d=%d/%d/%q/%d@%d", p.topic, p.partition, e.offset, e.leaderEpoch, e.metadata, e.commitMs, e.logOffset))
		}
		sort.Strings(offs)
		out[id] = fmt.Sprintf("state=%v gen=%d type=%q protocol=%q leader=%q members=%v offsets=%v pending=%d",
			g.state, g.generation, g.protocolType, g.protocol, g.leader, members, offs, len(g.pending))
	}
	return out
}

// openGroupLog opens a __consumer_offsets log in a fresh directory.
func openGroupLog(tb testing.TB, segmentBytes int64) *storage.Log {
	tb.Helper()
	cfg := storage.DefaultConfig()
	cfg.SegmentBytes, cfg.RetentionMs = segmentBytes, -1
	l, err := storage.Open(tb.TempDir(), storage.PartitionKey{Topic: "__consumer_offsets", Partition: 0}, cfg, 0, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return l
}

// appendBatches appends batches to l as the partition's leader would get
// them: data batches as written, markers through AppendMarker (as the
// transaction coordinator's WriteTxnMarkers). Offsets are the log's own.
func appendBatches(tb testing.TB, l *storage.Log, batches [][]byte) {
	tb.Helper()
	for _, raw := range batches {
		for it := record.NewIter(raw); it.Next(); {
			h := it.Header()
			if h.IsControl() {
				typ, coordEpoch, err := record.ReadControlBatch(it.Batch())
				if err != nil {
					tb.Fatal(err)
				}
				if _, err := l.AppendMarker(h.ProducerID, h.ProducerEpoch, coordEpoch, typ, 0); err != nil {
					tb.Fatal(err)
				}
				continue
			}
			if _, err := l.AppendAsLeader(append([]byte(nil), it.Batch()...), 0); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// loadFromLog runs the coordinator's load of a partition over l and
// describes the groups it loaded.
func loadFromLog(tb testing.TB, l *storage.Log) map[string]string {
	tb.Helper()
	return loadFromLogWithin(tb, l, time.Minute)
}

// loadFromLogWithin is loadFromLog failing when the load has not ended
// within d (it waits on a fake clock that never moves, so a load that
// pauses for a write never ends).
func loadFromLogWithin(tb testing.TB, l *storage.Log, d time.Duration) map[string]string {
	tb.Helper()
	c := &Coordinator{clk: clock.NewFake(time.Unix(1_700_000_000, 0)), lg: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s := newShard(0, broker.NewPartition(l.Key(), l, l.LogEndOffset()), 0)
	c.wg.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	c.load(ctx, s)
	if ctx.Err() != nil {
		tb.Fatalf("the load did not end within %v (log [%d, %d))", d, l.LogStartOffset(), l.LogEndOffset())
	}
	if s.status != active {
		tb.Fatalf("load ended with the shard %v", s.status)
	}
	return describeShard(s)
}

// TestLoadOfCompactedLogMatches: a history of commits, transactional
// commits (committed and aborted), memberships, OffsetDelete and
// DeleteGroups, written by the coordinator itself, loads to the same
// groups whole, compacted with its tombstones and markers, and compacted
// past the delete horizon (tombstones and empty transactions' markers
// gone). A group's repeated transactional commits leave one record (and
// its marker) per partition, not one per transaction.
func TestLoadOfCompactedLogMatches(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	// marker ends pid's transaction at epoch as version 2 does: the marker
	// carries the epoch bumped (the producer's next transaction's).
	marker := func(g string, pid int64, epoch int16, commit bool) {
		typ := record.ControlAbort
		if commit {
			typ = record.ControlCommit
		}
		h.w.marker(pid, epoch+1, typ)
		h.c.OnTxnMarker(h.c.partitionOf(g), pid, commit)
	}
	// live: a group with a member, plain and transactional commits, an
	// aborted transaction over a committed one, then a plain commit.
	st := h.stableStatic("live", "pod")
	wantCode(t, "commit", h.commit("live", st.MemberId, st.GenerationId, "t", 0, 5), pb.ErrorCode_NONE)
	wantCode(t, "txn", h.txnCommit("live", 7, 0, "t", 0, 50).ErrorCode, pb.ErrorCode_NONE)
	marker("live", 7, 0, true)
	wantCode(t, "txn", h.txnCommit("live", 7, 1, "t", 0, 60).ErrorCode, pb.ErrorCode_NONE)
	wantCode(t, "txn", h.txnCommit("live", 7, 1, "t", 1, 61).ErrorCode, pb.ErrorCode_NONE)
	marker("live", 7, 1, false)
	wantCode(t, "txn", h.txnCommit("live", 7, 2, "t", 1, 70).ErrorCode, pb.ErrorCode_NONE)
	marker("live", 7, 2, true)
	// txnOnly: only transactional commits, many transactions (the epoch
	// is bumped by each, as under transaction version 2).
	for e := int32(0); e < 20; e++ {
		wantCode(t, "txn", h.txnCommit("txnOnly", 8, e, "t", 0, int64(100+e)).ErrorCode, pb.ErrorCode_NONE)
		marker("txnOnly", 8, int16(e), e%3 != 2)
	}
	// deleted: committed transactionally and plainly, then DeleteGroups.
	wantCode(t, "commit", h.commit("deleted", "", -1, "t", 0, 1), pb.ErrorCode_NONE)
	wantCode(t, "txn", h.txnCommit("deleted", 9, 0, "t", 1, 2).ErrorCode, pb.ErrorCode_NONE)
	marker("deleted", 9, 0, true)
	if r, err := h.c.DeleteGroups(ctx, &pb.DeleteGroupsRequest{GroupIds: []string{"deleted"}}); err != nil || r.Groups[0].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("DeleteGroups: %v %v", r, err)
	}
	// trimmed: one partition committed transactionally then deleted with
	// OffsetDelete, the other kept.
	wantCode(t, "txn", h.txnCommit("trimmed", 10, 0, "t", 0, 3).ErrorCode, pb.ErrorCode_NONE)
	wantCode(t, "commit", h.commit("trimmed", "", -1, "t", 1, 4), pb.ErrorCode_NONE)
	marker("trimmed", 10, 0, true)
	if r, err := h.c.OffsetDelete(ctx, &pb.OffsetDeleteRequest{GroupId: "trimmed", Partitions: []*pb.TopicPartition{{Topic: "t", Partition: 0}}}); err != nil || r.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("OffsetDelete: %v %v", r, err)
	}

	whole := h.w.all()
	want := loadedState(t, whole)
	for _, g := range []string{"live", "txnOnly", "trimmed"} {
		if want[g] == "" {
			t.Fatalf("group %s not loaded from the whole log: %v", g, want)
		}
	}
	if _, ok := want["deleted"]; ok {
		t.Fatalf("the deleted group loads from the whole log: %v", want["deleted"])
	}
	for _, pastHorizon := range []bool{false, true} {
		compacted := compactBatches(t, whole, pastHorizon)
		if got := loadedState(t, compacted); !reflect.DeepEqual(got, want) {
			t.Errorf("compacted (past the delete horizon: %v) loads\n%v\nthe whole log\n%v", pastHorizon, got, want)
		}
		// txnOnly's 20 transactions leave its last committed record and
		// that transaction's marker (and, before the horizon, the other
		// markers).
		n := 0
		for _, raw := range compacted {
			for it := record.NewIter(raw); it.Next(); {
				if h := it.Header(); h.IsControl() {
					continue
				}
				_, recs, _ := record.Decode(it.Batch())
				for _, r := range recs {
					if k, err := decodeKey(r.Key); err == nil && k.group == "txnOnly" {
						n++
					}
				}
			}
		}
		if n != 1 {
			t.Errorf("compacted (past the delete horizon: %v): %d records of txnOnly's one partition kept, want 1", pastHorizon, n)
		}
	}
	// And in a storage.Log cleaned by the log cleaner itself.
	t.Run("storage.Log.Clean", func(t *testing.T) {
		l := openGroupLog(t, 2048)
		appendBatches(t, l, whole)
		want := loadFromLog(t, l)
		size := l.Size()
		st, err := storagetest.CleanAll(l, 2048, time.Now())
		if err != nil {
			t.Fatalf("storage.Log.Clean: %v", err)
		}
		if got := loadFromLog(t, l); !reflect.DeepEqual(got, want) {
			t.Errorf("cleaned (%+v) loads\n%v\nthe whole log\n%v", st, got, want)
		}
		if l.Size() >= size {
			t.Errorf("cleaned: %d bytes of %d (%+v)", l.Size(), size, st)
		}
		// Passes a day later give the markers whose data went a delete
		// horizon, then remove them: the log may then end in a gap (the
		// last batches gone, the active segment empty), which the load must
		// read past rather than wait for a write.
		later := time.Now().Add(24*time.Hour + time.Minute)
		for _, at := range []time.Time{later, later.Add(24*time.Hour + time.Minute)} {
			if st, err = storagetest.CleanAll(l, 2048, at); err != nil {
				t.Fatalf("storage.Log.Clean at %v: %v", at, err)
			}
		}
		if got := loadFromLogWithin(t, l, 10*time.Second); !reflect.DeepEqual(got, want) {
			t.Errorf("cleaned past the horizon (%+v) loads\n%v\nthe whole log\n%v", st, got, want)
		}
	})
}

// TestLoadReadsOlderTxnCommitKeys: a log written before transactional
// commits used the partition's key (type 1 keys, with the producer) still
// loads: committed by its COMMIT marker, dropped by an ABORT.
func TestLoadReadsOlderTxnCommitKeys(t *testing.T) {
	val := func(off int64) []byte {
		b, err := proto.Marshal(&pb.OffsetCommitValue{Offset: off, LeaderEpoch: -1, CommitTimestampMs: 5})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	txnBatch := func(base int64, pid int64, epoch int16, part int32, off int64) []byte {
		b, err := record.Build(record.BatchOptions{BaseOffset: base, ProducerID: pid, ProducerEpoch: epoch, Transactional: true, PartitionLeaderEpoch: -1},
			[]record.Record{{Key: pendingKey("old", "t", part, pid, epoch), Value: val(off)}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	marker := func(base int64, pid int64, epoch int16, typ record.ControlType) []byte {
		b := record.BuildControlBatch(pid, epoch, typ, 0, 0)
		record.SetBaseOffset(b, base)
		return b
	}
	got := loadedState(t, [][]byte{
		txnBatch(0, 7, 0, 0, 40), marker(1, 7, 1, record.ControlCommit),
		txnBatch(2, 7, 1, 0, 41), txnBatch(3, 7, 1, 1, 42), marker(4, 7, 2, record.ControlAbort),
	})
	want := `state=Empty gen=0 type="" protocol="" leader="" members=[] offsets=[t-0=40/-1/""/5@0] pending=0`
	if got["old"] != want {
		t.Fatalf("loaded %q, want %q", got["old"], want)
	}
}
