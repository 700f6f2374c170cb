package record

import (
	"encoding/binary"
	"hash/crc32"
	"math"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// NoDeleteHorizon is BuildRetained's deleteHorizonMs for a batch without one.
const NoDeleteHorizon = int64(-1)

// HasDeleteHorizon reports the delete-horizon attribute (KIP-534): the log
// cleaner set it on a batch it kept tombstones or a transaction marker in.
func (h *Header) HasDeleteHorizon() bool { return h.Attributes&deleteHorizonBit != 0 }

// DeleteHorizonMs is the batch's delete horizon: with the attribute set,
// the first timestamp field holds it (and record timestamp deltas count
// from it); ok is false without.
func (h *Header) DeleteHorizonMs() (ms int64, ok bool) {
	if !h.HasDeleteHorizon() {
		return 0, false
	}
	return h.FirstTimestamp, true
}

// BuildRetained rebuilds the batch with header h holding only recs, some
// of its records as Decode returned them (absolute Offset and Timestamp),
// the way Kafka's log cleaner does (MemoryRecords.filterTo): the base
// offset, last offset, producer fields, partition leader epoch, codec and
// timestamp type stay those of h, each record keeps its offset (its offset
// delta from h's base) and its timestamp. With deleteHorizonMs >= 0 the
// batch gets the delete-horizon attribute and the horizon as its first
// timestamp, the records' timestamp deltas counting from it. With no
// records the batch is Kafka's empty batch (writeEmptyHeader): no records,
// uncompressed, both timestamps h's max timestamp, kept only so that the
// producer's last sequence survives. The CRC is computed.
func BuildRetained(h *Header, recs []Record, deleteHorizonMs int64) ([]byte, error) {
	attrs := h.Attributes &^ (compressionMask | deleteHorizonBit)
	var section []byte
	first, maxTS := h.MaxTimestamp, h.MaxTimestamp
	if len(recs) > 0 {
		attrs |= int16(h.Compression())
		first = recs[0].Timestamp
		if !h.LogAppendTime() {
			maxTS = recs[0].Timestamp
			for i := range recs {
				maxTS = max(maxTS, recs[i].Timestamp)
			}
		}
		if deleteHorizonMs >= 0 {
			first = deleteHorizonMs
		}
		var raw []byte
		for i := range recs {
			r := recs[i]
			d := r.Offset - h.BaseOffset
			if d < 0 || d > int64(h.LastOffsetDelta) {
				return nil, errs.New(pb.ErrorCode_INVALID_RECORD, "record at offset %d is outside the batch [%d, %d]", r.Offset, h.BaseOffset, h.LastOffset())
			}
			r.OffsetDelta = int32(d)
			r.TimestampDelta = r.Timestamp - first
			if h.LogAppendTime() {
				r.TimestampDelta = 0
			}
			raw = r.AppendTo(raw)
		}
		if h.Compression() == None {
			section = raw
		} else {
			z, err := compress(nil, h.Compression(), raw)
			if err != nil {
				return nil, err
			}
			section = z
		}
	}
	if deleteHorizonMs >= 0 {
		attrs |= deleteHorizonBit
		first = deleteHorizonMs
	}
	if int64(len(section))+HeaderSize-LogOverhead > math.MaxInt32 {
		return nil, errs.New(pb.ErrorCode_MESSAGE_TOO_LARGE, "batch of %d bytes is over 2 GiB", len(section)+HeaderSize)
	}
	out := make([]byte, HeaderSize+len(section))
	copy(out[HeaderSize:], section)
	be := binary.BigEndian
	be.PutUint64(out[offBaseOffset:], uint64(h.BaseOffset))
	be.PutUint32(out[offBatchLength:], uint32(len(out)-LogOverhead))
	be.PutUint32(out[offPartitionLeaderEpoch:], uint32(h.PartitionLeaderEpoch))
	out[offMagic] = Magic
	be.PutUint16(out[offAttributes:], uint16(attrs))
	be.PutUint32(out[offLastOffsetDelta:], uint32(h.LastOffsetDelta))
	be.PutUint64(out[offFirstTimestamp:], uint64(first))
	be.PutUint64(out[offMaxTimestamp:], uint64(maxTS))
	be.PutUint64(out[offProducerID:], uint64(h.ProducerID))
	be.PutUint16(out[offProducerEpoch:], uint16(h.ProducerEpoch))
	be.PutUint32(out[offBaseSequence:], uint32(h.BaseSequence))
	be.PutUint32(out[offRecordCount:], uint32(len(recs)))
	be.PutUint32(out[offCRC:], crc32.Checksum(out[offAttributes:], castagnoli))
	return out, nil
}
