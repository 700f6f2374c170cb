package record

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"slices"
	"sync"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// BatchOptions are the header fields of a batch to build.
//
// The zero value is not a plain producer's batch: a producer without
// idempotence uses ProducerID NoProducerID, ProducerEpoch NoProducerEpoch
// and BaseSequence NoSequence, and a client writes PartitionLeaderEpoch
// NoPartitionLeader (the broker rewrites it and BaseOffset).
//
// FirstTimestamp is used only when every record's Timestamp is 0: the
// batch's first and max timestamps are then FirstTimestamp and every
// record's delta 0. Otherwise the first timestamp is the first record's
// Timestamp and the max the largest.
type BatchOptions struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	Compression          Compression
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	Transactional        bool
	Control              bool
	LogAppendTime        bool
	FirstTimestamp       int64
}

// Options returns the BatchOptions that rebuild a batch with h's header
// fields (FirstTimestamp is h.FirstTimestamp).
func (h *Header) Options() BatchOptions {
	return BatchOptions{
		BaseOffset:           h.BaseOffset,
		PartitionLeaderEpoch: h.PartitionLeaderEpoch,
		Compression:          h.Compression(),
		ProducerID:           h.ProducerID,
		ProducerEpoch:        h.ProducerEpoch,
		BaseSequence:         h.BaseSequence,
		Transactional:        h.IsTransactional(),
		Control:              h.IsControl(),
		LogAppendTime:        h.LogAppendTime(),
		FirstTimestamp:       h.FirstTimestamp,
	}
}

func (o *BatchOptions) attributes() int16 {
	a := int16(o.Compression) & compressionMask
	if o.LogAppendTime {
		a |= timestampTypeBit
	}
	if o.Transactional {
		a |= transactionalBit
	}
	if o.Control {
		a |= controlBit
	}
	return a
}

// Build encodes recs as one batch with opts and returns it; the caller
// owns the returned slice, which shares nothing with recs. OffsetDelta of
// record i is i and TimestampDelta is its Timestamp minus the first
// record's (see BatchOptions for the all-zero case); the records'
// own OffsetDelta, TimestampDelta and Offset are ignored. The records
// section is compressed with opts.Compression and the CRC computed.
//
// Errors: INVALID_RECORD for no records, UNSUPPORTED_COMPRESSION_TYPE for
// an unknown codec, MESSAGE_TOO_LARGE for more than 2^24 records or a
// batch past 2 GiB (compressed or not: a record's lengths are int32).
func Build(opts BatchOptions, recs []Record) ([]byte, error) {
	size := HeaderSize
	for i := range recs {
		size += recordSizeAt(&recs[i], i, recs[0].Timestamp)
	}
	var b Builder
	b.Reset(opts)
	var scratch *[]byte
	switch {
	case opts.Compression != None:
		// The uncompressed records are only an input to the codec.
		scratch = getScratch()
		b.buf = slices.Grow((*scratch)[:0], size)[:HeaderSize]
	case size <= math.MaxInt32:
		b.buf = make([]byte, HeaderSize, size)
	}
	for i := range recs {
		b.Append(recs[i])
	}
	out, err := b.Build()
	if scratch != nil {
		putScratch(scratch, b.buf)
	}
	return out, err
}

// recordSizeAt is the encoded size of r as record i of a batch whose first
// record has timestamp first.
func recordSizeAt(r *Record, i int, first int64) int {
	c := *r
	c.OffsetDelta = int32(i)
	c.TimestampDelta = r.Timestamp - first
	return c.EncodedSize()
}

// Builder accumulates records into one batch, encoding each straight into
// an internal buffer as it is appended (a producer's accumulator). It is
// not safe for concurrent use. The zero Builder is usable after Reset.
type Builder struct {
	opts    BatchOptions
	buf     []byte // HeaderSize bytes reserved for the header, then records
	n       int
	firstTS int64
	maxTS   int64
	anyTS   bool // some record had a non-zero Timestamp
	hint    int  // size of the last batch handed over, for the next buffer
}

