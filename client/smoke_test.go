package client_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/testkit/testutil"
)

func TestProduceConsumeSmoke(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm, err := client.NewAdmin(client.Bootstrap(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if err := adm.CreateTopic(ctx, client.TopicSpec{Name: "orders", Partitions: 3, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	p, err := client.NewProducer(client.Bootstrap(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	const N = 1000
	errc := make(chan error, N)
	for i := 0; i < N; i++ {
		p.Produce(ctx, &client.Record{Topic: "orders", Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprint(i))}, func(r *client.Record, err error) { errc <- err })
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < N; i++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	p.Close(ctx)
	c, err := client.NewConsumer(client.Bootstrap(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	c.Assign(map[client.TopicPartition]int64{{"orders", 0}: client.OffsetEarliest, {"orders", 1}: client.OffsetEarliest, {"orders", 2}: client.OffsetEarliest})
	seen := map[string]bool{}
	for len(seen) < N {
		recs, err := c.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if seen[string(r.Value)] {
				t.Fatalf("duplicate %s", r.Value)
			}
			seen[string(r.Value)] = true
		}
	}
}
