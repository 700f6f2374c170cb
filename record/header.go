// Package record is Kafka's RecordBatch v2 (magic 2) format: the fixed
// 61-byte batch header, varint-encoded records, compression, and control
// (transaction marker) records. A batch is the unit Strand writes,
// replicates, stores and serves byte for byte.
//
// The broker never changes a batch's records: it validates a batch (size,
// magic, CRC-32C; for a client's batch also every record, ValidateClient)
// and rewrites baseOffset and partitionLeaderEpoch in place, both outside
// the CRC.
package record

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Field offsets of the batch header (big-endian).
const (
	offBaseOffset           = 0
	offBatchLength          = 8
	offPartitionLeaderEpoch = 12
	offMagic                = 16
	offCRC                  = 17
	offAttributes           = 21
	offLastOffsetDelta      = 23
	offFirstTimestamp       = 27
	offMaxTimestamp         = 35
	offProducerID           = 43
	offProducerEpoch        = 51
	offBaseSequence         = 53
	offRecordCount          = 57

	// HeaderSize is the size of the fixed batch header.
	HeaderSize = 61
	// LogOverhead is what precedes batchLength's count: baseOffset and batchLength.
	LogOverhead = 12
	// Magic is the only batch format Strand reads and writes.
	Magic = 2
)

// Attribute bits.
const (
	compressionMask    = 0x07
	timestampTypeBit   = 0x08
	transactionalBit   = 0x10
	controlBit         = 0x20
	deleteHorizonBit   = 0x40
	NoProducerID       = int64(-1)
	NoProducerEpoch    = int16(-1)
	NoSequence         = int32(-1)
	NoPartitionLeader  = int32(-1)
	maxRecordsPerBatch = 1 << 24
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is a decoded batch header.
type Header struct {
	BaseOffset           int64
	BatchLength          int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// Size is the whole batch's size in bytes.
func (h *Header) Size() int { return LogOverhead + int(h.BatchLength) }

// LastOffset is the offset of the batch's last record.
func (h *Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset after the batch.
func (h *Header) NextOffset() int64 { return h.LastOffset() + 1 }

// Compression is the codec of the records section.
func (h *Header) Compression() Compression { return Compression(h.Attributes & compressionMask) }

// IsTransactional reports the isTransactional attribute.
func (h *Header) IsTransactional() bool { return h.Attributes&transactionalBit != 0 }

// IsControl reports the isControl attribute.
func (h *Header) IsControl() bool { return h.Attributes&controlBit != 0 }

// LogAppendTime reports whether timestamps are LogAppendTime (else CreateTime).
func (h *Header) LogAppendTime() bool { return h.Attributes&timestampTypeBit != 0 }

// HasProducerID reports whether the batch was written by an idempotent producer.
func (h *Header) HasProducerID() bool { return h.ProducerID >= 0 }

// LastSequence is the sequence of the batch's last record, wrapping at MaxInt32.
func (h *Header) LastSequence() int32 {
	if h.BaseSequence < 0 {
		return NoSequence
	}
	return IncrementSequence(h.BaseSequence, h.LastOffsetDelta)
}

// IncrementSequence adds n to a sequence, wrapping from MaxInt32 to 0.
func IncrementSequence(seq, n int32) int32 {
	if seq > int32(^uint32(0)>>1)-n {
		return n - (int32(^uint32(0)>>1) - seq) - 1
	}
	return seq + n
}

// ParseHeader decodes the header at the start of b without checking the CRC.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, errs.New(pb.ErrorCode_CORRUPT_MESSAGE, "batch header needs %d bytes, have %d", HeaderSize, len(b))
	}
	h := Header{
		BaseOffset:           int64(binary.BigEndian.Uint64(b[offBaseOffset:])),
		BatchLength:          int32(binary.BigEndian.Uint32(b[offBatchLength:])),
		PartitionLeaderEpoch: int32(binary.BigEndian.Uint32(b[offPartitionLeaderEpoch:])),
		Magic:                int8(b[offMagic]),
		CRC:                  binary.BigEndian.Uint32(b[offCRC:]),
		Attributes:           int16(binary.BigEndian.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:])),
		FirstTimestamp:       int64(binary.BigEndian.Uint64(b[offFirstTimestamp:])),
		MaxTimestamp:         int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])),
		ProducerID:           int64(binary.BigEndian.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(binary.BigEndian.Uint16(b[offProducerEpoch:])),
		BaseSequence:         int32(binary.BigEndian.Uint32(b[offBaseSequence:])),
		RecordCount:          int32(binary.BigEndian.Uint32(b[offRecordCount:])),
	}
	return h, nil
}

