package record

import (
	"bytes"
	"encoding/hex"
	"hash/crc32"
	"testing"
)

// The golden batches below are written out by hand from Kafka's
// RecordBatch v2 definition, field by field, so they state the format
// independently of the encoder. Their CRCs were computed with a separate
// bit-by-bit CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) over
// bytes 21.. (attributes to the end).

// goldenBatch: baseOffset 100, partitionLeaderEpoch 3, uncompressed,
// producer 4242 epoch 5 baseSequence 17, two records:
//
//	0: key "k1", value "hello", header h="v", timestamp 1700000000000
//	1: key "k2", value null, no headers,     timestamp 1700000000300
var goldenBatch = cat(
	// --- header (61 bytes) ---
	[]byte{0, 0, 0, 0, 0, 0, 0, 100}, // baseOffset int64 = 100
	[]byte{0, 0, 0, 77},              // batchLength int32 = 89 - 12
	[]byte{0, 0, 0, 3},               // partitionLeaderEpoch int32 = 3
	[]byte{2},                        // magic int8 = 2
	[]byte{0xe5, 0x72, 0x5b, 0xb6},   // crc uint32 = 0xe5725bb6
	[]byte{0, 0},                     // attributes int16: none, CreateTime, not transactional, not control
	[]byte{0, 0, 0, 1},               // lastOffsetDelta int32 = 1
	[]byte{0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00}, // baseTimestamp int64 = 1700000000000
	[]byte{0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x69, 0x2c}, // maxTimestamp int64 = 1700000000300
	[]byte{0, 0, 0, 0, 0, 0, 0x10, 0x92},             // producerId int64 = 4242
	[]byte{0, 5},                                     // producerEpoch int16 = 5
	[]byte{0, 0, 0, 17},                              // baseSequence int32 = 17
	[]byte{0, 0, 0, 2},                               // records count int32 = 2
	// --- record 0 (18 bytes) ---
	[]byte{0x22},               // length varint = 17 (zigzag 34)
	[]byte{0},                  // attributes int8 = 0
	[]byte{0},                  // timestampDelta varlong = 0
	[]byte{0},                  // offsetDelta varint = 0
	[]byte{0x04}, []byte("k1"), // keyLength varint = 2 (zigzag 4), key
	[]byte{0x0a}, []byte("hello"), // valueLength varint = 5 (zigzag 10), value
	[]byte{0x02},              // header count varint = 1
	[]byte{0x02}, []byte("h"), // headerKeyLength varint = 1, "h"
	[]byte{0x02}, []byte("v"), // headerValueLength varint = 1, "v"
	// --- record 1 (10 bytes) ---
	[]byte{0x12},               // length varint = 9 (zigzag 18)
	[]byte{0},                  // attributes int8 = 0
	[]byte{0xd8, 0x04},         // timestampDelta varlong = 300 (zigzag 600 = 0x258: 0xd8 0x04)
	[]byte{0x02},               // offsetDelta varint = 1
	[]byte{0x04}, []byte("k2"), // keyLength varint = 2, key
	[]byte{0x01}, // valueLength varint = -1 (zigzag 1): null
	[]byte{0x00}, // header count varint = 0
)

func goldenOptions() BatchOptions {
	return BatchOptions{BaseOffset: 100, PartitionLeaderEpoch: 3, ProducerID: 4242, ProducerEpoch: 5, BaseSequence: 17}
}

func goldenRecords() []Record {
	return []Record{
		{Key: []byte("k1"), Value: []byte("hello"), Headers: []RecordHeader{{Key: "h", Value: []byte("v")}}, Timestamp: 1700000000000},
		{Key: []byte("k2"), Value: nil, Timestamp: 1700000000300},
	}
}

// goldenControl: BuildControlBatch(4242, 5, ControlCommit, 9, 1700000000000).
var goldenControl = cat(
	[]byte{0, 0, 0, 0, 0, 0, 0, 0},                   // baseOffset int64 = 0 (the broker rewrites it)
	[]byte{0, 0, 0, 66},                              // batchLength int32 = 78 - 12
	[]byte{0xff, 0xff, 0xff, 0xff},                   // partitionLeaderEpoch int32 = -1
	[]byte{2},                                        // magic
	[]byte{0xb8, 0x49, 0xe3, 0x28},                   // crc uint32 = 0xb849e328
	[]byte{0x00, 0x30},                               // attributes: isTransactional (0x10) | isControl (0x20)
	[]byte{0, 0, 0, 0},                               // lastOffsetDelta = 0
	[]byte{0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00}, // baseTimestamp = 1700000000000
	[]byte{0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00}, // maxTimestamp = 1700000000000
	[]byte{0, 0, 0, 0, 0, 0, 0x10, 0x92},             // producerId = 4242
	[]byte{0, 5},                                     // producerEpoch = 5
	[]byte{0xff, 0xff, 0xff, 0xff},                   // baseSequence = -1
	[]byte{0, 0, 0, 1},                               // records count = 1
	// --- the control record (17 bytes) ---
	[]byte{0x20},       // length varint = 16
	[]byte{0, 0, 0},    // attributes, timestampDelta 0, offsetDelta 0
	[]byte{0x08},       // keyLength varint = 4
	[]byte{0, 0},       // key: version int16 = 0
	[]byte{0, 1},       // key: type int16 = 1 (COMMIT)
	[]byte{0x0c},       // valueLength varint = 6
	[]byte{0, 0},       // value: version int16 = 0
	[]byte{0, 0, 0, 9}, // value: coordinatorEpoch int32 = 9
	[]byte{0},          // header count = 0
)

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func diffHex(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from golden:\n got %s\nwant %s", what, hex.EncodeToString(got), hex.EncodeToString(want))
	}
}

