package replication

import (
	"fmt"
	"math/rand"
	"testing"
	"unsafe"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

func randomFetchResponse(r *rand.Rand) *pb.FetchResponse {
	m := &pb.FetchResponse{SessionId: r.Int31() - 1<<30, ErrorCode: pb.ErrorCode(r.Intn(5)), ThrottleTimeMs: r.Int31n(3)}
	if r.Intn(3) == 0 {
		m.ErrorMessage = "session gone"
	}
	for range r.Intn(4) {
		p := &pb.FetchPartitionResponse{
			Topic: "t", Partition: r.Int31n(5), ErrorCode: pb.ErrorCode(r.Intn(3)),
			HighWatermark: r.Int63n(1<<40) - 1, LastStableOffset: r.Int63n(1 << 40), LogStartOffset: r.Int63n(10) - 1,
			CurrentLeaderId: r.Int31n(4) - 1, CurrentLeaderEpoch: r.Int31n(9) - 1, LogEndOffset: r.Int63n(1 << 50),
		}
		if r.Intn(2) == 0 {
			p.ErrorMessage = "é"
		}
		if r.Intn(2) == 0 {
			p.TopicId = "AAECAwQFBgcICQoLDA0ODw"
		}
		for range r.Intn(3) {
			p.AbortedTransactions = append(p.AbortedTransactions, &pb.AbortedTransaction{ProducerId: r.Int63n(100) - 1, FirstOffset: r.Int63()})
		}
		if n := r.Intn(3) * r.Intn(40000); n > 0 {
			p.Records = make([]byte, n)
			r.Read(p.Records)
		}
		m.Partitions = append(m.Partitions, p)
	}
	return m
}

// split cuts b into frames the way gRPC hands a message to a codec.
func split(b []byte, frame int) mem.BufferSlice {
	var s mem.BufferSlice
	for len(b) > 0 {
		n := min(frame, len(b))
		s = append(s, mem.SliceBuffer(b[:n]))
		b = b[n:]
	}
	return s
}

func TestFetchCodecDecodesAsProto(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	c := newFetchCodec()
	for i := range 500 {
		want := randomFetchResponse(r)
		b, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got := &pb.FetchResponse{}
		if err := c.Unmarshal(split(b, 16384), got); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("case %d: decoded\n%v\nwant\n%v", i, got, want)
		}
		// The hand decoder takes every message proto.Marshal makes of
		// the current FetchResponse (no fallback), and Records alias the
		// codec's buffer instead of being copied out of it.
		if err := decodeFetchResponse(b, &pb.FetchResponse{}); err != nil {
			t.Fatalf("case %d: hand decoder refused a current message: %v", i, err)
		}
		base := uintptr(unsafe.Pointer(unsafe.SliceData(c.buf)))
		for _, p := range got.Partitions {
			if len(p.Records) == 0 {
				continue
			}
			at := uintptr(unsafe.Pointer(unsafe.SliceData(p.Records)))
			if at < base || at+uintptr(len(p.Records)) > base+uintptr(cap(c.buf)) {
				t.Fatalf("case %d: records were copied out of the codec buffer", i)
			}
			if cap(p.Records) != len(p.Records) {
				t.Fatalf("case %d: records cap %d lets an append overwrite the next field", i, cap(p.Records))
			}
		}
	}
}

// A field the hand decoder does not know (one added to the .proto later)
// sends the message to proto.Unmarshal, which keeps it as an unknown field.
func TestFetchCodecFallsBackOnUnknownField(t *testing.T) {
	want := &pb.FetchResponse{SessionId: 7, Partitions: []*pb.FetchPartitionResponse{{Topic: "t", Records: []byte{1, 2, 3}}}}
	b, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	b = protowire.AppendTag(b, 99, protowire.VarintType)
	b = protowire.AppendVarint(b, 5)
	if err := decodeFetchResponse(b, &pb.FetchResponse{}); err == nil {
		t.Fatal("hand decoder took an unknown field")
	}
	got := &pb.FetchResponse{}
	if err := newFetchCodec().Unmarshal(split(b, 5), got); err != nil {
		t.Fatal(err)
	}
	if got.SessionId != 7 || len(got.Partitions) != 1 || string(got.Partitions[0].Records) != "\x01\x02\x03" || len(got.ProtoReflect().GetUnknown()) == 0 {
		t.Fatalf("fallback decoded %v", got)
	}
}

func TestFetchCodecRefusesMalformed(t *testing.T) {
	b, err := proto.Marshal(&pb.FetchResponse{Partitions: []*pb.FetchPartitionResponse{{Topic: "t", Records: make([]byte, 100)}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := newFetchCodec().Unmarshal(split(b[:len(b)-10], 7), &pb.FetchResponse{}); err == nil {
		t.Fatal("a truncated response decoded")
	}
	bad, err := proto.Marshal(&pb.FetchResponse{ErrorMessage: "x"})
	if err != nil {
		t.Fatal(err)
	}
	bad[len(bad)-1] = 0xff // not UTF-8
	if err := newFetchCodec().Unmarshal(split(bad, 7), &pb.FetchResponse{}); err == nil {
		t.Fatal("a string that is not UTF-8 decoded")
	}
}

// BenchmarkFetchResponseDecode is a follower's decoding of one Fetch
// response carrying one partition's records, arriving as gRPC's 16 KiB
// HTTP/2 frames: gRPC's proto codec against fetchCodec.
func BenchmarkFetchResponseDecode(b *testing.B) {
	for _, size := range []int{16 << 10, 64 << 10, 256 << 10} {
		msg, err := proto.Marshal(&pb.FetchResponse{SessionId: 3, Partitions: []*pb.FetchPartitionResponse{{
			Topic: "bench", HighWatermark: 1000, LogEndOffset: 1000, Records: make([]byte, size)}}})
		if err != nil {
			b.Fatal(err)
		}
		frames := split(msg, 16<<10)
		for _, codec := range []struct {
			name string
			c    interface {
				Unmarshal(mem.BufferSlice, any) error
			}
		}{{"grpc-proto", newFetchCodec().base}, {"fetchCodec", newFetchCodec()}} {
			b.Run(fmt.Sprintf("records=%dKiB/%s", size>>10, codec.name), func(b *testing.B) {
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					var resp pb.FetchResponse
					if err := codec.c.Unmarshal(frames, &resp); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
