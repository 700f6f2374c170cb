package fakebroker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/wait"
)

// rig is a broker and a raw produce stream to it.
type rig struct {
	t      *testing.T
	b      *Broker
	cc     *grpc.ClientConn
	stream pb.Producer_ProduceClient
	corr   int64
}

func newRig(t *testing.T) *rig {
	t.Helper()
	b := Start(t, Topic{Name: "t", Partitions: 2})
	cc, err := grpc.NewClient("passthrough:///"+b.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	st, err := pb.NewProducerClient(cc).Produce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, b: b, cc: cc, stream: st}
}

// batch builds a batch of n records v<seq>… for producer pid (-1: none).
func batch(t *testing.T, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	var recs []record.Record
	for i := 0; i < n; i++ {
		recs = append(recs, record.Record{OffsetDelta: int32(i), Value: []byte(fmt.Sprintf("v%d", int(seq)+i))})
	}
	b, err := record.Build(record.BatchOptions{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, FirstTimestamp: 1}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (r *rig) send(records []byte) {
	r.t.Helper()
	r.corr++
	if err := r.stream.Send(&pb.ProduceRequest{CorrelationId: r.corr, Acks: -1, Partitions: []*pb.PartitionRecords{{Topic: "t", Partition: 0, Records: records}}}); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) recv() *pb.ProducePartitionResponse {
	r.t.Helper()
	resp, err := r.stream.Recv()
	if err != nil {
		r.t.Fatal(err)
	}
	return resp.Partitions[0]
}

func (r *rig) produce(records []byte) *pb.ProducePartitionResponse {
	r.t.Helper()
	r.send(records)
	return r.recv()
}

// The idempotent producer's rules: a retried batch among the latest five
// is answered with the offset it was appended at and not appended again;
// a gap in the sequence is OUT_OF_ORDER_SEQUENCE_NUMBER; a new epoch
// starts afresh; an older one is fenced.
func TestProduceSequenceChecks(t *testing.T) {
	r := newRig(t)
	if got := r.produce(batch(t, 5, 0, 0, 2)); got.ErrorCode != pb.ErrorCode_NONE || got.BaseOffset != 0 {
		t.Fatalf("first batch: %v", got)
	}
	if got := r.produce(batch(t, 5, 0, 2, 1)); got.ErrorCode != pb.ErrorCode_NONE || got.BaseOffset != 2 {
		t.Fatalf("second batch: %v", got)
	}
	if got := r.produce(batch(t, 5, 0, 0, 2)); got.ErrorCode != pb.ErrorCode_NONE || got.BaseOffset != 0 {
		t.Fatalf("the first batch again: %v, want its offset 0 back", got)
	}
	if got := r.produce(batch(t, 5, 0, 7, 1)); got.ErrorCode != pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER {
		t.Fatalf("a gap: %v", got)
	}
	if got := r.produce(batch(t, 5, 1, 0, 1)); got.ErrorCode != pb.ErrorCode_NONE || got.BaseOffset != 3 {
		t.Fatalf("a new epoch: %v", got)
	}
	if got := r.produce(batch(t, 5, 0, 3, 1)); got.ErrorCode != pb.ErrorCode_INVALID_PRODUCER_EPOCH {
		t.Fatalf("an old epoch: %v", got)
	}
	if got, want := fmt.Sprint(r.b.Values("t", 0)), "[v0 v1 v2 v0]"; got != want {
		t.Fatalf("values %s, want %s", got, want)
	}
	if r.b.OutOfOrder() != 1 {
		t.Fatalf("OutOfOrder = %d, want 1", r.b.OutOfOrder())
	}
}

// A batch falls out of the duplicate window after five newer ones: sent
// again it is out of order, not a duplicate.
func TestDuplicateWindowIsFive(t *testing.T) {
	r := newRig(t)
	for seq := int32(0); seq < 6; seq++ {
		if got := r.produce(batch(t, 5, 0, seq, 1)); got.ErrorCode != pb.ErrorCode_NONE {
			t.Fatal(got)
		}
	}
	if got := r.produce(batch(t, 5, 0, 1, 1)); got.ErrorCode != pb.ErrorCode_NONE || got.BaseOffset != 1 {
		t.Fatalf("seq 1 (within the window): %v", got)
	}
	if got := r.produce(batch(t, 5, 0, 0, 1)); got.ErrorCode != pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER {
		t.Fatalf("seq 0 (out of the window): %v", got)
	}
}

// Fetch serves what was appended, from the batch holding the offset.
func TestFetchServesTheLog(t *testing.T) {
	r := newRig(t)
	r.produce(batch(t, -1, 0, 0, 2))
	r.produce(batch(t, -1, 0, 2, 1))
	resp, err := pb.NewConsumerClient(r.cc).Fetch(context.Background(), &pb.FetchRequest{ReplicaId: -1, MaxWaitMs: 10,
		Partitions: []*pb.FetchPartition{{Topic: "t", Partition: 0, FetchOffset: 2, PartitionMaxBytes: 1 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Partitions[0]
	if p.HighWatermark != 3 {
		t.Fatalf("HW %d, want 3", p.HighWatermark)
	}
	h, recs, err := record.Decode(p.Records)
	if err != nil || h.BaseOffset != 2 || len(recs) != 1 || string(recs[0].Value) != "v2" {
		t.Fatalf("fetched base %d %v (%v)", h.BaseOffset, recs, err)
	}
}

// A fetch with nothing to read waits for an append.
func TestFetchWaitsForAnAppend(t *testing.T) {
	r := newRig(t)
	got := make(chan *pb.FetchResponse, 1)
	go func() {
		resp, _ := pb.NewConsumerClient(r.cc).Fetch(context.Background(), &pb.FetchRequest{ReplicaId: -1, MaxWaitMs: 20000,
			Partitions: []*pb.FetchPartition{{Topic: "t", Partition: 0, FetchOffset: 0}}})
		got <- resp
	}()
	r.produce(batch(t, -1, 0, 0, 1))
	select {
	case resp := <-got:
		if len(resp.Partitions[0].Records) == 0 {
			t.Fatal("the fetch returned nothing")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the fetch did not return after the append")
	}
}

// A held answer holds the answers behind it; a refused request appends
// nothing; Refuse answers a code and counts it.
func TestControlAndRefuse(t *testing.T) {
	r := newRig(t)
	release := make(chan struct{})
	r.b.ControlProduce(func(n int, _ *pb.ProduceRequest) ProduceAction {
		switch n {
		case 1:
			return ProduceAction{Hold: release}
		case 3:
			return ProduceAction{Code: pb.ErrorCode_NOT_ENOUGH_REPLICAS, Message: "test"}
		}
		return ProduceAction{}
	})
	r.send(batch(t, -1, 0, 0, 1))
	r.send(batch(t, -1, 0, 1, 1))
	answered := make(chan *pb.ProducePartitionResponse, 2)
	go func() {
		for i := 0; i < 2; i++ {
			resp, err := r.stream.Recv()
			if err != nil {
				return
			}
			answered <- resp.Partitions[0]
		}
	}()
	// Both are appended on arrival, neither answered while the first is held.
	wait.Eventually(t, 10*time.Second, "both requests appended", func() bool { return len(r.b.Values("t", 0)) == 2 })
	if len(answered) != 0 {
		t.Fatal("an answer came through the hold")
	}
	close(release)
	if a, b := <-answered, <-answered; a.BaseOffset != 0 || b.BaseOffset != 1 {
		t.Fatalf("answers %v then %v, want offsets 0 then 1", a, b)
	}
	if got := r.produce(batch(t, -1, 0, 2, 1)); got.ErrorCode != pb.ErrorCode_NOT_ENOUGH_REPLICAS {
		t.Fatalf("third: %v", got)
	}
	r.b.Refuse("Produce", pb.ErrorCode_KAFKA_STORAGE_ERROR)
	if got := r.produce(batch(t, -1, 0, 2, 1)); got.ErrorCode != pb.ErrorCode_KAFKA_STORAGE_ERROR || got.ErrorMessage != RefusalMessage {
		t.Fatalf("refused: %v", got)
	}
	if r.b.Refusals() != 1 {
		t.Fatalf("Refusals = %d, want 1", r.b.Refusals())
	}
	if got := fmt.Sprint(r.b.Values("t", 0)); got != "[v0 v1]" {
		t.Fatalf("values %s, want [v0 v1]", got)
	}
	reqs := r.b.ProduceRequests()
	if len(reqs) != 4 || !reqs[2].Refused || reqs[0].Refused {
		t.Fatalf("requests %+v", reqs)
	}
}

// Intercept answers in the broker's place; Calls counts.
func TestIntercept(t *testing.T) {
	b := Start(t, Topic{Name: "t"})
	b.Intercept("InitProducerId", func(_ context.Context, n int, _ any) (any, error) {
		if n == 1 {
			return &pb.InitProducerIdResponse{ProducerId: 77}, nil
		}
		return nil, nil
	})
	cc, err := grpc.NewClient("passthrough:///"+b.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	tx := pb.NewTransactionsClient(cc)
	first, err1 := tx.InitProducerId(context.Background(), &pb.InitProducerIdRequest{})
	second, err2 := tx.InitProducerId(context.Background(), &pb.InitProducerIdRequest{})
	if err1 != nil || err2 != nil || first.ProducerId != 77 || second.ProducerId == 77 {
		t.Fatalf("InitProducerId: %v %v, %v %v", first, err1, second, err2)
	}
	if b.Calls("InitProducerId") != 2 {
		t.Fatalf("Calls = %d, want 2", b.Calls("InitProducerId"))
	}
}
