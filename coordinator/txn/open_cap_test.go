package txn_test

import (
	"context"
	"testing"
	"time"

	"github.com/strand-io/strand/coordinator/txn"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/auth"
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
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) { cfg.TxnConfig.MaxOpenPerPrincipal = 2 })
	setupTopic(t, n, "c")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A transactional producer with no session makes __transaction_state.
	warm := newTxnProducer(t, n.Addr(), "warm")
	if err := warm.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	as := func(user string) context.Context {
		return auth.NewContext(ctx, auth.Session{Principal: auth.User(user)})
	}
	type ids struct {
		pid   int64
		epoch int16
	}
	init := func(user, id string) ids {
		t.Helper()
		var r txn.InitProducerIdResult
		if err := wait.UntilNil(20*time.Second, "InitProducerId "+id, func() (err error) {
			r, err = n.TxnCoord.InitProducerId(as(user), id, 60000, -1, -1)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return ids{r.ProducerID, r.Epoch}
	}
	leaderCtx := context.Background() // the leader's call: no session of the producer's
	add := func(id string, p ids, partition int32) error {
		return n.TxnCoord.AddPartitions(leaderCtx, id, p.pid, p.epoch, false, []txn.TopicPartition{{Topic: "c", Partition: partition}}, 2)
	}
	a1, a2, a3, b1 := init("alice", "a1"), init("alice", "a2"), init("alice", "a3"), init("bob", "b1")
	for _, c := range []struct {
		id string
		p  ids
	}{{"a1", a1}, {"a2", a2}} {
		if err := add(c.id, c.p, 0); err != nil {
			t.Fatalf("%s: %v", c.id, err)
		}
	}
	err := add("a3", a3, 0)
	if errs.CodeOf(err) != pb.ErrorCode_THROTTLING_QUOTA_EXCEEDED {
		t.Fatalf("alice's third open transaction: %v, want THROTTLING_QUOTA_EXCEEDED", err)
	}
	if !errs.IsRetriable(err) {
		t.Error("THROTTLING_QUOTA_EXCEEDED not retriable (Kafka's is)")
	}
	if err := add("a1", a1, 1); err != nil {
		t.Fatalf("another partition in alice's open transaction: %v", err)
	}
	if err := add("b1", b1, 0); err != nil {
		t.Fatalf("bob's transaction counted against alice: %v", err)
	}
	if _, err := n.TxnCoord.EndTxn(ctx, "a1", a1.pid, a1.epoch, false, 2); err != nil {
		t.Fatal(err)
	}
	// Once a1's abort is complete (its markers written), a3 may open.
	if err := wait.UntilNil(20*time.Second, "a3 opening after a1 ended", func() error { return add("a3", a3, 0) }); err != nil {
		t.Fatal(err)
	}
}
