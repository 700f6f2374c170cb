package txn_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/coordinator"
	"github.com/strand-io/strand/coordinator/txn"
	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// batchesOf lists a partition's batches as kind@first-last/eEPOCH (kind is
// data, COMMIT or ABORT), with the producer id when withPID.
func batchesOf(t *testing.T, n *node.Node, topic string, withPID bool) []string {
	t.Helper()
	part := n.Parts.Get(storage.PartitionKey{Topic: topic, Partition: 0})
	end := part.Log.LogEndOffset()
	res, err := part.Log.Read(0, 1<<20, end, true)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for it := record.NewIter(res.Records); it.Next(); {
		h := it.Header()
		kind := "data"
		if h.IsControl() {
			typ, _, err := record.ReadControlBatch(it.Batch())
			if err != nil {
				t.Fatal(err)
			}
			kind = typ.String()
		}
		s := fmt.Sprintf("%s@%d-%d/e%d", kind, h.BaseOffset, h.LastOffset(), h.ProducerEpoch)
		if withPID {
			s += fmt.Sprintf("/p%d", h.ProducerID)
		}
		out = append(out, s)
	}
	return out
}

// txnLogStates lists the transaction log records of id as State(epoch).
func txnLogStates(t *testing.T, n *node.Node, id string) []string {
	t.Helper()
	topic := coordinator.DefaultTransactionTopic()
	part := n.Parts.Get(storage.PartitionKey{Topic: topic.Name, Partition: coordinator.PartitionFor(id, topic.Partitions)})
	end := part.Log.LogEndOffset()
	var out []string
	for off := part.Log.LogStartOffset(); off < end; {
		res, err := part.Log.Read(off, 1<<20, end, true)
		if err != nil {
			t.Fatal(err)
		}
		for it := record.NewIter(res.Records); it.Next(); {
			h := it.Header()
			off = h.NextOffset()
			_, recs, err := record.Decode(it.Batch())
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if k, err := txn.DecodeKey(r.Key); err != nil || k != id {
					continue
				}
				v, err := txn.DecodeValue(r.Value)
				if err != nil || v == nil {
					continue
				}
				out = append(out, fmt.Sprintf("%s(%d)", txn.State(v.TransactionStatus), v.ProducerEpoch))
			}
		}
	}
	return out
}

// txnLogRecords lists the transaction log records of id as
// State(producer/epoch), with ">next" when a next producer id is recorded
// and "^last" when a last epoch is; the producer ids are named P, Q, R in
// the order they first appear.
func txnLogRecords(t *testing.T, n *node.Node, id string) []string {
	t.Helper()
	topic := coordinator.DefaultTransactionTopic()
	part := n.Parts.Get(storage.PartitionKey{Topic: topic.Name, Partition: coordinator.PartitionFor(id, topic.Partitions)})
	names := map[int64]string{-1: "-"}
	name := func(pid int64) string {
		if _, ok := names[pid]; !ok {
			names[pid] = string(rune('P' + len(names) - 1))
		}
		return names[pid]
	}
	end := part.Log.LogEndOffset()
	var out []string
	for off := part.Log.LogStartOffset(); off < end; {
		res, err := part.Log.Read(off, 1<<20, end, true)
		if err != nil {
			t.Fatal(err)
		}
		for it := record.NewIter(res.Records); it.Next(); {
			h := it.Header()
			off = h.NextOffset()
			_, recs, err := record.Decode(it.Batch())
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if k, err := txn.DecodeKey(r.Key); err != nil || k != id {
					continue
				}
				v, err := txn.DecodeValue(r.Value)
				if err != nil || v == nil {
					continue
				}
				s := fmt.Sprintf("%s(%s/%d", txn.State(v.TransactionStatus), name(v.ProducerId), v.ProducerEpoch)
				if v.NextProducerId >= 0 {
					s += ">" + name(v.NextProducerId)
				}
				if v.LastProducerEpoch >= 0 {
					s += fmt.Sprintf("^%d", v.LastProducerEpoch)
				}
				out = append(out, s+")")
			}
		}
	}
	return out
}

// initAnswers records the error codes of the InitProducerId answers a
// client receives.
type initAnswers struct {
	mu    sync.Mutex
	codes []pb.ErrorCode
}