func TestGoldenSelfConsistent(t *testing.T) {
	for name, g := range map[string][]byte{"data": goldenBatch, "control": goldenControl} {
		if got := crc32.Checksum(g[21:], crc32.MakeTable(crc32.Castagnoli)); got != uint32(g[17])<<24|uint32(g[18])<<16|uint32(g[19])<<8|uint32(g[20]) {
			t.Errorf("%s: golden CRC field does not match CRC-32C %#x of its bytes", name, got)
		}
		if n := int(g[8])<<24 | int(g[9])<<16 | int(g[10])<<8 | int(g[11]); n != len(g)-12 {
			t.Errorf("%s: golden batchLength %d, batch is %d bytes", name, n, len(g))
		}
	}
	if len(goldenBatch) != 89 || len(goldenControl) != 78 {
		t.Fatalf("golden sizes %d, %d", len(goldenBatch), len(goldenControl))
	}
}

func TestGoldenBuild(t *testing.T) {
	got, err := Build(goldenOptions(), goldenRecords())
	if err != nil {
		t.Fatal(err)
	}
	diffHex(t, "Build", got, goldenBatch)

	b := NewBuilder(goldenOptions())
	for _, r := range goldenRecords() {
		b.Append(r)
	}
	if b.Len() != 2 || b.EstimatedSize() != len(goldenBatch) {
		t.Fatalf("Builder Len %d EstimatedSize %d", b.Len(), b.EstimatedSize())
	}
	got, err = b.Build()
	if err != nil {
		t.Fatal(err)
	}
	diffHex(t, "Builder.Build", got, goldenBatch)
	if ComputeCRC(got) != 0xe5725bb6 {
		t.Fatalf("ComputeCRC = %#x", ComputeCRC(got))
	}
}

func TestGoldenDecode(t *testing.T) {
	h, recs, err := Decode(goldenBatch)
	if err != nil {
		t.Fatal(err)
	}
	want := Header{BaseOffset: 100, BatchLength: 77, PartitionLeaderEpoch: 3, Magic: 2, CRC: 0xe5725bb6,
		LastOffsetDelta: 1, FirstTimestamp: 1700000000000, MaxTimestamp: 1700000000300,
		ProducerID: 4242, ProducerEpoch: 5, BaseSequence: 17, RecordCount: 2}
	if h != want {
		t.Fatalf("header %+v\nwant %+v", h, want)
	}
	if h.LastSequence() != 18 || h.NextOffset() != 102 {
		t.Fatalf("LastSequence %d NextOffset %d", h.LastSequence(), h.NextOffset())
	}
	wantRecs := goldenRecords()
	wantRecs[0].Offset, wantRecs[1].Offset = 100, 101
	wantRecs[1].OffsetDelta, wantRecs[1].TimestampDelta = 1, 300
	checkRecords(t, recs, wantRecs, true)
}

func TestGoldenControl(t *testing.T) {
	got := BuildControlBatch(4242, 5, ControlCommit, 9, 1700000000000)
	diffHex(t, "BuildControlBatch", got, goldenControl)
	typ, ce, err := ReadControlBatch(goldenControl)
	if err != nil || typ != ControlCommit || ce != 9 {
		t.Fatalf("ReadControlBatch = %v %d %v", typ, ce, err)
	}
	h, recs, err := Decode(goldenControl)
	if err != nil {
		t.Fatal(err)
	}
	if !h.IsControl() || !h.IsTransactional() || h.BaseSequence != -1 || h.PartitionLeaderEpoch != -1 {
		t.Fatalf("control header %+v", h)
	}
	if len(recs[0].Key) != 4 || len(recs[0].Value) != 6 {
		t.Fatalf("control keySize %d valueSize %d, want 4 and 6", len(recs[0].Key), len(recs[0].Value))
	}
}
