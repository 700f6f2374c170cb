package record

import "encoding/binary"

// ControlType is the key type of a control record (a transaction marker).
type ControlType int16

const (
	ControlAbort  ControlType = 0
	ControlCommit ControlType = 1
)

func (t ControlType) String() string {
	switch t {
	case ControlAbort:
		return "ABORT"
	case ControlCommit:
		return "COMMIT"
	}
	return "UNKNOWN"
}

// Sizes of a version-0 transaction marker's key (int16 version, int16
// type) and value (int16 version, int32 coordinatorEpoch).
const (
	ControlKeySize   = 4
	ControlValueSize = 6
)

// BuildControlBatch returns a transaction marker: an uncompressed batch
// with isControl and isTransactional set, baseSequence -1, and one record
// whose key is version 0 + typ and whose value is version 0 +
// coordinatorEpoch, with timestamp timestampMs. baseOffset is 0 and
// partitionLeaderEpoch -1: the broker rewrites both when it appends the
// marker. The caller owns the returned slice.
func BuildControlBatch(pid int64, epoch int16, typ ControlType, coordinatorEpoch int32, timestampMs int64) []byte {
	var kv [ControlKeySize + ControlValueSize]byte
	binary.BigEndian.PutUint16(kv[0:], 0)
	binary.BigEndian.PutUint16(kv[2:], uint16(typ))
	binary.BigEndian.PutUint16(kv[4:], 0)
	binary.BigEndian.PutUint32(kv[6:], uint32(coordinatorEpoch))
	opts := BatchOptions{
		BaseOffset:           0,
		PartitionLeaderEpoch: NoPartitionLeader,
		Compression:          None,
		ProducerID:           pid,
		ProducerEpoch:        epoch,
		BaseSequence:         NoSequence,
		Transactional:        true,
		Control:              true,
		FirstTimestamp:       timestampMs,
	}
	var b Builder
	b.Reset(opts)
	b.Append(Record{Key: kv[:ControlKeySize], Value: kv[ControlKeySize:], Timestamp: timestampMs})
	batch, err := b.Build()
	if err != nil {
		panic("record: building a control batch cannot fail: " + err.Error())
	}
	return batch
}

// ParseControlRecord decodes a control record's key and value. The key is
// int16 version + int16 type; the value, for ABORT and COMMIT, int16
// version + int32 coordinatorEpoch. Versions above 0 are accepted (as
// Kafka does) provided the fields are there; version 0 must have the
// exact sizes. Another control type (Kafka has others, e.g. KRaft's) is
// returned with an error, so that a consumer may skip it. Every error is
// CORRUPT_MESSAGE.
func ParseControlRecord(r Record) (ControlType, int32, error) {
	if r.Key == nil {
		return 0, 0, corrupt("control record has a null key")
	}
	if len(r.Key) < ControlKeySize {
		return 0, 0, corrupt("control record key is %d bytes, need %d", len(r.Key), ControlKeySize)
	}
	kv := int16(binary.BigEndian.Uint16(r.Key))
	typ := ControlType(binary.BigEndian.Uint16(r.Key[2:]))
	if kv < 0 || (kv == 0 && len(r.Key) != ControlKeySize) {
		return 0, 0, corrupt("control record key version %d with %d bytes", kv, len(r.Key))
	}
	if typ != ControlAbort && typ != ControlCommit {
		return typ, 0, corrupt("control record type %d is not a transaction marker", typ)
	}
	if len(r.Value) < ControlValueSize {
		return typ, 0, corrupt("%s marker value is %d bytes, need %d", typ, len(r.Value), ControlValueSize)
	}
	vv := int16(binary.BigEndian.Uint16(r.Value))
	if vv < 0 || (vv == 0 && len(r.Value) != ControlValueSize) {
		return typ, 0, corrupt("%s marker value version %d with %d bytes", typ, vv, len(r.Value))
	}
	return typ, int32(binary.BigEndian.Uint32(r.Value[2:])), nil
}

// ReadControlBatch decodes a transaction marker batch, compressed or not
// (Decode's checks, then isControl set and exactly one record), and
// returns its type and coordinator epoch. Every error is CORRUPT_MESSAGE.
func ReadControlBatch(batch []byte) (ControlType, int32, error) {
	h, recs, err := Decode(batch)
	if err != nil {
		return 0, 0, err
	}
	if !h.IsControl() {
		return 0, 0, corrupt("batch is not a control batch (attributes %#x)", h.Attributes)
	}
	if len(recs) != 1 {
		return 0, 0, corrupt("control batch holds %d records, want 1", len(recs))
	}
	return ParseControlRecord(recs[0])
}
