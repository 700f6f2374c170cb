package kafka_test

// Real cluster on real time: a benchmark measures real throughput on real sockets,
// disks and CPUs; virtual time would make its numbers meaningless.

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strand-io/strand/testkit/testcluster"
)

// BenchmarkFranzProduce: franz-go producing 1 KiB records, idempotent,
// acks=all, to one partition of RF 3 through the Kafka listener of an
// in-process cluster (b.N records; MB/s of payload), uncompressed as
// strand perf produce sends them. With -cpuprofile it
// shows the listener's share of the produce path (api/kafka's frames,
// decoding, answers) beside the request layer's and storage's.
func BenchmarkFranzProduce(b *testing.B) {
	c := testcluster.New(b, testcluster.Options{})
	c.CreateTopic("bench", 1, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.DefaultProduceTopic("bench"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression())) // as strand perf produce sends
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	value := make([]byte, 1024)
	// Warm up: metadata, the producer id, the connections.
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(value)))
	b.ResetTimer()
	for range b.N {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
}