// NewBuilder returns an empty Builder for a batch with opts.
func NewBuilder(opts BatchOptions) *Builder {
	b := &Builder{}
	b.Reset(opts)
	return b
}

// SizeHint tells b how big its next batch is expected to be (uncompressed,
// header included, as EstimatedSize counts): the first Append then
// allocates that much at once instead of growing the buffer by copying. A
// producer passes the size of the partition's previous batch.
func (b *Builder) SizeHint(n int) {
	if n > 0 {
		b.hint = n
	}
}

// SetBuffer gives b an empty buffer to build its next batch in (a
// recycled one), used instead of allocating if it holds the header.
func (b *Builder) SetBuffer(buf []byte) {
	b.buf = buf[:0]
}

// TakeBuffer hands over b's buffer (after a compressed Build, the one the
// records were built in), leaving b without one.
func (b *Builder) TakeBuffer() []byte {
	buf := b.buf
	b.buf = nil
	return buf[:0]
}

// Reset empties b and sets the options of its next batch, keeping its
// buffer for reuse.
func (b *Builder) Reset(opts BatchOptions) {
	b.opts = opts
	b.buf = b.buf[:0]
	b.n, b.firstTS, b.maxTS, b.anyTS = 0, 0, 0, false
}

// Grow makes room for n more bytes of records without reallocating.
func (b *Builder) Grow(n int) {
	b.ensureHeader()
	if cap(b.buf)-len(b.buf) < n {
		nb := make([]byte, len(b.buf), len(b.buf)+n)
		copy(nb, b.buf)
		b.buf = nb
	}
}

func (b *Builder) ensureHeader() {
	if len(b.buf) < HeaderSize {
		if cap(b.buf) < HeaderSize {
			b.buf = make([]byte, HeaderSize, max(4096, b.hint+b.hint/16))
		}
		b.buf = b.buf[:HeaderSize]
	}
}

// Append adds r as the next record: its OffsetDelta becomes Len() and its
// TimestampDelta r.Timestamp minus the first record's. r's Key, Value and
// headers are copied into the buffer, so the caller may reuse them at
// once. It allocates nothing beyond growing the buffer.
func (b *Builder) Append(r Record) {
	b.ensureHeader()
	if b.n == 0 {
		b.firstTS, b.maxTS = r.Timestamp, r.Timestamp
	} else if r.Timestamp > b.maxTS {
		b.maxTS = r.Timestamp
	}
	if r.Timestamp != 0 {
		b.anyTS = true
	}
	r.OffsetDelta = int32(b.n)
	r.TimestampDelta = r.Timestamp - b.firstTS
	b.buf = r.AppendTo(b.buf)
	b.n++
}

// Len is the number of records appended.
func (b *Builder) Len() int { return b.n }

// EstimatedSize is the batch's size uncompressed, header included: the
// exact size of an uncompressed Build, an upper bound (give or take codec
// framing on incompressible data) of a compressed one.
func (b *Builder) EstimatedSize() int {
	if b.n == 0 {
		return HeaderSize
	}
	return len(b.buf)
}

