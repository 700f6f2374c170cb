package record

import (
	"fmt"
	"math"
	"strings"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// ClientPolicy is what a partition leader enforces on a batch a client
// sends, beyond the header checks of Validate: the topic's
// message.timestamp.before.max.ms and message.timestamp.after.max.ms
// (CreateTime, the only message.timestamp.type Strand serves) against the
// leader's clock.
type ClientPolicy struct {
	NowMs int64
	// TimestampBeforeMaxMs: how far a record's timestamp may be behind
	// NowMs (Kafka's default: no bound, math.MaxInt64).
	TimestampBeforeMaxMs int64
	// TimestampAfterMaxMs: how far a record's timestamp may be ahead of
	// NowMs (Kafka's default: one hour).
	TimestampAfterMaxMs int64
	// Compacted: the topic's cleanup.policy includes compact, and the
	// cleaner keeps records by key, so every record needs one.
	Compacted bool
}

// Kafka's defaults for the two timestamp bounds.
const (
	DefaultTimestampBeforeMaxMs = int64(math.MaxInt64)
	DefaultTimestampAfterMaxMs  = int64(3_600_000)
)

// NoTimestamp is a record timestamp meaning "none": it is never checked
// against the bounds.
const NoTimestamp = int64(-1)

// RecordError names one refused record by its index in the batch
// (Kafka's ProduceResponse RecordError).
type RecordError struct {
	BatchIndex int32
	Message    string
}

// maxRecordErrors bounds the record errors one refusal carries (a batch of
// a million bad timestamps is answered with the first of them and the
// count).
const maxRecordErrors = 16

// BatchError is a refused client batch: the code and message of the whole
// batch and, when particular records are at fault, which ones. errs.CodeOf
// and errors.As(*errs.Error) see the batch's error.
type BatchError struct {
	Err     *errs.Error
	Records []RecordError
}

func (e *BatchError) Error() string { return e.Err.Error() }
func (e *BatchError) Unwrap() error { return e.Err }

func batchErr(code pb.ErrorCode, format string, args ...any) error {
	return &BatchError{Err: errs.New(code, format, args...)}
}

// ValidateClient checks a batch a client sends as Kafka's LogValidator
// does for a produce request, so that every batch a leader appends has the
// records its header claims. batch must be exactly one batch. The checks,
// in order, with the code of each refusal:
//
//   - the header (Validate: size, magic, CRC-32C, known codec):
//     CORRUPT_MESSAGE;
//   - recordCount above 0 and lastOffsetDelta = recordCount-1, so the
//     offsets the batch takes are exactly its records': INVALID_RECORD;
//   - not a control batch (only a transaction coordinator writes
//     markers): INVALID_RECORD;
//   - a producer id comes with a producer epoch and a base sequence:
//     INVALID_RECORD;
//   - CreateTime timestamps (a LogAppendTime batch is the broker's to
//     write): INVALID_TIMESTAMP;
//   - the records section decompresses (within MaxDecompressedSize):
//     CORRUPT_MESSAGE;
//   - each record is well formed (varints no longer than their type,
//     lengths of key, value, headers and the record itself within the
//     record, header keys not null) and records fill the section
//     exactly, recordCount of them: INVALID_RECORD, naming the record;
//   - record i has offsetDelta i: INVALID_RECORD, naming the record;
//   - each record's timestamp, unless -1, lies within
//     [NowMs-TimestampBeforeMaxMs, NowMs+TimestampAfterMaxMs]:
//     INVALID_TIMESTAMP, naming every such record (up to 16);
//   - maxTimestamp is the largest record timestamp (the broker's time
//     index and retention read it): INVALID_TIMESTAMP;
//   - on a compacted topic (Compacted), every record has a key (null is
//     refused, empty is a key): INVALID_RECORD, naming the records, with
//     Kafka's message "Compacted topic cannot accept message without key".
//
// It returns the header on success; every refusal is a *BatchError. It
// never panics, and allocates nothing for a batch it accepts, compressed
// or not, beyond what a codec's reader may (compressed sections are
// decompressed into pooled buffers, at most MaxDecompressedSize).
func ValidateClient(batch []byte, p ClientPolicy) (Header, error) {
	h, err := Validate(batch)
	if err != nil {
		return h, &BatchError{Err: asErrs(err)}
	}
	if h.Size() != len(batch) {
		return h, batchErr(pb.ErrorCode_CORRUPT_MESSAGE, "%d bytes follow the %d-byte batch", len(batch)-h.Size(), h.Size())
	}
	if h.RecordCount <= 0 {
		return h, batchErr(pb.ErrorCode_INVALID_RECORD, "invalid record count %d: a batch holds at least one record", h.RecordCount)
	}
	if h.LastOffsetDelta != h.RecordCount-1 {
		return h, batchErr(pb.ErrorCode_INVALID_RECORD, "inconsistent batch: lastOffsetDelta %d spans %d offsets but recordCount is %d",
			h.LastOffsetDelta, int64(h.LastOffsetDelta)+1, h.RecordCount)
	}
	if h.IsControl() {
		return h, batchErr(pb.ErrorCode_INVALID_RECORD, "clients may not write control batches: only a transaction coordinator writes markers")
	}
	if h.HasProducerID() && (h.BaseSequence < 0 || h.ProducerEpoch < 0) {
		return h, batchErr(pb.ErrorCode_INVALID_RECORD, "a batch with a producer id needs a producer epoch and a base sequence, got epoch %d and baseSequence %d",
			h.ProducerEpoch, h.BaseSequence)
	}
	if h.LogAppendTime() {
		return h, batchErr(pb.ErrorCode_INVALID_TIMESTAMP, "the batch's timestamp type is LogAppendTime: producers send CreateTime (message.timestamp.type is CreateTime)")
	}
	section := batch[HeaderSize:]
	if c := h.Compression(); c != None {
		sp, out, err := decompressScratch(c, section, MaxDecompressedSize)
		if err != nil {
			return h, &BatchError{Err: asErrs(err)}
		}
		err = walkClientRecords(&h, out, &p)
		if sp != nil {
			putScratch(sp, out)
		}
		return h, err
	}
	return h, walkClientRecords(&h, section, &p)
}

func asErrs(err error) *errs.Error {
	if e, ok := err.(*errs.Error); ok {
		return e
	}
	return errs.New(pb.ErrorCode_CORRUPT_MESSAGE, "%v", err)
}

// walkClientRecords walks the recordCount records of a (decompressed) records
// section without decoding keys, values or headers into anything.
func walkClientRecords(h *Header, data []byte, p *ClientPolicy) error {
	count := int(h.RecordCount)
	lo, hi := timestampBounds(p)
	maxTS := NoTimestamp
	pos := 0
	var bad, noKey []RecordError
	badCount, keyless := 0, 0
	for i := 0; i < count; i++ {
		if pos >= len(data) {
			return recordErr(i, "recordCount %d but the records section ends after %d records", count, i)
		}
		n, tsDelta, offDelta, nullKey, e := skipRecord(data[pos:])
		if e != nil {
			return recordErr(i, "record %d at byte %d of the records section: %s", i, pos, e.Message)
		}
		if int(offDelta) != i {
			return recordErr(i, "record %d has offsetDelta %d: a batch's offset deltas run 0, 1, 2 … in order", i, offDelta)
		}
		if nullKey && p.Compacted {
			keyless++
			if len(noKey) < maxRecordErrors {
				noKey = append(noKey, RecordError{BatchIndex: int32(i), Message: compactedNoKey})
			}
		}
		ts := h.FirstTimestamp + tsDelta
		if ts != NoTimestamp {
			if ts < lo || ts > hi {
				badCount++
				if len(bad) < maxRecordErrors {
					bad = append(bad, RecordError{BatchIndex: int32(i), Message: fmt.Sprintf(
						"timestamp %d of record %d is out of range: it must be within [%d, %d]", ts, i, lo, hi)})
				}
			}
			maxTS = max(maxTS, ts)
		}
		pos += n
	}
	if pos != len(data) {
		return recordErr(count-1, "%d bytes left in the records section after the last of recordCount %d records", len(data)-pos, count)
	}
	if keyless > 0 {
		// Kafka's LogValidator refuses the batch with this message and
		// names each keyless record.
		return &BatchError{Err: errs.New(pb.ErrorCode_INVALID_RECORD, "%s (%d of %d records have a null key)", compactedNoKey, keyless, count), Records: noKey}
	}
	if badCount > 0 {
		msgs := make([]string, 0, 3)
		for _, r := range bad[:min(len(bad), 3)] {
			msgs = append(msgs, r.Message)
		}
		return &BatchError{
			Err: errs.New(pb.ErrorCode_INVALID_TIMESTAMP, "%d of %d records have a timestamp out of range (message.timestamp.before.max.ms=%d, message.timestamp.after.max.ms=%d): %s",
				badCount, count, p.TimestampBeforeMaxMs, p.TimestampAfterMaxMs, strings.Join(msgs, "; ")),
			Records: bad,
		}
	}
	if h.MaxTimestamp != maxTS {
		return batchErr(pb.ErrorCode_INVALID_TIMESTAMP, "the batch's maxTimestamp %d is not its records' largest timestamp %d", h.MaxTimestamp, maxTS)
	}
	return nil
}

// compactedNoKey is Kafka's message for a keyless record sent to a
// compacted topic.
const compactedNoKey = "Compacted topic cannot accept message without key"

func recordErr(i int, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return &BatchError{Err: errs.New(pb.ErrorCode_INVALID_RECORD, "%s", msg), Records: []RecordError{{BatchIndex: int32(i), Message: msg}}}
}

// timestampBounds is [now-before, now+after], saturating at the int64
// range (Kafka's defaults are math.MaxInt64).
func timestampBounds(p *ClientPolicy) (lo, hi int64) {
	before, after := max(p.TimestampBeforeMaxMs, 0), max(p.TimestampAfterMaxMs, 0)
	lo, hi = satSub(p.NowMs, before), satAdd(p.NowMs, after)
	return lo, hi
}

func satAdd(a, b int64) int64 { // b >= 0
	if a > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func satSub(a, b int64) int64 { // b >= 0
	if a < 0 && a < math.MinInt64+b {
		return math.MinInt64
	}
	return a - b
}

// skipRecord checks the record at the start of b as decodeRecord does,
// without keeping anything, and returns its size, timestampDelta and
// offsetDelta. It never allocates on success.
func skipRecord(b []byte) (n int, tsDelta int64, offDelta int32, nullKey bool, bad *errs.Error) {
	d := decoder{b: b}
	length := d.varint("record length")
	if d.bad != nil {
		return 0, 0, 0, false, d.bad
	}
	if length < minRecordBodySize {
		return 0, 0, 0, false, corrupt("record length %d is below the minimum %d", length, minRecordBodySize)
	}
	if int(length) > len(b)-d.pos {
		return 0, 0, 0, false, corrupt("record length %d overruns the records section (%d bytes left)", length, len(b)-d.pos)
	}
	end := d.pos + int(length)
	body := decoder{b: b[d.pos:end], pos: 1} // attributes: unused in v2
	tsDelta = body.varlong("timestampDelta")
	offDelta = body.varint("offsetDelta")
	keyLen := body.varint("key length")
	if body.bad == nil && keyLen < -1 {
		body.fail("key length %d is invalid (-1 is null)", keyLen)
	}
	if body.bad == nil && keyLen > 0 {
		body.bytes("key", keyLen)
	}
	body.nullable("value", "value length")
	count := body.varint("header count")
	if body.bad != nil {
		return 0, 0, 0, false, body.bad
	}
	if count < 0 {
		return 0, 0, 0, false, corrupt("header count %d is negative", count)
	}
	if left := len(body.b) - body.pos; int(count) > left/minHeaderSize {
		return 0, 0, 0, false, corrupt("header count %d cannot fit in the %d bytes left in the record", count, left)
	}
	for i := 0; i < int(count); i++ {
		kl := body.varint("header key length")
		if body.bad == nil && kl < 0 {
			return 0, 0, 0, false, corrupt("header %d key length %d is negative (header keys are never null)", i, kl)
		}
		body.bytes("header key", kl)
		body.nullable("header value", "header value length")
		if body.bad != nil {
			return 0, 0, 0, false, corrupt("header %d: %s", i, body.bad.Message)
		}
	}
	if body.pos != len(body.b) {
		return 0, 0, 0, false, corrupt("record length %d but its fields end after %d bytes", length, body.pos)
	}
	return end, tsDelta, offDelta, keyLen == -1, nil
}
