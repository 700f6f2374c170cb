package client

import (
	"context"
	"errors"
	"testing"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// offlineProducer knows topic "bench" (one partition led by broker 1) from
// injected metadata and never gets a producer id, so it accumulates
// batches and sends nothing: the accumulator on its own.
func offlineProducer(tb testing.TB, opts ...Opt) *Producer {
	tb.Helper()
	p, err := NewProducer(append([]Opt{Bootstrap("127.0.0.1:1")}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	p.mu.Lock()
	p.pidState = pidFetching // drain returns before sending anything
	p.mu.Unlock()
	p.cl.apply(&pb.MetadataResponse{
		Brokers: []*pb.BrokerInfo{{NodeId: 1, Address: "127.0.0.1:1"}},
		Topics:  []*pb.TopicMetadata{{Name: "bench", Partitions: []*pb.PartitionMetadata{{Partition: 0, LeaderId: 1}}}},
	})
	tb.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = p.Close(ctx)
	})
	return p
}

// dropQueued forgets every closed batch, as if sent and acknowledged.
func dropQueued(p *Producer) {
	p.mu.Lock()
	for _, pp := range p.parts {
		for _, b := range pp.queued {
			p.bufUsed -= b.size
		}
		pp.queued = nil
	}
	p.mu.Unlock()
}

// BenchmarkProducerAppend is Produce of one 1 KiB record into the
// accumulator (metadata cached, 16 KiB batches, nothing sent): what a
// record costs the application's goroutine, allocations included (the
// caller's Record is reused and not counted).
func BenchmarkProducerAppend(b *testing.B) {
	p := offlineProducer(b, BufferMemory(1<<40))
	ctx := context.Background()
	value := make([]byte, 1024)
	recs := make([]Record, 4096)
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == len(recs) {
			b.StopTimer()
			dropQueued(p)
			i = 0
			b.StartTimer()
		}
		r := &recs[i]
		*r = Record{Topic: "bench", Value: value}
		p.Produce(ctx, r, nil)
		i++
	}
}

// BenchmarkDrainQueued is one drain of a producer whose buffer holds 2048
// queued batches (32 MiB of 1 KiB records, as under an unthrottled load)
// while it has no producer id yet: the part of every drain that does not
// depend on sending.
func BenchmarkDrainQueued(b *testing.B) {
	p := offlineProducer(b, BufferMemory(1<<40))
	ctx := context.Background()
	value := make([]byte, 1024)
	for i := 0; i < 2048*16; i++ {
		p.Produce(ctx, &Record{Topic: "bench", Value: value}, nil)
	}
	p.mu.Lock()
	queued := len(p.parts[TopicPartition{"bench", 0}].queued)
	p.mu.Unlock()
	if queued < 2000 {
		b.Fatalf("%d batches queued", queued)
	}
	b.ReportAllocs()
	for b.Loop() {
		p.drain()
	}
}

// TestExpireQueued: delivery.timeout.ms fails exactly the queued batches
// that are too old, whatever their place in the queue, keeps the others in
// order, and is looked at again once the oldest one left can expire.
func TestExpireQueued(t *testing.T) {
	p := offlineProducer(t, BufferMemory(1<<40), DeliveryTimeout(time.Minute))
	ctx := context.Background()
	failed := make(chan error, 16)
	prom := func(_ *Record, err error) { failed <- err }
	for i := 0; i < 4; i++ {
		p.Produce(ctx, &Record{Topic: "bench", Value: []byte{byte(i)}}, prom)
		p.mu.Lock()
		p.closeOpen(p.parts[TopicPartition{"bench", 0}])
		p.mu.Unlock()
	}
	now := time.Now()
	p.mu.Lock()
	pp := p.parts[TopicPartition{"bench", 0}]
	if len(pp.queued) != 4 {
		p.mu.Unlock()
		t.Fatalf("%d batches queued, want 4", len(pp.queued))
	}
	q := append([]*pbatch(nil), pp.queued...)
	// Batches 0 and 2 are past the timeout, 1 and 3 are not.
	q[0].created = now.Add(-2 * time.Minute)
	q[1].created = now.Add(-30 * time.Second)
	q[2].created = now.Add(-90 * time.Second)
	q[3].created = now
	p.nextExpiry = time.Time{}
	p.expireLocked(now)
	got := append([]*pbatch(nil), pp.queued...)
	next := p.nextExpiry
	p.mu.Unlock()
	if len(got) != 2 || got[0] != q[1] || got[1] != q[3] {
		t.Fatalf("queued after expiry: %v, want batches 1 and 3", got)
	}
	if want := q[1].created.Add(time.Minute); !next.Equal(want) {
		t.Fatalf("next look at %v, want %v (when batch 1 expires)", next, want)
	}
	for i := 0; i < 2; i++ {
		select {
		case err := <-failed:
			if !errors.Is(err, ErrDeliveryTimeout) {
				t.Fatalf("expired batch failed with %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("an expired batch was not failed")
		}
	}
	// Before batch 1's deadline nothing is looked at; at it, batch 1 goes.
	p.mu.Lock()
	p.expireLocked(next.Add(-time.Millisecond))
	n1 := len(pp.queued)
	p.expireLocked(next)
	n2 := len(pp.queued)
	p.mu.Unlock()
	if n1 != 2 || n2 != 1 {
		t.Fatalf("queued %d before and %d at batch 1's deadline, want 2 and 1", n1, n2)
	}
	select {
	case err := <-failed:
		if !errors.Is(err, ErrDeliveryTimeout) {
			t.Fatalf("expired batch failed with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("batch 1 was not failed at its deadline")
	}
}
