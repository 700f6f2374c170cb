package client

import (
	"fmt"
	"testing"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TestPlanRemoveBroker: every replica of the broker goes, in its place, to
// the least-loaded other broker not already holding the partition.
func TestPlanRemoveBroker(t *testing.T) {
	md := &pb.MetadataResponse{
		Brokers: []*pb.BrokerInfo{{NodeId: 1}, {NodeId: 2}, {NodeId: 3}, {NodeId: 4}},
		Topics: []*pb.TopicMetadata{{Name: "t", Partitions: []*pb.PartitionMetadata{
			{Partition: 0, Replicas: []int32{1, 2, 3}},
			{Partition: 1, Replicas: []int32{2, 1}},
			{Partition: 2, Replicas: []int32{2, 3}},
			{Partition: 3, Replicas: []int32{3, 4}},
		}}},
	}
	// Load: 2 holds 3, 3 holds 3, 4 holds 1. t-0 lacks only 4; t-1 takes
	// the least loaded of 3 and 4 after t-0's move (4 then holds 2, 3 holds 3).
	got := PlanRemoveBroker(md, 1)
	want := map[TopicPartition][]int32{{"t", 0}: {4, 2, 3}, {"t", 1}: {2, 4}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("plan %v, want %v", got, want)
	}
	// No broker can take a partition that every other broker holds.
	md.Topics[0].Partitions = []*pb.PartitionMetadata{{Partition: 0, Replicas: []int32{1, 2, 3, 4}}}
	if got := PlanRemoveBroker(md, 1); len(got) != 0 {
		t.Fatalf("plan %v, want none", got)
	}
}
