package storage

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/record"
)

// BenchmarkClean measures a cleaning pass's throughput over a log of
// 1 KiB records with the key count in the name: MB/s is of the log's size
// before the pass (every byte is read twice, once for the key map and
// once for the rewrite). Compare with BenchmarkAppend's rate.
func BenchmarkClean(b *testing.B) {
	for _, keys := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("size=32MiB/keys=%d", keys), func(b *testing.B) {
			benchClean(b, 32<<20, keys)
		})
	}
}

func benchClean(b *testing.B, size int64, keys int) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4 << 20
	rng := rand.New(rand.NewSource(1))
	value := bytes.Repeat([]byte{'v'}, 1024)
	var before int64
	var written int64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		clk := clock.NewFake(t0)
		l, err := Open(filepath.Join(b.TempDir(), fmt.Sprint("bench-", i)), PartitionKey{"bench", 0}, cfg, 0, clk)
		if err != nil {
			b.Fatal(err)
		}
		for l.Size() < size {
			recs := make([]record.Record, 16)
			for j := range recs {
				recs[j] = record.Record{Key: []byte(fmt.Sprintf("key-%d", rng.Intn(keys))), Value: value, Timestamp: clk.Now().UnixMilli()}
			}
			batch, err := record.Build(record.BatchOptions{ProducerID: record.NoProducerID, ProducerEpoch: record.NoProducerEpoch, BaseSequence: record.NoSequence, PartitionLeaderEpoch: record.NoPartitionLeader}, recs)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := l.AppendAsLeader(batch, 0); err != nil {
				b.Fatal(err)
			}
		}
		if err := l.Roll(); err != nil {
			b.Fatal(err)
		}
		before = l.Size()
		b.SetBytes(before)
		b.StartTimer()
		st, err := l.Clean(context.Background(), CleanOptions{UpperBound: l.LogEndOffset(), NowMs: clk.Now().UnixMilli(), DeleteRetentionMs: 86_400_000, MaxSegmentBytes: cfg.SegmentBytes})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		written = st.BytesWritten
		if st.RecordsWritten > int64(keys) || st.RecordsWritten == 0 {
			b.Fatalf("kept %d records of %d keys", st.RecordsWritten, keys)
		}
		l.Close()
	}
	b.ReportMetric(float64(written)/float64(before)*100, "%kept")
}
