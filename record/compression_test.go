package record

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/klauspost/compress/s2"
)

// section returns the uncompressed records section of recs.
func section(t *testing.T, recs []Record) []byte {
	t.Helper()
	b, err := Build(plainOptions(None), recs)
	if err != nil {
		t.Fatal(err)
	}
	return b[HeaderSize:]
}

func bigRecords(n, size int) []Record {
	rng := newRand(uint64(n))
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Key: []byte{byte(i)}, Value: payload(rng, size), Timestamp: int64(i)}
	}
	return recs
}

func TestSnappyIsXerialFramed(t *testing.T) {
	recs := bigRecords(100, 1000) // ~100 KiB: four 32 KiB chunks
	batch, err := Build(plainOptions(Snappy), recs)
	if err != nil {
		t.Fatal(err)
	}
	s := batch[HeaderSize:]
	if !bytes.Equal(s[:16], []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}) {
		t.Fatalf("xerial header % x", s[:16])
	}
	var out []byte
	chunks := 0
	for p := 16; p < len(s); chunks++ {
		n := int(binary.BigEndian.Uint32(s[p:]))
		dec, err := s2.Decode(nil, s[p+4:p+4+n])
		if err != nil {
			t.Fatal(err)
		}
		if len(dec) > 32<<10 {
			t.Fatalf("chunk %d holds %d bytes, more than 32 KiB", chunks, len(dec))
		}
		out = append(out, dec...)
		p += 4 + n
	}
	raw := section(t, recs)
	if want := (len(raw) + 32<<10 - 1) / (32 << 10); chunks != want || !bytes.Equal(out, raw) {
		t.Fatalf("%d chunks (want %d), content equal %v", chunks, want, bytes.Equal(out, raw))
	}
}

func TestSnappyDecodeRawAndConcatenated(t *testing.T) {
	recs := bigRecords(40, 2000)
	raw := section(t, recs)
	check := func(name string, s []byte) {
		t.Helper()
		_, got, err := Decode(craft(int16(Snappy), int32(len(recs)), int32(len(recs)-1), s))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != len(recs) || !bytes.Equal(got[39].Value, recs[39].Value) {
			t.Fatalf("%s: wrong records", name)
		}
	}
	check("raw block", s2.EncodeSnappy(nil, raw))
	// Two xerial streams back to back (snappy-java reads those), with
	// chunks cut at odd places and one empty chunk.
	xs := xerialCompress(nil, raw[:10000])
	xs = binary.BigEndian.AppendUint32(xs, 1)
	xs = append(xs, 0) // an empty snappy block
	xs = xerialCompress(xs, raw[10000:])
	check("concatenated xerial", xs)

	for _, bad := range []struct {
		s    []byte
		want string
	}{
		{xerialMagic[:], "xerial snappy header truncated"},
		{append(xerialCompress(nil, raw), 0, 0), "chunk length truncated"},
		{append(xerialCompress(nil, nil), 0, 0, 0, 9, 1), "claims 9 bytes, 1 left"},
		{append(xerialCompress(nil, nil), 0x80, 0, 0, 0), "claims -2147483648 bytes"},
		{append(xerialCompress(nil, nil), 0, 0, 0, 2, 5, 0), "xerial snappy chunk"},
		{[]byte{0x80, 0x80, 0x80, 0x20, 0}, "claims 67108864 decompressed bytes"},
	} {
		_, _, err := Decode(craft(int16(Snappy), 1, 0, bad.s))
		wantCorrupt(t, err, bad.want)
	}
}

func withLimit(t *testing.T, n int) {
	old := MaxDecompressedSize
	MaxDecompressedSize = n
	t.Cleanup(func() { MaxDecompressedSize = old })
}

func TestDecompressionLimit(t *testing.T) {
	const limit = 1 << 20
	withLimit(t, limit)
	for _, c := range []Compression{Gzip, Snappy, LZ4, Zstd} {
		for _, n := range []int{limit, limit + 1} {
			s, err := compress(nil, c, make([]byte, n))
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = Decode(craft(int16(c), 1, 0, s))
			if n > limit {
				wantCorrupt(t, err, "past the 1048576-byte limit (MaxDecompressedSize)")
			} else {
				// Exactly at the limit it decompresses, then fails as records.
				wantCorrupt(t, err, "record 0 of 1")
			}
		}
		// A real batch over the limit, and then under a raised one.
		batch, err := Build(plainOptions(c), bigRecords(3, 400<<10))
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = Decode(batch)
		wantCorrupt(t, err, "MaxDecompressedSize")
		MaxDecompressedSize = 2 << 20
		if _, recs, err := Decode(batch); err != nil || len(recs) != 3 {
			t.Fatalf("%s under a raised limit: %v", c, err)
		}
		MaxDecompressedSize = limit
	}
}

func TestDecompressionBombMemoryIsBounded(t *testing.T) {
	const limit = 4 << 20
	withLimit(t, limit)
	zeros := make([]byte, 64<<20)
	for _, c := range []Compression{Gzip, Snappy, LZ4, Zstd} {
		s, err := compress(nil, c, zeros)
		if err != nil {
			t.Fatal(err)
		}
		batch := craft(int16(c), 1, 0, s)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _, err = Decode(batch)
		runtime.ReadMemStats(&after)
		wantCorrupt(t, err, "MaxDecompressedSize")
		if got := after.TotalAlloc - before.TotalAlloc; got > 4*limit {
			t.Errorf("%s: a %d-byte bomb made Decode allocate %d bytes (limit %d)", c, len(s), got, limit)
		}
	}
}

func TestEmptyCompressedSection(t *testing.T) {
	// Kafka never writes one, but a compressed section of nothing is a
	// valid stream of no records for the stream codecs.
	for _, c := range []Compression{Gzip, Snappy, LZ4, Zstd} {
		s, err := compress(nil, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, recs, err := Decode(craft(int16(c), 0, 0, s))
		if err != nil || len(recs) != 0 {
			t.Fatalf("%s: %v", c, err)
		}
	}
}