func (a *initAnswers) opt() client.Opt {
	return client.DialOptions(grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if r, ok := reply.(*pb.InitProducerIdResponse); ok && err == nil {
			a.mu.Lock()
			a.codes = append(a.codes, r.ErrorCode)
			a.mu.Unlock()
		}
		return err
	}))
}

func (a *initAnswers) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var s []string
	for _, c := range a.codes {
		s = append(s, c.String())
	}
	return strings.Join(s, " ")
}

// TestExample3Fencing is worked example 3 (docs/ARCHITECTURE.md, "Worked
// examples"), with its exact offsets, epochs and transaction-log states:
// two producers with one transactional id. Producer 1 gets P epoch 0 and writes z1 at offset 0; producer 2's
// InitProducerId fences it (the open transaction is aborted: ABORT marker
// at offset 1, epoch 1), answers CONCURRENT_TRANSACTIONS, and on retry P
// epoch 2; producer 1's z2 at epoch 0 is refused and not on disk; y1 at
// offset 2, epoch 2; COMMIT at offset 3, epoch 3. The transaction log holds
// Empty(0) Ongoing(0) PrepareAbort(1) CompleteAbort(1) Empty(2) Ongoing(2)
// PrepareCommit(3) CompleteCommit(3): PREPARE_EPOCH_FENCE is never written.
func TestExample3Fencing(t *testing.T) {
	got := runExample3(t)
	if got != "" {
		t.Fatal(got)
	}
	t.Run("planted: the fence writes PrepareEpochFence", func(t *testing.T) {
		defer planted.Set(planted.FenceWritesPrepareEpochFence)()
		if got := runExample3(t); !strings.Contains(got, "PrepareEpochFence") {
			t.Fatalf("with the bug put back example 3 reported %q; the planted bug no longer shows", got)
		}
	})
}

// runExample3 runs the example and returns what differs from it ("" if
// nothing).
func runExample3(t *testing.T) string {
	n := testutil.StartDev(t, t.TempDir())
	setupTopic(t, n, "u12-fence")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const id = "u12-fence"

	p1 := newTxnProducer(t, n.Addr(), id)
	if err := p1.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	pid, e := p1.ProducerID()
	if e != 0 {
		return fmt.Sprintf("producer 1 after initTransactions: (%d, %d), want epoch 0", pid, e)
	}
	if err := p1.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	txnProduce(t, p1, id, "z1")

	var answers initAnswers
	p2 := newTxnProducer(t, n.Addr(), id, answers.opt())
	if err := p2.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	var diffs []string
	if pid2, e2 := p2.ProducerID(); pid2 != pid || e2 != 2 {
		diffs = append(diffs, fmt.Sprintf("producer 2 after initTransactions: (%d, %d), want (%d, 2)", pid2, e2, pid))
	}
	if a := answers.String(); !strings.HasPrefix(a, "CONCURRENT_TRANSACTIONS") || !strings.HasSuffix(a, "NONE") {
		diffs = append(diffs, fmt.Sprintf("producer 2's InitProducerId answers: %s, want CONCURRENT_TRANSACTIONS first and NONE last", a))
	}
	res := p1.ProduceSync(ctx, &client.Record{Topic: id, Partition: 0, Value: []byte("z2")})
	if err := res.FirstErr(); !errors.Is(err, client.ErrInvalidProducerEpoch) {
		diffs = append(diffs, fmt.Sprintf("producer 1's z2: %v, want INVALID_PRODUCER_EPOCH", err))
	}
	if err := p1.CommitTransaction(ctx); err == nil {
		diffs = append(diffs, "producer 1 committed")
	}
	if err := p2.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	txnProduce(t, p2, id, "y1")
	if err := p2.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if pid2, e2 := p2.ProducerID(); pid2 != pid || e2 != 3 {
		diffs = append(diffs, fmt.Sprintf("producer 2 after commit: (%d, %d), want (%d, 3)", pid2, e2, pid))
	}
	waitLSO(t, n.Addr(), id, 4)
	if got, want := strings.Join(batchesOf(t, n, id, false), " "), "data@0-0/e0 ABORT@1-1/e1 data@2-2/e2 COMMIT@3-3/e3"; got != want {
		diffs = append(diffs, fmt.Sprintf("batches %s, want %s", got, want))
	}
	unc, _ := consumeAll(t, n.Addr(), client.ReadUncommitted, id, 4)
	com, _ := consumeAll(t, n.Addr(), client.ReadCommitted, id, 4)
	at := func(recs []*client.Record) string {
		var s []string
		for _, r := range recs {
			s = append(s, fmt.Sprintf("%s@%d", r.Value, r.Offset))
		}
		return strings.Join(s, " ")
	}
	if got := at(unc); got != "z1@0 y1@2" {
		diffs = append(diffs, fmt.Sprintf("read_uncommitted: %s, want z1@0 y1@2", got))
	}
	if got := at(com); got != "y1@2" {
		diffs = append(diffs, fmt.Sprintf("read_committed: %s, want y1@2", got))
	}
	// The transaction log: the completing records are written after the
	// markers, so wait for the last.
	want := "Empty(0) Ongoing(0) PrepareAbort(1) CompleteAbort(1) Empty(2) Ongoing(2) PrepareCommit(3) CompleteCommit(3)"
	var states string
	_ = wait.Until(10*time.Second, "the last CompleteCommit", func() bool {
		states = strings.Join(txnLogStates(t, n, id), " ")
		return strings.HasSuffix(states, "CompleteCommit(3)")
	})
	if states != want {
		diffs = append(diffs, fmt.Sprintf("transaction log %s, want %s", states, want))
	}
	return strings.Join(diffs, "; ")
}

