package request_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"testing"

	"github.com/strand-io/strand/authz"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/request"
)

// TestAuthorizeTopicAdmin: CreateTopics needs Create on the cluster or
// on each topic (a topic refused TOPIC_AUTHORIZATION_FAILED, the others
// created); DeleteTopics Delete, CreatePartitions Alter, DeleteRecords
// Delete, each per topic; DescribeConfigs DescribeConfigs on the topic
// (or the cluster, for a broker); IncrementalAlterConfigs and
// AlterConfigs AlterConfigs on the topic or the cluster.
func TestAuthorizeTopicAdmin(t *testing.T) {
	e := newAuthzEnv(t)
	ctx := as(e.ctx, alice)
	e.fc.grant(alice, authz.OpCreate, authz.ResourceTopic, "c1")
	ct, _ := e.h.CreateTopics(ctx, &pb.CreateTopicsRequest{TimeoutMs: 30000, Topics: []*pb.CreatableTopic{
		{Name: "c1", NumPartitions: 1, ReplicationFactor: 1}, {Name: "c2", NumPartitions: 1, ReplicationFactor: 1}}})
	if len(ct.Topics) != 2 || ct.Topics[0].Name != "c1" || ct.Topics[0].ErrorCode != pb.ErrorCode_NONE ||
		ct.Topics[1].Name != "c2" || ct.Topics[1].ErrorCode != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
		t.Fatalf("CreateTopics c1 (allowed), c2 (refused): %v", ct.Topics)
	}
	md, _ := e.raw.Metadata(e.ctx, &pb.MetadataRequest{Topics: []string{"c2"}})
	if md.Topics[0].ErrorCode != pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION {
		t.Fatalf("c2 was created: %v", md.Topics[0])
	}
	e.fc.grant(alice, authz.OpCreate, authz.ResourceCluster, authz.ClusterName)
	if ct, _ = e.h.CreateTopics(ctx, &pb.CreateTopicsRequest{TimeoutMs: 30000, Topics: []*pb.CreatableTopic{{Name: "c2", NumPartitions: 1, ReplicationFactor: 1}}}); ct.Topics[0].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("CreateTopics c2 with Create on the cluster: %v", ct.Topics)
	}

	e.fc.grant(alice, authz.OpAlter, authz.ResourceTopic, "a")
	cp, _ := e.h.CreatePartitions(ctx, &pb.CreatePartitionsRequest{TimeoutMs: 30000, Topics: []*pb.CreatePartitionsTopic{{Name: "a", Count: 2}, {Name: "b", Count: 2}}})
	if len(cp.Topics) != 2 || cp.Topics[0].ErrorCode != pb.ErrorCode_NONE || cp.Topics[1].ErrorCode != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
		t.Fatalf("CreatePartitions a (allowed), b (refused): %v", cp.Topics)
	}

	e.fc.grant(alice, authz.OpDescribeConfigs, authz.ResourceTopic, "a")
	dc, _ := e.h.DescribeConfigs(ctx, &pb.DescribeConfigsRequest{Resources: []*pb.ConfigResource{{Type: "topic", Name: "a"}, {Type: "topic", Name: "b"}, {Type: "broker", Name: "1"}}})
	if dc.Results[0].ErrorCode != pb.ErrorCode_NONE || len(dc.Results[0].Entries) == 0 ||
		dc.Results[1].ErrorCode != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED || len(dc.Results[1].Entries) != 0 ||
		dc.Results[2].ErrorCode != pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED || len(dc.Results[2].Entries) != 0 {
		t.Fatalf("DescribeConfigs a, b, broker 1: %v", dc.Results)
	}
	alter := func(typ, name string, replace bool) pb.ErrorCode {
		r, _ := e.h.IncrementalAlterConfigs(ctx, &pb.IncrementalAlterConfigsRequest{Resource: &pb.ConfigResource{Type: typ, Name: name},
			Set: map[string]string{"retention.ms": "100000"}, Replace: replace})
		return r.ErrorCode
	}
	if c := alter("topic", "a", false); c != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
		t.Fatalf("IncrementalAlterConfigs a without AlterConfigs: %v", c)
	}
	if c := alter("topic", "a", true); c != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
		t.Fatalf("AlterConfigs a without AlterConfigs: %v", c)
	}
	if c := alter("broker", "", false); c != pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED {
		t.Fatalf("IncrementalAlterConfigs of the brokers without AlterConfigs on the cluster: %v", c)
	}
	e.fc.grant(alice, authz.OpAlterConfigs, authz.ResourceTopic, "a")
	if c := alter("topic", "a", false); c != pb.ErrorCode_NONE {
		t.Fatalf("IncrementalAlterConfigs a with AlterConfigs: %v", c)
	}

	e.fc.grant(alice, authz.OpDelete, authz.ResourceTopic, "a")
	dr, _ := e.h.DeleteRecords(ctx, &pb.DeleteRecordsRequest{TimeoutMs: 5000, Partitions: []*pb.DeleteRecordsPartition{{Topic: "a", Offset: 0}, {Topic: "b", Offset: 0}}})
	if dr.Partitions[0].ErrorCode == pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED || dr.Partitions[1].ErrorCode != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
		t.Fatalf("DeleteRecords a (allowed), b (refused): %v", dr.Partitions)
	}
	dt, _ := e.h.DeleteTopics(ctx, &pb.DeleteTopicsRequest{Names: []string{"b", "a"}})
	if len(dt.Topics) != 2 || dt.Topics[0].Name != "b" || dt.Topics[0].ErrorCode != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED ||
		dt.Topics[1].Name != "a" || dt.Topics[1].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("DeleteTopics b (refused), a (allowed): %v", dt.Topics)
	}
	md, _ = e.raw.Metadata(e.ctx, &pb.MetadataRequest{Topics: []string{"a", "b"}})
	if md.Topics[0].ErrorCode != pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION || md.Topics[1].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("after DeleteTopics: a %v, b %v; want a gone, b kept", md.Topics[0].ErrorCode, md.Topics[1].ErrorCode)
	}
}

