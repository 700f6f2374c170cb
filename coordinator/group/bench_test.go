package group

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/broker/storage/storagetest"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// Group coordinator load benchmark: N groups each commit their
// offsets in M transactions (and then 10×M, the history grown 10×), as the
// coordinator writes them (a TxnOffsetCommit's records from offsetRecords
// in its producer's transactional batch, then the transaction's COMMIT or,
// one in ten, ABORT marker), into a storage.Log with small segments, after
// one membership record per group. For each size it reports the log's
// bytes and segments and the time of the coordinator's load (as when it
// becomes the partition's leader), for the whole log and again after
// storage.Log.Clean has compacted it, and again after a pass a day later.
// Without compaction both figures grow with the history. Compacted, one
// marker per transaction stays for delete.retention.ms (a day), as in
// Kafka; a day later the figures follow the number of groups.
//
// One partition holds all N groups (the worst case of Kafka's 50).
// Environment (the figures: N=1000, M=1000):
//
//	STRAND_BENCH_GROUPS         N (default 100)
//	STRAND_BENCH_TXNS           M (default 100)
//	STRAND_BENCH_GROWTH         the second size is M times this (default 10)
//	STRAND_BENCH_SEGMENT_BYTES  segment.bytes (default 1 MiB)
//
// go test -run '^$' -bench BenchmarkGroupLogLoad -benchtime 3x ./coordinator/group/
func BenchmarkGroupLogLoad(b *testing.B) {
	n, m := storagetest.EnvInt(b, "STRAND_BENCH_GROUPS", 100), storagetest.EnvInt(b, "STRAND_BENCH_TXNS", 100)
	growth, seg := storagetest.EnvInt(b, "STRAND_BENCH_GROWTH", 10), int64(storagetest.EnvInt(b, "STRAND_BENCH_SEGMENT_BYTES", 1<<20))
	for _, txns := range []int{m, m * growth} {
		b.Run(fmt.Sprintf("groups=%d/txns=%d", n, txns), func(b *testing.B) {
			l := openGroupLog(b, seg)
			writeGroupHistory(b, l, n, txns)
			want := loadFromLog(b, l)
			if len(want) != n {
				b.Fatalf("the whole log loads %d groups, want %d", len(want), n)
			}
			b.Run("whole", func(b *testing.B) { benchGroupLoad(b, l, want) })
			b.Run("compacted", func(b *testing.B) {
				st, err := storagetest.CleanAll(l, seg, time.Now())
				if err != nil {
					failUncleaned(b, err)
				}
				b.Logf("Clean: %d → %d bytes, %d → %d records, %d → %d segments in %v",
					st.BytesRead, st.BytesWritten, st.RecordsRead, st.RecordsWritten, st.SegmentsBefore, st.SegmentsAfter, st.Elapsed)
				benchGroupLoad(b, l, want)
			})
			// Each transaction's COMMIT or ABORT marker outlives its data:
			// the pass after the one that removed the data gives the marker
			// a delete horizon (delete.retention.ms, a day), and the first
			// pass after that removes it, as in Kafka.
			b.Run("compacted-days-later", func(b *testing.B) {
				later := time.Now().Add(24*time.Hour + time.Minute)
				for _, at := range []time.Time{later, later.Add(24*time.Hour + time.Minute)} {
					st, err := storagetest.CleanAll(l, seg, at)
					if err != nil {
						failUncleaned(b, err)
					}
					b.Logf("Clean at +%v: %d → %d bytes, %d → %d records, %d → %d segments in %v", time.Until(at).Round(time.Hour),
						st.BytesRead, st.BytesWritten, st.RecordsRead, st.RecordsWritten, st.SegmentsBefore, st.SegmentsAfter, st.Elapsed)
				}
				benchGroupLoad(b, l, want)
			})
		})
	}
}

// writeGroupHistory writes n groups' memberships, then txns rounds in
// which each group commits two partitions' offsets in a transaction of
// its own producer (version 2: the marker, and the next transaction,
// carry the epoch bumped).
func writeGroupHistory(b *testing.B, l *storage.Log, n, txns int) {
	now := time.Unix(1_700_000_000, 0)
	for i := 0; i < n; i++ {
		g := newGroup(fmt.Sprintf("group-%d", i), now)
		g.protocolType, g.protocol, g.generation = "consumer", "range", 1
		val, err := proto.Marshal(g.metadataValue(now))
		if err != nil {
			b.Fatal(err)
		}
		appendGroupBatch(b, l, record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, PartitionLeaderEpoch: -1},
			[]record.Record{{Key: groupKey(g.id), Value: val, Timestamp: now.UnixMilli()}})
	}
	for t := 0; t < txns; t++ {
		for i := 0; i < n; i++ {
			pid, epoch := int64(1000+i), int16(t)
			txn := &txnProducer{pid: pid, epoch: epoch, id: fmt.Sprintf("tx-%d", i)}
			offs := []*pb.PartitionOffset{{Topic: "orders", Partition: int32(i % 8), Offset: int64(t * 10), LeaderEpoch: -1},
				{Topic: "payments", Partition: int32(i % 4), Offset: int64(t * 7), LeaderEpoch: -1}}
			recs, _, err := offsetRecords(fmt.Sprintf("group-%d", i), offs, now.UnixMilli()+int64(t), txn)
			if err != nil {
				b.Fatal(err)
			}
			appendGroupBatch(b, l, record.BatchOptions{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: 0, Transactional: true, PartitionLeaderEpoch: -1}, recs)
			typ := record.ControlCommit
			if t%10 == 9 {
				typ = record.ControlAbort
			}
			if _, err := l.AppendMarker(pid, epoch+1, 0, typ, 0); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func appendGroupBatch(b *testing.B, l *storage.Log, opts record.BatchOptions, recs []record.Record) {
	batch, err := record.Build(opts, recs)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := l.AppendAsLeader(batch, 0); err != nil {
		b.Fatal(err)
	}
}

// benchGroupLoad times the coordinator's load of l, which must give want.
func benchGroupLoad(b *testing.B, l *storage.Log, want map[string]string) {
	if got := loadFromLog(b, l); !reflect.DeepEqual(got, want) {
		b.Fatalf("the log loads %d groups, not the %d of the whole log (or not in their state)", len(got), len(want))
	}
	b.SetBytes(l.Size())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if got := loadFromLog(b, l); len(got) != len(want) {
			b.Fatalf("loaded %d groups, want %d", len(got), len(want))
		}
	}
	// After the loop: ResetTimer drops metrics reported before it.
	b.ReportMetric(float64(l.Size()), "log-bytes")
	b.ReportMetric(float64(l.NumSegments()), "segments")
}

// failUncleaned fails a "compacted" benchmark whose log could not be
// cleaned: it has no figures to give.
func failUncleaned(b *testing.B, err error) {
	b.Fatalf("no figures with compaction: storage.Log.Clean: %v", err)
}
