package record

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"strings"
	"testing"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

const testNow = int64(1_700_000_000_000)

var defaultPolicy = ClientPolicy{NowMs: testNow, TimestampBeforeMaxMs: DefaultTimestampBeforeMaxMs, TimestampAfterMaxMs: DefaultTimestampAfterMaxMs}

// clientBatch builds a valid batch of n records at testNow.
func clientBatch(t testing.TB, c Compression, n int) []byte {
	t.Helper()
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Key: []byte("k"), Value: []byte("value"), Headers: []RecordHeader{{Key: "h", Value: []byte("v")}}, Timestamp: testNow + int64(i)}
	}
	b, err := Build(BatchOptions{Compression: c, ProducerID: 7, ProducerEpoch: 1, BaseSequence: 0, PartitionLeaderEpoch: -1}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rehead sets a header field and fixes the CRC.
func rehead(b []byte, off int, v uint64, size int) []byte {
	b = append([]byte(nil), b...)
	switch size {
	case 2:
		binary.BigEndian.PutUint16(b[off:], uint16(v))
	case 4:
		binary.BigEndian.PutUint32(b[off:], uint32(v))
	case 8:
		binary.BigEndian.PutUint64(b[off:], v)
	}
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// tsRecord is a minimal record with a timestampDelta and offsetDelta.
func tsRecord(tsDelta int64, offDelta int32) []byte {
	body := []byte{0}
	body = appendVarint(body, tsDelta)
	body = appendVarint(body, int64(offDelta))
	body = append(body, 1, 1, 0) // key null, value null, no headers
	return append(appendVarint(nil, int64(len(body))), body...)
}

// withTimes sets first and max timestamps of a crafted batch.
func withTimes(b []byte, first, maxTS int64) []byte {
	b = rehead(b, offFirstTimestamp, uint64(first), 8)
	return rehead(b, offMaxTimestamp, uint64(maxTS), 8)
}

func TestValidateClientAccepts(t *testing.T) {
	for _, c := range allCodecs {
		for _, n := range []int{1, 3, 100} {
			b := clientBatch(t, c, n)
			h, err := ValidateClient(b, defaultPolicy)
			if err != nil {
				t.Fatalf("%s, %d records: %v", c, n, err)
			}
			if h.RecordCount != int32(n) {
				t.Fatalf("%s: header says %d records", c, h.RecordCount)
			}
		}
	}
	// Records without timestamps (-1) are not checked against the bounds.
	b := withTimes(craft(0, 2, 1, append(tsRecord(0, 0), tsRecord(0, 1)...)), -1, -1)
	if _, err := ValidateClient(b, defaultPolicy); err != nil {
		t.Fatalf("records without timestamps: %v", err)
	}
}

func TestValidateClientRefuses(t *testing.T) {
	good := clientBatch(t, None, 3)
	three := append(append(tsRecord(0, 0), tsRecord(1, 1)...), tsRecord(2, 2)...)
	at := func(b []byte) []byte { return withTimes(b, testNow, testNow+2) }
	future := testNow + DefaultTimestampAfterMaxMs + 1
	cases := []struct {
		name    string
		batch   []byte
		policy  *ClientPolicy
		code    pb.ErrorCode
		want    string
		records []int32
	}{
		{"record count lies (5 for 3)", at(craft(0, 5, 4, three)), nil, pb.ErrorCode_INVALID_RECORD, "recordCount 5 but the records section ends after 3 records", []int32{3}},
		{"record count lies (2 for 3)", at(craft(0, 2, 1, three)), nil, pb.ErrorCode_INVALID_RECORD, "bytes left in the records section after the last of recordCount 2", []int32{1}},
		{"lastOffsetDelta MaxInt32", at(craft(0, 3, math.MaxInt32, three)), nil, pb.ErrorCode_INVALID_RECORD, "lastOffsetDelta 2147483647 spans 2147483648 offsets but recordCount is 3", nil},
		{"lastOffsetDelta short", rehead(good, offLastOffsetDelta, 1, 4), nil, pb.ErrorCode_CORRUPT_MESSAGE, "lastOffsetDelta 1 does not fit recordCount 3", nil},
		{"record count 0", craft(0, 0, 0, nil), nil, pb.ErrorCode_INVALID_RECORD, "invalid record count 0", nil},
		{"garbage record bytes", at(craft(0, 3, 2, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})), nil, pb.ErrorCode_INVALID_RECORD, "record 0 at byte 0 of the records section: record length: varint longer than 5 bytes", []int32{0}},
		{"garbage in the second record", at(craft(0, 3, 2, append(append(tsRecord(0, 0), 0x0c, 0, 0, 2, 0x7e, 1, 0), tsRecord(2, 2)...))), nil, pb.ErrorCode_INVALID_RECORD, "record 1 at byte 7 of the records section: key of 63 bytes overruns", []int32{1}},
		{"codec flag on uncompressed bytes", rehead(good, offAttributes, uint64(Gzip), 2), nil, pb.ErrorCode_CORRUPT_MESSAGE, "gzip records section does not decompress", nil},
		{"zstd flag on uncompressed bytes", rehead(good, offAttributes, uint64(Zstd), 2), nil, pb.ErrorCode_CORRUPT_MESSAGE, "zstd records section does not decompress", nil},
		{"unknown codec", rehead(good, offAttributes, 6, 2), nil, pb.ErrorCode_CORRUPT_MESSAGE, "unknown compression codec 6", nil},
		{"offset deltas out of order", at(craft(0, 3, 2, append(append(tsRecord(0, 0), tsRecord(1, 2)...), tsRecord(2, 1)...))), nil, pb.ErrorCode_INVALID_RECORD, "record 1 has offsetDelta 2", []int32{1}},
		{"offset deltas with gaps", at(craft(0, 2, 1, append(tsRecord(0, 1), tsRecord(1, 2)...))), nil, pb.ErrorCode_INVALID_RECORD, "record 0 has offsetDelta 1", []int32{0}},
		{"control batch", BuildControlBatch(7, 1, ControlCommit, 0, testNow), nil, pb.ErrorCode_INVALID_RECORD, "clients may not write control batches", nil},
		{"producer id without sequence", rehead(good, offBaseSequence, math.MaxUint32, 4), nil, pb.ErrorCode_INVALID_RECORD, "needs a producer epoch and a base sequence", nil},
		{"LogAppendTime from a client", rehead(good, offAttributes, timestampTypeBit, 2), nil, pb.ErrorCode_INVALID_TIMESTAMP, "LogAppendTime", nil},
		{"timestamp in the future", withTimes(craft(0, 3, 2, append(append(tsRecord(0, 0), tsRecord(future-testNow, 1)...), tsRecord(future-testNow+5, 2)...)), testNow, future+5), nil,
			pb.ErrorCode_INVALID_TIMESTAMP, "2 of 3 records have a timestamp out of range (message.timestamp.before.max.ms=9223372036854775807, message.timestamp.after.max.ms=3600000): timestamp 1700003600001 of record 1 is out of range: it must be within [-9223370336854775807, 1700003600000]", []int32{1, 2}},
		{"timestamp too old", withTimes(craft(0, 1, 0, tsRecord(0, 0)), testNow-61_000, testNow-61_000), &ClientPolicy{NowMs: testNow, TimestampBeforeMaxMs: 60_000, TimestampAfterMaxMs: 1000},
			pb.ErrorCode_INVALID_TIMESTAMP, "timestamp 1699999939000 of record 0 is out of range: it must be within [1699999940000, 1700000001000]", []int32{0}},
		{"maxTimestamp lies", withTimes(craft(0, 3, 2, three), testNow, testNow+1_000), nil, pb.ErrorCode_INVALID_TIMESTAMP, "maxTimestamp 1700000001000 is not its records' largest timestamp 1700000000002", nil},
		{"bytes after the batch", append(append([]byte(nil), good...), 0), nil, pb.ErrorCode_CORRUPT_MESSAGE, "1 bytes follow", nil},
		{"CRC", func() []byte { b := append([]byte(nil), good...); b[len(b)-1] ^= 1; return b }(), nil, pb.ErrorCode_CORRUPT_MESSAGE, "CRC mismatch", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := defaultPolicy
			if c.policy != nil {
				p = *c.policy
			}
			_, err := ValidateClient(c.batch, p)
			if err == nil {
				t.Fatal("accepted")
			}
			if got := errs.CodeOf(err); got != c.code {
				t.Fatalf("code %s, want %s (%v)", got, c.code, err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not say %q", err, c.want)
			}
			var be *BatchError
			if !errors.As(err, &be) {
				t.Fatalf("%T is not a *BatchError", err)
			}
			var idx []int32
			for _, r := range be.Records {
				idx = append(idx, r.BatchIndex)
			}
			if len(idx) != len(c.records) || (len(idx) > 0 && !equalInt32(idx, c.records)) {
				t.Fatalf("record errors at %v, want %v", idx, c.records)
			}
			// What the validator refuses, Decode never claims to be the
			// records the header says: it refuses too, or the header lies.
			if h, recs, derr := Decode(c.batch); derr == nil && int(h.LastOffsetDelta)+1 == len(recs) && c.code != pb.ErrorCode_INVALID_TIMESTAMP && !h.IsControl() && !h.HasProducerID() {
				t.Fatalf("Decode accepts what the validator refuses with %v", err)
			}
		})
	}
}

func equalInt32(a, b []int32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestValidateClientRecordErrorsBounded: a batch whose every record is bad
// is answered with at most maxRecordErrors record errors.
func TestValidateClientRecordErrorsBounded(t *testing.T) {
	var sec []byte
	for i := 0; i < 1000; i++ {
		sec = append(sec, tsRecord(int64(i), int32(i))...)
	}
	b := withTimes(craft(0, 1000, 999, sec), 0, 999)
	_, err := ValidateClient(b, ClientPolicy{NowMs: testNow, TimestampBeforeMaxMs: 1000, TimestampAfterMaxMs: 1000})
	var be *BatchError
	if !errors.As(err, &be) || len(be.Records) != maxRecordErrors || !strings.Contains(err.Error(), "1000 of 1000 records") {
		t.Fatalf("got %v", err)
	}
}

// TestValidateClientNoAllocs: validating a batch allocates nothing per
// record; uncompressed, zstd and lz4 batches nothing at all (snappy
// decodes into one new buffer, gzip's reader allocates a little).
func TestValidateClientNoAllocs(t *testing.T) {
	for _, c := range []struct {
		codec Compression
		max   float64
	}{{None, 0}, {Zstd, 0}, {LZ4, 0}, {Snappy, 1}, {Gzip, 4}} {
		b := clientBatch(t, c.codec, 100)
		n := testing.AllocsPerRun(100, func() {
			if _, err := ValidateClient(b, defaultPolicy); err != nil {
				t.Fatal(err)
			}
		})
		if n > c.max && !(raceEnabled && c.codec != None) {
			t.Errorf("%s: %v allocations per batch of 100 records, want at most %v", c.codec, n, c.max)
		}
	}
}

func TestTimestampBoundsSaturate(t *testing.T) {
	for _, c := range []struct {
		p      ClientPolicy
		lo, hi int64
	}{
		{ClientPolicy{NowMs: 10, TimestampBeforeMaxMs: math.MaxInt64, TimestampAfterMaxMs: math.MaxInt64}, 10 - math.MaxInt64, math.MaxInt64},
		{ClientPolicy{NowMs: -10, TimestampBeforeMaxMs: math.MaxInt64, TimestampAfterMaxMs: 5}, math.MinInt64, -5},
		{ClientPolicy{NowMs: 10, TimestampBeforeMaxMs: -3, TimestampAfterMaxMs: -3}, 10, 10},
	} {
		if lo, hi := timestampBounds(&c.p); lo != c.lo || hi != c.hi {
			t.Errorf("%+v: [%d, %d], want [%d, %d]", c.p, lo, hi, c.lo, c.hi)
		}
	}
}

// On a compacted topic a record with a null key is refused INVALID_RECORD
// with Kafka's message, naming each keyless record; an empty key is a key,
// and without Compacted a null key is fine. Compressed batches are walked
// the same way.
func TestValidateClientCompactedNeedsKeys(t *testing.T) {
	compacted := defaultPolicy
	compacted.Compacted = true
	for _, c := range []Compression{None, Zstd} {
		recs := []Record{
			{Key: []byte("a"), Value: []byte("1"), Timestamp: testNow},
			{Key: nil, Value: []byte("2"), Timestamp: testNow},
			{Key: []byte{}, Value: []byte("3"), Timestamp: testNow},
			{Key: nil, Value: nil, Timestamp: testNow},
		}
		b, err := Build(BatchOptions{Compression: c, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, PartitionLeaderEpoch: -1}, recs)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ValidateClient(b, defaultPolicy); err != nil {
			t.Fatalf("%v: keyless records refused on a delete topic: %v", c, err)
		}
		_, err = ValidateClient(b, compacted)
		var be *BatchError
		if !errors.As(err, &be) || be.Err.Code != pb.ErrorCode_INVALID_RECORD || !strings.Contains(be.Err.Message, "Compacted topic cannot accept message without key") {
			t.Fatalf("%v: got %v, want INVALID_RECORD: Compacted topic cannot accept message without key", c, err)
		}
		var idx []int32
		for _, r := range be.Records {
			idx = append(idx, r.BatchIndex)
		}
		if !equalInt32(idx, []int32{1, 3}) {
			t.Fatalf("%v: records named %v, want [1 3]", c, idx)
		}
		keyed, _ := Build(BatchOptions{Compression: c, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, PartitionLeaderEpoch: -1},
			[]Record{recs[0], recs[2]})
		if _, err := ValidateClient(keyed, compacted); err != nil {
			t.Fatalf("%v: keyed records refused on a compacted topic: %v", c, err)
		}
	}
}
