package replication_test

// Real cluster on real time: a benchmark measures real throughput on real sockets,
// disks and CPUs; virtual time would make its numbers meaningless.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

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

// BenchmarkProduceTLS is BenchmarkProduceRF3's one-partition, 64 KiB-batch
// case with TLS off and on: on, every listener speaks TLS (the
// producer's gRPC connection with a client certificate, replication, the
// Raft transport) and gossip is encrypted. The two cases run in
// STRAND_BENCH_ROUNDS rounds (default 3) in this one process, interleaved,
// the order swapped every round; each run starts a fresh cluster.
func BenchmarkProduceTLS(b *testing.B) {
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("STRAND_BENCH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	cases := []struct {
		name string
		tls  *testcluster.TLSOptions
	}{{"tls=off", nil}, {"tls=on", &testcluster.TLSOptions{}}}
	for r := 1; r <= rounds; r++ {
		for _, tc := range cases {
			b.Run(fmt.Sprintf("round=%d/%s/record=1KiB", r, tc.name), func(b *testing.B) {
				c := testcluster.New(b, testcluster.Options{TLS: tc.tls})
				c.CreateTopic("bench", 1, 3, map[string]string{"min.insync.replicas": "2"})
				p, err := client.NewProducer(c.ClientOpts(client.BatchSize(64 << 10))...)
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
				cpu0 := processCPU(b)
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
				cpu := processCPU(b) - cpu0
				if n := failed.Load(); n > 0 {
					b.Fatalf("%d records failed", n)
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
				// The process's CPU time (all three nodes and the
				// producer) per record: less at the mercy of other
				// processes on the machine than the wall-clock rate.
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/record")
			})
		}
		cases[0], cases[1] = cases[1], cases[0]
	}
}

// processCPU is the CPU time (user + system) this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
