package client

import (
	"context"
	"sync"
	"testing"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/fakebroker"
	"github.com/strand-io/strand/testkit/testutil"
)

// TestChunkOffsets: a reset's offsets go in requests of at most n
// partitions, ordered by topic and partition, each partition once.
func TestChunkOffsets(t *testing.T) {
	offsets := map[TopicPartition]int64{}
	for p := int32(0); p < 1200; p++ {
		offsets[TopicPartition{"b", p}] = int64(p)
		offsets[TopicPartition{"a", p}] = int64(p) + 10_000
	}
	chunks := chunkOffsets(offsets, 1000)
	if len(chunks) != 3 || len(chunks[0]) != 1000 || len(chunks[1]) != 1000 || len(chunks[2]) != 400 {
		t.Fatalf("2400 offsets in chunks of %d", lens(chunks))
	}
	seen := map[TopicPartition]bool{}
	var prev *pb.PartitionOffset
	for _, c := range chunks {
		for _, o := range c {
			tp := TopicPartition{o.Topic, o.Partition}
			if seen[tp] {
				t.Fatalf("%v twice", tp)
			}
			seen[tp] = true
			if o.Offset != offsets[tp] || o.LeaderEpoch != -1 {
				t.Fatalf("%v: offset %d epoch %d, want %d and -1", tp, o.Offset, o.LeaderEpoch, offsets[tp])
			}
			if prev != nil && (prev.Topic > o.Topic || prev.Topic == o.Topic && prev.Partition >= o.Partition) {
				t.Fatalf("%s-%d after %s-%d", o.Topic, o.Partition, prev.Topic, prev.Partition)
			}
			prev = o
		}
	}
	if len(seen) != len(offsets) {
		t.Fatalf("%d of %d partitions in the chunks", len(seen), len(offsets))
	}
	if c := chunkOffsets(offsets, 0); len(c) != 3 {
		t.Fatalf("n 0 (MaxOffsetCommitPartitions): chunks of %d", lens(c))
	}
	if c := chunkOffsets(nil, 1000); len(c) != 0 {
		t.Fatalf("no offsets: %d chunks", len(c))
	}
}

func lens(chunks [][]*pb.PartitionOffset) []int {
	var out []int
	for _, c := range chunks {
		out = append(out, len(c))
	}
	return out
}

// TestSetGroupOffsetsPerPartition: SetGroupOffsets sends a large reset in
// requests of at most MaxOffsetCommitPartitions partitions and reports
// every partition's refusal, not only the first.
func TestSetGroupOffsetsPerPartition(t *testing.T) {
	b := fakebroker.Start(t)
	var mu sync.Mutex
	var sizes []int
	b.Intercept("OffsetCommit", func(_ context.Context, _ int, req any) (any, error) {
		r := req.(*pb.OffsetCommitRequest)
		mu.Lock()
		sizes = append(sizes, len(r.Offsets))
		mu.Unlock()
		resp := &pb.OffsetCommitResponse{}
		for _, o := range r.Offsets {
			pe := &pb.PartitionError{Topic: o.Topic, Partition: o.Partition}
			if o.Partition%1000 == 7 {
				pe.ErrorCode, pe.ErrorMessage = pb.ErrorCode_OFFSET_METADATA_TOO_LARGE, "refused"
			}
			resp.Partitions = append(resp.Partitions, pe)
		}
		return resp, nil
	})
	adm, err := NewAdmin(Bootstrap(b.Addr()), Logger(testutil.Logger()), RetryBackoff(5*time.Millisecond, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offsets := map[TopicPartition]int64{}
	for p := int32(0); p < 2500; p++ {
		offsets[TopicPartition{"t", p}] = 1
	}
	res, err := adm.SetGroupOffsets(ctx, "g", offsets)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := sizes
	mu.Unlock()
	if len(got) != 3 || got[0] != 1000 || got[1] != 1000 || got[2] != 500 {
		t.Fatalf("OffsetCommit requests of %v partitions, want [1000 1000 500]", got)
	}
	if len(res) != len(offsets) {
		t.Fatalf("%d results for %d partitions", len(res), len(offsets))
	}
	var refused []int32
	for tp, e := range res {
		if e != nil {
			refused = append(refused, tp.Partition)
		}
	}
	if len(refused) != 3 {
		t.Fatalf("refused partitions %v, want 7, 1007 and 2007", refused)
	}
	for _, p := range []int32{7, 1007, 2007} {
		if res[TopicPartition{"t", p}] == nil {
			t.Errorf("t-%d's refusal is not reported", p)
		}
	}
}
