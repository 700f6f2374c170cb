package kafka_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/wait"
)

func ptr(s string) *string { return &s }

// everyBroker reports whether ok holds for req's answer from each of the
// cluster's brokers (asked one by one: a client would otherwise pick any).
func everyBroker(ctx context.Context, c *testcluster.Cluster, cl *kgo.Client, req kmsg.Request, ok func(kmsg.Response) bool) bool {
	for _, m := range c.Members() {
		resp, err := cl.Broker(int(m.ID)).Request(ctx, req)
		if err != nil || !ok(resp) {
			return false
		}
	}
	return true
}

// partitionsEverywhere waits until every broker's metadata has topic with
// n partitions (n = 0: has no such topic).
func partitionsEverywhere(ctx context.Context, t *testing.T, c *testcluster.Cluster, cl *kgo.Client, topic string, n int) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = ptr(topic)
	req.Topics = append(req.Topics, rt)
	wait.Eventually(t, 10*time.Second, fmt.Sprintf("every broker to see %s with %d partitions", topic, n), func() bool {
		return everyBroker(ctx, c, cl, req, func(r kmsg.Response) bool {
			ts := r.(*kmsg.MetadataResponse).Topics
			if n == 0 {
				return len(ts) == 1 && ts[0].ErrorCode == kerr.UnknownTopicOrPartition.Code
			}
			return len(ts) == 1 && ts[0].ErrorCode == 0 && len(ts[0].Partitions) == n
		})
	})
}

// configEverywhere waits until every broker describes topic's key as want.
func configEverywhere(ctx context.Context, t *testing.T, c *testcluster.Cluster, cl *kgo.Client, topic, key, want string) {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, []string{key}
	req.Resources = append(req.Resources, rr)
	wait.Eventually(t, 10*time.Second, fmt.Sprintf("every broker to describe %s's %s as %s", topic, key, want), func() bool {
		return everyBroker(ctx, c, cl, req, func(r kmsg.Response) bool {
			res := r.(*kmsg.DescribeConfigsResponse).Resources
			return len(res) == 1 && res[0].ErrorCode == 0 && len(res[0].Configs) == 1 && res[0].Configs[0].Value != nil && *res[0].Configs[0].Value == want
		})
	})
}

// configValue is a topic config as DescribeTopicConfigs reads it.
func configValue(ctx context.Context, t *testing.T, adm *kadm.Client, topic, key string) (string, kmsg.ConfigSource) {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe configs of %s: %v %v", topic, err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == key {
			if c.Value == nil {
				return "<nil>", c.Source
			}
			return *c.Value, c.Source
		}
	}
	t.Fatalf("describe configs of %s lists no %s", topic, key)
	return "", 0
}

