package txn_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"testing"
	"time"

	"github.com/strand-io/strand/coordinator/txn"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// TestOpenTransactionsCapPerPrincipal: with
// transaction.max.open.per.principal=2, a principal's third transaction is
// refused THROTTLING_QUOTA_EXCEEDED (retriable) until one of its two ends;
// the owner is the principal its InitProducerId was answered to, not the
// caller of AddPartitions (a partition leader under transaction version 2,
// here with no session at all); another principal is not counted against
// it; adding a partition to a transaction already open is not opening one.
func TestOpenTransactionsCapPerPrincipal(t *testing.T) {
	w := newCapWorld(t)
	a1, a2, a3, b1 := w.init("alice", "a1"), w.init("alice", "a2"), w.init("alice", "a3"), w.init("bob", "b1")
	for _, c := range []struct {
		id string
		p  capIDs
	}{{"a1", a1}, {"a2", a2}} {
		if err := w.add(c.id, c.p, 0); err != nil {
			t.Fatalf("%s: %v", c.id, err)
		}
	}
	err := w.add("a3", a3, 0)
	if errs.CodeOf(err) != pb.ErrorCode_THROTTLING_QUOTA_EXCEEDED {
		t.Fatalf("alice's third open transaction: %v, want THROTTLING_QUOTA_EXCEEDED", err)
	}
	if !errs.IsRetriable(err) {
		t.Error("THROTTLING_QUOTA_EXCEEDED not retriable (Kafka's is)")
	}
	if err := w.add("a1", a1, 1); err != nil {
		t.Fatalf("another partition in alice's open transaction: %v", err)
	}
	if err := w.add("b1", b1, 0); err != nil {
		t.Fatalf("bob's transaction counted against alice: %v", err)
	}
	if _, err := w.n.TxnCoord.EndTxn(w.ctx, "a1", a1.pid, a1.epoch, false, 2); err != nil {
		t.Fatal(err)
	}
	// Once a1's abort is complete (its markers written), a3 may open.
	if err := wait.UntilNil(20*time.Second, "a3 opening after a1 ended", func() error { return w.add("a3", a3, 0) }); err != nil {
		t.Fatal(err)
	}
}

// TestOpenTransactionsCapCatchesPlantedBug: with the cap counting the
// caller of AddPartitions (a partition leader, no producer session) the
// principal's third transaction opens: the check above would fail.
func TestOpenTransactionsCapCatchesPlantedBug(t *testing.T) {
	defer planted.Set(planted.OpenTxnCapCountsCaller)()
	w := newCapWorld(t)
	a1, a2, a3 := w.init("alice", "a1"), w.init("alice", "a2"), w.init("alice", "a3")
	for _, c := range []struct {
		id string
		p  capIDs
	}{{"a1", a1}, {"a2", a2}, {"a3", a3}} {
		if err := w.add(c.id, c.p, 0); err != nil {
			t.Fatalf("with the planted bug %s was refused (%v): the bug is not what the check catches", c.id, err)
		}
	}
}

type capIDs struct {
	pid   int64
	epoch int16
}

type capWorld struct {
	t   *testing.T
	n   *node.Node
	ctx context.Context
}

// newCapWorld: a node with transaction.max.open.per.principal=2 and a
// topic c of 2 partitions' worth of names (the coordinator does not check
// partitions exist).
func newCapWorld(t *testing.T) *capWorld {
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) { cfg.TxnConfig.MaxOpenPerPrincipal = 2 })
	setupTopic(t, n, "c")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	// A transactional producer with no session makes __transaction_state.
	warm := newTxnProducer(t, n.Addr(), "warm")
	if err := warm.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	return &capWorld{t: t, n: n, ctx: ctx}
}

func (w *capWorld) init(user, id string) capIDs {
	w.t.Helper()
	var r txn.InitProducerIdResult
	uctx := auth.NewContext(w.ctx, auth.Session{Principal: auth.User(user)})
	if err := wait.UntilNil(20*time.Second, "InitProducerId "+id, func() (err error) {
		r, err = w.n.TxnCoord.InitProducerId(uctx, id, 60000, -1, -1)
		return err
	}); err != nil {
		w.t.Fatal(err)
	}
	return capIDs{r.ProducerID, r.Epoch}
}

// add is a partition leader's AddPartitions (transaction version 2): no
// session of the producer's in its context.
func (w *capWorld) add(id string, p capIDs, partition int32) error {
	return w.n.TxnCoord.AddPartitions(w.ctx, id, p.pid, p.epoch, false, []txn.TopicPartition{{Topic: "c", Partition: partition}}, 2)
}
