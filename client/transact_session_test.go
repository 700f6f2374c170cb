package client_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// stageWorker runs one consume-transform-produce worker until stop; with
// crashAfter > 0 it "dies" in the middle of its crashAfter-th transaction:
// it leaves its transaction open and disappears.
func stageWorker(t *testing.T, ctx context.Context, addr, group, in, out, txnID, prefix string, crashAfter int, stop <-chan struct{}) (crashed bool) {
	s, err := client.NewTransactSession(ctx, client.Bootstrap(addr), client.GroupID(group), client.Topics(in), client.TransactionalID(txnID),
		client.AutoOffsetReset(client.ResetEarliest), client.SessionTimeout(6*time.Second), client.HeartbeatInterval(200*time.Millisecond),
		client.FetchMaxWait(100*time.Millisecond), client.MaxPollRecords(20), client.WithPartitioner(client.ManualPartitioner{}))
	if err != nil {
		t.Errorf("%s: %v", txnID, err)
		return false
	}
	txns := 0
	for {
		select {
		case <-stop:
			s.Close(context.Background())
			return false
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		recs, err := s.Poll(pctx)
		cancel()
		if err != nil && ctx.Err() == nil && pctx.Err() == nil {
			t.Logf("%s poll: %v", txnID, err)
			continue
		}
		if len(recs) == 0 {
			continue
		}
		if err := s.Begin(); err != nil {
			t.Errorf("%s begin: %v", txnID, err)
			return false
		}
		for _, r := range recs {
			s.Produce(ctx, &client.Record{Topic: out, Partition: r.Partition, Value: []byte(prefix + string(r.Value))}, nil)
		}
		txns++
		if crashAfter > 0 && txns == crashAfter {
			if err := s.Producer().Flush(ctx); err != nil {
				t.Errorf("flush: %v", err)
			}
			// Die mid-transaction: its records are in the log, uncommitted; its
			// group membership ends, its transaction stays open.
			s.Consumer().Close(context.Background())
			return true
		}
		if _, err := s.End(ctx, client.TryCommit); err != nil {
			t.Logf("%s end: %v", txnID, err)
		}
	}
}

func readCommitted(t *testing.T, ctx context.Context, addr, topic string, parts int32) map[string]int {
	t.Helper()
	adm, _ := client.NewAdmin(client.Bootstrap(addr))
	defer adm.Close()
	var tps []client.TopicPartition
	assign := map[client.TopicPartition]int64{}
	for p := int32(0); p < parts; p++ {
		tp := client.TopicPartition{Topic: topic, Partition: p}
		tps = append(tps, tp)
		assign[tp] = client.OffsetEarliest
	}
	ends, err := adm.ListOffsets(ctx, tps, client.OffsetLatest, client.ReadCommitted)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := client.NewConsumer(client.Bootstrap(addr), client.Isolation(client.ReadCommitted), client.FetchMaxWait(50*time.Millisecond))
	defer c.Close(ctx)
	c.Assign(assign)
	seen := map[string]int{}
	for {
		done := true
		for _, tp := range tps {
			if c.Position(tp) < ends[tp].LastStableOffset {
				done = false
			}
		}
		if done {
			return seen
		}
		recs, err := c.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			seen[string(r.Value)]++
		}
	}
}

// TestConsumeTransformProduceExactlyOnce: two stages (t1 → t2 → t3), two
// workers each; one worker of the first stage dies in the middle of a
// transaction and is restarted with the same transactional id. The output
// holds every input exactly once, and the committed offsets agree with it.
func TestConsumeTransformProduceExactlyOnce(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) {
		cfg.GroupConfig.InitialRebalanceDelay = 0
		cfg.TxnTopic.Partitions, cfg.OffsetsTopic.Partitions = 5, 5
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm, _ := client.NewAdmin(client.Bootstrap(n.Addr()))
	defer adm.Close()
	const parts, N = 3, 300
	for _, topic := range []string{"t1", "t2", "t3"} {
		if err := adm.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: parts, ReplicationFactor: 1}); err != nil {
			t.Fatal(err)
		}
	}
	p, _ := client.NewProducer(client.Bootstrap(n.Addr()), client.WithPartitioner(client.ManualPartitioner{}))
	var recs []*client.Record
	for i := 0; i < N; i++ {
		recs = append(recs, &client.Record{Topic: "t1", Partition: int32(i % parts), Value: []byte(fmt.Sprintf("v%03d", i))})
	}
	if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p.Close(ctx)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	run := func(group, in, out, id, prefix string, crashAfter int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if stageWorker(t, ctx, n.Addr(), group, in, out, id, prefix, crashAfter, stop) {
				t.Logf("%s crashed mid-transaction; restarting it", id)
				stageWorker(t, ctx, n.Addr(), group, in, out, id, prefix, 0, stop)
			}
		}()
	}
	run("s1", "t1", "t2", "s1-w0", "a:", 3)
	run("s1", "t1", "t2", "s1-w1", "a:", 0)
	run("s2", "t2", "t3", "s2-w0", "b:", 0)
	run("s2", "t2", "t3", "s2-w1", "b:", 0)

	var out map[string]int
	_ = wait.Until(2*time.Minute, "every output committed", func() bool {
		out = readCommitted(t, ctx, n.Addr(), "t3", parts)
		return len(out) >= N
	})
	close(stop)
	wg.Wait()
	for i := 0; i < N; i++ {
		v := fmt.Sprintf("b:a:v%03d", i)
		if out[v] != 1 {
			t.Fatalf("output %s appears %d times (outputs: %d distinct)", v, out[v], len(out))
		}
	}
	if len(out) != N {
		t.Fatalf("%d distinct outputs, want %d", len(out), N)
	}
	mid := readCommitted(t, ctx, n.Addr(), "t2", parts)
	for v, c := range mid {
		if c != 1 || !strings.HasPrefix(v, "a:") {
			t.Fatalf("stage 1 output %s appears %d times", v, c)
		}
	}
	// Committed offsets agree with the output: each stage's group has
	// committed exactly its input's end (every input consumed once).
	for _, st := range []struct{ group, in string }{{"s1", "t1"}, {"s2", "t2"}} {
		var tps []client.TopicPartition
		for p := int32(0); p < parts; p++ {
			tps = append(tps, client.TopicPartition{Topic: st.in, Partition: p})
		}
		ends, err := adm.ListOffsets(ctx, tps, client.OffsetLatest, client.ReadCommitted)
		if err != nil {
			t.Fatal(err)
		}
		got, err := adm.CommittedOffsets(ctx, st.group, tps)
		if err != nil {
			t.Fatal(err)
		}
		for _, tp := range tps {
			if got[tp] != ends[tp].LastStableOffset {
				t.Fatalf("group %s committed %d for %s, its input ends at %d", st.group, got[tp], tp, ends[tp].LastStableOffset)
			}
		}
	}
}