// TestKafkaTopicAdmin: kadm creates a topic with a config, describes and
// alters its configs (incrementally, validate-only, and whole), adds partitions (records then go to the new ones),
// and deletes it; what does not exist answers
// UNKNOWN_TOPIC_OR_PARTITION and a second create TOPIC_ALREADY_EXISTS, as
// Kafka answers them.
func TestKafkaTopicAdmin(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	cr, err := adm.CreateTopic(ctx, 2, 3, map[string]*string{"retention.ms": ptr("3600000")}, "ledger")
	if err != nil {
		t.Fatal(err)
	}
	if cr.NumPartitions != 2 || cr.ReplicationFactor != 3 || cr.ID == (kadm.TopicID{}) {
		t.Fatalf("created %+v: want 2 partitions, replication factor 3 and a topic id", cr)
	}
	if _, err := adm.CreateTopic(ctx, 2, 3, nil, "ledger"); !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("second CreateTopic: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 9, nil, "toowide"); !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("CreateTopic with replication factor 9 on 3 brokers: %v, want INVALID_REPLICATION_FACTOR", err)
	}

	// Every broker knows the topic once it has applied the controller's
	// records (the one that answered the create waited for them).
	partitionsEverywhere(ctx, t, c, cl, "ledger", 2)
	if v, src := configValue(ctx, t, adm, "ledger", "retention.ms"); v != "3600000" || src != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("retention.ms = %s (source %v), want 3600000 set on the topic", v, src)
	}
	if _, src := configValue(ctx, t, adm, "ledger", "segment.bytes"); src != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("segment.bytes source %v, want the default", src)
	}
	ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: ptr("7200000")}}, "ledger")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := ar.On("ledger", nil); err != nil || r.Err != nil {
		t.Fatalf("alter retention.ms: %v %v", err, r.Err)
	}
	// Each broker shows it once it applied the controller's record.
	configEverywhere(ctx, t, c, cl, "ledger", "retention.ms", "7200000")
	vr, err := adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: ptr("1")}}, "ledger")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := vr.On("ledger", nil); err != nil || r.Err != nil {
		t.Fatalf("validate-only alter: %v %v", err, r.Err)
	}
	// A later alter, once visible, orders after whatever the
	// validate-only one could have changed.
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.ms", Value: ptr("600000")}}, "ledger"); err != nil {
		t.Fatal(err)
	}
	configEverywhere(ctx, t, c, cl, "ledger", "segment.ms", "600000")
	if v, _ := configValue(ctx, t, adm, "ledger", "retention.ms"); v != "7200000" {
		t.Fatalf("a validate-only alter changed retention.ms to %s", v)
	}

	// AlterConfigs (not incremental) replaces the topic's whole config:
	// segment.ms, not given, goes back to its default.
	ar, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: ptr("1800000")}}, "ledger")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := ar.On("ledger", nil); err != nil || r.Err != nil {
		t.Fatalf("AlterConfigs: %v %v", err, r.Err)
	}
	configEverywhere(ctx, t, c, cl, "ledger", "retention.ms", "1800000")
	if v, src := configValue(ctx, t, adm, "ledger", "segment.ms"); src != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("segment.ms = %s (source %v) after an AlterConfigs without it, want the default", v, src)
	}
	ar, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: ptr("1")}}, "nosuch")
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := ar.On("nosuch", nil); !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("alter configs of a topic that does not exist: %v, want UNKNOWN_TOPIC_OR_PARTITION", r.Err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "nosuch")
	if err != nil {
		t.Fatal(err)
	}
	if rc, _ := rcs.On("nosuch", nil); !errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("describe configs of a topic that does not exist: %v, want UNKNOWN_TOPIC_OR_PARTITION", rc.Err)
	}

	pr, err := adm.CreatePartitions(ctx, 2, "ledger")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := pr.On("ledger", nil); err != nil || r.Err != nil {
		t.Fatalf("create partitions: %v %v", err, r.Err)
	}
	partitionsEverywhere(ctx, t, c, cl, "ledger", 4)
	for p := int32(2); p < 4; p++ {
		// The producer learns of the new partitions with its next metadata.
		wait.EventuallyNil(t, 10*time.Second, fmt.Sprintf("a record produced to new partition %d", p), func() error {
			cl.ForceMetadataRefresh()
			return cl.ProduceSync(ctx, &kgo.Record{Topic: "ledger", Partition: p, Value: []byte(fmt.Sprint(p))}).FirstErr()
		})
	}
	// Placement by hand: the replicas named, checked as Kafka checks them.
	for _, tc := range []struct {
		assign   [][]int32
		validate bool
		want     error
	}{
		{[][]int32{{1, 2}}, false, kerr.InvalidReplicaAssignment},               // two replicas, the topic has three
		{[][]int32{{1, 1, 2}}, false, kerr.InvalidReplicaAssignment},            // a broker twice
		{[][]int32{{1, 2, 9}}, false, kerr.InvalidReplicaAssignment},            // no broker 9
		{[][]int32{{1, 2, 3}, {2, 3, 1}}, false, kerr.InvalidReplicaAssignment}, // two lists for one new partition
		{[][]int32{{3, 1, 2}}, true, nil},                                       // validate only: nothing changes
		{[][]int32{{3, 1, 2}}, false, nil},
	} {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.TimeoutMillis, req.ValidateOnly = 10000, tc.validate
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = "ledger", 5
		for _, a := range tc.assign {
			ra := kmsg.NewCreatePartitionsRequestTopicAssignment()
			ra.Replicas = a
			rt.Assignment = append(rt.Assignment, ra)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if got := kerr.ErrorForCode(resp.Topics[0].ErrorCode); !errors.Is(got, tc.want) && got != tc.want {
			t.Fatalf("CreatePartitions to 5 with assignment %v (validate only %v): %v, want %v", tc.assign, tc.validate, got, tc.want)
		}
		if tc.validate {
			partitionsEverywhere(ctx, t, c, cl, "ledger", 4)
		}
	}
	partitionsEverywhere(ctx, t, c, cl, "ledger", 5)
	md, err := adm.ListTopics(ctx, "ledger")
	if err != nil {
		t.Fatal(err)
	}
	if reps := md["ledger"].Partitions[4].Replicas; fmt.Sprint(reps) != "[3 1 2]" {
		t.Fatalf("partition 4's replicas %v, want [3 1 2] as assigned", reps)
	}

	pr, err = adm.UpdatePartitions(ctx, 3, "ledger")
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := pr.On("ledger", nil); !errors.Is(r.Err, kerr.InvalidPartitions) {
		t.Fatalf("shrinking ledger to 3 partitions: %v, want INVALID_PARTITIONS", r.Err)
	}

	dr, err := adm.DeleteTopics(ctx, "ledger", "nosuch")
	if err != nil {
		t.Fatal(err)
	}
	if r := dr["ledger"]; r.Err != nil {
		t.Fatalf("delete ledger: %v", r.Err)
	}
	if r := dr["nosuch"]; !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete of a topic that does not exist: %v, want UNKNOWN_TOPIC_OR_PARTITION", r.Err)
	}
	partitionsEverywhere(ctx, t, c, cl, "ledger", 0)
	// DeleteTopics v6 names topics by id too.
	byID, err := adm.CreateTopic(ctx, 1, 3, nil, "byid")
	if err != nil {
		t.Fatal(err)
	}
	partitionsEverywhere(ctx, t, c, cl, "byid", 1)
	dreq := kmsg.NewPtrDeleteTopicsRequest()
	dreq.TimeoutMillis = 10000
	for _, id := range [][16]byte{byID.ID, {1, 2, 3}} {
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.TopicID = id
		dreq.Topics = append(dreq.Topics, dt)
	}
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(dresp.Topics) != 2 || dresp.Topics[0].ErrorCode != 0 || dresp.Topics[0].Topic == nil || *dresp.Topics[0].Topic != "byid" {
		t.Fatalf("DeleteTopics by id: %+v, want byid deleted", dresp.Topics)
	}
	if err := kerr.ErrorForCode(dresp.Topics[1].ErrorCode); !errors.Is(err, kerr.UnknownTopicID) {
		t.Fatalf("DeleteTopics of an id no topic has: %v, want UNKNOWN_TOPIC_ID", err)
	}
	partitionsEverywhere(ctx, t, c, cl, "byid", 0)

	pr, err = adm.UpdatePartitions(ctx, 5, "ledger")
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := pr.On("ledger", nil); !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("adding partitions to a deleted topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", r.Err)
	}
}

