package replication

import (
	"math"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strand-io/strand/internal/wire"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TestFetchMaxBytesCaps: a fetch's max_bytes is capped by fetch.max.bytes
// (consumers), replica.fetch.response.max.bytes (followers) and what a
// gRPC message carries; a smaller max_bytes is kept.
func TestFetchMaxBytesCaps(t *testing.T) {
	m := &Manager{cfg: DefaultConfig(1)}
	for _, c := range []struct {
		replica int32
		asked   int32
		want    int
	}{
		{-1, math.MaxInt32, 55 << 20},
		{-1, 0, 55 << 20},
		{-1, 1000, 1000},
		{2, math.MaxInt32, 10 << 20},
		{2, 1 << 20, 1 << 20},
	} {
		if got := m.fetchMaxBytes(&pb.FetchRequest{ReplicaId: c.replica, MaxBytes: c.asked}); got != c.want {
			t.Errorf("replica %d asking %d: %d, want %d", c.replica, c.asked, got, c.want)
		}
	}
	m.cfg.ConsumerFetchMaxBytes = 1 << 30
	if got := m.fetchMaxBytes(&pb.FetchRequest{ReplicaId: -1, MaxBytes: math.MaxInt32}); got != maxFetchRecords || got >= wire.MaxMessageSize {
		t.Errorf("fetch.max.bytes of 1 GiB: %d, want the transport's %d", got, maxFetchRecords)
	}
}

// TestFitMessage: an answer over a gRPC message loses the records of its
// last partitions, never the first's.
func TestFitMessage(t *testing.T) {
	resp := &pb.FetchResponse{Partitions: []*pb.FetchPartitionResponse{
		{Topic: "a", Records: make([]byte, 40<<20)},
		{Topic: "b", Records: make([]byte, 20<<20)},
		{Topic: "c", Records: make([]byte, 10<<20)},
	}}
	fitMessage(resp)
	if n := proto.Size(resp); n > wire.MaxMessageSize {
		t.Fatalf("%d bytes after fitting, over %d", n, wire.MaxMessageSize)
	}
	if len(resp.Partitions[0].Records) != 40<<20 || len(resp.Partitions[1].Records) != 20<<20 || len(resp.Partitions[2].Records) != 0 {
		t.Fatalf("kept %d, %d, %d bytes; want the first two whole and the last dropped",
			len(resp.Partitions[0].Records), len(resp.Partitions[1].Records), len(resp.Partitions[2].Records))
	}
}
