package node_test

// Real cluster on real time: the metrics and debug HTTP endpoints listen on real TCP;
// MemNet does not carry them.

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// waitMetric scrapes until cond holds for the value of name (which must
// appear), or fails after d.
func waitMetric(t *testing.T, maddr, name string, d time.Duration, cond func(float64) bool) float64 {
	t.Helper()
	var v float64
	if err := wait.Until(d, name, func() bool { v = metric(t, scrape(t, maddr), name); return cond(v) }); err != nil {
		t.Fatalf("%s stayed at %v: %v", name, v, err)
	}
	return v
}

// TestMetricsKafkaOperatorsLookFor: after some traffic the metrics a Kafka
// operator looks for first are on /metrics with sensible values:
// BytesInPerSec, MessagesInPerSec and BytesOutPerSec as per-topic counters,
// requests and their latency per API, the fetch and produce purgatories,
// and the lag of a group this broker coordinates.
func TestMetricsKafkaOperatorsLookFor(t *testing.T) {
	n, maddr, ctx := devWithTopic(t, "traffic", nil)
	p, err := client.NewProducer(client.Bootstrap(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	var recs []*client.Record
	for i := range 10 {
		recs = append(recs, &client.Record{Topic: "traffic", Value: bytes.Repeat([]byte{byte('a' + i)}, 100)})
	}
	if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c, err := client.NewConsumer(client.Bootstrap(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	c.Assign(map[client.TopicPartition]int64{{Topic: "traffic", Partition: 0}: client.OffsetEarliest})
	for got := 0; got < 10; {
		rs, err := c.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got += len(rs)
	}
	// A group that committed offset 4 of the 10 (a standalone commit).
	g, err := client.NewConsumer(client.Bootstrap(n.Addr()), client.GroupID("lagger"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(ctx)
	if err := g.CommitOffsets(ctx, map[client.TopicPartition]int64{{Topic: "traffic", Partition: 0}: 4}); err != nil {
		t.Fatal(err)
	}
	body := scrape(t, maddr)
	if v := metric(t, body, `strand_broker_topic_messages_in_total{topic="traffic"}`); v != 10 {
		t.Errorf("messages in %v, want 10", v)
	}
	if v := metric(t, body, `strand_broker_topic_bytes_in_total{topic="traffic"}`); v < 1000 || v > 2000 {
		t.Errorf("bytes in %v for ten 100-byte values", v)
	}
	if v := metric(t, body, `strand_broker_topic_bytes_out_total{topic="traffic"}`); v < 1000 {
		t.Errorf("bytes out %v after reading ten 100-byte values", v)
	}
	if v := metric(t, body, `strand_requests_total{request="Produce"}`); v < 1 {
		t.Errorf("Produce requests %v", v)
	}
	if v := metric(t, body, `strand_requests_total{request="FetchConsumer"}`); v < 1 {
		t.Errorf("FetchConsumer requests %v", v)
	}
	// At least one: the commit is retried when the offsets topic's
	// partition is still loading on its new coordinator, so two are right too.
	if v := metric(t, body, `strand_requests_total{request="OffsetCommit"}`); v < 1 {
		t.Errorf("OffsetCommit requests %v, want at least 1", v)
	}
	if v := metric(t, body, `strand_request_duration_seconds_count{request="Produce"}`); v < 1 {
		t.Errorf("Produce latency observations %v", v)
	}
	if v := metric(t, body, `strand_request_duration_seconds_sum{request="Metadata"}`); v <= 0 {
		t.Errorf("Metadata latency sum %v", v)
	}
	if v := metric(t, body, `strand_consumer_group_lag{group="lagger",partition="0",topic="traffic"}`); v != 6 {
		t.Errorf("lag of group lagger %v, want 10-4", v)
	}
	if v := metric(t, body, `strand_purgatory_size{operation="produce"}`); v != 0 {
		t.Errorf("produce purgatory %v at rest", v)
	}

	// A consumer's long poll at the log end waits in the fetch purgatory
	// until a record arrives.
	cc, err := grpc.NewClient(n.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	fetched := make(chan error, 1)
	go func() {
		r, err := pb.NewConsumerClient(cc).Fetch(ctx, &pb.FetchRequest{ReplicaId: -1, MaxWaitMs: 30000, MinBytes: 1, MaxBytes: 1 << 20,
			Partitions: []*pb.FetchPartition{{Topic: "traffic", Partition: 0, FetchOffset: 10, CurrentLeaderEpoch: -1, PartitionMaxBytes: 1 << 20}}})
		if err == nil && (len(r.Partitions) != 1 || len(r.Partitions[0].Records) == 0) {
			err = fmt.Errorf("the long poll ended without the record: %v", r)
		}
		fetched <- err
	}()
	waitMetric(t, maddr, `strand_purgatory_size{operation="fetch"}`, 10*time.Second, func(v float64) bool { return v >= 1 })
	if err := p.ProduceSync(ctx, &client.Record{Topic: "traffic", Value: []byte("wake")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := <-fetched; err != nil {
		t.Fatal(err)
	}
	waitMetric(t, maddr, `strand_purgatory_size{operation="fetch"}`, 10*time.Second, func(v float64) bool { return v == 0 })
	body = scrape(t, maddr)
	if v := metric(t, body, `strand_consumer_group_lag{group="lagger",partition="0",topic="traffic"}`); v != 7 {
		t.Errorf("lag of group lagger %v after one more record, want 11-4", v)
	}
	if v := metric(t, body, `strand_broker_topic_messages_in_total{topic="traffic"}`); v != 11 {
		t.Errorf("messages in %v, want 11", v)
	}
}

// TestMetricsProducePurgatoryHoldsAcksAll: an acks=all produce waits in
// the produce purgatory while a follower in the ISR cannot fetch, and
// leaves it when the follower is back.
func TestMetricsProducePurgatoryHoldsAcksAll(t *testing.T) {
	maddrs := map[int32]string{}
	var mu sync.Mutex
	c := testcluster.New(t, testcluster.Options{SessionTimeout: 20 * time.Second, ReplicaLag: 20 * time.Second,
		Mutate: func(id int32, cfg *node.Config) {
			mu.Lock()
			defer mu.Unlock()
			maddrs[id] = testutil.FreeAddr(t)
			cfg.MetricsListen = maddrs[id]
		}})
	c.CreateTopic("held", 1, 3, nil)
	part := c.Partition("held", 0)
	leader := part.Leader
	follower := int32(-1)
	for _, r := range part.Replicas {
		if r != leader && r != c.ActiveController() {
			follower = r
			break
		}
	}
	p, err := client.NewProducer(c.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	defer p.Close(ctx)
	if err := p.ProduceSync(ctx, &client.Record{Topic: "held", Value: []byte("warm")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	maddr := maddrs[leader]
	c.Isolate(follower)
	done := make(chan error, 1)
	go func() { done <- p.ProduceSync(ctx, &client.Record{Topic: "held", Value: []byte("held")}).FirstErr() }()
	waitMetric(t, maddr, `strand_purgatory_size{operation="produce"}`, 15*time.Second, func(v float64) bool { return v >= 1 })
	select {
	case err := <-done:
		t.Fatalf("the acks=all produce was answered (%v) while a follower of the ISR was cut off", err)
	default:
	}
	c.Heal(follower)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitMetric(t, maddr, `strand_purgatory_size{operation="produce"}`, 15*time.Second, func(v float64) bool { return v == 0 })
}
