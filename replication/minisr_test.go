package replication_test

// Real cluster on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/testcluster"
)

// TestMinISR: with two of three replicas down an acks=all produce fails
// with NOT_ENOUGH_REPLICAS and writes nothing; when they return, writes
// resume and every earlier acknowledged record is still there. Five nodes,
// so the controller quorum survives two failures.
func TestMinISR(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 5})
	c.CreateTopic("m", 1, 3, map[string]string{"min.insync.replicas": "2"})
	acks := produceValues(t, c, "m", 0, 100)
	p := c.Partition("m", 0)
	leader := p.Leader
	var down []int32
	for _, r := range p.Replicas {
		if r != leader {
			down = append(down, r)
		}
	}
	for _, id := range down {
		c.Kill(id)
	}
	c.Eventually(20*time.Second, "ISR shrinks to the leader", func() bool {
		p := c.Partition("m", 0)
		return len(p.ISR) == 1 && p.Leader == leader
	})
	conn, err := grpc.NewClient("passthrough:///"+c.Member(leader).Cfg.Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := pb.NewProducerClient(conn).Produce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	end := c.Log(leader, "m", 0).LogEndOffset()
	batch, _ := record.Build(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []record.Record{{Value: []byte("x")}})
	c.Eventually(10*time.Second, "the leader sees the shrunk ISR", func() bool {
		return len(c.Member(leader).Node.Parts.Get(c.Log(leader, "m", 0).Key()).Leadership().ISR) == 1
	})
	if err := st.Send(&pb.ProduceRequest{CorrelationId: 1, Acks: -1, TimeoutMs: 2000, Partitions: []*pb.PartitionRecords{{Topic: "m", Partition: 0, Records: batch}}}); err != nil {
		t.Fatal(err)
	}
	resp, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Partitions[0].ErrorCode; code != pb.ErrorCode_NOT_ENOUGH_REPLICAS {
		t.Fatalf("produce with the ISR below min.insync.replicas: %v (%s), want NOT_ENOUGH_REPLICAS", code, resp.Partitions[0].ErrorMessage)
	}
	if got := c.Log(leader, "m", 0).LogEndOffset(); got != end {
		t.Fatalf("the refused write moved the log end from %d to %d", end, got)
	}
	for _, id := range down {
		c.Start(id)
	}
	c.WaitReady(30 * time.Second)
	c.Eventually(30*time.Second, "ISR back to 3", func() bool { return len(c.Partition("m", 0).ISR) == 3 })
	acks = merge(acks, produceValues(t, c, "m", 100, 200))
	checkExactlyOnce(t, acks, readAll(t, c, "m", 1))
	sameLogs(t, c, "m", 0)
}
