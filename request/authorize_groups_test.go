package request_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"testing"

	"github.com/strand-io/strand/authz"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

func partitionCodes(ps []*pb.PartitionError) map[string]pb.ErrorCode {
	out := map[string]pb.ErrorCode{}
	for _, p := range ps {
		out[p.Topic] = p.ErrorCode
	}
	return out
}

// TestAuthorizeGroups: the membership requests need Read on the group
// (GROUP_AUTHORIZATION_FAILED in the response's error); OffsetCommit
// Read on the group (else every partition refused) and on each topic
// (per partition, before the existence check); OffsetFetch Describe on
// the group and on each topic (a partition named is refused, asked for
// all the topic is left out); DescribeGroups and DeleteGroups per group;
// ListGroups lists only the groups the principal may Describe unless it
// may Describe the cluster; OffsetDelete Delete on the group and Read on
// each topic.
func TestAuthorizeGroups(t *testing.T) {
	e := newAuthzEnv(t)
	waitGroupCoordinator(t, e, "g")
	waitGroupCoordinator(t, e, "h")
	// From inside the process: offsets of g and h on a and b.
	for _, g := range []string{"g", "h"} {
		r, err := e.raw.OffsetCommit(e.ctx, &pb.OffsetCommitRequest{GroupId: g, GenerationId: -1, Offsets: []*pb.PartitionOffset{{Topic: "a", Offset: 1}, {Topic: "b", Offset: 1}}})
		if err != nil || partitionCodes(r.Partitions)["a"] != pb.ErrorCode_NONE {
			t.Fatalf("commit %s: %v %v", g, r, err)
		}
	}
	e.fc.grant(alice, authz.OpRead, authz.ResourceGroup, "g").grant(alice, authz.OpDescribe, authz.ResourceGroup, "g").
		grant(alice, authz.OpRead, authz.ResourceTopic, "a").grant(alice, authz.OpDescribe, authz.ResourceTopic, "a")
	ctx := as(e.ctx, alice)

	// The membership requests.
	jg, _ := e.h.JoinGroup(ctx, &pb.JoinGroupRequest{GroupId: "h", SessionTimeoutMs: 10000, RebalanceTimeoutMs: 10000, ProtocolType: "consumer",
		Protocols: []*pb.GroupProtocol{{Name: "range"}}})
	if jg.ErrorCode != pb.ErrorCode_GROUP_AUTHORIZATION_FAILED || jg.GenerationId != -1 {
		t.Fatalf("JoinGroup h: %v", jg)
	}
	if sg, _ := e.h.SyncGroup(ctx, &pb.SyncGroupRequest{GroupId: "h", MemberId: "m"}); sg.ErrorCode != pb.ErrorCode_GROUP_AUTHORIZATION_FAILED {
		t.Fatalf("SyncGroup h: %v", sg)
	}
	if hb, _ := e.h.Heartbeat(ctx, &pb.HeartbeatRequest{GroupId: "h", MemberId: "m"}); hb.ErrorCode != pb.ErrorCode_GROUP_AUTHORIZATION_FAILED {
		t.Fatalf("Heartbeat h: %v", hb)
	}
	if lg, _ := e.h.LeaveGroup(ctx, &pb.LeaveGroupRequest{GroupId: "h", MemberId: "m"}); lg.ErrorCode != pb.ErrorCode_GROUP_AUTHORIZATION_FAILED {
		t.Fatalf("LeaveGroup h: %v", lg)
	}
	// Allowed on g: the coordinator answers (an unknown member, not a refusal).
	if hb, _ := e.h.Heartbeat(ctx, &pb.HeartbeatRequest{GroupId: "g", MemberId: "m"}); hb.ErrorCode == pb.ErrorCode_GROUP_AUTHORIZATION_FAILED {
		t.Fatalf("Heartbeat g (allowed): %v", hb)
	}

	// OffsetCommit.
	oc, _ := e.h.OffsetCommit(ctx, &pb.OffsetCommitRequest{GroupId: "h", GenerationId: -1, Offsets: []*pb.PartitionOffset{{Topic: "a", Offset: 2}}})
	if partitionCodes(oc.Partitions)["a"] != pb.ErrorCode_GROUP_AUTHORIZATION_FAILED {
		t.Fatalf("OffsetCommit to h: %v", oc)
	}
	oc, _ = e.h.OffsetCommit(ctx, &pb.OffsetCommitRequest{GroupId: "g", GenerationId: -1, Offsets: []*pb.PartitionOffset{{Topic: "a", Offset: 5}, {Topic: "b", Offset: 5}, {Topic: "nope", Offset: 5}}})
	if c := partitionCodes(oc.Partitions); len(oc.Partitions) != 3 || c["a"] != pb.ErrorCode_NONE || c["b"] != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED || c["nope"] != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
		t.Fatalf("OffsetCommit a, b, nope to g: %v", oc.Partitions)
	}

	// OffsetFetch.
	if of, _ := e.h.OffsetFetch(ctx, &pb.OffsetFetchRequest{GroupId: "h"}); of.ErrorCode != pb.ErrorCode_GROUP_AUTHORIZATION_FAILED || len(of.Partitions) != 0 {
		t.Fatalf("OffsetFetch h: %v", of)
	}
	of, _ := e.h.OffsetFetch(ctx, &pb.OffsetFetchRequest{GroupId: "g"})
	if of.ErrorCode != pb.ErrorCode_NONE || len(of.Partitions) != 1 || of.Partitions[0].Topic != "a" || of.Partitions[0].Offset != 5 {
		t.Fatalf("OffsetFetch g, all: %v; want a at 5 only (b left out)", of)
	}
	of, _ = e.h.OffsetFetch(ctx, &pb.OffsetFetchRequest{GroupId: "g", Partitions: []*pb.TopicPartition{{Topic: "b"}, {Topic: "a"}}})
	if len(of.Partitions) != 2 || of.Partitions[0].Topic != "b" || of.Partitions[0].ErrorCode != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED || of.Partitions[0].Offset != -1 ||
		of.Partitions[1].Topic != "a" || of.Partitions[1].ErrorCode != pb.ErrorCode_NONE || of.Partitions[1].Offset != 5 {
		t.Fatalf("OffsetFetch g, b and a named: %v", of.Partitions)
	}

	// DescribeGroups, ListGroups.
	dg, _ := e.h.DescribeGroups(ctx, &pb.DescribeGroupsRequest{GroupIds: []string{"g", "h"}})
	if len(dg.Groups) != 2 || dg.Groups[0].ErrorCode != pb.ErrorCode_NONE || dg.Groups[1].GroupId != "h" || dg.Groups[1].ErrorCode != pb.ErrorCode_GROUP_AUTHORIZATION_FAILED || dg.Groups[1].State != "" {
		t.Fatalf("DescribeGroups g, h: %v", dg.Groups)
	}
	lg, _ := e.h.ListGroups(ctx, &pb.ListGroupsRequest{})
	if len(lg.Groups) != 1 || lg.Groups[0].GroupId != "g" {
		t.Fatalf("ListGroups without Describe on the cluster: %v, want g only", lg.Groups)
	}
	e.fc.grant(alice, authz.OpDescribe, authz.ResourceCluster, authz.ClusterName)
	if lg, _ = e.h.ListGroups(ctx, &pb.ListGroupsRequest{}); len(lg.Groups) != 2 {
		t.Fatalf("ListGroups with Describe on the cluster: %v, want g and h", lg.Groups)
	}

	// OffsetDelete, DeleteGroups.
	if od, _ := e.h.OffsetDelete(ctx, &pb.OffsetDeleteRequest{GroupId: "g", Partitions: []*pb.TopicPartition{{Topic: "a"}}}); od.ErrorCode != pb.ErrorCode_GROUP_AUTHORIZATION_FAILED {
		t.Fatalf("OffsetDelete g without Delete on it: %v", od)
	}
	e.fc.grant(alice, authz.OpDelete, authz.ResourceGroup, "g")
	od, _ := e.h.OffsetDelete(ctx, &pb.OffsetDeleteRequest{GroupId: "g", Partitions: []*pb.TopicPartition{{Topic: "a"}, {Topic: "b"}}})
	if c := partitionCodes(od.Partitions); od.ErrorCode != pb.ErrorCode_NONE || c["a"] != pb.ErrorCode_NONE || c["b"] != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
		t.Fatalf("OffsetDelete g a, b: %v", od)
	}
	dl, _ := e.h.DeleteGroups(ctx, &pb.DeleteGroupsRequest{GroupIds: []string{"h", "g"}})
	if len(dl.Groups) != 2 || dl.Groups[0].ErrorCode != pb.ErrorCode_GROUP_AUTHORIZATION_FAILED || dl.Groups[1].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("DeleteGroups h, g: %v", dl.Groups)
	}
}
