package kafka_test

// Real node on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/kafkareq"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// TestKafkaOffsetFetchAuthorizedAtEveryVersion: OffsetFetch as Kafka's
// KafkaApis answers it at each version 1–9. Without Describe on the group:
// GROUP_AUTHORIZATION_FAILED whatever the request names, an empty topic
// list included (before v2 on each partition asked, from v2 the group's
// error). With Describe on the group but not on topic b: a partition of b
// asked is TOPIC_AUTHORIZATION_FAILED, one of a is answered, and asked
// for all (v2+), b is left out.
func TestKafkaOffsetFetchAuthorizedAtEveryVersion(t *testing.T) {
	g := &grantTable{allow: map[authz.Action]bool{}}
	sess := auth.Session{Principal: auth.User("mallory"), Host: "127.0.0.1", Listener: auth.ListenerKafka}
	kafkaAddr := testutil.FreeAddr(t)
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) {
		cfg.KafkaListen = kafkaAddr
		cfg.TestAuthorizer = g
		cfg.TestSession = &sess
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := n.Handler()
	if ct, err := h.CreateTopics(ctx, &pb.CreateTopicsRequest{TimeoutMs: 30000, Topics: []*pb.CreatableTopic{
		{Name: "a", NumPartitions: 1, ReplicationFactor: 1}, {Name: "b", NumPartitions: 1, ReplicationFactor: 1}}}); err != nil || ct.Topics[0].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("CreateTopics: %v %v", ct, err)
	}
	wait.Eventually(t, 30*time.Second, "offsets of a and b committed for group g", func() bool {
		// FindCoordinator makes the group's coordinator (its internal topic).
		if fc, err := h.FindCoordinator(ctx, &pb.FindCoordinatorRequest{KeyType: pb.CoordinatorType_GROUP, Keys: []string{"g"}}); err != nil || fc.Coordinators[0].ErrorCode != pb.ErrorCode_NONE {
			return false
		}
		oc, err := h.OffsetCommit(ctx, &pb.OffsetCommitRequest{GroupId: "g", GenerationId: -1, Offsets: []*pb.PartitionOffset{{Topic: "a", Offset: 3}, {Topic: "b", Offset: 4}}})
		return err == nil && oc.Partitions[0].ErrorCode == pb.ErrorCode_NONE && oc.Partitions[1].ErrorCode == pb.ErrorCode_NONE
	})
	conn, err := net.Dial("tcp", kafkaAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	corr := int32(0)
	// ask sends OffsetFetch at version v for group g naming topics
	// (nil: all, from v2) and returns the answer.
	ask := func(v int16, topics []string) *kmsg.OffsetFetchResponse {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.SetVersion(v)
		if v >= 8 {
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = "g"
			if topics != nil {
				rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
			}
			for _, tp := range topics {
				rt := kmsg.NewOffsetFetchRequestGroupTopic()
				rt.Topic, rt.Partitions = tp, []int32{0}
				rg.Topics = append(rg.Topics, rt)
			}
			req.Groups = append(req.Groups, rg)
		} else {
			req.Group = "g"
			if topics != nil {
				req.Topics = []kmsg.OffsetFetchRequestTopic{}
			}
			for _, tp := range topics {
				rt := kmsg.NewOffsetFetchRequestTopic()
				rt.Topic, rt.Partitions = tp, []int32{0}
				req.Topics = append(req.Topics, rt)
			}
		}
		corr++
		_, body, err := roundTrip(t, conn, encode(req, corr))
		if err != nil {
			t.Fatal(err)
		}
		resp := kmsg.NewPtrOffsetFetchResponse()
		resp.SetVersion(v)
		if resp.IsFlexible() {
			body = body[1:]
		}
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		return resp
	}
	// answer flattens a response: the group's error and each partition's.
	answer := func(v int16, r *kmsg.OffsetFetchResponse) (int16, map[string]int16) {
		parts := map[string]int16{}
		if v >= 8 {
			if len(r.Groups) != 1 {
				t.Fatalf("v%d: %d groups answered", v, len(r.Groups))
			}
			for _, tp := range r.Groups[0].Topics {
				for _, p := range tp.Partitions {
					parts[tp.Topic] = p.ErrorCode
				}
			}
			return r.Groups[0].ErrorCode, parts
		}
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				parts[tp.Topic] = p.ErrorCode
			}
		}
		return r.ErrorCode, parts
	}
	const groupDenied, topicDenied = kafkareq.GroupDenied, kafkareq.TopicDenied

	// No grant at all.
	for v := int16(1); v <= 9; v++ {
		for _, topics := range [][]string{{"a"}, {}, nil} {
			if topics == nil && v < 2 {
				continue // no "all" before v2
			}
			code, parts := answer(v, ask(v, topics))
			what := fmt.Sprintf("v%d naming %v", v, topics)
			switch {
			case v < 2 && len(topics) > 0:
				if parts["a"] != groupDenied {
					t.Errorf("%s: partitions %v, want %d on a", what, parts, groupDenied)
				}
			case v >= 2:
				if code != groupDenied || len(parts) != 0 {
					t.Errorf("%s: group code %d, partitions %v; want %d and nothing answered", what, code, parts, groupDenied)
				}
			}
		}
	}

	// Describe on the group and on topic a, not on b.
	g.mu.Lock()
	g.allow[authz.Action{Op: authz.OpDescribe, Type: authz.ResourceGroup, Name: "g"}] = true
	g.allow[authz.Action{Op: authz.OpDescribe, Type: authz.ResourceTopic, Name: "a"}] = true
	g.mu.Unlock()
	for v := int16(1); v <= 9; v++ {
		r := ask(v, []string{"a", "b"})
		code, parts := answer(v, r)
		if code != 0 || parts["a"] != 0 || parts["b"] != topicDenied {
			t.Errorf("v%d naming a and b: group code %d, partitions %v; want a answered, b %d", v, code, parts, topicDenied)
		}
		if v < 2 {
			continue
		}
		code, parts = answer(v, ask(v, nil))
		if keys := slices.Sorted(func(yield func(string) bool) {
			for k := range parts {
				if !yield(k) {
					return
				}
			}
		}); code != 0 || !slices.Equal(keys, []string{"a"}) {
			t.Errorf("v%d, all: group code %d, partitions %v; want a only", v, code, parts)
		}
	}
}
