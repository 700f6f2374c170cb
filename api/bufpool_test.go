package api

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

func TestDirtyPool(t *testing.T) {
	p := newDirtyPool()
	for _, n := range []int{1, 255, 256, 257, 1000, 1024, 1025, 16 << 10, 16<<10 + 61, 40 << 10, 1 << 20, 4 << 20} {
		b := p.Get(n)
		if len(*b) != n {
			t.Fatalf("Get(%d) has length %d", n, len(*b))
		}
		want := 256
		for want < n {
			want *= 2
		}
		if cap(*b) != want {
			t.Fatalf("Get(%d) has capacity %d, want %d", n, cap(*b), want)
		}
		for i := range *b {
			(*b)[i] = 0xAB
		}
		p.Put(b)
		// Whatever comes back for the same size fits it.
		if c := p.Get(n); len(*c) != n || cap(*c) < n {
			t.Fatalf("second Get(%d): len %d cap %d", n, len(*c), cap(*c))
		}
	}
	// Larger than the largest tier: allocated, and not kept.
	big := p.Get(4<<20 + 1)
	if len(*big) != 4<<20+1 {
		t.Fatalf("big Get has length %d", len(*big))
	}
	p.Put(big)
	// A buffer of a capacity that is not a tier's is filed under the tier
	// below, so it still fits every Get of that tier.
	odd := make([]byte, 10, 3000)
	p.Put(&odd)
	for i := 0; i < 4; i++ {
		if b := p.Get(2048); cap(*b) < 2048 {
			t.Fatalf("Get(2048) got capacity %d", cap(*b))
		}
	}
	tiny := make([]byte, 10)
	p.Put(&tiny) // below the smallest tier: dropped, no panic
	if b := p.Get(0); len(*b) != 0 {
		t.Fatalf("Get(0) has length %d", len(*b))
	}
}

// BenchmarkBufferPool is a Get and Put of a message's size: gRPC's default
// pool (clears the buffer; 32 KiB then 1 MiB tiers) against dirtyPool.
func BenchmarkBufferPool(b *testing.B) {
	grpcDefault, err := mem.NewBinaryTieredBufferPool(8, 12, 14, 15, 20)
	if err != nil {
		b.Fatal(err)
	}
	pools := []struct {
		name string
		p    mem.BufferPool
	}{{"grpc-default", grpcDefault}, {"dirty", newDirtyPool()}}
	for _, size := range []int{16<<10 + 100, 48 << 10} {
		for _, pl := range pools {
			b.Run(fmt.Sprintf("pool=%s/size=%dKiB", pl.name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					buf := pl.p.Get(size)
					(*buf)[0] = 1
					pl.p.Put(buf)
				}
			})
		}
	}
}

// BenchmarkFetchResponseCodec is a leader serving a follower's fetch of
// two 16 KiB batches: the records read into a buffer, the response
// marshalled (into the pool's buffer, freed as gRPC does after the write),
// and the follower unmarshalling it from two 16 KiB frames. Before: a
// fresh read buffer, gRPC's default pool and codec; after: readPool,
// dirtyPool and serverCodec.
func BenchmarkFetchResponseCodec(b *testing.B) {
	const size = 2*(16<<10) + 2*61
	grpcDefault, err := mem.NewBinaryTieredBufferPool(8, 12, 14, 15, 20)
	if err != nil {
		b.Fatal(err)
	}
	proto := encoding.GetCodecV2(grpcproto.Name)
	for _, v := range []struct {
		name   string
		pool   mem.BufferPool
		codec  encoding.CodecV2
		pooled bool
	}{{"before", grpcDefault, proto, false}, {"after", mem.DefaultBufferPool(), newServerCodec(), true}} {
		b.Run(v.name, func(b *testing.B) {
			experimental.SetDefaultBufferPool(v.pool) // the codec's pool; no gRPC is running here
			defer experimental.SetDefaultBufferPool(newDirtyPool())
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				var recs []byte
				if v.pooled {
					recs = ReadBuffer(size)
				} else {
					recs = make([]byte, size)
				}
				recs[0] = 1
				resp := &pb.FetchResponse{Partitions: []*pb.FetchPartitionResponse{{Topic: "bench", HighWatermark: 1, Records: recs}}}
				data, err := v.codec.Marshal(resp)
				if err != nil {
					b.Fatal(err)
				}
				// The follower's side: the message arrives in frames of at
				// most 16 KiB, each in a pool buffer.
				raw := data.Materialize()
				data.Free()
				var frames mem.BufferSlice
				for len(raw) > 0 {
					n := min(len(raw), 16<<10)
					frames = append(frames, mem.Copy(raw[:n], v.pool))
					raw = raw[n:]
				}
				var got pb.FetchResponse
				if err := proto.Unmarshal(frames, &got); err != nil {
					b.Fatal(err)
				}
				frames.Free()
				if len(got.Partitions) != 1 || len(got.Partitions[0].Records) != size {
					b.Fatal("bad round trip")
				}
			}
		})
	}
}