// Validate checks one complete batch at the start of b (b may hold more
// after it): length, magic, CRC-32C, counts, codec. It never decompresses
// and never allocates on success. Every refusal is CORRUPT_MESSAGE with a
// message naming the problem; a batch in another format (magic 0 or 1) is
// refused as CORRUPT_MESSAGE too, with the magic named, since Strand's log
// holds magic 2 only.
func Validate(b []byte) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if h.Magic != Magic {
		return h, errs.New(pb.ErrorCode_CORRUPT_MESSAGE, "unsupported batch magic %d (only magic %d is accepted)", h.Magic, Magic)
	}
	if h.BatchLength < HeaderSize-LogOverhead {
		return h, errs.New(pb.ErrorCode_CORRUPT_MESSAGE, "batchLength %d is smaller than the header", h.BatchLength)
	}
	if int64(h.BatchLength)+LogOverhead > int64(len(b)) {
		return h, errs.New(pb.ErrorCode_CORRUPT_MESSAGE, "batch of %d bytes is truncated to %d", int64(h.BatchLength)+LogOverhead, len(b))
	}
	if h.RecordCount < 0 || h.RecordCount > maxRecordsPerBatch {
		return h, errs.New(pb.ErrorCode_CORRUPT_MESSAGE, "recordCount %d out of range", h.RecordCount)
	}
	if h.LastOffsetDelta < 0 || (h.RecordCount > 0 && h.LastOffsetDelta < h.RecordCount-1) {
		return h, errs.New(pb.ErrorCode_CORRUPT_MESSAGE, "lastOffsetDelta %d does not fit recordCount %d", h.LastOffsetDelta, h.RecordCount)
	}
	if got := crc32.Checksum(b[offAttributes:h.Size()], castagnoli); got != h.CRC {
		return h, errs.New(pb.ErrorCode_CORRUPT_MESSAGE, "CRC mismatch: stored %d, computed %d", h.CRC, got)
	}
	if h.Compression() > Zstd {
		return h, errs.New(pb.ErrorCode_CORRUPT_MESSAGE, "unknown compression codec %d", h.Compression())
	}
	return h, nil
}

// ComputeCRC returns the CRC-32C of a complete batch.
func ComputeCRC(batch []byte) uint32 {
	return crc32.Checksum(batch[offAttributes:], castagnoli)
}

// SetBaseOffset rewrites baseOffset in place (outside the CRC).
func SetBaseOffset(batch []byte, off int64) {
	binary.BigEndian.PutUint64(batch[offBaseOffset:], uint64(off))
}

// SetPartitionLeaderEpoch rewrites partitionLeaderEpoch in place (outside the CRC).
func SetPartitionLeaderEpoch(batch []byte, epoch int32) {
	binary.BigEndian.PutUint32(batch[offPartitionLeaderEpoch:], uint32(epoch))
}

// BaseOffsetOf reads baseOffset without parsing the rest.
func BaseOffsetOf(batch []byte) int64 { return int64(binary.BigEndian.Uint64(batch[offBaseOffset:])) }

// Iter walks the batches of a buffer of concatenated batches.
//
//	for it := record.NewIter(buf); it.Next(); { h, b := it.Header(), it.Batch() }
//	if it.Err() != nil { ... }
//
// It stops without error at a trailing partial batch (a fetch may end in one)
// and reports Rest() for it; with Verify set it also checks each CRC.
type Iter struct {
	buf    []byte
	pos    int
	h      Header
	batch  []byte
	err    error
	Verify bool
}

// NewIter returns an iterator over buf.
func NewIter(buf []byte) *Iter { return &Iter{buf: buf} }

// Next advances to the next complete batch.
func (it *Iter) Next() bool {
	if it.err != nil {
		return false
	}
	rest := it.buf[it.pos:]
	if len(rest) < HeaderSize {
		return false
	}
	h, err := ParseHeader(rest)
	if err != nil {
		it.err = err
		return false
	}
	if h.BatchLength < HeaderSize-LogOverhead || h.Magic != Magic {
		it.err = errs.New(pb.ErrorCode_CORRUPT_MESSAGE, "bad batch at byte %d: batchLength %d magic %d", it.pos, h.BatchLength, h.Magic)
		return false
	}
	if int64(h.BatchLength)+LogOverhead > int64(len(rest)) {
		return false
	}
	b := rest[:h.Size()]
	if it.Verify {
		if _, err := Validate(b); err != nil {
			it.err = err
			return false
		}
	}
	it.h, it.batch = h, b
	it.pos += h.Size()
	return true
}

// Header is the current batch's header.
func (it *Iter) Header() Header { return it.h }

// Batch is the current batch's bytes (a sub-slice of the buffer).
func (it *Iter) Batch() []byte { return it.batch }

// Pos is the byte position after the current batch.
func (it *Iter) Pos() int { return it.pos }

// Rest is what follows the last complete batch.
func (it *Iter) Rest() []byte { return it.buf[it.pos:] }

// Err is the first corruption met, if any.
func (it *Iter) Err() error { return it.err }
