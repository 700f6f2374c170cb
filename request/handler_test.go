package request_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/strand-io/strand/testkit/wait"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/request"
	"github.com/strand-io/strand/testkit/testutil"
)

// produce calls Produce and waits for the answer to be complete.
func produce(ctx context.Context, t *testing.T, h *request.Handler, req *pb.ProduceRequest) *pb.ProducePartitionResponse {
	t.Helper()
	resp, wait := h.Produce(ctx, req)
	if wait != nil {
		wait.Wait(ctx)
	}
	if len(resp.Partitions) != 1 {
		t.Fatalf("produce answered %d partitions, want 1", len(resp.Partitions))
	}
	return resp.Partitions[0]
}

func batch(t *testing.T, opts record.BatchOptions, values ...string) []byte {
	t.Helper()
	var recs []record.Record
	for _, v := range values {
		recs = append(recs, record.Record{Value: []byte(v), Timestamp: time.Now().UnixMilli()})
	}
	b, err := record.Build(opts, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestProduceAndCommitThroughHandler: a node's request layer called as
// plain Go methods, no gRPC in between, as the Kafka listener will call
// it. A produce with acks=all is answered once written; a request's
// invalid acks and an unknown topic are answered per partition; a
// transaction's batch is held back from read_committed consumers (the
// last stable offset stays at it) until EndTxn commits it, after which
// the last stable offset passes its marker.
func TestProduceAndCommitThroughHandler(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	h := n.Handler()
	if h == nil {
		t.Fatal("a broker node has no request handler")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	ct, err := h.CreateTopics(ctx, &pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{{Name: "p", NumPartitions: 1, ReplicationFactor: 1}}, TimeoutMs: 30000})
	if err != nil || ct.Topics[0].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("CreateTopics: %v %v", ct, err)
	}
	md, err := h.Metadata(ctx, &pb.MetadataRequest{Topics: []string{"p"}})
	if err != nil || len(md.Brokers) != 1 || len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 1 || md.Topics[0].Partitions[0].LeaderId != md.Brokers[0].NodeId {
		t.Fatalf("Metadata of p: %v %v", md, err)
	}

	plain := record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	r := produce(ctx, t, h, &pb.ProduceRequest{Acks: -1, TimeoutMs: 5000, Partitions: []*pb.PartitionRecords{{Topic: "p", Records: batch(t, plain, "a")}}})
	if r.ErrorCode != pb.ErrorCode_NONE || r.BaseOffset != 0 {
		t.Fatalf("acks=all produce: %v %q at %d, want NONE at 0", r.ErrorCode, r.ErrorMessage, r.BaseOffset)
	}
	if r = produce(ctx, t, h, &pb.ProduceRequest{Acks: 2, Partitions: []*pb.PartitionRecords{{Topic: "p", Records: batch(t, plain, "b")}}}); r.ErrorCode != pb.ErrorCode_INVALID_REQUIRED_ACKS {
		t.Fatalf("acks=2: %v, want INVALID_REQUIRED_ACKS", r.ErrorCode)
	}
	if r = produce(ctx, t, h, &pb.ProduceRequest{Acks: 1, Partitions: []*pb.PartitionRecords{{Topic: "nope", Records: batch(t, plain, "b")}}}); r.ErrorCode != pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION {
		t.Fatalf("produce to an unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", r.ErrorCode)
	}

	// The transaction coordinator's topic is created by the first
	// FindCoordinator; until its partition is led and loaded here,
	// InitProducerId is answered retriably.
	var ip *pb.InitProducerIdResponse
	wait.Eventually(t, 30*time.Second, "InitProducerId", func() bool {
		fc, err := h.FindCoordinator(ctx, &pb.FindCoordinatorRequest{KeyType: pb.CoordinatorType_TRANSACTION, Keys: []string{"tx"}})
		if err != nil || fc.Coordinators[0].ErrorCode != pb.ErrorCode_NONE {
			return false
		}
		ip, err = h.InitProducerId(ctx, &pb.InitProducerIdRequest{TransactionalId: "tx", TransactionTimeoutMs: 60000, ProducerId: -1, ProducerEpoch: -1})
		return err == nil && ip.ErrorCode == pb.ErrorCode_NONE
	})
	txnOpts := record.BatchOptions{ProducerID: ip.ProducerId, ProducerEpoch: int16(ip.ProducerEpoch), BaseSequence: 0, Transactional: true}
	r = produce(ctx, t, h, &pb.ProduceRequest{Acks: -1, TimeoutMs: 5000, TransactionalId: "tx", Partitions: []*pb.PartitionRecords{{Topic: "p", Records: batch(t, txnOpts, "t1", "t2")}}})
	if r.ErrorCode != pb.ErrorCode_NONE || r.BaseOffset != 1 {
		t.Fatalf("transactional produce: %v %q at %d, want NONE at 1", r.ErrorCode, r.ErrorMessage, r.BaseOffset)
	}
	latest := func() *pb.ListOffsetsPartitionResponse {
		lo, err := h.ListOffsets(ctx, &pb.ListOffsetsRequest{IsolationLevel: pb.IsolationLevel_READ_COMMITTED, Partitions: []*pb.ListOffsetsPartition{{Topic: "p", Timestamp: -1, CurrentLeaderEpoch: -1}}})
		if err != nil || lo.Partitions[0].ErrorCode != pb.ErrorCode_NONE {
			t.Fatalf("ListOffsets: %v %v", lo, err)
		}
		return lo.Partitions[0]
	}
	if p := latest(); p.LastStableOffset != 1 || p.Offset != 1 || p.HighWatermark != 3 {
		t.Fatalf("open transaction: LSO %d, read_committed latest %d, HW %d; want 1, 1, 3", p.LastStableOffset, p.Offset, p.HighWatermark)
	}

	et, err := h.EndTxn(ctx, &pb.EndTxnRequest{TransactionalId: "tx", ProducerId: ip.ProducerId, ProducerEpoch: ip.ProducerEpoch, Committed: true})
	if err != nil || et.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("EndTxn commit: %v %v", et, err)
	}
	// The marker is written by the coordinator after it answers.
	wait.Eventually(t, 30*time.Second, "the commit marker", func() bool {
		p := latest()
		return p.LastStableOffset == 4 && p.HighWatermark == 4 && p.LastOffsetIsControl
	})

	f, err := h.Fetch(ctx, &pb.FetchRequest{ReplicaId: -1, IsolationLevel: pb.IsolationLevel_READ_COMMITTED, MaxBytes: 1 << 20,
		Partitions: []*pb.FetchPartition{{Topic: "p", FetchOffset: 0, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1}}})
	if err != nil || len(f.Partitions) != 1 || f.Partitions[0].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("Fetch: %v %v", f, err)
	}
	var values []string
	for it := record.NewIter(f.Partitions[0].Records); it.Next(); {
		hd, recs, err := record.Decode(it.Batch())
		if err != nil {
			t.Fatal(err)
		}
		if hd.IsControl() {
			continue
		}
		for _, rec := range recs {
			values = append(values, string(rec.Value))
		}
	}
	if len(values) != 3 || values[0] != "a" || values[1] != "t1" || values[2] != "t2" {
		t.Fatalf("read_committed fetch after the commit: %q, want [a t1 t2]", values)
	}
}

