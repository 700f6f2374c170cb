package record

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

var words = []string{"order", "id", "customer", "amount", "currency", "EUR", "USD", "status",
	"shipped", "pending", "created_at", "2026-01-01T00:00:00Z", "sku", "quantity", "price",
	"warehouse", "berlin", "lisbon", "true", "false", "null", "{", "}", ":", ",", "\""}

// payload returns n bytes of JSON-ish text: compressible, but not trivially.
func payload(rng *rand.Rand, n int) []byte {
	b := make([]byte, 0, n+32)
	for len(b) < n {
		if rng.IntN(4) == 0 {
			b = fmt.Appendf(b, "%d", rng.Uint32())
		} else {
			b = append(b, words[rng.IntN(len(words))]...)
		}
		b = append(b, ' ')
	}
	return b[:n]
}

func benchRecords(n, size int) []Record {
	rng := newRand(42)
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{
			Key:       fmt.Appendf(nil, "customer-%06d", rng.IntN(1e6)),
			Value:     payload(rng, size),
			Headers:   []RecordHeader{{Key: "trace-id", Value: fmt.Appendf(nil, "%016x", rng.Uint64())}},
			Timestamp: 1_700_000_000_000 + int64(i),
		}
	}
	return recs
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

var benchShapes = []struct{ records, size int }{{16, 1 << 10}, {256, 100}, {1, 64 << 10}}

func BenchmarkBuild(b *testing.B) {
	for _, c := range allCodecs {
		for _, s := range benchShapes {
			b.Run(fmt.Sprintf("codec=%s/records=%d/size=%s", c, s.records, sizeName(s.size)), func(b *testing.B) {
				recs := benchRecords(s.records, s.size)
				opts := plainOptions(c)
				var batch []byte
				var err error
				raw, _ := Build(plainOptions(None), recs)
				b.SetBytes(int64(len(raw)))
				b.ReportAllocs()
				for b.Loop() {
					if batch, err = Build(opts, recs); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(len(batch))/float64(len(raw)), "ratio")
				if h, got, err := Decode(batch); err != nil || len(got) != s.records || h.Compression() != c {
					b.Fatalf("built batch does not decode to %d records: %v", s.records, err)
				}
			})
		}
	}
}

// BenchmarkBuilder is the producer's path: one reused Builder per partition.
func BenchmarkBuilder(b *testing.B) {
	for _, c := range []Compression{None, LZ4, Zstd} {
		s := benchShapes[0]
		b.Run(fmt.Sprintf("codec=%s/records=%d/size=%s", c, s.records, sizeName(s.size)), func(b *testing.B) {
			recs := benchRecords(s.records, s.size)
			bld := NewBuilder(plainOptions(c))
			var batch []byte
			var err error
			raw, _ := Build(plainOptions(None), recs)
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				for _, r := range recs {
					bld.Append(r)
				}
				if batch, err = bld.Build(); err != nil {
					b.Fatal(err)
				}
				SetProducerFields(batch, 1, 0, 0, false)
			}
			b.StopTimer()
			if _, got, err := Decode(batch); err != nil || len(got) != s.records {
				b.Fatalf("built batch does not decode: %v", err)
			}
		})
	}
}

// BenchmarkNewBuilder is the producer's path since a batch owns its
// Builder: a new one per batch, growing its buffer from 4 KiB by copying,
// or told the previous batch's size with SizeHint.
func BenchmarkNewBuilder(b *testing.B) {
	s := benchShapes[0]
	recs := benchRecords(s.records, s.size)
	raw, _ := Build(plainOptions(None), recs)
	for _, hint := range []bool{false, true} {
		b.Run(fmt.Sprintf("records=%d/size=%s/hint=%v", s.records, sizeName(s.size), hint), func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				bld := NewBuilder(plainOptions(None))
				if hint {
					bld.SizeHint(len(raw))
				}
				for _, r := range recs {
					bld.Append(r)
				}
				if _, err := bld.Build(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkValidate(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10, 1 << 20} {
		b.Run("batch="+sizeName(size), func(b *testing.B) {
			n := max(1, size/1100)
			batch, err := Build(plainOptions(None), benchRecords(n, size/n-100))
			if err != nil {
				b.Fatal(err)
			}
			var h Header
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for b.Loop() {
				if h, err = Validate(batch); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if int(h.RecordCount) != n || h.Size() != len(batch) {
				b.Fatalf("Validate saw %d records, want %d", h.RecordCount, n)
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, c := range allCodecs {
		for _, s := range benchShapes {
			b.Run(fmt.Sprintf("codec=%s/records=%d/size=%s", c, s.records, sizeName(s.size)), func(b *testing.B) {
				recs := benchRecords(s.records, s.size)
				batch, err := Build(plainOptions(c), recs)
				if err != nil {
					b.Fatal(err)
				}
				raw, _ := Build(plainOptions(None), recs)
				var got []Record
				b.SetBytes(int64(len(raw)))
				b.ReportAllocs()
				for b.Loop() {
					if _, got, err = Decode(batch); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if len(got) != s.records || string(got[s.records-1].Value) != string(recs[s.records-1].Value) {
					b.Fatalf("decoded %d records, want %d", len(got), s.records)
				}
			})
		}
	}
}

func BenchmarkReadControlBatch(b *testing.B) {
	batch := BuildControlBatch(1, 2, ControlCommit, 3, 4)
	var typ ControlType
	var err error
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if typ, _, err = ReadControlBatch(batch); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if typ != ControlCommit {
		b.Fatalf("type %v", typ)
	}
}