// TestAbortBeforeAnySendLanded: a producer whose records never left its
// buffer aborts: the coordinator has no partition in the transaction (an
// empty abort under version 2) and answers NONE with a bumped epoch; the
// producer carries on. With the bug put back it got INVALID_TXN_STATE, a
// fatal error.
func TestAbortBeforeAnySendLanded(t *testing.T) {
	check := func(t *testing.T) error {
		n := testutil.StartDev(t, t.TempDir())
		setupTopic(t, n, "e")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p := newTxnProducer(t, n.Addr(), "early-abort", client.Linger(20*time.Second), client.DeliveryTimeout(time.Minute), client.BatchSize(1<<20))
		if err := p.InitTransactions(ctx); err != nil {
			t.Fatal(err)
		}
		_, e0 := p.ProducerID()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		p.Produce(ctx, &client.Record{Topic: "e", Partition: 0, Value: []byte("never")}, func(_ *client.Record, err error) { done <- err })
		if err := p.AbortTransaction(ctx); err != nil {
			return err
		}
		if err := <-done; !errors.Is(err, client.ErrAborted) {
			t.Fatalf("the buffered record: %v, want ErrAborted", err)
		}
		if _, e1 := p.ProducerID(); e1 != e0+1 {
			t.Fatalf("epoch %d after the empty abort, want %d", e1, e0+1)
		}
		if err := p.BeginTransaction(); err != nil {
			return err
		}
		txnProduce(t, p, "e", "after")
		if err := p.CommitTransaction(ctx); err != nil {
			return err
		}
		return nil
	}
	if err := check(t); err != nil {
		t.Fatalf("abort before any send landed: %v", err)
	}
	t.Run("planted", func(t *testing.T) {
		defer planted.Set(planted.EmptyAbortRefused)()
		if err := check(t); err == nil || !errors.Is(err, client.ErrInvalidTxnState) {
			t.Fatalf("with the bug put back: %v, want INVALID_TXN_STATE", err)
		}
	})
}

// startNearEpochEnd starts a dev node whose new transactional ids start at
// first (the testing knob drills use), with a one-partition topic.
func startNearEpochEnd(t *testing.T, first int16, topic string) *node.Node {
	t.Helper()
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) { cfg.TxnConfig.FirstEpoch = first })
	setupTopic(t, n, topic)
	return n
}

