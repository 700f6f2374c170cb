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
// and a consumer group's (the consumer protocol, KIP-848), one record per
// part as in Kafka, so a heartbeat rewrites only what it changed:
//
//	type 3, group epoch:                int16 3 · string group
//	type 4, subscribed topics:          int16 4 · string group
//	type 5, member subscription:        int16 5 · string group · string member
//	type 6, target assignment epoch:    int16 6 · string group
//	type 7, member's target assignment: int16 7 · string group · string member
//	type 8, member's current assignment: int16 8 · string group · string member
//	type 16, resolved regular expression: int16 16 · string group · string regex
//
// Values are protobuf messages: OffsetCommitValue for types 0 and 1,
// GroupMetadataValue for type 2, and the ConsumerGroup*Value messages of
// consumer_groups.proto for the others. A null value is a tombstone (the
// offset, the group or the part is gone). A transactional offset commit is a type 0 record in
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

	keyCGEpoch         int16 = 3
	keyCGSubscription  int16 = 4
	keyCGMember        int16 = 5
	keyCGTargetEpoch   int16 = 6
	keyCGTargetMember  int16 = 7
	keyCGCurrentMember int16 = 8
	keyCGRegex         int16 = 16
)

// recordKey is a decoded key.
type recordKey struct {
	typ       int16
	group     string
	topic     string
	partition int32
	pid       int64
	epoch     int16
	member    string // types 5, 7 and 8: the member id; 16: the regex
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

// cgKey encodes a consumer group key of a type with no member part (3, 4, 6).
func cgKey(typ int16, group string) []byte {
	b := binary.BigEndian.AppendUint16(make([]byte, 0, 4+len(group)), uint16(typ))
	return appendString(b, group)
}

// cgMemberKey encodes a consumer group key with a second string (5, 7, 8:
// the member id; 16: the regular expression).
func cgMemberKey(typ int16, group, member string) []byte {
	b := binary.BigEndian.AppendUint16(make([]byte, 0, 6+len(group)+len(member)), uint16(typ))
	b = appendString(b, group)
	return appendString(b, member)
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

// decodeKey reads any of the key types above. Trailing bytes are an error
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
	case keyGroupMetadata, keyCGEpoch, keyCGSubscription, keyCGTargetEpoch:
		k.group = r.str()
	case keyCGMember, keyCGTargetMember, keyCGCurrentMember, keyCGRegex:
		k.group, k.member = r.str(), r.str()
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
