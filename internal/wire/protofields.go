package wire

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// A ProtoField is one field of a protobuf message as EachProtoField reads
// it: its number, and its value if it is a varint or length-delimited (the
// only wire types the hand decoders take; any other is refused).
type ProtoField struct {
	Num    protowire.Number
	Varint bool   // a varint field: the value is in V
	V      uint64 // the varint's value
	Bytes  []byte // a length-delimited field's bytes, a slice of the message
}

// EachProtoField walks the fields of the protobuf message b in order,
// calling fn for each. It reports false, having stopped, at the first
// malformed field, a field of another wire type, or a field fn refuses
// (fn returns false). The hand decoders of messages whose bytes fields
// should not be copied (api/producebuf.go, replication/fetchcodec.go) read
// with it and fall back to proto.Unmarshal whenever it reports false.
func EachProtoField(b []byte, fn func(f ProtoField) bool) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		f := ProtoField{Num: num}
		switch typ {
		case protowire.VarintType:
			f.Varint = true
			f.V, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			f.Bytes, n = protowire.ConsumeBytes(b)
		default:
			return false
		}
		if n < 0 || !fn(f) {
			return false
		}
		b = b[n:]
	}
	return true
}

// String is the field's bytes as a string, and false when they are not
// UTF-8 (proto.Unmarshal refuses such a proto3 string).
func (f ProtoField) String() (string, bool) {
	if !utf8.Valid(f.Bytes) {
		return "", false
	}
	return string(f.Bytes), true
}

// Alias is the field's bytes without a copy, capped so that an append
// cannot run into the next field; nil when empty, as proto.Unmarshal
// leaves an empty bytes field.
func (f ProtoField) Alias() []byte {
	if len(f.Bytes) == 0 {
		return nil
	}
	return f.Bytes[:len(f.Bytes):len(f.Bytes)]
}
