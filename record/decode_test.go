package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"testing"
)

// craft makes a batch around an arbitrary records section with a correct
// length and CRC, written independently of the builder.
func craft(attrs int16, count, lastOffsetDelta int32, section []byte) []byte {
	b := make([]byte, HeaderSize, HeaderSize+len(section))
	be := binary.BigEndian
	be.PutUint32(b[8:], uint32(HeaderSize-12+len(section)))
	b[16] = 2
	be.PutUint16(b[21:], uint16(attrs))
	be.PutUint32(b[23:], uint32(lastOffsetDelta))
	be.PutUint64(b[43:], math.MaxUint64) // producerId -1
	be.PutUint16(b[51:], math.MaxUint16)
	be.PutUint32(b[53:], math.MaxUint32)
	be.PutUint32(b[57:], uint32(count))
	b = append(b, section...)
	be.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// rec0 is a minimal valid record with offsetDelta 0.
var rec0 = []byte{0x0c, 0, 0, 0, 0x01, 0x01, 0} // length 6, attrs, ts 0, off 0, key null, value null, 0 headers

func TestDecodeCorrupt(t *testing.T) {
	rec1 := []byte{0x0c, 0, 0, 2, 1, 1, 0} // offsetDelta 1
	cases := []struct {
		name  string
		batch []byte
		want  string
	}{
		{"short header", goldenBatch[:60], "header needs 61"},
		{"bytes after batch", append(append([]byte(nil), goldenBatch...), 0), "1 bytes follow"},
		{"magic 1", func() []byte { b := craft(0, 1, 0, rec0); b[16] = 1; return b }(), "magic 1"},
		{"unknown codec", craft(5, 1, 0, rec0), "unknown compression codec 5"},
		{"count 2^24+1", craft(0, 1<<24+1, 1<<24, rec0), "recordCount 16777217 out of range"},
		{"count beyond bytes", craft(0, 1<<24, 1<<24, rec0), "cannot fit in a 7-byte records section"},
		{"count 0 with bytes", craft(0, 0, 0, rec0), "recordCount 0 but"},
		{"second record overruns", craft(0, 2, 1, append(append([]byte(nil), rec0...), 0x0e, 0, 0, 2, 1, 1, 0)), "record 1 of 2 at byte 7 of the records section: record length 7 overruns"},
		{"trailing garbage", craft(0, 1, 0, append(append([]byte(nil), rec0...), 0, 0, 0, 0, 0, 0, 0)), "7 bytes of trailing garbage"},
		{"negative record length", craft(0, 1, 0, []byte{0x01, 0, 0, 0, 1, 1, 0}), "record length -1 is below"},
		{"record length overrun", craft(0, 1, 0, []byte{0x0e, 0, 0, 0, 1, 1, 0}), "record length 7 overruns"},
		{"record length too long for fields", craft(0, 1, 0, []byte{0x0e, 0, 0, 0, 1, 1, 0, 0}), "fields end after 6"},
		{"key length -2", craft(0, 1, 0, []byte{0x0c, 0, 0, 0, 0x03, 1, 0}), "key length -2 is invalid"},
		{"key overrun", craft(0, 1, 0, []byte{0x0c, 0, 0, 0, 0x7e, 1, 0}), "key of 63 bytes overruns"},
		{"value length huge", craft(0, 1, 0, []byte{0x14, 0, 0, 0, 1, 0xfe, 0xff, 0xff, 0xff, 0x0f, 0}), "value of 2147483647 bytes overruns"},
		{"varint too long", craft(0, 1, 0, []byte{0x10, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 1, 1}), "offsetDelta: varint longer than 5"},
		{"varint over 32 bits", craft(0, 1, 0, []byte{0x10, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x1f, 1, 1, 0}), "offsetDelta: varint longer than 5 bytes or out of range"},
		{"varlong too long", craft(0, 1, 0, []byte{0x18, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02, 0, 1}), "timestampDelta: varint longer than 10"},
		{"negative header count", craft(0, 1, 0, []byte{0x0c, 0, 0, 0, 1, 1, 0x01}), "header count -1 is negative"},
		{"huge header count", craft(0, 1, 0, []byte{0x14, 0, 0, 0, 1, 1, 0xfe, 0xff, 0xff, 0xff, 0x0f}), "header count 2147483647 cannot fit"},
		{"null header key", craft(0, 1, 0, []byte{0x10, 0, 0, 0, 1, 1, 0x02, 0x01, 0x01}), "header 0 key length -1 is negative"},
		{"header value -3", craft(0, 1, 0, []byte{0x10, 0, 0, 0, 1, 1, 0x02, 0x00, 0x05}), "header value length -3"},
		{"header count past bytes", craft(0, 1, 0, []byte{0x0e, 0, 0, 0, 1, 1, 0x02, 0x00}), "header count 1 cannot fit in the 1 bytes left"},
		{"header truncated", craft(0, 1, 0, []byte{0x10, 0, 0, 0, 1, 1, 0x02, 0x02, 'a'}), "header 0: header value length: varint truncated"},
		{"offset deltas repeat", craft(0, 2, 1, append(append([]byte(nil), rec0...), rec0...)), "record 1 has offsetDelta 0"},
		{"offset delta past last", craft(0, 1, 0, rec1), "record 0 has offsetDelta 1"},
		{"negative offset delta", craft(0, 1, 0, []byte{0x0c, 0, 0, 1, 1, 1, 0}), "offsetDelta -1"},
		{"gzip garbage", craft(int16(Gzip), 1, 0, rec0), "gzip records section does not decompress"},
		{"lz4 garbage", craft(int16(LZ4), 1, 0, rec0), "lz4 records section does not decompress"},
		{"zstd garbage", craft(int16(Zstd), 1, 0, rec0), "zstd records section does not decompress"},
		{"snappy garbage", craft(int16(Snappy), 1, 0, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}), "raw snappy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, recs, err := Decode(c.batch)
			wantCorrupt(t, err, c.want)
			if recs != nil {
				t.Fatal("records returned with an error")
			}
		})
	}
	// Sanity: the crafting itself makes valid batches.
	if _, recs, err := Decode(craft(0, 2, 5, append(append([]byte(nil), rec0...), rec1...))); err != nil || len(recs) != 2 {
		t.Fatalf("crafted valid batch: %v", err)
	}
}

