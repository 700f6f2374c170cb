package wire

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

func TestEachProtoField(t *testing.T) {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 300)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("abc"))
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendBytes(b, nil)

	var got []ProtoField
	if !EachProtoField(b, func(f ProtoField) bool { got = append(got, f); return true }) {
		t.Fatal("a well-formed message was refused")
	}
	if len(got) != 3 || !got[0].Varint || got[0].Num != 1 || got[0].V != 300 {
		t.Fatalf("fields = %+v", got)
	}
	if s, ok := got[1].String(); !ok || s != "abc" || got[1].Num != 2 {
		t.Fatalf("field 2 = %q %v", s, ok)
	}
	// Alias shares the message's bytes, and an append cannot overwrite
	// what follows in the message.
	a := got[1].Alias()
	if &a[0] != &b[bytes.Index(b, []byte("abc"))] || cap(a) != 3 {
		t.Fatalf("Alias copied or left room to grow: cap %d", cap(a))
	}
	if got[2].Alias() != nil {
		t.Fatal("an empty bytes field aliases to a non-nil slice")
	}

	// Refused: another wire type, a truncated field, a field fn refuses,
	// invalid UTF-8 as a string.
	fixed := protowire.AppendFixed32(protowire.AppendTag(nil, 1, protowire.Fixed32Type), 7)
	if EachProtoField(fixed, func(ProtoField) bool { return true }) {
		t.Fatal("a fixed32 field was taken")
	}
	if EachProtoField(b[:len(b)-3], func(ProtoField) bool { return true }) {
		t.Fatal("a truncated message was taken")
	}
	calls := 0
	if EachProtoField(b, func(ProtoField) bool { calls++; return false }) || calls != 1 {
		t.Fatalf("a refusal did not stop the walk (calls %d)", calls)
	}
	if _, ok := (ProtoField{Bytes: []byte{0xff, 0xfe}}).String(); ok {
		t.Fatal("invalid UTF-8 taken as a string")
	}
}
