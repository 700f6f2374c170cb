package storage

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/record"
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

// benchPool lends read buffers as a fetch does (api's readPool): the
// buffer goes back once the response is marshalled, here at once.
type benchPool struct{ free [][]byte }

func (p *benchPool) get(n int) []byte {
	if k := len(p.free); k > 0 && cap(p.free[k-1]) >= n {
		b := p.free[k-1][:n]
		p.free = p.free[:k-1]
		return b
	}
	return make([]byte, n)
}

func (p *benchPool) put(b []byte) { p.free = append(p.free, b[:0]) }

// BenchmarkRead is Read of whole 16 KiB batches: 1 MiB at a time from the
// middle of a segment (a consumer catching up), and the last two batches
// (a follower at the log end), each with a fresh buffer (Read) and with a
// reused one (ReadInto, as fetches are served).
func BenchmarkRead(b *testing.B) {
	src := benchBatch(b)
	l := benchLog(b)
	const batches = 256 // 4 MiB
	for i := 0; i < batches; i++ {
		if _, err := l.AppendAsLeader(append([]byte(nil), src...), 1); err != nil {
			b.Fatal(err)
		}
	}
	end := l.LogEndOffset()
	for _, shape := range []struct {
		name string
		max  int
		from func(off int64) int64
	}{
		{"max=1MiB", 1 << 20, func(off int64) int64 { return off }},
		{"tail=2batches", 1 << 20, func(int64) int64 { return end - 32 }},
	} {
		for _, pooled := range []bool{false, true} {
			name := "batch=16KiB/" + shape.name + "/alloc=fresh"
			if pooled {
				name = "batch=16KiB/" + shape.name + "/alloc=pooled"
			}
			b.Run(name, func(b *testing.B) {
				var pool benchPool
				var n int64
				b.ReportAllocs()
				off := int64(0)
				for b.Loop() {
					var res ReadResult
					var err error
					if pooled {
						res, err = l.ReadInto(shape.from(off), shape.max, end, true, pool.get)
					} else {
						res, err = l.Read(shape.from(off), shape.max, end, true)
					}
					if err != nil {
						b.Fatal(err)
					}
					if len(res.Records) == 0 || len(res.Records) > shape.max {
						b.Fatalf("read %d bytes", len(res.Records))
					}
					n += int64(len(res.Records))
					off += int64(len(res.Records) / len(src) * 16)
					if off >= end {
						off = 0
					}
					if pooled {
						pool.put(res.Records)
					}
				}
				b.StopTimer()
				b.SetBytes(n / int64(b.N))
			})
		}
	}
}

// BenchmarkAppendValidated is a leader's client append of 16 KiB batches
// (16 records of 1 KiB) with and without record.ValidateClient before it,
// as the produce path does: the ratio of the two is the validator's cost.
func BenchmarkAppendValidated(b *testing.B) {
	for _, c := range []record.Compression{record.None, record.LZ4, record.Zstd} {
		recs := make([]record.Record, 16)
		for i := range recs {
			recs[i] = record.Record{Key: []byte{byte(i)}, Value: bytes.Repeat([]byte{byte('a' + i)}, 1024), Timestamp: 1_700_000_000_000 + int64(i)}
		}
		src, err := record.Build(record.BatchOptions{
			ProducerID: record.NoProducerID, ProducerEpoch: record.NoProducerEpoch, BaseSequence: record.NoSequence,
			PartitionLeaderEpoch: record.NoPartitionLeader, Compression: c,
		}, recs)
		if err != nil {
			b.Fatal(err)
		}
		policy := record.ClientPolicy{NowMs: 1_700_000_000_000, TimestampBeforeMaxMs: record.DefaultTimestampBeforeMaxMs, TimestampAfterMaxMs: record.DefaultTimestampAfterMaxMs}
		for _, validate := range []bool{false, true} {
			name := "codec=" + c.String() + "/validate=off"
			if validate {
				name = "codec=" + c.String() + "/validate=on"
			}
			b.Run(name, func(b *testing.B) {
				buf := make([]byte, len(src))
				l := benchLog(b)
				b.SetBytes(16 * 1024) // record payload, the same for every codec
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					copy(buf, src)
					if validate {
						if _, err := record.ValidateClient(buf, policy); err != nil {
							b.Fatal(err)
						}
					}
					if _, err := l.AppendAsLeader(buf, 1); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
