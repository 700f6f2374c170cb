package client

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/testutil"
)

// holdingBroker is one broker that leads partition 0 of topic "t" and
// answers produce requests only once it holds `hold` of them unanswered
// (or 300 ms have passed), recording the most it ever held.
type holdingBroker struct {
	pb.UnimplementedMetadataServer
	pb.UnimplementedProducerServer
	addr string
	hold int

	mu      sync.Mutex
	most    int
	batches int
}

func (b *holdingBroker) Metadata(ctx context.Context, req *pb.MetadataRequest) (*pb.MetadataResponse, error) {
	return &pb.MetadataResponse{ClusterId: "c", ControllerId: 1,
		Brokers: []*pb.BrokerInfo{{NodeId: 1, Address: b.addr}},
		Topics:  []*pb.TopicMetadata{{Name: "t", Partitions: []*pb.PartitionMetadata{{Partition: 0, LeaderId: 1, Replicas: []int32{1}, Isr: []int32{1}}}}}}, nil
}

func (b *holdingBroker) Produce(stream pb.Producer_ProduceServer) error {
	reqs := make(chan *pb.ProduceRequest)
	errc := make(chan error, 1)
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				errc <- err
				return
			}
			reqs <- r
		}
	}()
	var held []*pb.ProduceRequest
	next := int64(0)
	flush := func() error {
		for _, r := range held {
			resp := &pb.ProduceResponse{CorrelationId: r.CorrelationId}
			for _, p := range r.Partitions {
				resp.Partitions = append(resp.Partitions, &pb.ProducePartitionResponse{Topic: p.Topic, Partition: p.Partition, BaseOffset: next})
				next += 1000
			}
			if err := stream.Send(resp); err != nil {
				return err
			}
		}
		held = held[:0]
		return nil
	}
	for {
		t := time.NewTimer(300 * time.Millisecond)
		select {
		case r := <-reqs:
			t.Stop()
			held = append(held, r)
			b.mu.Lock()
			b.batches += len(r.Partitions)
			b.most = max(b.most, len(held))
			b.mu.Unlock()
			if len(held) >= b.hold {
				if err := flush(); err != nil {
					return err
				}
			}
		case <-t.C:
			if err := flush(); err != nil {
				return err
			}
		case err := <-errc:
			return err
		}
	}
}

// TestFlushKeepsTheWindowFull: while Flush (or a transaction's commit)
// drains a backlog, the producer keeps max.in.flight requests outstanding
// to the partition's leader, not just the one each answer frees.
func TestFlushKeepsTheWindowFull(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &holdingBroker{addr: lis.Addr().String(), hold: 5}
	srv := grpc.NewServer()
	pb.RegisterMetadataServer(srv, b)
	pb.RegisterProducerServer(srv, b)
	go srv.Serve(lis)
	defer srv.Stop()

	p, err := NewProducer(Bootstrap(b.addr), EnableIdempotence(IdempotenceOff), Linger(time.Minute), BatchSize(1024), MaxInFlight(5), Logger(testutil.Logger()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	defer p.Close(ctx)
	// 40 batches of 1 KiB wait in the accumulator (linger.ms is a minute).
	for i := 0; i < 40; i++ {
		p.Produce(ctx, &Record{Topic: "t", Value: make([]byte, 1000)}, nil)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.batches != 40 {
		t.Fatalf("broker saw %d batches; want 40", b.batches)
	}
	if b.most != 5 {
		t.Fatalf("at most %d produce requests were outstanding during Flush; want max.in.flight = 5", b.most)
	}
}