// TestDeleteRecordsDuplicatePartition: a DeleteRecords naming a partition
// twice is answered once for it, with the last offset asked (as Kafka,
// whose handler collects the request into a map), and a request asking
// the largest timeout is still answered.
func TestDeleteRecordsDuplicatePartition(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	h := n.Handler()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ct, err := h.CreateTopics(ctx, &pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{{Name: "d", NumPartitions: 1, ReplicationFactor: 1}}, TimeoutMs: 30000})
	if err != nil || ct.Topics[0].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("CreateTopics: %v %v", ct, err)
	}
	plain := record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	if r := produce(ctx, t, h, &pb.ProduceRequest{Acks: -1, TimeoutMs: 5000, Partitions: []*pb.PartitionRecords{{Topic: "d", Records: batch(t, plain, "a", "b", "c")}}}); r.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("produce: %v %q", r.ErrorCode, r.ErrorMessage)
	}
	resp, err := h.DeleteRecords(ctx, &pb.DeleteRecordsRequest{TimeoutMs: math.MaxInt32, Partitions: []*pb.DeleteRecordsPartition{
		{Topic: "d", Partition: 0, Offset: 1}, {Topic: "d", Partition: 0, Offset: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Partitions) != 1 {
		t.Fatalf("DeleteRecords naming d-0 twice answered %d entries: %v", len(resp.Partitions), resp.Partitions)
	}
	if r := resp.Partitions[0]; r.ErrorCode != pb.ErrorCode_NONE || r.LowWatermark != 2 {
		t.Fatalf("DeleteRecords d-0: %v %q low watermark %d, want NONE at 2 (the last offset asked)", r.ErrorCode, r.ErrorMessage, r.LowWatermark)
	}
}