// TestEpochExhaustionCommits: a producer commits across the end of its
// epochs. The commit at epoch 32766 writes its marker at 32767 and hands the
// producer a new producer id at epoch 0; every record is read once by
// read_committed, and every marker is above its data.
func TestEpochExhaustionCommits(t *testing.T) {
	n := startNearEpochEnd(t, 32764, "x")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := newTxnProducer(t, n.Addr(), "long-lived")
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	pid, e := p.ProducerID()
	if e != 32764 {
		t.Fatalf("first epoch %d, want 32764", e)
	}
	var seen []string
	for i, v := range []string{"a", "b", "c", "d"} {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		txnProduce(t, p, "x", v)
		if err := p.CommitTransaction(ctx); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		np, ne := p.ProducerID()
		seen = append(seen, fmt.Sprintf("%d/%d", np, ne))
	}
	want := fmt.Sprintf("%d/32765 %d/32766 N/0 N/1", pid, pid)
	got := strings.Join(seen, " ")
	newPID, _ := p.ProducerID()
	if newPID == pid || strings.ReplaceAll(got, fmt.Sprint(newPID)+"/", "N/") != want {
		t.Fatalf("producer id/epoch after each commit: %s, want %s (N a new producer id)", got, want)
	}
	waitLSO(t, n.Addr(), "x", 8)
	com, _ := consumeAll(t, n.Addr(), client.ReadCommitted, "x", 8)
	if got := values(com); got != "a b c d" {
		t.Fatalf("read_committed: %s", got)
	}
	wantBatches := fmt.Sprintf("data@0-0/e32764/p%[1]d COMMIT@1-1/e32765/p%[1]d data@2-2/e32765/p%[1]d COMMIT@3-3/e32766/p%[1]d "+
		"data@4-4/e32766/p%[1]d COMMIT@5-5/e32767/p%[1]d data@6-6/e0/p%[2]d COMMIT@7-7/e1/p%[2]d", pid, newPID)
	if got := strings.Join(batchesOf(t, n, "x", true), " "); got != wantBatches {
		t.Fatalf("batches\n %s\nwant\n %s", got, wantBatches)
	}
}

// TestEpochExhaustionFence: a producer at epoch 32766 is fenced. As in
// Kafka, the abort is written at 32767 on the same producer id and
// completes there; the fencing producer's retried InitProducerId moves
// the transactional id to a new producer id at epoch 0 (never a wrapped
// epoch), and the fenced one is refused. With the rotation recorded with
// the abort (the planted fence-at-last-epoch-rotates-early) the fencing
// producer starts at epoch 1; with the fence's overflow check removed
// (fence-epoch-overflow) it is handed epoch -32768.
func TestEpochExhaustionFence(t *testing.T) {
	run := func(t *testing.T) (pid2 int64, e2 int16, pid int64, log []string) {
		n := startNearEpochEnd(t, 32766, "f")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p1 := newTxnProducer(t, n.Addr(), "at-the-end")
		if err := p1.InitTransactions(ctx); err != nil {
			t.Fatal(err)
		}
		pid, _ = p1.ProducerID()
		if err := p1.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		txnProduce(t, p1, "f", "z1")
		p2 := newTxnProducer(t, n.Addr(), "at-the-end")
		if err := p2.InitTransactions(ctx); err != nil {
			t.Fatal(err)
		}
		pid2, e2 = p2.ProducerID()
		if e2 < 0 {
			return pid2, e2, pid, nil
		}
		if err := p1.ProduceSync(ctx, &client.Record{Topic: "f", Partition: 0, Value: []byte("z2")}).FirstErr(); err == nil {
			t.Fatal("the fenced producer's z2 was accepted")
		}
		if err := p2.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		txnProduce(t, p2, "f", "y1")
		if err := p2.CommitTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		waitLSO(t, n.Addr(), "f", 4)
		if com, _ := consumeAll(t, n.Addr(), client.ReadCommitted, "f", 4); values(com) != "y1" {
			t.Fatalf("read_committed: %s", values(com))
		}
		_ = wait.Until(10*time.Second, "the last CompleteCommit", func() bool {
			log = txnLogRecords(t, n, "at-the-end")
			return len(log) > 0 && strings.HasPrefix(log[len(log)-1], "CompleteCommit")
		})
		return pid2, e2, pid, log
	}
	pid2, e2, pid, log := run(t)
	if pid2 == pid || e2 != 0 {
		t.Fatalf("after the fence at 32766 the new producer got %d/%d (the fenced one had %d); want a new producer id at epoch 0", pid2, e2, pid)
	}
	want := "Empty(P/32766) Ongoing(P/32766) PrepareAbort(P/32767) CompleteAbort(P/32767) Empty(Q/0) Ongoing(Q/0) PrepareCommit(Q/1^0) CompleteCommit(Q/1^0)"
	if got := strings.Join(log, " "); got != want {
		t.Fatalf("__transaction_state holds\n %s\nwant\n %s", got, want)
	}
	t.Run("planted early rotation", func(t *testing.T) {
		defer planted.Set(planted.FenceAtLastEpochRotatesEarly)()
		if _, e2, _, _ := run(t); e2 != 1 {
			t.Fatalf("with the rotation recorded with the abort the new producer got epoch %d; the planted bug no longer reproduces", e2)
		}
	})
	t.Run("planted overflow", func(t *testing.T) {
		defer planted.Set(planted.FenceEpochOverflow)()
		if _, e2, _, _ := run(t); e2 >= 0 {
			t.Fatalf("with the bug put back the new producer got epoch %d; the planted bug no longer reproduces", e2)
		}
	})
}

