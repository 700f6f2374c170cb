package replication_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/testkit/testcluster"
)

// BenchmarkProduceRF3 is acks=all produce to a replicated topic (RF 3,
// min ISR 2) on the in-process three-node cluster: one idempotent SDK
// producer, 1 KiB records, b.N records, Kafka's default 16 KiB batches and
// 64 KiB ones. All nodes and the client share
// the machine's cores.
func BenchmarkProduceRF3(b *testing.B) {
	for _, bench := range []struct {
		parts     int32
		batchSize int
	}{{1, 16 << 10}, {1, 64 << 10}, {6, 64 << 10}} {
		parts := bench.parts
		b.Run(fmt.Sprintf("partitions=%d/batch=%dKiB/record=1KiB", parts, bench.batchSize>>10), func(b *testing.B) {
			c := testcluster.New(b, testcluster.Options{})
			c.CreateTopic("bench", parts, 3, map[string]string{"min.insync.replicas": "2"})
			p, err := client.NewProducer(c.ClientOpts(client.BatchSize(bench.batchSize))...)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			defer p.Close(ctx)
			value := make([]byte, 1024)
			var failed atomic.Int64
			var wg sync.WaitGroup
			wg.Add(b.N)
			b.SetBytes(1024)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p.Produce(ctx, &client.Record{Topic: "bench", Value: value}, func(_ *client.Record, err error) {
					if err != nil {
						failed.Add(1)
					}
					wg.Done()
				})
			}
			wg.Wait()
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d records failed", n)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