// Build returns the batch of the records appended so far, compressed with
// the options' codec and with its header and CRC written; the caller owns
// it. The Builder is then empty, with the same options, ready for another
// batch. Errors are as for the Build function.
func (b *Builder) Build() ([]byte, error) {
	if b.n == 0 {
		return nil, errs.New(pb.ErrorCode_INVALID_RECORD, "a batch needs at least one record")
	}
	if b.n > maxRecordsPerBatch {
		return nil, errs.New(pb.ErrorCode_MESSAGE_TOO_LARGE, "%d records exceed the %d a batch may hold", b.n, maxRecordsPerBatch)
	}
	c := b.opts.Compression
	if !c.Valid() {
		return nil, errs.New(pb.ErrorCode_UNSUPPORTED_COMPRESSION_TYPE, "unknown compression codec %d", c)
	}
	if len(b.buf)-LogOverhead > math.MaxInt32 {
		return nil, errs.New(pb.ErrorCode_MESSAGE_TOO_LARGE, "%d bytes of records are over 2 GiB", len(b.buf)-HeaderSize)
	}
	var out []byte
	if c == None {
		out, b.buf, b.hint = b.buf, nil, len(b.buf) // hand the buffer over
	} else {
		// Compress into a pooled buffer, then copy into one of the exact
		// size, so the batch does not carry the codec's worst-case slack.
		scratch := getScratch()
		z, err := compress((*scratch)[:0], c, b.buf[HeaderSize:])
		if err != nil {
			putScratch(scratch, z)
			return nil, err
		}
		out = make([]byte, HeaderSize+len(z))
		copy(out[HeaderSize:], z)
		putScratch(scratch, z)
	}
	if len(out)-LogOverhead > math.MaxInt32 {
		return nil, errs.New(pb.ErrorCode_MESSAGE_TOO_LARGE, "batch of %d bytes is over 2 GiB", len(out))
	}
	first, maxTS := b.firstTS, b.maxTS
	if !b.anyTS {
		first, maxTS = b.opts.FirstTimestamp, b.opts.FirstTimestamp
	}
	o := &b.opts
	be := binary.BigEndian
	be.PutUint64(out[offBaseOffset:], uint64(o.BaseOffset))
	be.PutUint32(out[offBatchLength:], uint32(len(out)-LogOverhead))
	be.PutUint32(out[offPartitionLeaderEpoch:], uint32(o.PartitionLeaderEpoch))
	out[offMagic] = Magic
	be.PutUint16(out[offAttributes:], uint16(o.attributes()))
	be.PutUint32(out[offLastOffsetDelta:], uint32(b.n-1))
	be.PutUint64(out[offFirstTimestamp:], uint64(first))
	be.PutUint64(out[offMaxTimestamp:], uint64(maxTS))
	be.PutUint64(out[offProducerID:], uint64(o.ProducerID))
	be.PutUint16(out[offProducerEpoch:], uint16(o.ProducerEpoch))
	be.PutUint32(out[offBaseSequence:], uint32(o.BaseSequence))
	be.PutUint32(out[offRecordCount:], uint32(b.n))
	be.PutUint32(out[offCRC:], crc32.Checksum(out[offAttributes:], castagnoli))
	b.Reset(b.opts)
	return out, nil
}

// SetProducerFields rewrites producerId, producerEpoch, baseSequence and
// the isTransactional attribute of a built batch in place and recomputes
// its CRC, so the batch stays valid. batch must hold one complete batch at
// its start (as Build returns); it panics if batch is shorter than the
// header. Bytes past the batch's length are left alone.
func SetProducerFields(batch []byte, pid int64, epoch int16, baseSeq int32, transactional bool) {
	be := binary.BigEndian
	_ = batch[HeaderSize-1]
	be.PutUint64(batch[offProducerID:], uint64(pid))
	be.PutUint16(batch[offProducerEpoch:], uint16(epoch))
	be.PutUint32(batch[offBaseSequence:], uint32(baseSeq))
	attrs := be.Uint16(batch[offAttributes:]) &^ transactionalBit
	if transactional {
		attrs |= transactionalBit
	}
	be.PutUint16(batch[offAttributes:], attrs)
	end := len(batch)
	if n := int64(int32(be.Uint32(batch[offBatchLength:]))) + LogOverhead; n >= HeaderSize && n <= int64(end) {
		end = int(n)
	}
	be.PutUint32(batch[offCRC:], crc32.Checksum(batch[offAttributes:end], castagnoli))
}

// Scratch buffers for compression: pooled, and dropped when over
// maxScratch so that one huge batch does not pin its memory.
const maxScratch = 4 << 20

var scratchPool = sync.Pool{New: func() any { return new([]byte) }}

func getScratch() *[]byte { return scratchPool.Get().(*[]byte) }

func putScratch(p *[]byte, b []byte) {
	if cap(b) > maxScratch {
		return
	}
	*p = b[:0]
	scratchPool.Put(p)
}
