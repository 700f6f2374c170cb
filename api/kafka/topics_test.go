package kafka_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/testkit/testcluster"
)

func createTopicsTopic(name string, parts int32, rf int16, assign ...[]int32) kmsg.CreateTopicsRequestTopic {
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, parts, rf
	for i, a := range assign {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = int32(i), a
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	return rt
}

func msgOf(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// CreateTopics and DeleteTopics on the Kafka door as Kafka 4 answers them:
// a topic named twice is INVALID_REQUEST "Duplicate topic name." at every
// occurrence and nothing is done for it (by id: "Duplicate topic id.",
// and a name with an id refused); a topic with replicas chosen by the
// client is created as they say, and a bad assignment refused with Kafka's
// codes.
func TestKafkaTopicsNamedTwiceAndPlacedByHand(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	req.Topics = []kmsg.CreateTopicsRequestTopic{
		createTopicsTopic("twin", 1, 1), createTopicsTopic("placed", -1, -1, []int32{1}, []int32{1}), createTopicsTopic("twin", 2, 1),
		createTopicsTopic("rf-too", -1, 1, []int32{1}), createTopicsTopic("nobody", -1, -1, []int32{7}),
		createTopicsTopic("uneven", -1, -1, []int32{1}, []int32{}),
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		code  int16
		msg   string
		parts int32
	}{
		{kerr.InvalidRequest.Code, "Duplicate topic name.", -1}, {0, "", 2}, {kerr.InvalidRequest.Code, "Duplicate topic name.", -1},
		{kerr.InvalidRequest.Code, "", -1}, {kerr.InvalidReplicaAssignment.Code, "", -1}, {kerr.InvalidReplicaAssignment.Code, "", -1},
	}
	if len(resp.Topics) != len(want) {
		t.Fatalf("%d answers to %d topics: %+v", len(resp.Topics), len(want), resp.Topics)
	}
	for i, w := range want {
		rt := resp.Topics[i]
		if rt.Topic != req.Topics[i].Topic || rt.ErrorCode != w.code || (w.msg != "" && msgOf(rt.ErrorMessage) != w.msg) || rt.NumPartitions != w.parts {
			t.Errorf("answer %d: %s %d %q (%d partitions), want %s %d %q (%d)", i, rt.Topic, rt.ErrorCode, msgOf(rt.ErrorMessage), rt.NumPartitions, req.Topics[i].Topic, w.code, w.msg, w.parts)
		}
	}
	img := c.Image()
	if img.Topic("twin") != nil {
		t.Error("a topic named twice was created")
	}
	if top := img.Topic("placed"); top == nil || len(top.Partitions) != 2 || top.Partitions[1].Leader != 1 {
		t.Errorf("placed: %+v", top)
	}

	// DeleteTopics by name and by id.
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TimeoutMillis = 10000
	for range 2 {
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = kmsg.StringPtr("placed")
		del.Topics = append(del.Topics, dt)
	}
	dresp, err := del.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range dresp.Topics {
		if rt.ErrorCode != kerr.InvalidRequest.Code || msgOf(rt.ErrorMessage) != "Duplicate topic name." {
			t.Errorf("DeleteTopics naming placed twice: %s %d %q", msgOf(rt.Topic), rt.ErrorCode, msgOf(rt.ErrorMessage))
		}
	}
	if len(dresp.Topics) != 2 || c.Image().Topic("placed") == nil {
		t.Fatalf("DeleteTopics naming placed twice: %d answers, topic there: %v", len(dresp.Topics), c.Image().Topic("placed") != nil)
	}
	id := resp.Topics[1].TopicID
	del = kmsg.NewPtrDeleteTopicsRequest()
	del.TimeoutMillis = 10000
	for _, tt := range []struct {
		name *string
		id   [16]byte
	}{{nil, id}, {nil, id}, {kmsg.StringPtr("placed"), id}} {
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic, dt.TopicID = tt.name, tt.id
		del.Topics = append(del.Topics, dt)
	}
	dresp, err = del.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	wantMsg := []string{"Duplicate topic id.", "Duplicate topic id.", "You may not specify both topic name and topic id."}
	for i, rt := range dresp.Topics {
		if rt.ErrorCode != kerr.InvalidRequest.Code || msgOf(rt.ErrorMessage) != wantMsg[i] {
			t.Errorf("DeleteTopics by id, answer %d: %s %d %q, want INVALID_REQUEST %q", i, msgOf(rt.Topic), rt.ErrorCode, msgOf(rt.ErrorMessage), wantMsg[i])
		}
	}
	if c.Image().Topic("placed") == nil {
		t.Fatal("placed was deleted")
	}
}