func TestCRCCatchesEveryBitFlip(t *testing.T) {
	lz4Batch, err := Build(plainOptions(LZ4), variedRecords(20, newRand(1)))
	if err != nil {
		t.Fatal(err)
	}
	for name, orig := range map[string][]byte{"golden": goldenBatch, "control": goldenControl, "lz4": lz4Batch} {
		b := append([]byte(nil), orig...)
		for i := range b {
			for bit := 0; bit < 8; bit++ {
				b[i] ^= 1 << bit
				_, err := Validate(b)
				_, _, derr := Decode(b)
				b[i] ^= 1 << bit
				outsideCRC := i < offBatchLength || (i >= offPartitionLeaderEpoch && i < offMagic)
				if outsideCRC && (err != nil || derr != nil) {
					t.Fatalf("%s: byte %d (baseOffset or partitionLeaderEpoch) is outside the CRC, yet flipping it fails: %v", name, i, derr)
				}
				if !outsideCRC && (err == nil || derr == nil) {
					t.Fatalf("%s: flipping bit %d of byte %d went unnoticed", name, bit, i)
				}
				if err != nil {
					wantCorrupt(t, err, "")
				}
			}
		}
	}
	// The CRC check itself, named.
	b := append([]byte(nil), goldenBatch...)
	b[len(b)-1] ^= 0x10
	_, err = Validate(b)
	wantCorrupt(t, err, "CRC mismatch")
}

func TestTruncatedBatches(t *testing.T) {
	zb, _ := Build(plainOptions(Zstd), variedRecords(10, newRand(2)))
	for _, orig := range [][]byte{goldenBatch, goldenControl, zb} {
		for n := 0; n < len(orig); n++ {
			_, _, err := Decode(orig[:n])
			wantCorrupt(t, err, "")
			if _, err := Validate(orig[:n]); err == nil {
				t.Fatalf("Validate accepts a batch truncated to %d of %d bytes", n, len(orig))
			}
		}
	}
	_, err := Validate(goldenBatch[:70])
	wantCorrupt(t, err, "batch of 89 bytes is truncated to 70")
	// Iter stops cleanly before a trailing partial batch.
	buf := append(append([]byte(nil), goldenBatch...), goldenControl[:70]...)
	it := NewIter(buf)
	it.Verify = true
	n := 0
	for it.Next() {
		n++
	}
	if n != 1 || it.Err() != nil || len(it.Rest()) != 70 {
		t.Fatalf("Iter: %d batches, err %v, rest %d", n, it.Err(), len(it.Rest()))
	}
}

