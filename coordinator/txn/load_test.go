package txn

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TestLoadServesOnlyWhatTheISRHas: a coordinator taking over a
// transaction log partition whose log ends past its high watermark (the
// previous coordinator's last write, adding orders-1 to a transaction,
// was never acknowledged) must not answer from that write: a follower
// without it may be elected next, and a partition leader told "orders-1
// is in the transaction" would append a batch no marker ever ends. It
// holds requests (LoadHold) and answers COORDINATOR_LOAD_IN_PROGRESS
// until the HW reaches the log end, then from what it loaded. (Found by the simulation: seed 20292 with
// -profile leadership -faults 12 left such a hanging transaction.)
func TestLoadServesOnlyWhatTheISRHas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig(1)
		const id = "app"
		key := storage.PartitionKey{Topic: cfg.Topic.Name, Partition: cfg.Topic.PartitionOf(nil, id)}
		scfg := storage.DefaultConfig()
		scfg.RetentionMs = -1
		l, err := storage.Open(t.TempDir(), key, scfg, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()

		// What the previous coordinator wrote: a committed transaction
		// over orders-0, acknowledged, then orders-1 added to the next
		// one, not acknowledged.
		h := newTxnHistory(appendTo(l))
		if err := h.init(id); err != nil {
			t.Fatal(err)
		}
		if err := h.transaction(id, true, []TopicPartition{{"orders", 0}}); err != nil {
			t.Fatal(err)
		}
		acked := l.LogEndOffset()
		m := h.txns[id]
		pid, epoch := m.ProducerID, m.ProducerEpoch
		orders1 := []TopicPartition{{"orders", 1}}
		if _, err := h.do(id, Request{Kind: KindAddPartitions, TxnVersion: 2, ProducerID: pid, Epoch: epoch, Partitions: orders1}); err != nil {
			t.Fatal(err)
		}

		const leaderEpoch = 5
		p := broker.NewPartition(key, l, acked)
		if err := l.AssignEpoch(leaderEpoch); err != nil {
			t.Fatal(err)
		}
		isr := []int32{1, 2}
		if err := p.SetLeadership(broker.Leadership{Role: broker.RoleLeader, Leader: 1, LeaderEpoch: leaderEpoch, Replicas: isr, ISR: isr, MaximalISR: isr}, nil); err != nil {
			t.Fatal(err)
		}
		c := New(cfg, nil, nil, nil, nil)
		defer func() { c.cancel(); c.wg.Wait() }() // Stop without the marker sender, which needs a replication manager
		c.BecameLeader(p, leaderEpoch)
		synctest.Wait() // the load has read the log and waits for the HW

		ctx := context.Background()
		add := func(ctx context.Context) error { return c.AddPartitions(ctx, id, pid, epoch, false, orders1, 2) }
		// A request is held for the load (LoadHold), and answered
		// COORDINATOR_LOAD_IN_PROGRESS when the hold or its own time ends
		// first.
		began := time.Now()
		if err := add(ctx); errs.CodeOf(err) != pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS {
			t.Fatalf("with the log's last write above the HW, adding orders-1 answered %v, want COORDINATOR_LOAD_IN_PROGRESS", err)
		}
		if held := time.Since(began); held != cfg.LoadHold {
			t.Fatalf("the request was held %v, want LoadHold (%v)", held, cfg.LoadHold)
		}
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if err := add(short); errs.CodeOf(err) != pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS {
			t.Fatalf("a request whose deadline ends before the load answered %v, want COORDINATOR_LOAD_IN_PROGRESS", err)
		}

		// A request held while the follower fetches the tail: the HW
		// reaches the log end, and the coordinator answers it from what it
		// loaded (orders-1 is in the transaction already, so nothing is
		// written).
		held := make(chan error, 1)
		go func() { held <- add(ctx) }()
		time.Sleep(300 * time.Millisecond) // virtual time (synctest)
		p.SetHighWatermark(l.LogEndOffset(), false)
		if err := <-held; err != nil {
			t.Fatalf("once the ISR has the log, the held request answered %v", err)
		}
		if err := add(ctx); err != nil {
			t.Fatalf("once the ISR has the log, adding orders-1 answered %v", err)
		}
		st := c.Describe([]string{id})
		if len(st) != 1 || len(st[0].Partitions) != 1 || st[0].Partitions[0].Topic != "orders" || st[0].Partitions[0].Partition != 1 {
			t.Fatalf("described %v, want the open transaction over orders-1", st)
		}
	})
}
