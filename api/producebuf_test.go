package api

import (
	"math/rand"
	"testing"
	"unsafe"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

func frames(b []byte, size int) mem.BufferSlice {
	var s mem.BufferSlice
	for len(b) > 0 {
		n := min(size, len(b))
		s = append(s, mem.SliceBuffer(b[:n]))
		b = b[n:]
	}
	return s
}

func TestServerCodecProduceRequestAsProto(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	c := newServerCodec()
	for i := range 300 {
		want := &pb.ProduceRequest{CorrelationId: r.Int63() - 1<<62, Acks: int32(r.Intn(3)) - 1, TimeoutMs: r.Int31(), TransactionVersion: int32(r.Intn(3))}
		if r.Intn(2) == 0 {
			want.TransactionalId = "tx-é"
		}
		for range r.Intn(4) {
			p := &pb.PartitionRecords{Topic: "t", Partition: r.Int31n(7)}
			if n := r.Intn(3) * r.Intn(70000); n > 0 {
				p.Records = make([]byte, n)
				r.Read(p.Records)
			}
			want.Partitions = append(want.Partitions, p)
		}
		b, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got := &pb.ProduceRequest{}
		if err := c.Unmarshal(frames(b, 16384), got); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("case %d: decoded\n%v\nwant\n%v", i, got, want)
		}
		v, held := produceBuffers.Load(got)
		if !held {
			t.Fatalf("case %d: the hand decoder refused a current request", i)
		}
		// Records are slices of the held pool buffer, not copies.
		buf := *v.(*[]byte)
		base := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
		for _, p := range got.Partitions {
			if len(p.Records) == 0 {
				continue
			}
			at := uintptr(unsafe.Pointer(unsafe.SliceData(p.Records)))
			if at < base || at+uintptr(len(p.Records)) > base+uintptr(len(buf)) || cap(p.Records) != len(p.Records) {
				t.Fatalf("case %d: records not an exact slice of the request buffer", i)
			}
		}
		releaseProduceRequest(got)
		if _, held := produceBuffers.Load(got); held {
			t.Fatalf("case %d: buffer still held after release", i)
		}
		for _, p := range got.Partitions {
			if p.Records != nil {
				t.Fatalf("case %d: released request still points at the pooled buffer", i)
			}
		}
	}
}

// A field the hand decoder does not know goes to proto.Unmarshal, which
// copies and keeps no buffer; malformed input is refused.
func TestServerCodecProduceRequestFallback(t *testing.T) {
	c := newServerCodec()
	b, err := proto.Marshal(&pb.ProduceRequest{Acks: -1, Partitions: []*pb.PartitionRecords{{Topic: "t", Records: []byte{1, 2, 3}}}})
	if err != nil {
		t.Fatal(err)
	}
	unknown := protowire.AppendVarint(protowire.AppendTag(append([]byte(nil), b...), 77, protowire.VarintType), 1)
	got := &pb.ProduceRequest{}
	if err := c.Unmarshal(frames(unknown, 4), got); err != nil {
		t.Fatal(err)
	}
	if _, held := produceBuffers.Load(got); held {
		t.Fatal("a proto.Unmarshal fallback holds a pool buffer")
	}
	if got.Acks != -1 || len(got.Partitions) != 1 || string(got.Partitions[0].Records) != "\x01\x02\x03" || len(got.ProtoReflect().GetUnknown()) == 0 {
		t.Fatalf("fallback decoded %v", got)
	}
	releaseProduceRequest(got) // no buffer: a no-op
	if string(got.Partitions[0].Records) != "\x01\x02\x03" {
		t.Fatal("release cleared records it does not own")
	}
	if err := c.Unmarshal(frames(b[:len(b)-2], 4), &pb.ProduceRequest{}); err == nil {
		t.Fatal("a truncated request decoded")
	}
}
