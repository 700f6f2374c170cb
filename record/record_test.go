package record

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

var allCodecs = []Compression{None, Gzip, Snappy, LZ4, Zstd}

// sameBytes compares two nullable fields, nil (null) differing from empty.
func sameBytes(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

// recordDiff says how two records differ in content (attributes, key,
// value, headers, timestamp) and, with deltas, in offsets too.
func recordDiff(got, want *Record, deltas bool) string {
	switch {
	case got.Attributes != want.Attributes:
		return fmt.Sprintf("attributes %d, want %d", got.Attributes, want.Attributes)
	case !sameBytes(got.Key, want.Key):
		return fmt.Sprintf("key %q (nil %v), want %q (nil %v)", got.Key, got.Key == nil, want.Key, want.Key == nil)
	case !sameBytes(got.Value, want.Value):
		return fmt.Sprintf("value %.40q (nil %v), want %.40q (nil %v)", got.Value, got.Value == nil, want.Value, want.Value == nil)
	case len(got.Headers) != len(want.Headers):
		return fmt.Sprintf("%d headers, want %d", len(got.Headers), len(want.Headers))
	case got.Timestamp != want.Timestamp:
		return fmt.Sprintf("timestamp %d, want %d", got.Timestamp, want.Timestamp)
	}
	for i := range got.Headers {
		g, w := got.Headers[i], want.Headers[i]
		if g.Key != w.Key || !sameBytes(g.Value, w.Value) {
			return fmt.Sprintf("header %d = %q:%q, want %q:%q", i, g.Key, g.Value, w.Key, w.Value)
		}
	}
	if deltas && (got.Offset != want.Offset || got.OffsetDelta != want.OffsetDelta || got.TimestampDelta != want.TimestampDelta) {
		return fmt.Sprintf("offset %d delta %d tsDelta %d, want %d %d %d", got.Offset, got.OffsetDelta, got.TimestampDelta, want.Offset, want.OffsetDelta, want.TimestampDelta)
	}
	return ""
}

func checkRecords(t *testing.T, got, want []Record, deltas bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range got {
		if d := recordDiff(&got[i], &want[i], deltas); d != "" {
			t.Fatalf("record %d: %s", i, d)
		}
	}
}

func wantCorrupt(t *testing.T, err error, substr string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want CORRUPT_MESSAGE containing %q", substr)
	}
	if errs.CodeOf(err) != pb.ErrorCode_CORRUPT_MESSAGE {
		t.Fatalf("error %v has code %v, want CORRUPT_MESSAGE", err, errs.CodeOf(err))
	}
	if !strings.Contains(err.Error(), substr) {
		t.Fatalf("error %q does not mention %q", err, substr)
	}
}

func plainOptions(c Compression) BatchOptions {
	return BatchOptions{BaseOffset: 1000, PartitionLeaderEpoch: NoPartitionLeader, Compression: c,
		ProducerID: NoProducerID, ProducerEpoch: NoProducerEpoch, BaseSequence: NoSequence}
}

// variedRecords exercises null vs empty keys and values, null, empty and
// binary header values, many headers, and timestamps going back and forth.
func variedRecords(n int, rng *rand.Rand) []Record {
	recs := make([]Record, n)
	base := int64(1_700_000_000_000)
	for i := range recs {
		r := &recs[i]
		r.Timestamp = base + int64(rng.IntN(20000)) - 10000
		r.Attributes = int8(i % 3)
		switch i % 4 {
		case 0:
			r.Key = nil
		case 1:
			r.Key = []byte{}
		default:
			r.Key = []byte(fmt.Sprintf("key-%d", i))
		}
		switch i % 5 {
		case 0:
			r.Value = nil
		case 1:
			r.Value = []byte{}
		default:
			r.Value = payload(rng, rng.IntN(300))
		}
		nh := rng.IntN(4)
		if i%97 == 0 {
			nh = 200
		}
		for j := 0; j < nh; j++ {
			h := RecordHeader{Key: fmt.Sprintf("h%d", j)}
			switch j % 3 {
			case 0:
				h.Value = nil
			case 1:
				h.Value = []byte{}
				h.Key = ""
			default:
				h.Value = []byte{0, 0xff, byte(j)}
			}
			r.Headers = append(r.Headers, h)
		}
	}
	return recs
}

