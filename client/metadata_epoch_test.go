package client

import (
	"testing"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TestMetadataKeepsTheNewerLeaderEpoch: metadata from a broker that lags
// (here one cut off from the controller, which still names itself leader
// at the older epoch) does not replace what the client knows of a newer
// leader epoch of the same topic (KIP-320). Following it sent a
// read_committed consumer, positioned past the deposed leader's log end,
// to that leader, which answered OFFSET_OUT_OF_RANGE; the consumer reset to
// the earliest offset and a consume-transform-produce stage processed its
// inputs again (found by the simulation, seed 31107 with -profile
// leadership -faults 12). A topic deleted and created again (a new topic
// id) starts its epochs over and is believed.
func TestMetadataKeepsTheNewerLeaderEpoch(t *testing.T) {
	cfg := newConfig(nil)
	c := newCluster(&cfg)
	md := func(id string, leader, epoch int32) *pb.MetadataResponse {
		return &pb.MetadataResponse{Topics: []*pb.TopicMetadata{{Name: "src", TopicId: id,
			Partitions: []*pb.PartitionMetadata{{Partition: 0, LeaderId: leader, LeaderEpoch: epoch}}}}}
	}
	tp := TopicPartition{"src", 0}
	check := func(what string, leader, epoch int32) {
		t.Helper()
		if l, e := c.leader(tp); l != leader || e != epoch {
			t.Fatalf("%s: leader %d at epoch %d, want %d at %d", what, l, e, leader, epoch)
		}
	}
	c.apply(md("id-1", 1, 0))
	check("first metadata", 1, 0)
	c.apply(md("id-1", 2, 1))
	check("the new leader", 2, 1)
	c.apply(md("id-1", 1, 0))
	check("metadata from the deposed leader", 2, 1)
	c.markStale(tp)
	c.apply(md("id-1", 1, 0))
	if l, e := c.leader(tp); l == 1 {
		t.Fatalf("after a fetch error, stale metadata made the deposed leader 1 (epoch %d) the leader again", e)
	}
	c.apply(md("id-1", 3, 2))
	check("a newer epoch", 3, 2)
	c.apply(md("id-2", 1, 0))
	check("the topic created again", 1, 0)
}
