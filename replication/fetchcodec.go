package replication

import (
	"errors"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/strand-io/strand/internal/wire"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// fetchCodec is the gRPC codec of one fetcher's Fetch calls. gRPC's proto
// codec gathers a response's frames into one buffer and then copies every
// partition's records out of it into a fresh allocation (protobuf-go
// never aliases a bytes field): on a follower that second copy, into
// cold memory, was about a tenth of the CPU of an acks=all RF 3 run. This
// codec gathers the frames into a buffer of its own, reused from one
// response to the next, and decodes FetchResponse by hand so that each
// partition's Records is a slice of that buffer.
//
// A response's Records are therefore valid only until the fetcher's next
// Fetch: fetcher.fetch appends them to the log (which copies them into
// the segment file) before it returns, and nothing keeps them. A codec
// belongs to one fetcher, whose run goroutine makes one call at a time.
// Any message the hand decoder does not know field by field (a field
// added to the .proto later) goes to proto.Unmarshal, which copies.
type fetchCodec struct {
	base encoding.CodecV2
	buf  []byte
}

// maxKeptFetchBuffer is the largest buffer a fetchCodec keeps between
// responses; a larger response gets a buffer of its own.
const maxKeptFetchBuffer = 8 << 20

func newFetchCodec() *fetchCodec { return &fetchCodec{base: encoding.GetCodecV2(grpcproto.Name)} }

func (c *fetchCodec) Name() string { return c.base.Name() }

func (c *fetchCodec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

func (c *fetchCodec) Unmarshal(data mem.BufferSlice, v any) error {
	resp, ok := v.(*pb.FetchResponse)
	if !ok {
		return c.base.Unmarshal(data, v)
	}
	n := data.Len()
	var b []byte
	switch {
	case n <= cap(c.buf):
		b = c.buf[:n]
	case n <= maxKeptFetchBuffer:
		c.buf = make([]byte, n, min(n+n/4, maxKeptFetchBuffer))
		b = c.buf[:n]
	default:
		b = make([]byte, n)
	}
	data.CopyTo(b)
	if err := decodeFetchResponse(b, resp); err != nil {
		proto.Reset(resp)
		return proto.Unmarshal(b, resp)
	}
	return nil
}

// errNotDecoded sends a message the hand decoder does not take to
// proto.Unmarshal (which also reports malformed input in its own words).
var errNotDecoded = errors.New("fetch response: not decoded by hand")

// decodeFetchResponse decodes b into m (which is empty) as proto.Unmarshal
// would, except that each partition's Records aliases b.
func decodeFetchResponse(b []byte, m *pb.FetchResponse) error {
	ok := wire.EachProtoField(b, func(f wire.ProtoField) bool {
		switch {
		case f.Varint && f.Num == 2:
			m.SessionId = int32(f.V)
		case f.Varint && f.Num == 3:
			m.ErrorCode = pb.ErrorCode(int32(f.V))
		case f.Varint && f.Num == 5:
			m.ThrottleTimeMs = int32(f.V)
		case !f.Varint && f.Num == 1:
			p := &pb.FetchPartitionResponse{}
			if !decodeFetchPartition(f.Bytes, p) {
				return false
			}
			m.Partitions = append(m.Partitions, p)
		case !f.Varint && f.Num == 4:
			msg, ok := f.String()
			m.ErrorMessage = msg
			return ok
		default:
			return false
		}
		return true
	})
	if !ok {
		return errNotDecoded
	}
	return nil
}

func decodeFetchPartition(b []byte, p *pb.FetchPartitionResponse) bool {
	return wire.EachProtoField(b, func(f wire.ProtoField) bool {
		if f.Varint {
			switch f.Num {
			case 2:
				p.Partition = int32(f.V)
			case 3:
				p.ErrorCode = pb.ErrorCode(int32(f.V))
			case 5:
				p.HighWatermark = int64(f.V)
			case 6:
				p.LastStableOffset = int64(f.V)
			case 7:
				p.LogStartOffset = int64(f.V)
			case 10:
				p.CurrentLeaderId = int32(f.V)
			case 11:
				p.CurrentLeaderEpoch = int32(f.V)
			case 12:
				p.LogEndOffset = int64(f.V)
			default:
				return false
			}
			return true
		}
		switch f.Num {
		case 1, 4, 13:
			s, ok := f.String()
			switch f.Num {
			case 1:
				p.Topic = s
			case 4:
				p.ErrorMessage = s
			default:
				p.TopicId = s
			}
			return ok
		case 8:
			a := &pb.AbortedTransaction{}
			if proto.Unmarshal(f.Bytes, a) != nil {
				return false
			}
			p.AbortedTransactions = append(p.AbortedTransactions, a)
		case 9:
			p.Records = f.Alias()
		default:
			return false
		}
		return true
	})
}
