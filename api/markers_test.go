package api_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/coordinator"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// TestMarkerChecks: what a partition leader checks of a WriteTxnMarkers
// that reached it on the inter-broker listener. A marker must name its
// transactional id; its coordinator epoch may not be above the leader
// epoch of the __transaction_state partition coordinating that id, as
// this broker knows it (COORDINATOR_NOT_AVAILABLE: the coordinator
// retries); for an open transaction its epoch must be the transaction's
// plus one; for a producer with nothing open it is answered NONE and
// writes nothing. None of them disturbs the producer, whose commit goes
// through.
func TestMarkerChecks(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := []client.Opt{client.Bootstrap(n.Addr()), client.Logger(testutil.Logger())}
	adm, err := client.NewAdmin(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if err := adm.CreateTopic(ctx, client.TopicSpec{Name: "m", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	p, err := client.NewProducer(append(opts, client.TransactionalID("marked"), client.WithPartitioner(client.ManualPartitioner{}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &client.Record{Topic: "m", Partition: 0, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tp := client.TopicPartition{Topic: "m", Partition: 0}
	pp, err := adm.DescribeProducers(ctx, tp, -1)
	if err != nil || len(pp.ActiveProducers) != 1 {
		t.Fatalf("DescribeProducers: %v %v", pp, err)
	}
	st := pp.ActiveProducers[0]
	img := n.Repl.Image()
	part := coordinator.PartitionFor("marked", int32(len(img.Topic(metadata.InternalTransactionTopic).Partitions)))
	leaderEpoch := img.Partition(metadata.InternalTransactionTopic, part).LeaderEpoch

	cc, err := grpc.NewClient("passthrough:///"+n.InterBrokerAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	send := func(m *pb.TxnMarker) pb.ErrorCode {
		t.Helper()
		m.Partitions = []*pb.TopicPartition{{Topic: "m", Partition: 0}}
		r, err := pb.NewTransactionsClient(cc).WriteTxnMarkers(ctx, &pb.WriteTxnMarkersRequest{Markers: []*pb.TxnMarker{m}})
		if err != nil {
			t.Fatalf("WriteTxnMarkers: %v", err)
		}
		return r.Markers[0].Partitions[0].ErrorCode
	}
	end := func() int64 {
		lo, err := adm.ListOffsets(ctx, []client.TopicPartition{tp}, client.OffsetLatest, client.ReadUncommitted)
		if err != nil {
			t.Fatal(err)
		}
		return lo[tp].Offset
	}
	hw := end()
	for _, c := range []struct {
		name string
		m    *pb.TxnMarker
		want pb.ErrorCode
	}{
		{"no transactional id", &pb.TxnMarker{ProducerId: st.ProducerId, ProducerEpoch: st.ProducerEpoch + 1, TransactionVersion: 2, CoordinatorEpoch: leaderEpoch},
			pb.ErrorCode_INVALID_REQUEST},
		{"a coordinator epoch above the leader epoch", &pb.TxnMarker{ProducerId: st.ProducerId, ProducerEpoch: st.ProducerEpoch + 1, TransactionVersion: 2,
			CoordinatorEpoch: leaderEpoch + 1, TransactionalId: "marked"}, pb.ErrorCode_COORDINATOR_NOT_AVAILABLE},
		{"an epoch that skips the bump", &pb.TxnMarker{ProducerId: st.ProducerId, ProducerEpoch: 32767, TransactionVersion: 2,
			CoordinatorEpoch: leaderEpoch, TransactionalId: "marked"}, pb.ErrorCode_INVALID_PRODUCER_EPOCH},
		{"a producer with nothing open", &pb.TxnMarker{ProducerId: st.ProducerId + 1000, ProducerEpoch: 1, TransactionVersion: 2,
			CoordinatorEpoch: leaderEpoch, TransactionalId: "marked"}, pb.ErrorCode_NONE},
	} {
		if got := send(c.m); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if got := end(); got != hw {
		t.Fatalf("the refused markers moved the HW from %d to %d", hw, got)
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("commit after the refused markers: %v", err)
	}
	var lso int64
	if wait.Until(10*time.Second, "x and its COMMIT marker to be stable", func() bool {
		lo, err := adm.ListOffsets(ctx, []client.TopicPartition{tp}, client.OffsetLatest, client.ReadCommitted)
		if err != nil {
			t.Fatal(err)
		}
		lso = lo[tp].LastStableOffset
		return lso == hw+1
	}) != nil {
		t.Fatalf("LSO %d after the commit, want %d", lso, hw+1)
	}
}
