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

// TestFlushMessagesOneAnswersAfterFsync: with flush.messages=1 the leader
// fsyncs in the background while it takes the next requests of a stream,
// but answers none (acks=1 or acks=all) before the batch is on its disk.
func TestFlushMessagesOneAnswersAfterFsync(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 3})
	c.CreateTopic("f", 1, 3, map[string]string{"min.insync.replicas": "2", "flush.messages": "1"})
	c.Eventually(20*time.Second, "all replicas in sync", func() bool {
		p := c.Partition("f", 0)
		return p != nil && p.Leader > 0 && len(p.ISR) == 3
	})
	leader := c.Partition("f", 0).Leader
	conn, err := grpc.NewClient("passthrough:///"+c.Member(leader).Cfg.Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := pb.NewProducerClient(conn).Produce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lg := c.Log(leader, "f", 0)
	part := c.Member(leader).Node.Parts.Get(lg.Key())
	const n = 40
	acks := map[int64]int32{}
	for i := int64(1); i <= n; i++ {
		a := int32(1)
		if i%2 == 0 {
			a = -1
		}
		acks[i] = a
		batch, _ := record.Build(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []record.Record{{Value: []byte("x")}, {Value: []byte("y")}})
		if err := st.Send(&pb.ProduceRequest{CorrelationId: i, Acks: a, TimeoutMs: 10000, Partitions: []*pb.PartitionRecords{{Topic: "f", Partition: 0, Records: batch}}}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[int64]bool{}
	for range n {
		resp, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		rp, hw := lg.RecoveryPoint(), part.HighWatermark()
		r := resp.Partitions[0]
		if r.ErrorCode != pb.ErrorCode_NONE {
			t.Fatalf("request %d: %v %s", resp.CorrelationId, r.ErrorCode, r.ErrorMessage)
		}
		last := r.BaseOffset + 1
		if rp <= last {
			t.Fatalf("request %d (acks=%d) answered with offsets %d..%d while the leader's recovery point was %d: not yet fsynced",
				resp.CorrelationId, acks[resp.CorrelationId], r.BaseOffset, last, rp)
		}
		if acks[resp.CorrelationId] == -1 && hw <= last {
			t.Fatalf("acks=all request %d answered below the HW %d", resp.CorrelationId, hw)
		}
		if seen[r.BaseOffset] {
			t.Fatalf("offset %d answered twice", r.BaseOffset)
		}
		seen[r.BaseOffset] = true
	}
	if end := lg.LogEndOffset(); end != 2*n {
		t.Fatalf("log end %d, want %d", end, 2*n)
	}
}
