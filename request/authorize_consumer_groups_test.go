package request_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"testing"
	"time"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/request"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// TestAuthorizeConsumerGroups: ConsumerGroupHeartbeat needs Read on the
// group and Describe on every topic it names; a regular expression
// resolves only to the topics the principal may describe.
// ConsumerGroupDescribe needs Describe on each group, and on the topics
// its members subscribe to or hold; it tells the group operations the
// principal may do when asked.
func TestAuthorizeConsumerGroups(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) { cfg.GroupConfig.ConsumerProtocol = true })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	raw := n.Handler()
	h := raw.ForListener(request.ListenerClient)
	fc := newFake()
	h.Authorizer = fc
	ct, err := raw.CreateTopics(ctx, &pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{{Name: "a", NumPartitions: 1, ReplicationFactor: 1}, {Name: "b", NumPartitions: 1, ReplicationFactor: 1}}, TimeoutMs: 30000})
	if err != nil || ct.Topics[0].ErrorCode != pb.ErrorCode_NONE || ct.Topics[1].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("CreateTopics: %v %v", ct, err)
	}
	fc.grant(alice, authz.OpRead, authz.ResourceGroup, "g").grant(alice, authz.OpDescribe, authz.ResourceGroup, "g").
		grant(alice, authz.OpDescribe, authz.ResourceTopic, "a").
		grant(bob, authz.OpRead, authz.ResourceGroup, "g").grant(bob, authz.OpDescribe, authz.ResourceTopic, "b")
	join := func(who, group, member string, names []string, regex *string) *pb.ConsumerGroupHeartbeatResponse {
		req := &pb.ConsumerGroupHeartbeatRequest{GroupId: group, MemberId: member, RebalanceTimeoutMs: 30000, SubscribedTopicRegex: regex,
			TopicPartitions: &pb.OwnedPartitions{}, Version: 1}
		if names != nil {
			req.SubscribedTopicNames = &pb.TopicNames{Names: names}
		}
		r, err := h.ConsumerGroupHeartbeat(as(ctx, who), req)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var r *pb.ConsumerGroupHeartbeatResponse
	wait.Eventually(t, 30*time.Second, "the group coordinator", func() bool {
		if fc, err := raw.FindCoordinator(ctx, &pb.FindCoordinatorRequest{KeyType: pb.CoordinatorType_GROUP, Keys: []string{"g"}}); err != nil || fc.Coordinators[0].ErrorCode != pb.ErrorCode_NONE {
			return false
		}
		r = join(alice, "g", "m1", nil, strp(".*"))
		return r.ErrorCode != pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS && r.ErrorCode != pb.ErrorCode_NOT_COORDINATOR && r.ErrorCode != pb.ErrorCode_COORDINATOR_NOT_AVAILABLE
	})
	if r.ErrorCode != pb.ErrorCode_NONE || r.Assignment == nil || len(r.Assignment.Topics) != 1 || r.Assignment.Topics[0].TopicId != n.Repl.Image().Topics["a"].ID {
		t.Fatalf("alice's regex .* resolved to %v (%v), want topic a only", r.Assignment, r.ErrorCode)
	}
	if r := join(alice, "h", "m2", []string{"a"}, nil); r.ErrorCode != pb.ErrorCode_GROUP_AUTHORIZATION_FAILED {
		t.Fatalf("heartbeat to h without Read: %v", r)
	}
	if r := join(alice, "g", "m3", []string{"a", "b"}, nil); r.ErrorCode != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
		t.Fatalf("subscribing to b without Describe on it: %v", r)
	}

	describe := func(who string, ops bool, groups ...string) *pb.ConsumerGroupDescribeResponse {
		d, err := h.ConsumerGroupDescribe(as(ctx, who), &pb.ConsumerGroupDescribeRequest{GroupIds: groups, IncludeAuthorizedOperations: ops})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	d := describe(alice, true, "g", "h")
	if d.Groups[0].ErrorCode != pb.ErrorCode_NONE || d.Groups[1].ErrorCode != pb.ErrorCode_GROUP_AUTHORIZATION_FAILED {
		t.Fatalf("describe g, h: %v", d)
	}
	if want := int32(1<<authz.OpRead | 1<<authz.OpDescribe); d.Groups[0].AuthorizedOperations != want {
		t.Fatalf("authorized operations %b, want %b (Read, Describe)", d.Groups[0].AuthorizedOperations, want)
	}
	if d := describe(alice, false, "g"); d.Groups[0].AuthorizedOperations != -2147483648 {
		t.Fatalf("authorized operations not asked for: %d", d.Groups[0].AuthorizedOperations)
	}
	// bob's member subscribes to b, which alice may not describe.
	if r := join(bob, "g", "m4", []string{"b"}, nil); r.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("bob joins: %v", r)
	}
	if d := describe(alice, false, "g"); d.Groups[0].ErrorCode != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED || len(d.Groups[0].Members) != 0 {
		t.Fatalf("alice describes a group with a member on b: %v", d.Groups[0])
	}
}

func strp(s string) *string { return &s }
