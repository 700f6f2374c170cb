package record

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// FuzzValidateBatch: ValidateClient never panics, refuses only with the
// three codes of its contract, and a batch it accepts decodes (Decode) to
// exactly recordCount records at offset deltas 0..recordCount-1, the
// header's lastOffsetDelta being recordCount-1. Each input is also tried
// with batchLength and CRC fixed up, so the fuzzer gets past the CRC.
func FuzzValidateBatch(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s.batch, testNow)
	}
	f.Add(clientBatch(f, None, 3), testNow)
	f.Add(clientBatch(f, Zstd, 3), testNow)
	f.Fuzz(func(t *testing.T, b []byte, now int64) {
		checkValidateProperty(t, b, now)
		if len(b) >= HeaderSize {
			fixed := append([]byte(nil), b...)
			binary.BigEndian.PutUint32(fixed[offBatchLength:], uint32(len(fixed)-LogOverhead))
			binary.BigEndian.PutUint32(fixed[offCRC:], crc32.Checksum(fixed[offAttributes:], castagnoli))
			checkValidateProperty(t, fixed, now)
		}
	})
}

func checkValidateProperty(t *testing.T, b []byte, now int64) {
	p := ClientPolicy{NowMs: now, TimestampBeforeMaxMs: DefaultTimestampBeforeMaxMs, TimestampAfterMaxMs: DefaultTimestampAfterMaxMs}
	h, err := ValidateClient(b, p)
	if err != nil {
		switch c := errs.CodeOf(err); c {
		case pb.ErrorCode_CORRUPT_MESSAGE, pb.ErrorCode_INVALID_RECORD, pb.ErrorCode_INVALID_TIMESTAMP:
		default:
			t.Fatalf("refused with %v, not one of CORRUPT_MESSAGE, INVALID_RECORD, INVALID_TIMESTAMP", err)
		}
		return
	}
	h2, recs, err := Decode(b)
	if err != nil {
		t.Fatalf("ValidateClient accepted a batch Decode refuses: %v", err)
	}
	if h2 != h || len(recs) != int(h.RecordCount) || h.LastOffsetDelta != h.RecordCount-1 {
		t.Fatalf("accepted header %+v: %d records decoded", h, len(recs))
	}
	for i := range recs {
		if recs[i].OffsetDelta != int32(i) {
			t.Fatalf("accepted batch has record %d at offsetDelta %d", i, recs[i].OffsetDelta)
		}
	}
	if h.IsControl() || h.LogAppendTime() {
		t.Fatalf("accepted a control or LogAppendTime batch: %+v", h)
	}
}

// FuzzReadControlBatch: ReadControlBatch never panics and fails only with
// CORRUPT_MESSAGE; a marker it reads, built again from what it read, reads
// the same.
func FuzzReadControlBatch(f *testing.F) {
	f.Add(BuildControlBatch(7, 1, ControlAbort, 4, 1000))
	f.Add(BuildControlBatch(7, 2, ControlCommit, 0, 0))
	for _, s := range fuzzSeeds() {
		f.Add(s.batch)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, in := range [][]byte{b, fixCRC(b)} {
			typ, ce, err := ReadControlBatch(in)
			if err != nil {
				if errs.CodeOf(err) != pb.ErrorCode_CORRUPT_MESSAGE {
					t.Fatalf("failed with %v, not CORRUPT_MESSAGE", err)
				}
				continue
			}
			h, _ := ParseHeader(in)
			typ2, ce2, err := ReadControlBatch(BuildControlBatch(h.ProducerID, h.ProducerEpoch, typ, ce, h.FirstTimestamp))
			if err != nil || typ2 != typ || ce2 != ce {
				t.Fatalf("rebuilt marker reads %v %d %v, want %v %d", typ2, ce2, err, typ, ce)
			}
		}
	})
}

// FuzzParseControlRecord: any key and value; a marker it parses has a
// transaction marker's type.
func FuzzParseControlRecord(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1}, []byte{0, 0, 0, 0, 0, 5})
	f.Add([]byte{0, 1, 0, 0, 9}, []byte{0, 1, 0, 0, 0, 5, 7})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		typ, _, err := ParseControlRecord(Record{Key: key, Value: value})
		if err != nil {
			if errs.CodeOf(err) != pb.ErrorCode_CORRUPT_MESSAGE {
				t.Fatalf("failed with %v, not CORRUPT_MESSAGE", err)
			}
			return
		}
		if typ != ControlAbort && typ != ControlCommit {
			t.Fatalf("parsed type %d", typ)
		}
	})
}

func fixCRC(b []byte) []byte {
	if len(b) < HeaderSize {
		return b
	}
	fixed := append([]byte(nil), b...)
	binary.BigEndian.PutUint32(fixed[offBatchLength:], uint32(len(fixed)-LogOverhead))
	binary.BigEndian.PutUint32(fixed[offCRC:], crc32.Checksum(fixed[offAttributes:], castagnoli))
	return fixed
}
