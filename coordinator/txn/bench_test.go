package txn

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/broker/storage/storagetest"
)

// Coordinator load benchmark: N transactional ids each run M
// transactions (and then 10×M, the history grown 10×), written as the
// coordinator writes them into a storage.Log with small segments. For
// each size it reports the log's bytes and segments and the time to load
// it (replayLog, what a new coordinator does when it becomes leader of the
// partition), for the whole log and again after storage.Log.Clean has
// compacted it. Without compaction both figures grow with the history;
// with it they should follow the number of ids.
//
// One partition holds all N ids (the worst case of Kafka's 50).
// Environment (the figures: N=1000, M=1000):
//
//	STRAND_BENCH_IDS            N (default 100)
//	STRAND_BENCH_TXNS           M (default 100)
//	STRAND_BENCH_GROWTH         the second size is M times this (default 10)
//	STRAND_BENCH_SEGMENT_BYTES  segment.bytes (default 1 MiB)
//
// go test -run '^$' -bench BenchmarkTxnLogLoad -benchtime 3x ./coordinator/txn/
func BenchmarkTxnLogLoad(b *testing.B) {
	n, m := storagetest.EnvInt(b, "STRAND_BENCH_IDS", 100), storagetest.EnvInt(b, "STRAND_BENCH_TXNS", 100)
	growth, seg := storagetest.EnvInt(b, "STRAND_BENCH_GROWTH", 10), int64(storagetest.EnvInt(b, "STRAND_BENCH_SEGMENT_BYTES", 1<<20))
	for _, txns := range []int{m, m * growth} {
		b.Run(fmt.Sprintf("ids=%d/txns=%d", n, txns), func(b *testing.B) {
			l := openLog(b, b.TempDir(), seg)
			h := newTxnHistory(appendTo(l))
			parts := []TopicPartition{{"orders", 0}, {"orders", 1}, {"payments", 0}}
			for i := 0; i < n; i++ {
				if err := h.init(fmt.Sprintf("tx-%d", i)); err != nil {
					b.Fatal(err)
				}
			}
			// Round robin over the ids, as concurrent producers interleave.
			for t := 0; t < txns; t++ {
				for i := 0; i < n; i++ {
					if err := h.transaction(fmt.Sprintf("tx-%d", i), t%10 != 9, parts[:1+t%3]); err != nil {
						b.Fatalf("tx-%d transaction %d: %v", i, t, err)
					}
				}
			}
			want := describeIDs(h.txns)
			b.Run("whole", func(b *testing.B) { benchTxnLoad(b, l, want) })
			b.Run("compacted", func(b *testing.B) {
				st, err := storagetest.CleanAll(l, seg, time.Now())
				if err != nil {
					failUncleaned(b, err)
				}
				b.Logf("Clean: %d → %d bytes, %d → %d records, %d → %d segments in %v",
					st.BytesRead, st.BytesWritten, st.RecordsRead, st.RecordsWritten, st.SegmentsBefore, st.SegmentsAfter, st.Elapsed)
				benchTxnLoad(b, l, want)
			})
		})
	}
}

// benchTxnLoad times loading l, which must give the ids of want.
func benchTxnLoad(b *testing.B, l *storage.Log, want map[string]string) {
	got, err := replayLog(l, warnTB(b))
	if err != nil {
		b.Fatal(err)
	}
	if !reflect.DeepEqual(describeIDs(got), want) {
		b.Fatalf("the log loads %d ids, not the %d the coordinator had (or not in their state)", len(got), len(want))
	}
	b.SetBytes(l.Size())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		txns, err := replayLog(l, func(msg string, args ...any) { b.Errorf("%s %v", msg, args) })
		if err != nil {
			b.Fatal(err)
		}
		if len(txns) != len(want) {
			b.Fatalf("loaded %d ids, want %d", len(txns), len(want))
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
