package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/strand-io/strand/client"
)

// Consumers that share a group id share the partitions of their topics,
// and the group's committed offsets say where it resumes. A group with no
// committed offset for a partition starts at its end
// (auto.offset.reset=latest, as in Kafka): ResetEarliest reads what is
// already there.
func ExampleConsumer_group() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := client.NewProducer(client.Bootstrap(bootstrap))
	if err != nil {
		log.Fatal(err)
	}
	var recs []*client.Record
	for _, page := range []string{"home", "cart", "checkout"} {
		recs = append(recs, &client.Record{Topic: "clicks", Value: []byte(page)})
	}
	if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		log.Fatal(err)
	}
	p.Close(ctx)

	c, err := client.NewConsumer(client.Bootstrap(bootstrap),
		client.GroupID("click-counter"), client.Topics("clicks"),
		client.AutoOffsetReset(client.ResetEarliest),
		client.AutoCommit(0)) // commit by hand, below
	if err != nil {
		log.Fatal(err)
	}
	// Close commits nothing here (auto-commit is off) and leaves the group,
	// so the others rebalance at once.
	defer c.Close(ctx)
	for n := 0; n < 3; {
		// Poll joins the group on its first call, and returns what
		// arrives within fetch.max.wait.ms (possibly nothing).
		recs, err := c.Poll(ctx)
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range recs {
			fmt.Printf("%s (%s-%d)\n", r.Value, r.Topic, r.Partition)
			n++
		}
	}
	// A restarted member of the group resumes after what was polled.
	if err := c.CommitPolled(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// home (clicks-0)
	// cart (clicks-0)
	// checkout (clicks-0)
}
