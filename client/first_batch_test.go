package client

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/testutil"
)

// seqBroker is a one-partition leader that keeps producer state as Kafka 4
// does: a producer id it does not know is accepted at any sequence (its
// state may have expired, KIP-360); a known one must go on at lastSeq+1; a
// repeat of the last batch is a duplicate. Its first produce request is
// answered NOT_LEADER_OR_FOLLOWER (the leader had not applied the topic
// yet), and that answer is held until a few more requests arrived (or a
// short while passed), as when a producer has several batches in flight.
type seqBroker struct {
	pb.UnimplementedMetadataServer
	pb.UnimplementedProducerServer
	pb.UnimplementedTransactionsServer
	addr string

	mu         sync.Mutex
	requests   int
	lastSeq    map[int64]int32
	values     []string
	outOfOrder int
	more       chan struct{} // a request after the first arrived
}

func (b *seqBroker) Metadata(ctx context.Context, req *pb.MetadataRequest) (*pb.MetadataResponse, error) {
	return &pb.MetadataResponse{ClusterId: "c", ControllerId: 1, Brokers: []*pb.BrokerInfo{{NodeId: 1, Address: b.addr}},
		Topics: []*pb.TopicMetadata{{Name: "t", Partitions: []*pb.PartitionMetadata{{Partition: 0, LeaderId: 1, Replicas: []int32{1}, Isr: []int32{1}}}}}}, nil
}

func (b *seqBroker) InitProducerId(ctx context.Context, req *pb.InitProducerIdRequest) (*pb.InitProducerIdResponse, error) {
	return &pb.InitProducerIdResponse{ProducerId: 9, ProducerEpoch: 0}, nil
}

func (b *seqBroker) Produce(stream pb.Producer_ProduceServer) error {
	var wg sync.WaitGroup
	var sendMu sync.Mutex
	defer wg.Wait()
	for {
		r, err := stream.Recv()
		if err != nil {
			return err
		}
		b.mu.Lock()
		b.requests++
		first := b.requests == 1
		if !first {
			select {
			case b.more <- struct{}{}:
			default:
			}
		}
		b.mu.Unlock()
		send := func(resp *pb.ProduceResponse) {
			sendMu.Lock()
			defer sendMu.Unlock()
			stream.Send(resp)
		}
		if first {
			// Answer the first request later, refused, while the
			// stream goes on receiving.
			wg.Add(1)
			go func(r *pb.ProduceRequest) {
				defer wg.Done()
				deadline := time.After(300 * time.Millisecond)
				for n := 0; n < 4; n++ {
					select {
					case <-b.more:
					case <-deadline:
						n = 4
					}
				}
				resp := &pb.ProduceResponse{CorrelationId: r.CorrelationId}
				for _, p := range r.Partitions {
					resp.Partitions = append(resp.Partitions, &pb.ProducePartitionResponse{Topic: p.Topic, Partition: p.Partition, BaseOffset: -1,
						ErrorCode: pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, ErrorMessage: "test: the topic is not applied yet"})
				}
				send(resp)
			}(r)
			continue
		}
		resp := &pb.ProduceResponse{CorrelationId: r.CorrelationId}
		for _, p := range r.Partitions {
			h, err := record.ParseHeader(p.Records)
			if err != nil {
				return err
			}
			_, recs, err := record.Decode(p.Records)
			if err != nil {
				return err
			}
			pr := &pb.ProducePartitionResponse{Topic: p.Topic, Partition: p.Partition, BaseOffset: -1}
			b.mu.Lock()
			last, known := b.lastSeq[h.ProducerID]
			switch {
			case known && h.LastSequence() == last:
				pr.ErrorCode = pb.ErrorCode_DUPLICATE_SEQUENCE_NUMBER
			case known && h.BaseSequence != last+1:
				b.outOfOrder++
				pr.ErrorCode, pr.ErrorMessage = pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER, fmt.Sprintf("expected %d, received %d", last+1, h.BaseSequence)
			default:
				b.lastSeq[h.ProducerID] = h.LastSequence()
				pr.BaseOffset = int64(len(b.values))
				for _, rec := range recs {
					b.values = append(b.values, string(rec.Value))
				}
			}
			b.mu.Unlock()
			resp.Partitions = append(resp.Partitions, pr)
		}
		send(resp)
	}
}

// TestFirstBatchGoesAlone: until a partition has acknowledged a batch under
// the producer's id, the producer sends it one batch at a time. Otherwise,
// when the first batch is refused retriably, the batches in flight behind it
// are accepted by a leader that does not know the producer, and the retried
// first batch lands behind them or is refused OUT_OF_ORDER_SEQUENCE_NUMBER.
func TestFirstBatchGoesAlone(t *testing.T) {
	b := &seqBroker{lastSeq: map[int64]int32{}, more: make(chan struct{}, 16)}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.addr = lis.Addr().String()
	srv := grpc.NewServer()
	pb.RegisterMetadataServer(srv, b)
	pb.RegisterProducerServer(srv, b)
	pb.RegisterTransactionsServer(srv, b)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)

	p, err := NewProducer(Bootstrap(b.addr), Logger(testutil.Logger()), Linger(0), BatchSize(64), MaxInFlight(5), RetryBackoff(10*time.Millisecond, 50*time.Millisecond),
		RequestTimeout(2*time.Second), DeliveryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	defer p.Close(ctx)
	const n = 40
	var recs []*Record
	for i := 0; i < n; i++ {
		recs = append(recs, &Record{Topic: "t", Value: []byte(fmt.Sprintf("v%02d", i))})
	}
	if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.outOfOrder != 0 {
		t.Errorf("%d batches were refused OUT_OF_ORDER_SEQUENCE_NUMBER", b.outOfOrder)
	}
	if len(b.values) != n {
		t.Fatalf("the broker has %d records, want %d: %v", len(b.values), n, b.values)
	}
	for i, v := range b.values {
		if want := fmt.Sprintf("v%02d", i); v != want {
			t.Fatalf("record %d is %s, want %s (order: %v)", i, v, want, b.values)
		}
	}
}
