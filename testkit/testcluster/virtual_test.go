package testcluster

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TestClusterOnVirtualTime runs a whole three-node cluster (Raft, gossip,
// brokers, coordinators, the SDK's clients) on an in-memory network
// inside a testing/synctest bubble, where every timer of every goroutine
// the test starts, hashicorp/raft's and memberlist's included, runs on
// virtual time: a transaction is committed through a kill -9 of its
// coordinator's node, read_committed sees each record once, and when the
// bubble ends no goroutine is left (synctest fails the test if one is:
// every goroutine of a node has an owner that stops it). This is the
// ground the cluster simulation stands on; a seconds-long failover costs
// milliseconds of CPU here.
func TestClusterOnVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(t, Options{MemNet: true, Mutate: func(_ int32, cfg *node.Config) {
			cfg.TxnTopic.Partitions = 5
			cfg.OffsetsTopic.Partitions = 5
		}})
		defer c.Close()
		c.CreateTopic("pay", 3, 3, map[string]string{"min.insync.replicas": "2"})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		adm, err := client.NewAdmin(c.ClientOpts()...)
		if err != nil {
			t.Fatal(err)
		}
		defer adm.Close()
		p, err := client.NewProducer(c.ClientOpts(client.TransactionalID("payer"), client.WithPartitioner(client.ManualPartitioner{}), client.MaxBlock(30*time.Second))...)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(ctx)
		if err := p.InitTransactions(ctx); err != nil {
			t.Fatal(err)
		}
		coord, err := adm.FindCoordinator(ctx, pb.CoordinatorType_TRANSACTION, "payer")
		if err != nil {
			t.Fatal(err)
		}
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*client.Record
		for i := range 20 {
			recs = append(recs, &client.Record{Topic: "pay", Partition: int32(i % 3), Value: []byte(strconv.Itoa(i))})
		}
		if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		c.Kill(coord.NodeId)
		if err := p.CommitTransaction(ctx); err != nil {
			t.Fatalf("commit through the coordinator's kill: %v", err)
		}
		t.Logf("committed %v (virtual) after node %d, the coordinator's, was killed", time.Since(start), coord.NodeId)

		cons, err := client.NewConsumer(c.ClientOpts(client.Isolation(client.ReadCommitted))...)
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close(ctx)
		assign := map[client.TopicPartition]int64{}
		for i := range int32(3) {
			assign[client.TopicPartition{Topic: "pay", Partition: i}] = client.OffsetEarliest
		}
		cons.Assign(assign)
		seen := map[string]int{}
		for n := 0; n < 20; {
			got, err := cons.Poll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range got {
				seen[string(r.Value)]++
				n++
			}
		}
		for i := range 20 {
			if seen[strconv.Itoa(i)] != 1 {
				t.Fatalf("record %d seen %d times by read_committed", i, seen[strconv.Itoa(i)])
			}
		}
		cons.Close(ctx)
		p.Close(ctx)
		adm.Close()
		c.Close()
		// memberlist's Shutdown does not wait for a probe it has in flight
		// (up to its probe timeout, then its indirect checks): give those
		// their virtual seconds, after which nothing may be left running.
		time.Sleep(10 * time.Second) // virtual time (synctest)
	})
}
