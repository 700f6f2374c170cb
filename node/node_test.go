package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strand-io/strand/controller"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/testutil/ports"
	"github.com/strand-io/strand/testkit/wait"
)

func freePort(t *testing.T) string {
	t.Helper()
	a, err := ports.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func devNode(t *testing.T, dir string, reuse ...Config) *Node {
	t.Helper()
	cfg := DefaultConfig(1, dir)
	cfg.Listen = freePort(t)
	cfg.ControllerListen = freePort(t)
	if len(reuse) > 0 {
		cfg.Listen, cfg.ControllerListen = reuse[0].Listen, reuse[0].ControllerListen
	}
	cfg.Voters = []controller.Voter{{ID: 1, Addr: cfg.ControllerListen}}
	cfg.HeartbeatInterval = 100 * time.Millisecond
	cfg.QuorumTimeouts = QuorumTimeouts{Heartbeat: 100 * time.Millisecond, Election: 100 * time.Millisecond, LeaderLease: 100 * time.Millisecond, Commit: 5 * time.Millisecond}
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestDevNodeProduceFetch(t *testing.T) {
	dir := t.TempDir()
	n := devNode(t, dir)
	defer n.Stop()
	conn, err := grpc.NewClient("passthrough:///"+n.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	cr, err := pb.NewAdminClient(conn).CreateTopics(ctx, &pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{{Name: "orders", NumPartitions: 3, ReplicationFactor: 1}}})
	if err != nil || cr.Topics[0].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("create: %v %v", err, cr)
	}
	st, err := pb.NewProducerClient(conn).Produce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		b, _ := record.Build(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []record.Record{{Value: []byte(fmt.Sprintf("v%d", i)), Timestamp: 1}})
		if err := st.Send(&pb.ProduceRequest{CorrelationId: int64(i), Acks: -1, TimeoutMs: 5000, Partitions: []*pb.PartitionRecords{{Topic: "orders", Partition: 0, Records: b}}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		r, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if p := r.Partitions[0]; p.ErrorCode != pb.ErrorCode_NONE || p.BaseOffset != r.CorrelationId {
			t.Fatalf("produce %d: %v", i, p)
		}
	}
	fr, err := pb.NewConsumerClient(conn).Fetch(ctx, &pb.FetchRequest{ReplicaId: -1, MaxBytes: 1 << 20, Partitions: []*pb.FetchPartition{{Topic: "orders", Partition: 0, FetchOffset: 0, CurrentLeaderEpoch: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	p := fr.Partitions[0]
	if p.ErrorCode != pb.ErrorCode_NONE || p.HighWatermark != 3 {
		t.Fatalf("fetch: %v", p)
	}
	var vals []string
	for it := record.NewIter(p.Records); it.Next(); {
		_, recs, err := record.Decode(it.Batch())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			vals = append(vals, string(r.Value))
		}
	}
	if fmt.Sprint(vals) != "[v0 v1 v2]" {
		t.Fatalf("values %v", vals)
	}
	// Restart keeps the data.
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	n2 := devNode(t, dir, n.cfg)
	defer n2.Stop()
	conn2, _ := grpc.NewClient("passthrough:///"+n2.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn2.Close()
	var fr2 *pb.FetchResponse
	_ = wait.Until(5*time.Second, "the restarted node to serve the log", func() bool {
		fr2, err = pb.NewConsumerClient(conn2).Fetch(ctx, &pb.FetchRequest{ReplicaId: -1, MaxBytes: 1 << 20, Partitions: []*pb.FetchPartition{{Topic: "orders", Partition: 0, FetchOffset: 0, CurrentLeaderEpoch: -1}}})
		return err == nil && fr2.Partitions[0].ErrorCode == pb.ErrorCode_NONE && fr2.Partitions[0].HighWatermark == 3
	})
	if fr2.Partitions[0].HighWatermark != 3 || len(fr2.Partitions[0].Records) != len(p.Records) {
		t.Fatalf("after restart: %v", fr2.Partitions[0])
	}
}