// TestEndTxnRetryAfterRotationEndToEnd: the answer to the EndTxn that
// rotated the producer id is lost; the producer retries it with the old id
// and epoch and gets the same answer.
func TestEndTxnRetryAfterRotationEndToEnd(t *testing.T) {
	n := startNearEpochEnd(t, 32766, "r")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := newTxnProducer(t, n.Addr(), "rotating")
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	pid, epoch := p.ProducerID()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	txnProduce(t, p, "r", "v")
	first, err := n.TxnCoord.EndTxn(ctx, "rotating", pid, epoch, true, 2)
	if err != nil || first.ProducerID == pid || first.Epoch != 0 {
		t.Fatalf("the rotating commit: %+v %v", first, err)
	}
	for i := 0; i < 2; i++ { // during the markers (likely) and after them
		again, err := n.TxnCoord.EndTxn(ctx, "rotating", pid, epoch, true, 2)
		if err != nil || again != first {
			t.Fatalf("retry %d of the rotating commit: %+v %v, want %+v", i, again, err, first)
		}
	}
	waitLSO(t, n.Addr(), "r", 2)
}

// TestExpiredTransactionalIDRecovers: a producer idle past
// transactional.id.expiration.ms finds its id forgotten
// (INVALID_PRODUCER_ID_MAPPING). As with Kafka's producer, that is
// abortable: the abort asks for a new producer id naming the old one
// (KIP-360), and the next transaction commits.
func TestExpiredTransactionalIDRecovers(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) {
		cfg.TxnConfig.IDExpiration = 200 * time.Millisecond
		cfg.TxnConfig.RemoveExpiredInterval = 50 * time.Millisecond
	})
	setupTopic(t, n, "idle")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := newTxnProducer(t, n.Addr(), "sleepy")
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	txnProduce(t, p, "idle", "before")
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 20*time.Second, "the id to expire", func() bool {
		return n.TxnCoord.Describe([]string{"sleepy"})[0].ErrorCode == pb.ErrorCode_TRANSACTIONAL_ID_NOT_FOUND
	})
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	err := p.ProduceSync(ctx, &client.Record{Topic: "idle", Partition: 0, Value: []byte("lost")}).FirstErr()
	if !errors.Is(err, client.ErrInvalidProducerIDMapping) || client.Classify(err) != client.Abortable {
		t.Fatalf("produce after the id expired: %v (%v), want an abortable INVALID_PRODUCER_ID_MAPPING", err, client.Classify(err))
	}
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatalf("abort after the id expired: %v", err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	txnProduce(t, p, "idle", "after")
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("commit under the new producer id: %v", err)
	}
	waitLSO(t, n.Addr(), "idle", 4)
	if com, _ := consumeAll(t, n.Addr(), client.ReadCommitted, "idle", 4); values(com) != "before after" {
		t.Fatalf("read_committed: %s", values(com))
	}
}
