package record

import (
	"math/bits"

	"github.com/strand-io/strand/errs"
)

// RecordHeader is one record header: a key, never null, and a value, nil
// for null.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Record is one record of a batch.
//
// On the wire a record is: length varint (of what follows), attributes
// int8, timestampDelta varlong, offsetDelta varint, keyLength varint (-1 =
// null) + key, valueLength varint (-1 = null) + value, header count varint,
// then per header keyLength varint + key, valueLength varint (-1 = null) +
// value. Varints are zigzag-encoded as in Kafka (and protobuf sint32/64).
//
// A nil Key, Value or header Value is null; a non-nil empty one is empty.
// Offset and Timestamp are absolute: Decode fills them in from the batch
// header; Build and Builder.Append read Timestamp (not TimestampDelta) and
// assign OffsetDelta and TimestampDelta themselves.
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Key            []byte
	Value          []byte
	Headers        []RecordHeader
	Offset         int64
	Timestamp      int64
}

// minRecordBodySize is the smallest record body: attributes, then one byte
// each for timestampDelta, offsetDelta, keyLength, valueLength and header
// count. With the length varint a record takes at least minRecordSize.
const (
	minRecordBodySize = 6
	minRecordSize     = 1 + minRecordBodySize
	// minHeaderSize is a header's keyLength and valueLength, one byte each.
	minHeaderSize = 2
)

// zigzag maps signed to unsigned so small magnitudes encode short. For a
// value in int32 range it equals Kafka's 32-bit zigzag varint, so one
// encoder serves varint and varlong.
func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

