package log

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/strand-io/strand/internal/clock"
	"github.com/strand-io/strand/internal/record"
)

// benchBatch is a batch of 16 records of 1 KiB each.
func benchBatch(b *testing.B) []byte {
	recs := make([]record.Record, 16)
	for i := range recs {
		recs[i] = record.Record{Key: []byte{byte(i)}, Value: bytes.Repeat([]byte{byte('a' + i)}, 1024), Timestamp: 1_700_000_000_000 + int64(i)}
	}
	batch, err := record.Build(record.BatchOptions{
		ProducerID: record.NoProducerID, ProducerEpoch: record.NoProducerEpoch, BaseSequence: record.NoSequence,
		PartitionLeaderEpoch: record.NoPartitionLeader,
	}, recs)
	if err != nil {
		b.Fatal(err)
	}
	return batch
}

func benchLog(b *testing.B) *Log {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 64 << 20
	l, err := Open(filepath.Join(b.TempDir(), "bench-0"), PartitionKey{"bench", 0}, cfg, 0, clock.NewFake(t0))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

func BenchmarkAppend(b *testing.B) {
	b.Run("batch=16KiB", func(b *testing.B) {
		src := benchBatch(b)
		buf := make([]byte, len(src))
		l := benchLog(b)
		b.SetBytes(int64(len(src)))
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			copy(buf, src)
			if _, err := l.AppendAsLeader(buf, 1); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if got, want := l.LogEndOffset(), int64(16*b.N); got != want {
			b.Fatalf("log end %d, want %d", got, want)
		}
	})
}

func BenchmarkRead(b *testing.B) {
	b.Run("batch=16KiB/max=1MiB", func(b *testing.B) {
		src := benchBatch(b)
		l := benchLog(b)
		const batches = 256 // 4 MiB
		for i := 0; i < batches; i++ {
			if _, err := l.AppendAsLeader(append([]byte(nil), src...), 1); err != nil {
				b.Fatal(err)
			}
		}
		end := l.LogEndOffset()
		var n int64
		b.ReportAllocs()
		b.ResetTimer()
		off := int64(0)
		for i := 0; i < b.N; i++ {
			res, err := l.Read(off, 1<<20, end, true)
			if err != nil {
				b.Fatal(err)
			}
			if len(res.Records) == 0 || len(res.Records) > 1<<20 {
				b.Fatalf("read %d bytes", len(res.Records))
			}
			n += int64(len(res.Records))
			off += int64(len(res.Records) / len(src) * 16)
			if off >= end {
				off = 0
			}
		}
		b.StopTimer()
		b.SetBytes(n / int64(b.N))
	})
}
