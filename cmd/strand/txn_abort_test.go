package main

// Real node on real time: the strand CLI under test dials its --bootstrap address
// over real TCP; it has no in-memory dialer that could reach MemNet.

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/testutil"
)

// TestTransactionsAbortEndsHangingTransaction: `strand transactions
// find-hanging` finds a transaction open on a partition that no
// coordinator knows (written straight to the log, as a marker lost for good
// would leave it), and `strand transactions abort` ends it through the
// leader's AbortTransaction: the LSO reaches the HW and read_committed
// readers skip its records. The node's transaction.max.timeout.ms is 1 ms
// here, so the transaction is old enough to abort at once; an abort of a
// younger one is refused, and so is one naming no open transaction.
func TestTransactionsAbortEndsHangingTransaction(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) { cfg.TxnConfig.MaxTimeout = time.Millisecond })
	b := "--bootstrap=" + n.Addr()
	run(t, "", "topics", "create", "stuck", "--partitions", "1", b)
	run(t, "before\n", "produce", "stuck", "--partition", "0", b)
	batch, err := record.Build(record.BatchOptions{ProducerID: 4242, ProducerEpoch: 3, BaseSequence: 0, Transactional: true, PartitionLeaderEpoch: -1},
		[]record.Record{{Value: []byte("hanging"), Timestamp: time.Now().Add(-time.Hour).UnixMilli()}})
	if err != nil {
		t.Fatal(err)
	}
	a := n.Repl.AppendLeader("stuck", 0, batch, -1)
	if a.Err != nil {
		t.Fatal(a.Err)
	}
	start := a.Result.FirstOffset
	run(t, "after\n", "produce", "stuck", "--partition", "0", b)

	hanging := run(t, "", "transactions", "find-hanging", "--topic", "stuck", "--max-transaction-timeout", "0", b)
	mustContain(t, hanging, "4242", strconv.FormatInt(start, 10))
	if out, _, err := runErr(t, "", "transactions", "abort", "--topic", "stuck", "--partition", "0", "--start-offset", strconv.FormatInt(start+1, 10), b); err == nil {
		t.Fatalf("abort of a transaction starting at %d, where none starts, succeeded: %s", start+1, out)
	}
	run(t, "", "transactions", "abort", "--topic", "stuck", "--partition", "0", "--start-offset", strconv.FormatInt(start, 10), b)
	out := run(t, "", "consume", "stuck", "--from-beginning", "--isolation-level", "read_committed", "--timeout", "3s", b)
	if got := strings.Fields(out); strings.Join(got, " ") != "before after" {
		t.Fatalf("read_committed after the abort: %q, want before after", got)
	}
	if out, _, err := runErr(t, "", "transactions", "abort", "--topic", "stuck", "--partition", "0", "--start-offset", strconv.FormatInt(start, 10), b); err == nil {
		t.Fatalf("a second abort succeeded: %s", out)
	}
}

// TestTransactionsAbortRefusesYoungTransaction: with Kafka's default
// transaction.max.timeout.ms (15 minutes), a transaction that just opened
// cannot be aborted from outside: its coordinator may still commit it.
func TestTransactionsAbortRefusesYoungTransaction(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	b := "--bootstrap=" + n.Addr()
	run(t, "", "topics", "create", "young", "--partitions", "1", b)
	batch, err := record.Build(record.BatchOptions{ProducerID: 4243, ProducerEpoch: 0, BaseSequence: 0, Transactional: true, PartitionLeaderEpoch: -1},
		[]record.Record{{Value: []byte("young"), Timestamp: time.Now().Add(-time.Hour).UnixMilli()}})
	if err != nil {
		t.Fatal(err)
	}
	a := n.Repl.AppendLeader("young", 0, batch, -1)
	if a.Err != nil {
		t.Fatal(a.Err)
	}
	_, stderr, err := runErr(t, "", "transactions", "abort", "--topic", "young", "--partition", "0", "--start-offset", strconv.FormatInt(a.Result.FirstOffset, 10), b)
	if err == nil || !strings.Contains(stderr, "INVALID_TXN_STATE") || !strings.Contains(stderr, "transaction.max.timeout.ms") {
		t.Fatalf("abort of a transaction open for a moment: %v\n%s", err, stderr)
	}
}
