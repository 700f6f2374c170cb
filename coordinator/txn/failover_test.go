package txn_test

// Real cluster on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/testcluster"
)

func smallInternalTopics(_ int32, cfg *node.Config) {
	cfg.TxnTopic.Partitions = 5
	cfg.OffsetsTopic.Partitions = 5
	cfg.GroupConfig.InitialRebalanceDelay = 0
}

func findCoordinator(t *testing.T, c *testcluster.Cluster, typ pb.CoordinatorType, key string) *pb.Coordinator {
	t.Helper()
	var co *pb.Coordinator
	c.Eventually(20*time.Second, "a coordinator for "+key, func() bool {
		for _, m := range c.Running() {
			conn, err := grpc.NewClient("passthrough:///"+m.Cfg.Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				continue
			}
			r, err := pb.NewMetadataClient(conn).FindCoordinator(context.Background(), &pb.FindCoordinatorRequest{KeyType: typ, Keys: []string{key}})
			conn.Close()
			if err == nil && r.Coordinators[0].ErrorCode == pb.ErrorCode_NONE {
				co = r.Coordinators[0]
				return true
			}
		}
		return false
	})
	return co
}

// TestCoordinatorFailoverCompletesCommit: the coordinator's node dies after
// PREPARE_COMMIT is durable and before any marker is written; the new
// coordinator (the new leader of the transaction log partition) rebuilds
// from the log and finishes the commit. read_committed readers see every
// record once.
func TestCoordinatorFailoverCompletesCommit(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Mutate: smallInternalTopics})
	c.CreateTopic("pay", 3, 3, map[string]string{"min.insync.replicas": "2"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := client.NewProducer(c.ClientOpts(client.TransactionalID("payer"), client.WithPartitioner(client.ManualPartitioner{}), client.MaxBlock(30*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	coord := findCoordinator(t, c, pb.CoordinatorType_TRANSACTION, "payer")
	// A data partition led by another node, so its markers cross a link we can hold.
	var part int32 = -1
	for i := int32(0); i < 3; i++ {
		if c.Partition("pay", i).Leader != coord.NodeId {
			part = i
			break
		}
	}
	if part < 0 {
		t.Fatal("every partition is led by the coordinator")
	}
	dataLeader := c.Partition("pay", part).Leader
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var recs []*client.Record
	for i := 0; i < 20; i++ {
		recs = append(recs, &client.Record{Topic: "pay", Partition: part, Value: []byte(strconv.Itoa(i))})
	}
	if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Hold the coordinator's markers to the data partition's leader.
	c.Net.Cut(c.Member(coord.NodeId).Name()+"-markers", c.Member(dataLeader).Name())
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	adm, _ := client.NewAdmin(c.ClientOpts()...)
	defer adm.Close()
	tp := client.TopicPartition{Topic: "pay", Partition: part}
	// The coordinator tries its markers and is refused.
	c.Eventually(10*time.Second, "a refused marker connection", func() bool {
		return c.Net.Refused(c.Member(coord.NodeId).Name()+"-markers", c.Member(dataLeader).Name()) > 0
	})
	lo, err := adm.ListOffsets(ctx, []client.TopicPartition{tp}, client.OffsetLatest, client.ReadCommitted)
	if err != nil {
		t.Fatal(err)
	}
	if lo[tp].LastStableOffset != 0 {
		t.Fatalf("LSO %d before any marker was written", lo[tp].LastStableOffset)
	}
	c.Kill(coord.NodeId)
	// The new coordinator finishes the commit.
	c.Eventually(60*time.Second, "the commit to complete", func() bool {
		lo, err := adm.ListOffsets(ctx, []client.TopicPartition{tp}, client.OffsetLatest, client.ReadCommitted)
		return err == nil && lo[tp].LastStableOffset == 21
	})
	cons, _ := client.NewConsumer(c.ClientOpts(client.Isolation(client.ReadCommitted))...)
	defer cons.Close(ctx)
	cons.Assign(map[client.TopicPartition]int64{tp: client.OffsetEarliest})
	seen := map[string]int{}
	for cons.Position(tp) < 21 {
		got, err := cons.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range got {
			seen[string(r.Value)]++
		}
	}
	for i := 0; i < 20; i++ {
		if seen[strconv.Itoa(i)] != 1 {
			t.Fatalf("record %d seen %d times", i, seen[strconv.Itoa(i)])
		}
	}
	newCoord := findCoordinator(t, c, pb.CoordinatorType_TRANSACTION, "payer")
	if newCoord.NodeId == coord.NodeId {
		t.Fatal("coordinator did not move")
	}
	// The producer carries on with the new coordinator.
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &client.Record{Topic: "pay", Partition: part, Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
}
