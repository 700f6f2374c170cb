package txn_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

func values(recs []*client.Record) string {
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Value))
	}
	return strings.Join(out, " ")
}

func consumeAll(t *testing.T, addr string, iso client.IsolationLevel, topic string, until int64) ([]*client.Record, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.NewConsumer(client.Bootstrap(addr), client.Isolation(iso), client.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	tp := client.TopicPartition{Topic: topic, Partition: 0}
	c.Assign(map[client.TopicPartition]int64{tp: client.OffsetEarliest})
	var out []*client.Record
	for c.Position(tp) < until {
		recs, err := c.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, recs...)
	}
	return out, c.Position(tp)
}

func txnProduce(t *testing.T, p *client.Producer, topic string, vals ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var recs []*client.Record
	for _, v := range vals {
		recs = append(recs, &client.Record{Topic: topic, Partition: 0, Value: []byte(v)})
	}
	if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestDemoFlow is `make demo` as a test and worked example 1
// (docs/ARCHITECTURE.md, "Worked examples") with its exact offsets, epochs,
// .txnindex and transaction-log states: transaction A (c1..c3) commits,
// B (a1..a3) aborts, C (c4..c5) commits, on one partition.
func TestDemoFlow(t *testing.T) {
	dir := t.TempDir()
	n := testutil.StartDev(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm, _ := client.NewAdmin(client.Bootstrap(n.Addr()))
	defer adm.Close()
	if err := adm.CreateTopic(ctx, client.TopicSpec{Name: "demo", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	p, err := client.NewProducer(client.Bootstrap(n.Addr()), client.TransactionalID("order-writer"), client.WithPartitioner(client.ManualPartitioner{}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	step := func(name string, commit bool, vals ...string) {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		txnProduce(t, p, "demo", vals...)
		if name == "B" {
			lo, err := adm.ListOffsets(ctx, []client.TopicPartition{{Topic: "demo", Partition: 0}}, client.OffsetLatest, client.ReadUncommitted)
			if err != nil {
				t.Fatal(err)
			}
			o := lo[client.TopicPartition{Topic: "demo", Partition: 0}]
			if o.HighWatermark != 7 || o.LastStableOffset != 4 {
				t.Fatalf("while B is open: HW %d LSO %d, want 7 and 4", o.HighWatermark, o.LastStableOffset)
			}
		}
		var err error
		if commit {
			err = p.CommitTransaction(ctx)
		} else {
			err = p.AbortTransaction(ctx)
		}
		if err != nil {
			t.Fatalf("end %s: %v", name, err)
		}
	}
	step("A", true, "c1", "c2", "c3")
	step("B", false, "a1", "a2", "a3")
	step("C", true, "c4", "c5")

	// Markers are written asynchronously after EndTxn answers: wait for the LSO.
	wait.Eventually(t, 10*time.Second, "the LSO to reach 11", func() bool {
		lo, err := adm.ListOffsets(ctx, []client.TopicPartition{{Topic: "demo", Partition: 0}}, client.OffsetLatest, client.ReadCommitted)
		if err != nil {
			t.Fatal(err)
		}
		o := lo[client.TopicPartition{Topic: "demo", Partition: 0}]
		if o.LastStableOffset == 11 && o.HighWatermark == 11 && !o.LastIsControl {
			t.Fatal("the record below the HW is a COMMIT marker, ListOffsets should say so")
		}
		return o.LastStableOffset == 11 && o.HighWatermark == 11
	})
	unc, posU := consumeAll(t, n.Addr(), client.ReadUncommitted, "demo", 11)
	com, posC := consumeAll(t, n.Addr(), client.ReadCommitted, "demo", 11)
	if got := values(unc); got != "c1 c2 c3 a1 a2 a3 c4 c5" {
		t.Fatalf("read_uncommitted: %s", got)
	}
	if got := values(com); got != "c1 c2 c3 c4 c5" {
		t.Fatalf("read_committed: %s", got)
	}
	if posU != 11 || posC != 11 {
		t.Fatalf("positions %d and %d, want 11", posU, posC)
	}
	// Worked example 1 exactly: the log (data batches of one epoch merged,
	// since batch boundaries vary), the .txnindex entry with its LSO, and
	// the transaction log's states with their epochs.
	if got, want := strings.Join(mergeData(batchesOf(t, n, "demo", false)), " "),
		"data@0-2/e0 COMMIT@3-3/e1 data@4-6/e1 ABORT@7-7/e2 data@8-9/e2 COMMIT@10-10/e3"; got != want {
		t.Fatalf("batches %s, want %s", got, want)
	}
	part := n.Parts.Get(storage.PartitionKey{Topic: "demo", Partition: 0})
	aborted := part.Log.AllAborted()
	if len(aborted) != 1 || aborted[0].FirstOffset != 4 || aborted[0].LastOffset != 7 || aborted[0].LastStableOffset != 8 {
		t.Fatalf(".txnindex holds %+v, want one entry first 4 last 7 lastStableOffset 8", aborted)
	}
	want := "Empty(0) Ongoing(0) PrepareCommit(1) CompleteCommit(1) Ongoing(1) PrepareAbort(2) CompleteAbort(2) Ongoing(2) PrepareCommit(3) CompleteCommit(3)"
	var states string
	_ = wait.Until(10*time.Second, "the last CompleteCommit", func() bool {
		states = strings.Join(txnLogStates(t, n, "order-writer"), " ")
		return strings.HasSuffix(states, "CompleteCommit(3)")
	})
	if states != want {
		t.Fatalf("transaction log %s, want %s", states, want)
	}
	_ = filepath.Join
	_ = node.Config{}
}

// mergeData merges consecutive data batches of one epoch (as batchesOf
// lists them) into one range.
func mergeData(batches []string) []string {
	var out []string
	for _, b := range batches {
		var first, last int64
		var epoch int
		if _, err := fmt.Sscanf(b, "data@%d-%d/e%d", &first, &last, &epoch); err == nil && len(out) > 0 {
			var pf, pl int64
			var pe int
			if _, err := fmt.Sscanf(out[len(out)-1], "data@%d-%d/e%d", &pf, &pl, &pe); err == nil && pe == epoch && pl+1 == first {
				out[len(out)-1] = fmt.Sprintf("data@%d-%d/e%d", pf, last, epoch)
				continue
			}
		}
		out = append(out, b)
	}
	return out
}