func TestRoundTripEveryCodec(t *testing.T) {
	for _, c := range allCodecs {
		for _, n := range []int{1, 2, 1000} {
			t.Run(fmt.Sprintf("codec=%s/records=%d", c, n), func(t *testing.T) {
				recs := variedRecords(n, rand.New(rand.NewPCG(uint64(n), uint64(c))))
				opts := plainOptions(c)
				batch, err := Build(opts, recs)
				if err != nil {
					t.Fatal(err)
				}
				h, got, err := Decode(batch)
				if err != nil {
					t.Fatal(err)
				}
				if h.Compression() != c || int(h.RecordCount) != n || h.LastOffsetDelta != int32(n-1) || h.BaseOffset != 1000 {
					t.Fatalf("header %+v", h)
				}
				if h.FirstTimestamp != recs[0].Timestamp {
					t.Fatalf("firstTimestamp %d, want the first record's %d", h.FirstTimestamp, recs[0].Timestamp)
				}
				maxTS := recs[0].Timestamp
				for i := range recs {
					maxTS = max(maxTS, recs[i].Timestamp)
					recs[i].Offset = 1000 + int64(i)
					recs[i].OffsetDelta = int32(i)
					recs[i].TimestampDelta = recs[i].Timestamp - recs[0].Timestamp
				}
				if h.MaxTimestamp != maxTS {
					t.Fatalf("maxTimestamp %d, want %d", h.MaxTimestamp, maxTS)
				}
				checkRecords(t, got, recs, true)

				// The incremental Builder makes the same batch.
				b := NewBuilder(opts)
				for _, r := range recs {
					b.Append(r)
				}
				again, err := b.Build()
				if err != nil {
					t.Fatal(err)
				}
				if c == None && !bytes.Equal(again, batch) {
					t.Fatal("Builder and Build differ")
				}
				if _, got2, err := Decode(again); err != nil {
					t.Fatal(err)
				} else {
					checkRecords(t, got2, recs, true)
				}
			})
		}
	}
}

func TestTimestampRules(t *testing.T) {
	// All zero: FirstTimestamp stands for every record.
	recs := []Record{{Value: []byte("a")}, {Value: []byte("b")}}
	opts := plainOptions(None)
	opts.FirstTimestamp = 12345
	batch, err := Build(opts, recs)
	if err != nil {
		t.Fatal(err)
	}
	h, got, err := Decode(batch)
	if err != nil {
		t.Fatal(err)
	}
	if h.FirstTimestamp != 12345 || h.MaxTimestamp != 12345 || got[0].Timestamp != 12345 || got[1].Timestamp != 12345 {
		t.Fatalf("header %+v records %+v", h, got)
	}
	// LogAppendTime: every record reads the batch's max timestamp.
	opts.LogAppendTime = true
	recs[0].Timestamp, recs[1].Timestamp = 50, 40
	batch, _ = Build(opts, recs)
	h, got, err = Decode(batch)
	if err != nil {
		t.Fatal(err)
	}
	if !h.LogAppendTime() || h.FirstTimestamp != 50 || h.MaxTimestamp != 50 || got[0].Timestamp != 50 || got[1].Timestamp != 50 || got[1].TimestampDelta != -10 {
		t.Fatalf("header %+v records %+v", h, got)
	}
	// Extreme timestamps wrap consistently.
	recs[0].Timestamp, recs[1].Timestamp = math.MinInt64, math.MaxInt64
	opts.LogAppendTime = false
	batch, _ = Build(opts, recs)
	if _, got, err = Decode(batch); err != nil || got[0].Timestamp != math.MinInt64 || got[1].Timestamp != math.MaxInt64 {
		t.Fatalf("extreme timestamps: %v %+v", err, got)
	}
}

