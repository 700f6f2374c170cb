package kafka_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/testkit/testcluster"
)

// TestFranzRoundTrip: franz-go, a client nobody here wrote, finds the
// three brokers through Metadata, produces idempotently with acks=all to
// every partition, and reads everything back in order per partition.
func TestFranzRoundTrip(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	c.CreateTopic("rt", 3, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()[0]), kgo.DefaultProduceTopic("rt"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	// Metadata lists every broker at its Kafka address.
	mreq := kmsg.NewPtrMetadataRequest()
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(mresp.Brokers) != 3 {
		t.Fatalf("metadata lists %d brokers, want 3", len(mresp.Brokers))
	}
	want := map[string]bool{}
	for _, a := range c.KafkaAddrs() {
		want[a] = true
	}
	for _, b := range mresp.Brokers {
		if a := fmt.Sprintf("%s:%d", b.Host, b.Port); !want[a] {
			t.Fatalf("broker %d advertised at %s, which is not a Kafka listener (%v)", b.NodeID, a, c.KafkaAddrs())
		}
	}

	const n = 300
	for i := range n {
		r := &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i%7)), Value: []byte(fmt.Sprintf("v%d", i)), Partition: int32(i % 3)}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	cons, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.ConsumeTopics("rt"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[int32][]string{}
	total := 0
	for total < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", total, n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Errorf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			total++
		})
	}
	for p := int32(0); p < 3; p++ {
		var want []string
		for i := int(p); i < n; i += 3 {
			want = append(want, fmt.Sprintf("v%d", i))
		}
		if fmt.Sprint(got[p]) != fmt.Sprint(want) {
			t.Fatalf("partition %d read %v, want %v", p, got[p], want)
		}
	}
}