// TestAuthorizeClusterAdmin: the cluster-wide requests, refused in the
// request's own error with CLUSTER_AUTHORIZATION_FAILED: ElectLeaders,
// AlterPartitionReassignments, AddVoter, RemoveVoter and UnregisterBroker
// need Alter, ListPartitionReassignments and DescribeQuorum Describe;
// DescribeCluster answers its brokers to anyone (as Kafka's) and the
// controller quorum only with Describe on the cluster; the helpers the
// ACL, SCRAM and quota handlers call ask what Kafka asks.
func TestAuthorizeClusterAdmin(t *testing.T) {
	e := newAuthzEnv(t)
	ctx := as(e.ctx, alice)
	type call struct {
		name string
		op   authz.Operation
		do   func(context.Context) pb.ErrorCode
	}
	calls := []call{
		{"ElectLeaders", authz.OpAlter, func(ctx context.Context) pb.ErrorCode {
			r, _ := e.h.ElectLeaders(ctx, &pb.ElectLeadersRequest{Topics: []*pb.ElectLeadersTopic{{Topic: "a", Partitions: []int32{0}}}, TimeoutMs: 1000})
			if r.ErrorCode == pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED && (len(r.Results) != 1 || r.Results[0].ErrorCode != pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED) {
				t.Errorf("ElectLeaders refused with partition results %v", r.Results)
			}
			return r.ErrorCode
		}},
		{"AlterPartitionReassignments", authz.OpAlter, func(ctx context.Context) pb.ErrorCode {
			r, _ := e.h.AlterPartitionReassignments(ctx, &pb.AlterPartitionReassignmentsRequest{TimeoutMs: 1000})
			return r.ErrorCode
		}},
		{"ListPartitionReassignments", authz.OpDescribe, func(ctx context.Context) pb.ErrorCode {
			r, _ := e.h.ListPartitionReassignments(ctx, &pb.ListPartitionReassignmentsRequest{TimeoutMs: 1000})
			return r.ErrorCode
		}},
		{"DescribeQuorum", authz.OpDescribe, func(ctx context.Context) pb.ErrorCode {
			r, _ := e.h.DescribeQuorum(ctx, &pb.QuorumStatusRequest{})
			return r.ErrorCode
		}},
		{"AddRaftVoter", authz.OpAlter, func(ctx context.Context) pb.ErrorCode {
			r, _ := e.h.AddVoter(ctx, &pb.AddVoterRequest{NodeId: 99, Address: "127.0.0.1:1"})
			return r.ErrorCode
		}},
		{"RemoveRaftVoter", authz.OpAlter, func(ctx context.Context) pb.ErrorCode {
			r, _ := e.h.RemoveVoter(ctx, &pb.RemoveVoterRequest{NodeId: 99})
			return r.ErrorCode
		}},
		{"UnregisterBroker", authz.OpAlter, func(ctx context.Context) pb.ErrorCode {
			r, _ := e.h.UnregisterBroker(ctx, &pb.UnregisterBrokerRequest{BrokerId: 99})
			return r.ErrorCode
		}},
		{"CreateAcls", authz.OpAlter, func(ctx context.Context) pb.ErrorCode {
			return request.CodeOf(request.AuthorizeACLAdminForTest(e.h, ctx, "CreateAcls"))
		}},
		{"DeleteAcls", authz.OpAlter, func(ctx context.Context) pb.ErrorCode {
			return request.CodeOf(request.AuthorizeACLAdminForTest(e.h, ctx, "DeleteAcls"))
		}},
		{"DescribeAcls", authz.OpDescribe, func(ctx context.Context) pb.ErrorCode {
			return request.CodeOf(request.AuthorizeACLAdminForTest(e.h, ctx, "DescribeAcls"))
		}},
		// The SCRAM handlers themselves (the check once existed without
		// a handler calling it).
		{"AlterUserScramCredentials", authz.OpAlter, func(ctx context.Context) pb.ErrorCode {
			r, _ := e.h.AlterUserScramCredentials(ctx, &pb.AlterUserScramCredentialsRequest{Upsertions: []*pb.ScramCredentialUpsertion{
				{Name: "eve", Mechanism: 1, Iterations: 4096, Salt: []byte("salt"), SaltedPassword: make([]byte, 32)}}})
			if len(r.Results) != 1 {
				t.Errorf("AlterUserScramCredentials results %v", r.Results)
				return pb.ErrorCode_NONE
			}
			return r.Results[0].ErrorCode
		}},
		{"DescribeUserScramCredentials", authz.OpDescribe, func(ctx context.Context) pb.ErrorCode {
			r, _ := e.h.DescribeUserScramCredentials(ctx, &pb.DescribeUserScramCredentialsRequest{})
			return r.ErrorCode
		}},
		{"AlterClientQuotas", authz.OpAlterConfigs, func(ctx context.Context) pb.ErrorCode {
			return request.CodeOf(request.AuthorizeClientQuotasForTest(e.h, ctx, "AlterClientQuotas"))
		}},
		{"DescribeClientQuotas", authz.OpDescribeConfigs, func(ctx context.Context) pb.ErrorCode {
			return request.CodeOf(request.AuthorizeClientQuotasForTest(e.h, ctx, "DescribeClientQuotas"))
		}},
	}
	for _, c := range calls {
		if got := c.do(ctx); got != pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED {
			t.Errorf("%s without %s on the cluster: %v, want CLUSTER_AUTHORIZATION_FAILED", c.name, c.op, got)
		}
		if !e.fc.denied(c.name, c.op, authz.ResourceCluster, authz.ClusterName) {
			t.Errorf("%s: no denial of %s on the cluster reported", c.name, c.op)
		}
	}
	for _, c := range calls {
		e.fc.grant(bob, c.op, authz.ResourceCluster, authz.ClusterName)
		if got := c.do(as(e.ctx, bob)); got == pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED {
			t.Errorf("%s with %s on the cluster: refused", c.name, c.op)
		}
	}

	dc, _ := e.h.DescribeCluster(ctx, &pb.DescribeClusterRequest{})
	if len(dc.Brokers) != 1 || len(dc.Controllers) != 0 {
		t.Fatalf("DescribeCluster without Describe on the cluster: brokers %v, controllers %v; want the broker, no controllers", dc.Brokers, dc.Controllers)
	}
	if dc, _ = e.h.DescribeCluster(as(e.ctx, bob), &pb.DescribeClusterRequest{}); len(dc.Controllers) != 1 {
		t.Fatalf("DescribeCluster with Describe on the cluster: controllers %v", dc.Controllers)
	}
}