// TestKafkaDescribeCluster: DescribeCluster lists every broker at its
// Kafka listener, and a controller id among them; a request for
// controllers is MISMATCHED_ENDPOINT_TYPE, as a Kafka broker answers it.
func TestKafkaDescribeCluster(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	// Only live brokers are listed, and the answering broker's metadata
	// may not show all three unfenced the moment the cluster is ready.
	var resp *kmsg.DescribeClusterResponse
	c.Eventually(20*time.Second, "DescribeCluster listing three live brokers", func() bool {
		r, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
		resp = r
		return err == nil && len(r.Brokers) == 3
	})
	if resp.ErrorCode != 0 || resp.ClusterID == "" || len(resp.Brokers) != 3 {
		t.Fatalf("DescribeCluster: error %d, cluster id %q, %d brokers; want 0, an id, 3", resp.ErrorCode, resp.ClusterID, len(resp.Brokers))
	}
	want := map[string]bool{}
	for _, a := range c.KafkaAddrs() {
		want[a] = true
	}
	ctl := false
	for _, b := range resp.Brokers {
		if !want[fmt.Sprintf("%s:%d", b.Host, b.Port)] {
			t.Fatalf("broker %d at %s:%d, not a Kafka listener (%v)", b.NodeID, b.Host, b.Port, c.KafkaAddrs())
		}
		ctl = ctl || b.NodeID == resp.ControllerID
	}
	if !ctl {
		t.Fatalf("controller id %d is none of the brokers", resp.ControllerID)
	}

	req := kmsg.NewPtrDescribeClusterRequest()
	req.EndpointType = 2
	resp, err = req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(kerr.ErrorForCode(resp.ErrorCode), kerr.MismatchedEndpointType) {
		t.Fatalf("DescribeCluster for controllers: error %d, want MISMATCHED_ENDPOINT_TYPE", resp.ErrorCode)
	}
}
