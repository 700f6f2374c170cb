package kafka_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/wait"
)

// consumerCluster is a three-node cluster serving the consumer rebalance
// protocol (KIP-848) with short heartbeats and sessions.
func consumerCluster(t *testing.T) *testcluster.Cluster {
	return testcluster.New(t, testcluster.Options{Mutate: func(_ int32, cfg *node.Config) {
		cfg.GroupConfig.InitialRebalanceDelay = 100 * time.Millisecond
		cfg.GroupConfig.ConsumerProtocol = true
		cfg.GroupConfig.ConsumerHeartbeatInterval = 300 * time.Millisecond
		cfg.GroupConfig.ConsumerSessionTimeout = 6 * time.Second
	}})
}

// consumer848 is a franz-go consumer of the consumer protocol (it opts in
// with ServerSideBalancer; the balancer names the server's assignor).
func consumer848(t *testing.T, addrs []string, group, topic string, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(addrs...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ServerSideBalancer()}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// describe848 is the ConsumerGroupDescribe of one group.
func describe848(ctx context.Context, cl *kgo.Client, group string) (kmsg.ConsumerGroupDescribeResponseGroup, error) {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return kmsg.ConsumerGroupDescribeResponseGroup{}, err
	}
	if len(resp.Groups) != 1 {
		return kmsg.ConsumerGroupDescribeResponseGroup{}, fmt.Errorf("%d groups described", len(resp.Groups))
	}
	return resp.Groups[0], nil
}

// TestKafkaConsumerProtocolSplit: franz-go consumers of the consumer
// protocol share a topic's partitions (each partition with one member),
// read every record once, and the ApiVersions of such a node lists
// ConsumerGroupHeartbeat v0-1.
func TestKafkaConsumerProtocolSplit(t *testing.T) {
	c := consumerCluster(t)
	const topic, group, parts = "orders848", "g848", 6
	c.CreateTopic(topic, parts, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	addrs := c.KafkaAddrs()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	vs, err := kadm.NewClient(admCl).ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, bv := range vs {
		if v, ok := bv.KeyMaxVersion(int16(kmsg.ConsumerGroupHeartbeat)); !ok || v != 1 {
			t.Fatalf("broker %d lists ConsumerGroupHeartbeat up to %d (listed: %v), want 1", bv.NodeID, v, ok)
		}
	}

	prod, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produceEach(ctx, t, prod, topic, parts, 0, 20)

	var members []*kgo.Client
	for i := 0; i < 3; i++ {
		m := consumer848(t, addrs, group, topic)
		defer m.Close()
		members = append(members, m)
	}
	wait.Eventually(t, 60*time.Second, "three members to split six partitions", func() bool {
		d, err := describe848(ctx, admCl, group)
		if err != nil || d.ErrorCode != 0 || d.State != "Stable" || len(d.Members) != 3 {
			return false
		}
		seen := map[int32]bool{}
		for _, m := range d.Members {
			if len(m.Assignment.TopicPartitions) != 1 || len(m.Assignment.TopicPartitions[0].Partitions) != 2 {
				return false
			}
			for _, p := range m.Assignment.TopicPartitions[0].Partitions {
				if seen[p] {
					return false
				}
				seen[p] = true
			}
		}
		return len(seen) == parts
	})
	got := pollCommit(ctx, t, 20*parts, members...)
	seen := map[string]bool{}
	var mu sync.Mutex
	for _, g := range got {
		for _, v := range g {
			mu.Lock()
			if seen[v] {
				t.Errorf("record %s read twice", v)
			}
			seen[v] = true
			mu.Unlock()
		}
	}
}
