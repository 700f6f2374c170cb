package txn_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

func newTxnProducer(t *testing.T, addr, id string, opts ...client.Opt) *client.Producer {
	t.Helper()
	p, err := client.NewProducer(append([]client.Opt{client.Bootstrap(addr), client.TransactionalID(id), client.WithPartitioner(client.ManualPartitioner{}),
		client.MaxBlock(10 * time.Second), client.RetryBackoff(20*time.Millisecond, 200*time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	return p
}

func setupTopic(t *testing.T, n *node.Node, name string) {
	t.Helper()
	adm, _ := client.NewAdmin(client.Bootstrap(n.Addr()))
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := adm.CreateTopic(ctx, client.TopicSpec{Name: name, Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
}

func waitLSO(t *testing.T, addr, topic string, want int64) {
	t.Helper()
	adm, _ := client.NewAdmin(client.Bootstrap(addr))
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tp := client.TopicPartition{Topic: topic, Partition: 0}
	var last client.PartitionOffsets
	if wait.Until(20*time.Second, "the LSO and HW", func() bool {
		lo, err := adm.ListOffsets(ctx, []client.TopicPartition{tp}, client.OffsetLatest, client.ReadCommitted)
		if err != nil {
			t.Fatal(err)
		}
		last = lo[tp]
		return last.LastStableOffset == want && last.HighWatermark == want
	}) != nil {
		t.Fatalf("LSO %d HW %d, want both %d", last.LastStableOffset, last.HighWatermark, want)
	}
}

// TestFencing: a second producer with the same transactional id while the
// first has a transaction open. The first's records are aborted, its next
// send fails with an invalid-epoch error, its commit fails as fenced.
func TestFencing(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	setupTopic(t, n, "f")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first := newTxnProducer(t, n.Addr(), "worker")
	if err := first.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	txnProduce(t, first, "f", "z1", "z2")

	second := newTxnProducer(t, n.Addr(), "worker")
	if err := second.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	_, e1 := first.ProducerID()
	_, e2 := second.ProducerID()
	if e2 <= e1 {
		t.Fatalf("second producer epoch %d not above the first's %d", e2, e1)
	}
	// The first producer's next send fails with an invalid epoch.
	res := first.ProduceSync(ctx, &client.Record{Topic: "f", Partition: 0, Value: []byte("z3")})
	if err := res.FirstErr(); !errors.Is(err, client.ErrInvalidProducerEpoch) {
		t.Fatalf("zombie send: %v, want INVALID_PRODUCER_EPOCH", err)
	}
	if client.Classify(res.FirstErr()) != client.Abortable {
		t.Fatalf("zombie send classified %v, want abortable", client.Classify(res.FirstErr()))
	}
	// Its commit fails as fenced, and so does everything after.
	if err := first.CommitTransaction(ctx); err == nil {
		t.Fatal("the fenced producer committed")
	}
	if err := first.AbortTransaction(ctx); !errors.Is(err, client.ErrProducerFenced) {
		t.Fatalf("fenced abort: %v, want PRODUCER_FENCED", err)
	}
	if err := first.BeginTransaction(); !errors.Is(err, client.ErrProducerFenced) {
		t.Fatalf("begin after fence: %v", err)
	}
	// The new producer works; the zombie's records were aborted.
	if err := second.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	txnProduce(t, second, "f", "ok1")
	if err := second.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	waitLSO(t, n.Addr(), "f", 5) // z1 z2 ABORT ok1 COMMIT
	com, _ := consumeAll(t, n.Addr(), client.ReadCommitted, "f", 5)
	if got := values(com); got != "ok1" {
		t.Fatalf("read_committed sees %q, want just ok1", got)
	}
}

// TestTransactionTimeout: a transaction left open past its
// transaction.timeout.ms is aborted by the coordinator (with an epoch
// bump) and the LSO moves on. The producer learns why.
func TestTransactionTimeout(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) {
		cfg.TxnConfig.AbortTimedOutInterval = 100 * time.Millisecond
	})
	setupTopic(t, n, "slow")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := newTxnProducer(t, n.Addr(), "slowpoke", client.TransactionTimeout(500*time.Millisecond))
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	txnProduce(t, p, "slow", "late1", "late2")
	// Nothing else: the coordinator aborts after 500 ms and the LSO passes the marker.
	waitLSO(t, n.Addr(), "slow", 3)
	err := p.CommitTransaction(ctx)
	if !errors.Is(err, client.ErrTransactionTimedOut) {
		t.Fatalf("commit after the timeout: %v, want TRANSACTION_TIMED_OUT", err)
	}
	if client.Classify(err) != client.Abortable {
		t.Fatalf("timeout classified %v, want abortable", client.Classify(err))
	}
	// Aborting is accepted and the producer carries on.
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	txnProduce(t, p, "slow", "fresh")
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	waitLSO(t, n.Addr(), "slow", 5)
	com, _ := consumeAll(t, n.Addr(), client.ReadCommitted, "slow", 5)
	if got := values(com); got != "fresh" {
		t.Fatalf("read_committed sees %q", got)
	}
}
