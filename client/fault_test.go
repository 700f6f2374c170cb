package client_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/client"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/testutil"
)

// dropResponses is a stream interceptor that loses a share of Produce
// answers after the broker has acted on them, the way a lost response does.
type dropResponses struct {
	rate    float64
	dropped atomic.Int64
	mu      sync.Mutex
	rng     *rand.Rand
}

func (d *dropResponses) intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != pb.Producer_Produce_FullMethodName {
		return s, err
	}
	return &droppingStream{ClientStream: s, d: d}, nil
}

type droppingStream struct {
	grpc.ClientStream
	d *dropResponses
}

func (s *droppingStream) RecvMsg(m any) error {
	for {
		if err := s.ClientStream.RecvMsg(m); err != nil {
			return err
		}
		s.d.mu.Lock()
		drop := s.d.rng.Float64() < s.d.rate
		s.d.mu.Unlock()
		if !drop {
			return nil
		}
		s.d.dropped.Add(1)
	}
}

// TestProducerExactlyOnceWithLostResponses: with responses lost, every
// record is acknowledged exactly once, none is duplicated in the log, and
// each partition holds its records in send order, with 5 requests in flight;
// with batches of batch.size, and with batches allowed to grow
// (batch.max.size) while the window is full, so that retried batches may be
// bigger than batch.size.
func TestProducerExactlyOnceWithLostResponses(t *testing.T) {
	for _, c := range []struct{ batch, batchMax int }{{512, 512}, {128, 512}} {
		t.Run(fmt.Sprintf("batch.size=%d,batch.max.size=%d", c.batch, c.batchMax), func(t *testing.T) { exactlyOnceWithLostResponses(t, c.batch, c.batchMax) })
	}
}

func exactlyOnceWithLostResponses(t *testing.T, batch, batchMax int) {
	n := testutil.StartDev(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm, _ := client.NewAdmin(client.Bootstrap(n.Addr()))
	defer adm.Close()
	const parts = 3
	if err := adm.CreateTopic(ctx, client.TopicSpec{Name: "lossy", Partitions: parts, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	drop := &dropResponses{rate: 0.2, rng: rand.New(rand.NewPCG(1, 2))}
	p, err := client.NewProducer(client.Bootstrap(n.Addr()), client.MaxInFlight(5), client.Linger(2*time.Millisecond), client.BatchSize(batch), client.BatchMaxSize(batchMax),
		client.RequestTimeout(300*time.Millisecond), client.DeliveryTimeout(time.Minute), client.RetryBackoff(10*time.Millisecond, 50*time.Millisecond),
		client.WithPartitioner(client.ManualPartitioner{}),
		client.DialOptions(grpc.WithStreamInterceptor(drop.intercept)))
	if err != nil {
		t.Fatal(err)
	}
	const N = 3000
	var acked sync.Map
	var ackErrs atomic.Int64
	var wg sync.WaitGroup
	wg.Add(N)
	for i := 0; i < N; i++ {
		rec := &client.Record{Topic: "lossy", Partition: int32(i % parts), Value: []byte(strconv.Itoa(i))}
		p.Produce(ctx, rec, func(r *client.Record, err error) {
			defer wg.Done()
			if err != nil {
				ackErrs.Add(1)
				t.Errorf("record %s: %v", r.Value, err)
				return
			}
			if _, dup := acked.LoadOrStore(string(r.Value), r.Offset); dup {
				t.Errorf("record %s acknowledged twice", r.Value)
			}
		})
	}
	wg.Wait()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if drop.dropped.Load() == 0 {
		t.Fatal("the interceptor dropped nothing; the test proves nothing")
	}
	t.Logf("dropped %d responses", drop.dropped.Load())
	// Read everything back.
	c, _ := client.NewConsumer(client.Bootstrap(n.Addr()))
	defer c.Close(ctx)
	assign := map[client.TopicPartition]int64{}
	for i := int32(0); i < parts; i++ {
		assign[client.TopicPartition{Topic: "lossy", Partition: i}] = client.OffsetEarliest
	}
	c.Assign(assign)
	seen := map[int]bool{}
	last := map[int32]int{0: -1, 1: -1, 2: -1}
	for len(seen) < N {
		recs, err := c.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			v, _ := strconv.Atoi(string(r.Value))
			if seen[v] {
				t.Fatalf("record %d is in the log twice", v)
			}
			seen[v] = true
			if v <= last[r.Partition] {
				t.Fatalf("partition %d: %d after %d, out of send order", r.Partition, v, last[r.Partition])
			}
			last[r.Partition] = v
			if off, ok := acked.Load(string(r.Value)); !ok || off.(int64) != r.Offset {
				t.Fatalf("record %d at offset %d was acknowledged at %v", v, r.Offset, off)
			}
		}
	}
	// Nothing beyond the N records.
	lo, err := adm.ListOffsets(ctx, []client.TopicPartition{{"lossy", 0}, {"lossy", 1}, {"lossy", 2}}, client.OffsetLatest, client.ReadUncommitted)
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	for _, o := range lo {
		total += o.HighWatermark
	}
	if total != N {
		t.Fatalf("logs hold %d records, want %d", total, N)
	}
}