func sizeUvarint(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

func sizeVarint(v int64) int { return sizeUvarint(zigzag(v)) }

func appendVarint(b []byte, v int64) []byte {
	x := zigzag(v)
	for x >= 0x80 {
		b = append(b, byte(x)|0x80)
		x >>= 7
	}
	return append(b, byte(x))
}

// sizeNullable is the encoded size of a length-prefixed nullable field.
func sizeNullable(p []byte) int {
	if p == nil {
		return 1 // varint -1
	}
	return sizeVarint(int64(len(p))) + len(p)
}

func appendNullable(b, p []byte) []byte {
	if p == nil {
		return append(b, 1) // zigzag(-1)
	}
	b = appendVarint(b, int64(len(p)))
	return append(b, p...)
}

// bodySize is the size of the record after its length varint.
func (r *Record) bodySize() int {
	n := 1 + sizeVarint(r.TimestampDelta) + sizeVarint(int64(r.OffsetDelta))
	n += sizeNullable(r.Key) + sizeNullable(r.Value)
	n += sizeVarint(int64(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		n += sizeVarint(int64(len(h.Key))) + len(h.Key) + sizeNullable(h.Value)
	}
	return n
}

// EncodedSize is the number of bytes AppendTo writes for r, length prefix
// included.
func (r *Record) EncodedSize() int {
	n := r.bodySize()
	return sizeVarint(int64(n)) + n
}

// AppendTo appends r's encoding to dst, using r.OffsetDelta and
// r.TimestampDelta as they are, and returns the extended slice. It
// allocates only if dst must grow.
func (r *Record) AppendTo(dst []byte) []byte {
	return r.appendBody(appendVarint(dst, int64(r.bodySize())))
}

func (r *Record) appendBody(b []byte) []byte {
	b = append(b, byte(r.Attributes))
	b = appendVarint(b, r.TimestampDelta)
	b = appendVarint(b, int64(r.OffsetDelta))
	b = appendNullable(b, r.Key)
	b = appendNullable(b, r.Value)
	b = appendVarint(b, int64(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		b = appendVarint(b, int64(len(h.Key)))
		b = append(b, h.Key...)
		b = appendNullable(b, h.Value)
	}
	return b
}

// DecodeRecord decodes the one record at the start of b and returns it
// with the number of bytes it took. Offset and Timestamp are left zero
// (they need the batch header); Key, Value and header Values alias b (with
// their capacity clipped, so appending to them never writes into b), and
// header Keys are copied. Every failure is CORRUPT_MESSAGE.
func DecodeRecord(b []byte) (Record, int, error) {
	var r Record
	n, err := decodeRecord(b, &r, nil, 0)
	if err != nil {
		return Record{}, 0, err
	}
	return r, n, nil
}

// decoder reads varints and length-prefixed fields from one record body,
// remembering the first problem.
type decoder struct {
	b   []byte
	pos int
	bad *errs.Error
}

func (d *decoder) fail(format string, args ...any) {
	if d.bad == nil {
		d.bad = corrupt(format, args...)
	}
}

// uvarint reads an unsigned LEB128 of at most maxLen bytes whose last byte
// holds at most lastBits bits, so the value fits 32 or 64 bits.
func (d *decoder) uvarint(what string, maxLen int, lastBits uint) uint64 {
	if d.bad != nil {
		return 0
	}
	if d.pos < len(d.b) && d.b[d.pos] < 0x80 { // one byte: the usual case
		d.pos++
		return uint64(d.b[d.pos-1])
	}
	var x uint64
	for i := 0; ; i++ {
		if d.pos >= len(d.b) {
			d.fail("%s: varint truncated", what)
			return 0
		}
		c := d.b[d.pos]
		d.pos++
		if i == maxLen-1 {
			if c>>lastBits != 0 {
				d.fail("%s: varint longer than %d bytes or out of range", what, maxLen)
				return 0
			}
			return x | uint64(c)<<(7*i)
		}
		x |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return x
		}
	}
}

func unzigzag(x uint64) int64 { return int64(x>>1) ^ -int64(x&1) }

// varint reads a zigzag int32 (at most 5 bytes).
func (d *decoder) varint(what string) int32 {
	return int32(unzigzag(d.uvarint(what, 5, 4)))
}

// varlong reads a zigzag int64 (at most 10 bytes).
func (d *decoder) varlong(what string) int64 {
	return unzigzag(d.uvarint(what, 10, 1))
}

// bytes returns the next n bytes, capacity clipped.
func (d *decoder) bytes(what string, n int32) []byte {
	if d.bad != nil {
		return nil
	}
	if int(n) > len(d.b)-d.pos {
		d.fail("%s of %d bytes overruns the record (%d bytes left)", what, n, len(d.b)-d.pos)
		return nil
	}
	p := d.b[d.pos : d.pos+int(n) : d.pos+int(n)]
	d.pos += int(n)
	return p
}

// nullable reads a length-prefixed field, -1 meaning null; whatLen names
// its length (constant strings: no concatenation on the hot path).
func (d *decoder) nullable(what, whatLen string) []byte {
	n := d.varint(whatLen)
	if d.bad != nil {
		return nil
	}
	if n < -1 {
		d.fail("%s length %d is invalid (-1 is null)", what, n)
		return nil
	}
	if n == -1 {
		return nil
	}
	return d.bytes(what, n)
}

// decodeRecord decodes the record at the start of b into r and returns
// its size. It allocates only for headers, after checking their count
// against the bytes left, from sh when given (see shared), with more
// records following the current one.
func decodeRecord(b []byte, r *Record, sh *shared, more int) (int, *errs.Error) {
	d := decoder{b: b}
	length := d.varint("record length")
	if d.bad != nil {
		return 0, d.bad
	}
	if length < minRecordBodySize {
		return 0, corrupt("record length %d is below the minimum %d", length, minRecordBodySize)
	}
	if int(length) > len(b)-d.pos {
		return 0, corrupt("record length %d overruns the records section (%d bytes left)", length, len(b)-d.pos)
	}
	end := d.pos + int(length)
	body := decoder{b: b[d.pos:end]}
	body.pos = 1
	r.Attributes = int8(body.b[0])
	r.TimestampDelta = body.varlong("timestampDelta")
	r.OffsetDelta = body.varint("offsetDelta")
	r.Key = body.nullable("key", "key length")
	r.Value = body.nullable("value", "value length")
	count := body.varint("header count")
	if body.bad != nil {
		return 0, body.bad
	}
	if count < 0 {
		return 0, corrupt("header count %d is negative", count)
	}
	if left := len(body.b) - body.pos; int(count) > left/minHeaderSize {
		return 0, corrupt("header count %d cannot fit in the %d bytes left in the record", count, left)
	}
	r.Headers = nil
	if count > 0 {
		r.Headers = sh.headers(int(count), more, len(b)-end)
		for i := range r.Headers {
			h := &r.Headers[i]
			kl := body.varint("header key length")
			if body.bad == nil && kl < 0 {
				return 0, corrupt("header %d key length %d is negative (header keys are never null)", i, kl)
			}
			h.Key = sh.key(i, body.bytes("header key", kl))
			h.Value = body.nullable("header value", "header value length")
			if body.bad != nil {
				return 0, corrupt("header %d: %s", i, body.bad.Message)
			}
		}
	}
	if body.pos != len(body.b) {
		return 0, corrupt("record length %d but its fields end after %d bytes", length, body.pos)
	}
	return end, nil
}

// shared is what the records of one batch share while decoding: a slab
// of headers, so that they take a few allocations rather than one per
// record, and the last header key seen at each of the first positions,
// since records of a batch tend to carry the same header keys. A nil
// *shared allocates per record.
type shared struct {
	slab []RecordHeader
	keys [8]string
}

// headers returns n zeroed headers. A new slab is sized for the records
// still to come having as many headers as this one, but never more than
// the bytes after this record could hold.
func (sh *shared) headers(n, more, bytesAfter int) []RecordHeader {
	if sh == nil {
		return make([]RecordHeader, n)
	}
	s := sh.slab
	if cap(s)-len(s) < n {
		extra := min(n*more, bytesAfter/minHeaderSize, 1024)
		s = make([]RecordHeader, 0, n+extra)
	}
	sh.slab = s[:len(s)+n]
	return s[len(s) : len(s)+n : len(s)+n]
}

// key returns b as a string, reusing the previous key at position i when
// it is the same.
func (sh *shared) key(i int, b []byte) string {
	if sh == nil || i >= len(sh.keys) {
		return string(b)
	}
	if sh.keys[i] != string(b) {
		sh.keys[i] = string(b)
	}
	return sh.keys[i]
}