func TestSetProducerFields(t *testing.T) {
	for _, c := range allCodecs {
		batch, err := Build(plainOptions(c), variedRecords(5, newRand(3)))
		if err != nil {
			t.Fatal(err)
		}
		SetProducerFields(batch, 99, 3, math.MaxInt32-2, true)
		h, recs, err := Decode(batch)
		if err != nil {
			t.Fatalf("%s: batch invalid after SetProducerFields: %v", c, err)
		}
		if h.ProducerID != 99 || h.ProducerEpoch != 3 || h.BaseSequence != math.MaxInt32-2 || !h.IsTransactional() || h.Compression() != c || len(recs) != 5 {
			t.Fatalf("%s: header %+v", c, h)
		}
		if h.LastSequence() != 1 {
			t.Fatalf("LastSequence %d, want 1 (wrapped)", h.LastSequence())
		}
		SetProducerFields(batch, NoProducerID, NoProducerEpoch, NoSequence, false)
		if h, err = Validate(batch); err != nil || h.IsTransactional() || h.HasProducerID() || h.LastSequence() != NoSequence {
			t.Fatalf("%s: after clearing: %v %+v", c, err, h)
		}
	}
	// With bytes after the batch, only the batch is covered.
	buf := append(append([]byte(nil), goldenBatch...), goldenControl...)
	SetProducerFields(buf, 1, 1, 1, false)
	if _, err := Validate(buf); err != nil {
		t.Fatal(err)
	}
	if _, err := Validate(buf[len(goldenBatch):]); err != nil {
		t.Fatal("the following batch was touched:", err)
	}
}

func TestIncrementSequence(t *testing.T) {
	for _, c := range []struct{ seq, n, want int32 }{
		{0, 0, 0},
		{5, 3, 8},
		{math.MaxInt32 - 3, 3, math.MaxInt32},
		{math.MaxInt32, 1, 0},
		{math.MaxInt32 - 1, 2, 0},
		{math.MaxInt32 - 1, 3, 1},
		{math.MaxInt32, math.MaxInt32, math.MaxInt32 - 1},
	} {
		if got := IncrementSequence(c.seq, c.n); got != c.want {
			t.Errorf("IncrementSequence(%d, %d) = %d, want %d", c.seq, c.n, got, c.want)
		}
	}
}

func TestControlRecords(t *testing.T) {
	for _, typ := range []ControlType{ControlAbort, ControlCommit} {
		for _, c := range allCodecs {
			// A compressed marker, as some clients may write one.
			recs := []Record{{Key: []byte{0, 0, 0, byte(typ)}, Value: []byte{0, 0, 0x80, 0, 0, 1}, Timestamp: 9}}
			opts := plainOptions(c)
			opts.Control, opts.Transactional = true, true
			batch, err := Build(opts, recs)
			if err != nil {
				t.Fatal(err)
			}
			gt, ce, err := ReadControlBatch(batch)
			if err != nil || gt != typ || ce != math.MinInt32+1 {
				t.Fatalf("%s %s: %v %d %v", typ, c, gt, ce, err)
			}
		}
	}
	bad := []struct {
		rec  Record
		want string
	}{
		{Record{Key: nil, Value: make([]byte, 6)}, "null key"},
		{Record{Key: []byte{0, 0, 0}, Value: make([]byte, 6)}, "key is 3 bytes"},
		{Record{Key: []byte{0, 0, 0, 1, 0}, Value: make([]byte, 6)}, "key version 0 with 5 bytes"},
		{Record{Key: []byte{0x80, 0, 0, 1}, Value: make([]byte, 6)}, "key version -32768"},
		{Record{Key: []byte{0, 0, 0, 3}, Value: make([]byte, 6)}, "type 3 is not a transaction marker"},
		{Record{Key: []byte{0, 0, 0, 1}, Value: make([]byte, 5)}, "value is 5 bytes"},
		{Record{Key: []byte{0, 0, 0, 1}, Value: make([]byte, 7)}, "value version 0 with 7 bytes"},
	}
	for _, b := range bad {
		_, _, err := ParseControlRecord(b.rec)
		wantCorrupt(t, err, b.want)
	}
	// Later versions may carry more.
	if typ, ce, err := ParseControlRecord(Record{Key: []byte{0, 1, 0, 0, 9}, Value: []byte{0, 1, 0, 0, 0, 4, 7, 7}}); err != nil || typ != ControlAbort || ce != 4 {
		t.Fatalf("version 1 marker: %v %d %v", typ, ce, err)
	}
	_, _, err := ReadControlBatch(goldenBatch)
	wantCorrupt(t, err, "not a control batch")
	opts := plainOptions(None)
	opts.Control = true
	two, _ := Build(opts, []Record{{}, {}})
	_, _, err = ReadControlBatch(two)
	wantCorrupt(t, err, "holds 2 records")
}

func ExampleDecode() {
	_, recs, err := Decode(goldenBatch)
	if err != nil {
		panic(err)
	}
	for _, r := range recs {
		fmt.Printf("%d %s %q %d\n", r.Offset, r.Key, r.Value, len(r.Headers))
	}
	// Output:
	// 100 k1 "hello" 1
	// 101 k2 "" 0
}
