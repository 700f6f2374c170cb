package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// Kafka's embedded consumer protocol (protocol type "consumer"): the
// subscription a classic member sends in JoinGroup and the assignment it
// gets back in SyncGroup. A consumer group reads a classic member's
// subscription (its topics, owned partitions, rack) and hands it its
// assignment in this encoding; a group converted between the protocols
// carries the assignments over in it.
//
//	subscription: int16 version · [string] topics · bytes user data
//	              · v1+: [string topic · [int32] partitions] owned
//	              · v2+: int32 generation · v3+: nullable string rack
//	assignment:   int16 version · [string topic · [int32] partitions]
//	              · bytes user data
//
// Arrays are an int32 count, strings an int16 length, bytes an int32
// length (-1: null); bytes past the fields a version defines are ignored,
// as Kafka's reader ignores them.

// classicSubscription is a decoded ConsumerProtocolSubscription.
type classicSubscription struct {
	version    int16
	topics     []string
	userData   []byte
	owned      map[string][]int32 // by topic name
	generation int32
	rack       string
}

// classicAssignment is a decoded ConsumerProtocolAssignment.
type classicAssignment struct {
	version    int16
	partitions map[string][]int32 // by topic name
	userData   []byte
}

var errProtocolShort = errors.New("ends early")

type protoReader struct {
	b   []byte
	err error
}

func (r *protoReader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b) < n {
		r.err = errProtocolShort
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *protoReader) i16() int16 {
	b := r.take(2)
	if b == nil {
		return 0
	}
	return int16(binary.BigEndian.Uint16(b))
}

func (r *protoReader) i32() int32 {
	b := r.take(4)
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

// count reads an array length; each item takes at least minItem bytes, so
// a count the rest cannot hold is an error (not an allocation).
func (r *protoReader) count(minItem int) int {
	n := int(r.i32())
	if r.err != nil {
		return 0
	}
	if n < 0 {
		return 0 // a null array
	}
	if n*minItem > len(r.b) {
		r.err = fmt.Errorf("array of %d items with %d bytes left", n, len(r.b))
		return 0
	}
	return n
}

func (r *protoReader) str() string {
	n := int(r.i16())
	if n < 0 {
		return ""
	}
	return string(r.take(n))
}

func (r *protoReader) nullableStr() string { return r.str() }

func (r *protoReader) bytes() []byte {
	n := int(r.i32())
	if n < 0 || r.err != nil {
		return nil
	}
	b := r.take(n)
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

func (r *protoReader) topicPartitions() map[string][]int32 {
	n := r.count(6)
	out := make(map[string][]int32, n)
	for i := 0; i < n && r.err == nil; i++ {
		t := r.str()
		m := r.count(4)
		ps := make([]int32, 0, m)
		for j := 0; j < m && r.err == nil; j++ {
			ps = append(ps, r.i32())
		}
		out[t] = append(out[t], ps...)
	}
	return out
}

// decodeClassicSubscription reads a ConsumerProtocolSubscription.
func decodeClassicSubscription(b []byte) (classicSubscription, error) {
	r := &protoReader{b: b}
	s := classicSubscription{version: r.i16(), generation: -1}
	if r.err == nil && s.version < 0 {
		return s, fmt.Errorf("consumer protocol subscription: version %d", s.version)
	}
	n := r.count(2)
	for i := 0; i < n && r.err == nil; i++ {
		s.topics = append(s.topics, r.str())
	}
	s.userData = r.bytes()
	if s.version >= 1 {
		s.owned = r.topicPartitions()
	}
	if s.version >= 2 {
		s.generation = r.i32()
	}
	if s.version >= 3 {
		s.rack = r.nullableStr()
	}
	if r.err != nil {
		return s, fmt.Errorf("consumer protocol subscription: %w", r.err)
	}
	return s, nil
}

// decodeClassicAssignment reads a ConsumerProtocolAssignment; an empty
// one (a member given nothing) decodes to no partitions.
func decodeClassicAssignment(b []byte) (classicAssignment, error) {
	if len(b) == 0 {
		return classicAssignment{partitions: map[string][]int32{}}, nil
	}
	r := &protoReader{b: b}
	a := classicAssignment{version: r.i16()}
	if r.err == nil && a.version < 0 {
		return a, fmt.Errorf("consumer protocol assignment: version %d", a.version)
	}
	a.partitions = r.topicPartitions()
	a.userData = r.bytes()
	if r.err != nil {
		return a, fmt.Errorf("consumer protocol assignment: %w", r.err)
	}
	return a, nil
}

func appendProtoStr(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// encodeClassicAssignment writes partitions (by topic name) as a
// ConsumerProtocolAssignment of the given version (Kafka's versions 0 to
// 3 share this layout), topics sorted, no user data.
func encodeClassicAssignment(version int16, parts map[string][]int32) []byte {
	if version < 0 {
		version = 0
	}
	if version > 3 {
		version = 3
	}
	topics := make([]string, 0, len(parts))
	for t := range parts {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	b := binary.BigEndian.AppendUint16(nil, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(len(topics)))
	for _, t := range topics {
		b = appendProtoStr(b, t)
		ps := parts[t]
		b = binary.BigEndian.AppendUint32(b, uint32(len(ps)))
		for _, p := range ps {
			b = binary.BigEndian.AppendUint32(b, uint32(p))
		}
	}
	return binary.BigEndian.AppendUint32(b, 0xffffffff) // null user data
}

// encodeClassicSubscription writes a ConsumerProtocolSubscription (the
// version's fields, no user data): a consumer-protocol member described
// in the classic shape.
func encodeClassicSubscription(version int16, topics []string, owned map[string][]int32, rack string) []byte {
	version = min(max(version, 0), 3)
	b := binary.BigEndian.AppendUint16(nil, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(len(topics)))
	for _, t := range topics {
		b = appendProtoStr(b, t)
	}
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)
	if version >= 1 {
		names := make([]string, 0, len(owned))
		for t := range owned {
			names = append(names, t)
		}
		sort.Strings(names)
		b = binary.BigEndian.AppendUint32(b, uint32(len(names)))
		for _, t := range names {
			b = appendProtoStr(b, t)
			b = binary.BigEndian.AppendUint32(b, uint32(len(owned[t])))
			for _, p := range owned[t] {
				b = binary.BigEndian.AppendUint32(b, uint32(p))
			}
		}
	}
	if version >= 2 {
		b = binary.BigEndian.AppendUint32(b, 0xffffffff) // generation -1
	}
	if version >= 3 {
		if rack == "" {
			b = binary.BigEndian.AppendUint16(b, 0xffff)
		} else {
			b = appendProtoStr(b, rack)
		}
	}
	return b
}

// protocolVersion is the version at the front of an embedded protocol's
// bytes (0 when there are none).
func protocolVersion(b []byte) int16 {
	if len(b) < 2 {
		return 0
	}
	return int16(binary.BigEndian.Uint16(b))
}
