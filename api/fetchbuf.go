package api

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Fetch reads go into buffers from readPool, and the server's codec puts
// them back once it has marshalled the response: marshalling copies the
// records into gRPC's own buffers, and nothing else holds a response's
// records (a partition's Records is the start of the buffer its read
// filled; see replication.Manager.FetchInto). A response that some other
// server marshals just leaves its buffers to the garbage collector.
// Allocating and zeroing a fresh buffer per fetch (16 KiB to 1 MiB) was
// about 4 % of a leader's CPU under acks=all load, and most of its garbage.
var readPool = newDirtyPool()

// ReadBuffer is a buffer of n bytes for a fetch read, from the pool the
// server codec returns Fetch responses' buffers to (request.Handler.ReadBuffer).
func ReadBuffer(n int) []byte { return *readPool.Get(n) }

// serverCodec is gRPC's proto codec, plus the return of a Fetch
// response's read buffers after Marshal.
type serverCodec struct{ encoding.CodecV2 }

func newServerCodec() serverCodec { return serverCodec{encoding.GetCodecV2(proto.Name)} }

func (c serverCodec) Marshal(v any) (mem.BufferSlice, error) {
	out, err := c.CodecV2.Marshal(v)
	if r, ok := v.(*pb.FetchResponse); ok {
		for _, p := range r.Partitions {
			if cap(p.Records) > 0 {
				b := p.Records[:0]
				p.Records = nil
				readPool.Put(&b)
			}
		}
	}
	return out, err
}

// Unmarshal is gRPC's, but for a ProduceRequest, whose records stay in a
// pooled buffer until the handler releases it (producebuf.go).
func (c serverCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if req, ok := v.(*pb.ProduceRequest); ok {
		return unmarshalProduce(data, req)
	}
	return c.CodecV2.Unmarshal(data, v)
}
