package api

import (
	"errors"
	"sync"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/strand-io/strand/internal/wire"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// A Produce request's records are not copied out of the request: gRPC's
// proto codec gathers the frames into one buffer and then copies each
// partition's records into a fresh allocation (protobuf-go never aliases
// a bytes field), and that second copy into cold memory was about 6 % of
// the CPU of an acks=all RF 3 run. The server codec gathers a
// ProduceRequest into a buffer from readPool and decodes it by hand, each
// PartitionRecords.Records a slice of that buffer; producerService.Produce
// hands the buffer back (releaseProduceRequest) once the request's appends
// are done: the log has copied the batches into its segment by then (only
// an fsync may still be pending), and nothing else keeps them. A request
// the hand decoder does not know field by field (a field added to the
// .proto later) goes to proto.Unmarshal, which copies, and holds no buffer.
var produceBuffers sync.Map // *pb.ProduceRequest → *[]byte

// unmarshalProduce is the server codec's Unmarshal of a ProduceRequest.
func unmarshalProduce(data mem.BufferSlice, req *pb.ProduceRequest) error {
	bp := readPool.Get(data.Len())
	b := *bp
	data.CopyTo(b)
	if err := decodeProduceRequest(b, req); err != nil {
		proto.Reset(req)
		err = proto.Unmarshal(b, req)
		readPool.Put(bp)
		return err
	}
	produceBuffers.Store(req, bp)
	return nil
}

// releaseProduceRequest returns the buffer req's records are in to the
// pool; req's Records are cleared, as they are no longer valid.
func releaseProduceRequest(req *pb.ProduceRequest) {
	bp, ok := produceBuffers.LoadAndDelete(req)
	if !ok {
		return
	}
	for _, p := range req.Partitions {
		p.Records = nil
	}
	readPool.Put(bp.(*[]byte))
}

var errNotDecoded = errors.New("produce request: not decoded by hand")

// decodeProduceRequest decodes b into the empty req as proto.Unmarshal
// would, except that each partition's Records aliases b.
func decodeProduceRequest(b []byte, req *pb.ProduceRequest) error {
	ok := wire.EachProtoField(b, func(f wire.ProtoField) bool {
		switch {
		case f.Varint && f.Num == 1:
			req.CorrelationId = int64(f.V)
		case f.Varint && f.Num == 2:
			req.Acks = int32(f.V)
		case f.Varint && f.Num == 3:
			req.TimeoutMs = int32(f.V)
		case f.Varint && f.Num == 6:
			req.TransactionVersion = int32(f.V)
		case !f.Varint && f.Num == 4:
			id, ok := f.String()
			req.TransactionalId = id
			return ok
		case !f.Varint && f.Num == 5:
			p := &pb.PartitionRecords{}
			if !decodePartitionRecords(f.Bytes, p) {
				return false
			}
			req.Partitions = append(req.Partitions, p)
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

func decodePartitionRecords(b []byte, p *pb.PartitionRecords) bool {
	return wire.EachProtoField(b, func(f wire.ProtoField) bool {
		switch {
		case f.Varint && f.Num == 2:
			p.Partition = int32(f.V)
		case !f.Varint && f.Num == 1:
			topic, ok := f.String()
			p.Topic = topic
			return ok
		case !f.Varint && f.Num == 3:
			p.Records = f.Alias()
		default:
			return false
		}
		return true
	})
}