func TestRecordEncodeDecode(t *testing.T) {
	for _, r := range []Record{
		{},
		{Key: []byte{}, Value: []byte{}},
		{Attributes: -1, TimestampDelta: math.MinInt64, OffsetDelta: math.MaxInt32, Key: bytes.Repeat([]byte("k"), 200), Value: bytes.Repeat([]byte("v"), 70000)},
		{TimestampDelta: math.MaxInt64, OffsetDelta: math.MinInt32, Headers: []RecordHeader{{Key: "", Value: nil}, {Key: "x", Value: []byte{}}}},
	} {
		enc := r.AppendTo([]byte("prefix"))[6:]
		if len(enc) != r.EncodedSize() {
			t.Fatalf("EncodedSize %d, encoded %d", r.EncodedSize(), len(enc))
		}
		got, n, err := DecodeRecord(append(enc, 0xAA))
		if err != nil || n != len(enc) {
			t.Fatalf("DecodeRecord: n %d of %d, %v", n, len(enc), err)
		}
		if d := recordDiff(&got, &r, true); d != "" {
			t.Fatal(d)
		}
	}
}

func TestDecodedSlicesAreClipped(t *testing.T) {
	batch := append([]byte(nil), goldenBatch...)
	_, recs, err := Decode(batch)
	if err != nil {
		t.Fatal(err)
	}
	_ = append(recs[0].Key, 'X', 'X', 'X')
	_ = append(recs[0].Value, 'X')
	if !bytes.Equal(batch, goldenBatch) {
		t.Fatal("appending to a decoded key or value wrote into the batch")
	}
}

func TestBuilderAppendDoesNotAllocate(t *testing.T) {
	b := NewBuilder(plainOptions(None))
	r := Record{Key: []byte("key"), Value: make([]byte, 100), Headers: []RecordHeader{{Key: "a", Value: []byte("b")}}, Timestamp: 5}
	b.Grow(1000 * (r.EncodedSize() + 8))
	allocs := testing.AllocsPerRun(500, func() { b.Append(r) })
	if allocs != 0 {
		t.Fatalf("Append allocates %.1f times", allocs)
	}
}

func TestBuilderReuse(t *testing.T) {
	for _, c := range allCodecs {
		b := NewBuilder(plainOptions(c))
		for round := 0; round < 3; round++ {
			for i := 0; i <= round; i++ {
				b.Append(Record{Value: []byte(fmt.Sprint(round, i)), Timestamp: int64(100 * round)})
			}
			batch, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			if b.Len() != 0 || b.EstimatedSize() != HeaderSize {
				t.Fatalf("Builder not empty after Build: %d records", b.Len())
			}
			h, recs, err := Decode(batch)
			if err != nil || len(recs) != round+1 || h.FirstTimestamp != int64(100*round) {
				t.Fatalf("%s round %d: %v, %d records, header %+v", c, round, err, len(recs), h)
			}
		}
	}
}

func TestBuildErrors(t *testing.T) {
	if _, err := Build(plainOptions(None), nil); errs.CodeOf(err) != pb.ErrorCode_INVALID_RECORD {
		t.Fatalf("empty batch: %v", err)
	}
	if _, err := Build(plainOptions(Compression(5)), []Record{{}}); errs.CodeOf(err) != pb.ErrorCode_UNSUPPORTED_COMPRESSION_TYPE {
		t.Fatalf("unknown codec: %v", err)
	}
}

func TestHeaderOptionsRebuild(t *testing.T) {
	opts := BatchOptions{BaseOffset: 7, PartitionLeaderEpoch: 9, Compression: LZ4, ProducerID: 11, ProducerEpoch: 2,
		BaseSequence: 5, Transactional: true, LogAppendTime: true, FirstTimestamp: 77}
	batch, err := Build(opts, []Record{{Value: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := ParseHeader(batch)
	if got := h.Options(); got != opts {
		t.Fatalf("Options() = %+v, want %+v", got, opts)
	}
}
