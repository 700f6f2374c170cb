package group_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"testing"

	"github.com/strand-io/strand/coordinator/group"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

func listed(t *testing.T, c *group.Coordinator, id string) bool {
	t.Helper()
	lr, err := c.ListGroups(context.Background(), &pb.ListGroupsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range lr.Groups {
		if g.GroupId == id {
			return true
		}
	}
	return false
}

// TestDeletionsSurviveReload: OffsetDelete and DeleteGroups are
// tombstones in the log; a coordinator that reloads the partition sees
// the offsets and the group gone, as they were live.
func TestDeletionsSurviveReload(t *testing.T) {
	r := newRig(t)
	c := r.start()
	ctx := context.Background()
	cr, _ := c.OffsetCommit(ctx, &pb.OffsetCommitRequest{GroupId: "tg", GenerationId: -1,
		Offsets: []*pb.PartitionOffset{{Topic: "orders", Partition: 0, Offset: 5}, {Topic: "orders", Partition: 1, Offset: 6}}})
	if cr.Partitions[0].ErrorCode != pb.ErrorCode_NONE || cr.Partitions[1].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("commit: %v", cr)
	}
	od, err := c.OffsetDelete(ctx, &pb.OffsetDeleteRequest{GroupId: "tg", Partitions: []*pb.TopicPartition{{Topic: "orders", Partition: 0}}})
	if err != nil || od.ErrorCode != pb.ErrorCode_NONE || od.Partitions[0].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("OffsetDelete: %v %v", od, err)
	}
	for i := 0; i < 2; i++ { // live, then after a reload
		if off, _ := r.fetch(c, 0, false); off != -1 {
			t.Fatalf("pass %d: orders-0 = %d after its delete, want -1", i, off)
		}
		if off, _ := r.fetch(c, 1, false); off != 6 {
			t.Fatalf("pass %d: orders-1 = %d, want 6", i, off)
		}
		if !listed(t, c, "tg") {
			t.Fatalf("pass %d: tg is not listed", i)
		}
		c.Stop()
		c = r.start()
	}

	dr, err := c.DeleteGroups(ctx, &pb.DeleteGroupsRequest{GroupIds: []string{"tg"}})
	if err != nil || dr.Groups[0].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("DeleteGroups: %v %v", dr, err)
	}
	for i := 0; i < 2; i++ {
		if off, _ := r.fetch(c, 1, false); off != -1 {
			t.Fatalf("pass %d: orders-1 = %d after the group's delete, want -1", i, off)
		}
		if listed(t, c, "tg") {
			t.Fatalf("pass %d: tg is still listed after its delete", i)
		}
		d, _ := c.DescribeGroups(ctx, &pb.DescribeGroupsRequest{GroupIds: []string{"tg"}})
		if d.Groups[0].State != "Dead" {
			t.Fatalf("pass %d: tg described %q after its delete, want Dead", i, d.Groups[0].State)
		}
		dr, _ := c.DeleteGroups(ctx, &pb.DeleteGroupsRequest{GroupIds: []string{"tg"}})
		if dr.Groups[0].ErrorCode != pb.ErrorCode_GROUP_ID_NOT_FOUND {
			t.Fatalf("pass %d: second delete: %v, want GROUP_ID_NOT_FOUND", i, dr.Groups[0])
		}
		c.Stop()
		c = r.start()
	}
}
