package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/strand-io/strand/client"
)

// A producer sends records asynchronously: Produce buffers a record and
// calls its promise with the outcome. Records with the same key go to the
// same partition and keep their order there.
func ExampleProducer() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := client.NewProducer(client.Bootstrap(bootstrap), client.Compression(client.Zstd))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)

	for _, status := range []string{"created", "paid", "shipped"} {
		rec := &client.Record{Topic: "orders", Key: []byte("order-17"), Value: []byte(status)}
		p.Produce(ctx, rec, func(r *client.Record, err error) {
			if err != nil {
				log.Printf("%s: %v (%v)", r.Value, err, client.Classify(err))
				return
			}
			fmt.Printf("%s: written to %s-%d\n", r.Value, r.Topic, r.Partition)
		})
	}
	// Flush sends what is buffered and waits until every record has its
	// outcome (its promise has run).
	if err := p.Flush(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// created: written to orders-0
	// paid: written to orders-0
	// shipped: written to orders-0
}

// Producers are idempotent by default: with acks=all, every batch carries
// the producer's id and a sequence number, so a batch sent again after a
// lost answer is written once. A setting that contradicts idempotence is
// refused.
func ExampleProducer_idempotent() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := client.NewProducer(client.Bootstrap(bootstrap),
		client.RequiredAcks(client.AllISRAcks),         // the default
		client.EnableIdempotence(client.IdempotenceOn), // the default
		client.MaxInFlight(5))                          // at most 5 with idempotence
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)

	// ProduceSync sends at once and waits for every record.
	res := p.ProduceSync(ctx,
		&client.Record{Topic: "payments", Key: []byte("account-9"), Value: []byte("+100")},
		&client.Record{Topic: "payments", Key: []byte("account-9"), Value: []byte("-30")})
	if err := res.FirstErr(); err != nil {
		log.Fatal(err)
	}
	for _, r := range res {
		fmt.Printf("%s: written under a producer id: %v\n", r.Record.Value, r.Record.ProducerID >= 0)
	}

	_, err = client.NewProducer(client.Bootstrap(bootstrap), client.EnableIdempotence(client.IdempotenceOn), client.RequiredAcks(client.LeaderAck))
	fmt.Println(err)
	// Output:
	// +100: written under a producer id: true
	// -30: written under a producer id: true
	// strand: enable.idempotence requires acks=all, got acks=1
}

// A transactional producer writes records atomically: read_committed
// consumers see all of a transaction or none of it, and never an aborted
// one.
func ExampleProducer_transactions() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := client.NewProducer(client.Bootstrap(bootstrap), client.TransactionalID("ledger-writer"))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)
	// Once per producer: it gets the id's producer epoch and fences any
	// older producer with the same transactional id.
	if err := p.InitTransactions(ctx); err != nil {
		log.Fatal(err)
	}

	if err := p.BeginTransaction(); err != nil {
		log.Fatal(err)
	}
	p.Produce(ctx, &client.Record{Topic: "ledger", Value: []byte("debit A 10")}, nil)
	p.Produce(ctx, &client.Record{Topic: "ledger", Value: []byte("credit B 10")}, nil)
	// CommitTransaction waits for the transaction's records, then commits.
	// On failure, Classify says what to do: Abortable: AbortTransaction and
	// begin again; CommitOutcomeUnknown (ErrCommitOutcomeUnknown): call
	// CommitTransaction again; ApplicationRecoverable (ErrProducerFenced):
	// close this producer.
	if err := p.CommitTransaction(ctx); err != nil {
		log.Fatalf("%v (%v)", err, client.Classify(err))
	}

	if err := p.BeginTransaction(); err != nil {
		log.Fatal(err)
	}
	p.Produce(ctx, &client.Record{Topic: "ledger", Value: []byte("debit A 99")}, nil)
	if err := p.AbortTransaction(ctx); err != nil {
		log.Fatal(err)
	}

	// A read_committed consumer reads the committed transaction only.
	c, err := client.NewConsumer(client.Bootstrap(bootstrap), client.Isolation(client.ReadCommitted),
		client.GroupID("ledger-audit"), client.Topics("ledger"), client.AutoOffsetReset(client.ResetEarliest))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	for n := 0; n < 2; {
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
	// debit A 10
	// credit B 10
}
