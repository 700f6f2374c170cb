package replication_test

// Real cluster on real time: the subject is a fetch waiting at the leader.

import (
	"context"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testcluster"
)

// TestFollowerGainingAPartitionEndsItsWaitingFetch: with
// replica.fetch.wait.max.ms at 20 s and every follower's fetch parked at
// every leader, a topic created then is replicated at once, so an
// acks=all write to it completes within seconds. Two things make it so,
// and the test fails without either (checked): the follower ends the
// fetch waiting at the leader when it gains a partition, and a partition
// whose truncation by leader epoch just finished joins the fetch of the
// same round instead of waiting for the next one behind the others' 20 s
// wait. (The third, a fetch asked to wait no longer than a partition's
// 50 ms retry after a refusal for metadata lag, matters only when the
// leader learns of its leadership after the follower, which this test
// does not arrange.)
func TestFollowerGainingAPartitionEndsItsWaitingFetch(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Mutate: func(_ int32, cfg *node.Config) {
		cfg.ReplicationConfig.FetchWaitMax = 20 * time.Second
		cfg.ReplicationConfig.ReplicaLagTimeMax = time.Minute // Kafka requires it above the fetch wait
	}})
	c.CreateTopic("idle", 3, 3, nil) // every node leads one: every follower has a fetch parked at every node
	time.Sleep(time.Second)          // the followers' fetches of "idle" park at its leader
	c.CreateTopic("fresh", 1, 3, map[string]string{"min.insync.replicas": "3"})
	p, err := client.NewProducer(c.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	start := time.Now()
	if err := p.ProduceSync(ctx, &client.Record{Topic: "fresh", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("acks=all write to a new topic, with its followers' fetches parked elsewhere: %v after %v", err, time.Since(start).Round(time.Millisecond))
	}
}
