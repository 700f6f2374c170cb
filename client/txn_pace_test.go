package client_test

// Real cluster on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testcluster"
)

// TestBackToBackTransactionsDoNotWaitABackoff: the first record of a
// transaction usually reaches the coordinator (through the partition
// leader's AddPartitionsToTxn) while the previous transaction's markers are
// still being written. The coordinator waits for them instead of answering
// CONCURRENT_TRANSACTIONS, so a producer with a 2 s retry backoff still
// runs ten small transactions back to back in far less than one backoff
// each (answering CONCURRENT_TRANSACTIONS would cost about 20 s).
func TestBackToBackTransactionsDoNotWaitABackoff(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Mutate: func(id int32, cfg *node.Config) {
		cfg.TxnTopic.Partitions = 1
	}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c.CreateTopic("pace", 1, 3, map[string]string{"min.insync.replicas": "2"})
	p, err := client.NewProducer(c.ClientOpts(client.TransactionalID("pace"), client.RetryBackoff(2*time.Second, 2*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	run := func() {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, &client.Record{Topic: "pace", Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := p.CommitTransaction(ctx); err != nil {
			t.Fatal(err)
		}
	}
	run() // warm up: the transaction log partition is created on first use
	start := time.Now()
	const txns = 10
	for i := 0; i < txns; i++ {
		run()
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("%d back-to-back transactions took %s: the producer is waiting retry backoffs", txns, d.Round(time.Millisecond))
	} else {
		t.Logf("%d back-to-back transactions in %s", txns, d.Round(time.Millisecond))
	}
}
