package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Record keys in __consumer_offsets. Every key starts with an int16 record
// type; strings are an int16 length then UTF-8 bytes; integers are
// big-endian:
//
//	type 0, offset commit:              int16 0 · string group · string topic · int32 partition
//	type 1, pending txn offset commit:  int16 1 · string group · string topic · int32 partition · int64 producerId · int16 producerEpoch
//	type 2, group metadata:             int16 2 · string group
//
// Values are protobuf messages: OffsetCommitValue for types 0 and 1,
// GroupMetadataValue for type 2. A null value is a tombstone (the offset or
// the group is gone). A transactional offset commit is a type 0 record in
// a transactional batch of its producer, as in Kafka, with a
// "transactional.id" record header naming its transaction (shown when a
// commit is stuck); it becomes the committed offset when the partition's
// COMMIT marker for that producer follows it, and is dropped by an ABORT
// marker. Type 1 is only read: older versions wrote transactional commits
// with it, a key per transaction that compaction could never drop.
const (
	keyOffsetCommit     int16 = 0
	keyPendingTxnCommit int16 = 1
	keyGroupMetadata    int16 = 2
)

// recordKey is a decoded key.
type recordKey struct {
	typ       int16
	group     string
	topic     string
	partition int32
	pid       int64
	epoch     int16
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// offsetKey encodes a type 0 key.
func offsetKey(group, topic string, partition int32) []byte {
	b := binary.BigEndian.AppendUint16(make([]byte, 0, 12+len(group)+len(topic)), uint16(keyOffsetCommit))
	b = appendString(b, group)
	b = appendString(b, topic)
	return binary.BigEndian.AppendUint32(b, uint32(partition))
}

// pendingKey encodes a type 1 key.
func pendingKey(group, topic string, partition int32, pid int64, epoch int16) []byte {
	b := binary.BigEndian.AppendUint16(make([]byte, 0, 22+len(group)+len(topic)), uint16(keyPendingTxnCommit))
	b = appendString(b, group)
	b = appendString(b, topic)
	b = binary.BigEndian.AppendUint32(b, uint32(partition))
	b = binary.BigEndian.AppendUint64(b, uint64(pid))
	return binary.BigEndian.AppendUint16(b, uint16(epoch))
}

// groupKey encodes a type 2 key.
func groupKey(group string) []byte {
	b := binary.BigEndian.AppendUint16(make([]byte, 0, 4+len(group)), uint16(keyGroupMetadata))
	return appendString(b, group)
}

// validKeyString reports whether s fits a key's int16 length.
func validKeyString(s string) bool { return len(s) <= math.MaxInt16 }

var errShortKey = errors.New("key ends early")

type keyReader struct {
	b   []byte
	err error
}

func (r *keyReader) u16() uint16 {
	if r.err != nil || len(r.b) < 2 {
		r.err = errShortKey
		return 0
	}
	v := binary.BigEndian.Uint16(r.b)
	r.b = r.b[2:]
	return v
}

func (r *keyReader) u32() uint32 {
	if r.err != nil || len(r.b) < 4 {
		r.err = errShortKey
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *keyReader) u64() uint64 {
	if r.err != nil || len(r.b) < 8 {
		r.err = errShortKey
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *keyReader) str() string {
	n := int(int16(r.u16()))
	if r.err != nil {
		return ""
	}
	if n < 0 || len(r.b) < n {
		r.err = fmt.Errorf("string of %d bytes with %d left", n, len(r.b))
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// decodeKey reads any of the three key types. Trailing bytes are an error
// (a newer key version would need a new type).
func decodeKey(b []byte) (recordKey, error) {
	r := &keyReader{b: b}
	k := recordKey{typ: int16(r.u16())}
	switch k.typ {
	case keyOffsetCommit, keyPendingTxnCommit:
		k.group, k.topic, k.partition = r.str(), r.str(), int32(r.u32())
		if k.typ == keyPendingTxnCommit {
			k.pid, k.epoch = int64(r.u64()), int16(r.u16())
		}
	case keyGroupMetadata:
		k.group = r.str()
	default:
		if r.err == nil {
			return k, fmt.Errorf("unknown record type %d", k.typ)
		}
	}
	if r.err != nil {
		return k, fmt.Errorf("record type %d: %w", k.typ, r.err)
	}
	if len(r.b) != 0 {
		return k, fmt.Errorf("record type %d: %d trailing bytes", k.typ, len(r.b))
	}
	return k, nil
}
