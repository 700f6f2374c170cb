package client_test

import (
	"context"
	"fmt"
	"log"
	"strconv"
	"time"

	"github.com/strand-io/strand/client"
)

// A TransactSession reads, transforms and writes exactly once: what it
// writes and the input offsets it consumed commit in one transaction.
func ExampleTransactSession() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := client.NewProducer(client.Bootstrap(bootstrap))
	if err != nil {
		log.Fatal(err)
	}
	var in []*client.Record
	for _, n := range []string{"3", "1", "4"} {
		in = append(in, &client.Record{Topic: "numbers", Value: []byte(n)})
	}
	if err := p.ProduceSync(ctx, in...).FirstErr(); err != nil {
		log.Fatal(err)
	}
	p.Close(ctx)

	s, err := client.NewTransactSession(ctx, client.Bootstrap(bootstrap),
		client.GroupID("doubler"), client.Topics("numbers"),
		// One transactional id per process, the same after a restart.
		client.TransactionalID("doubler-1"),
		// A new group starts at the end of its topics; this one reads what
		// is already there.
		client.AutoOffsetReset(client.ResetEarliest))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)
	for done := 0; done < len(in); {
		recs, err := s.Poll(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if len(recs) == 0 {
			continue // nothing arrived: no transaction to open
		}
		if err := s.Begin(); err != nil {
			log.Fatal(err)
		}
		for _, r := range recs {
			n, _ := strconv.Atoi(string(r.Value))
			s.Produce(ctx, &client.Record{Topic: "doubled", Key: r.Key, Value: []byte(strconv.Itoa(2 * n))}, nil)
		}
		committed, err := s.End(ctx, client.TryCommit)
		if err != nil {
			// ErrProducerFenced: another process took over the
			// transactional id. ErrCommitOutcomeUnknown: call End again.
			log.Fatal(err)
		}
		if committed {
			done += len(recs)
		}
		// Otherwise End aborted (partitions were revoked, or a write
		// failed) and rewound the consumer: the records come again.
	}

	c, err := client.NewConsumer(client.Bootstrap(bootstrap), client.Isolation(client.ReadCommitted),
		client.GroupID("doubled-reader"), client.Topics("doubled"), client.AutoOffsetReset(client.ResetEarliest))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	for n := 0; n < len(in); {
		recs, err := c.Poll(ctx)
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range recs {
			fmt.Println(string(r.Value))
			n++
		}
	}
	// Output:
	// 6
	// 2
	// 8
}
