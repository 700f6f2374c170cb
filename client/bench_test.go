package client_test

// Real node on real time: a benchmark measures real throughput on real sockets,
// disks and CPUs; virtual time would make its numbers meaningless.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/testkit/testutil"
)

// BenchmarkProduce is the SDK producing 1 KiB records end to end against a
// one-node server on loopback (acks=all, idempotent, linger 5 ms, 16 KiB
// batches, 5 in flight). b.N records.
func BenchmarkProduce(b *testing.B) {
	for _, size := range []int{100, 1024} {
		b.Run(fmt.Sprintf("acks=all/record=%dB", size), func(b *testing.B) {
			n := testutil.StartDev(b, b.TempDir())
			ctx := context.Background()
			adm, _ := client.NewAdmin(client.Bootstrap(n.Addr()))
			defer adm.Close()
			if err := adm.CreateTopic(ctx, client.TopicSpec{Name: "bench", Partitions: 1, ReplicationFactor: 1}); err != nil {
				b.Fatal(err)
			}
			p, err := client.NewProducer(client.Bootstrap(n.Addr()), client.BatchSize(64<<10))
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close(ctx)
			value := make([]byte, size)
			var wg sync.WaitGroup
			var failed int64
			var mu sync.Mutex
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			wg.Add(b.N)
			for i := 0; i < b.N; i++ {
				p.Produce(ctx, &client.Record{Topic: "bench", Value: value}, func(_ *client.Record, err error) {
					if err != nil {
						mu.Lock()
						failed++
						mu.Unlock()
					}
					wg.Done()
				})
			}
			wg.Wait()
			b.StopTimer()
			if failed > 0 {
				b.Fatalf("%d records failed", failed)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkConsume reads b.N 1 KiB records back (read_uncommitted).
func BenchmarkConsume(b *testing.B) {
	n := testutil.StartDev(b, b.TempDir())
	ctx := context.Background()
	adm, _ := client.NewAdmin(client.Bootstrap(n.Addr()))
	defer adm.Close()
	if err := adm.CreateTopic(ctx, client.TopicSpec{Name: "bench", Partitions: 1, ReplicationFactor: 1}); err != nil {
		b.Fatal(err)
	}
	p, _ := client.NewProducer(client.Bootstrap(n.Addr()), client.BatchSize(64<<10))
	value := make([]byte, 1024)
	for i := 0; i < b.N; i++ {
		p.Produce(ctx, &client.Record{Topic: "bench", Value: value}, nil)
	}
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	p.Close(ctx)
	c, _ := client.NewConsumer(client.Bootstrap(n.Addr()))
	defer c.Close(ctx)
	b.SetBytes(1024)
	b.ReportAllocs()
	b.ResetTimer()
	c.Assign(map[client.TopicPartition]int64{{Topic: "bench", Partition: 0}: client.OffsetEarliest})
	got := 0
	deadline := time.Now().Add(time.Minute)
	for got < b.N && time.Now().Before(deadline) {
		recs, err := c.Poll(ctx)
		if err != nil {
			b.Fatal(err)
		}
		got += len(recs)
	}
	b.StopTimer()
	if got != b.N {
		b.Fatalf("consumed %d of %d", got, b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
