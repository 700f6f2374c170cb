package hostile

// Real node on real time: the hostile requests are raw bytes on a real TCP connection
// to the Kafka listener; could dial MemNet inside synctest; not moved yet.

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/client"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// victim is a well-behaved transactional producer writing to partition 0
// of one topic.
type victim struct {
	tg    *target
	p     *client.Producer
	topic string
}

func newVictim(tg *target, topic, txnID string) *victim {
	tg.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := client.NewProducer(tg.opts(client.TransactionalID(txnID), client.WithPartitioner(client.ManualPartitioner{}))...)
	if err != nil {
		tg.t.Fatal(err)
	}
	tg.t.Cleanup(func() { p.Close(context.Background()) })
	if err := p.InitTransactions(ctx); err != nil {
		tg.t.Fatal(err)
	}
	return &victim{tg: tg, p: p, topic: topic}
}

// begin opens a transaction and writes vals, each acknowledged.
func (v *victim) begin(vals ...string) {
	v.tg.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := v.p.BeginTransaction(); err != nil {
		v.tg.t.Fatal(err)
	}
	var recs []*client.Record
	for _, s := range vals {
		recs = append(recs, &client.Record{Topic: v.topic, Partition: 0, Value: []byte(s)})
	}
	if err := v.p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		v.tg.t.Fatalf("victim's acks=all write: %v", err)
	}
}

// end commits or aborts the open transaction.
func (v *victim) end(commit bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if commit {
		return v.p.CommitTransaction(ctx)
	}
	return v.p.AbortTransaction(ctx)
}

// state is the victim's producer state on the partition, as any client
// can read it (DescribeProducers): the producer id, epoch and coordinator
// epoch an attacker aims its markers with.
func (v *victim) state() *pb.ProducerState {
	v.tg.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pp, err := v.tg.admin().DescribeProducers(ctx, client.TopicPartition{Topic: v.topic, Partition: 0}, -1)
	if err != nil {
		v.tg.t.Fatal(err)
	}
	if len(pp.ActiveProducers) != 1 {
		v.tg.t.Fatalf("want the victim as the one producer of %s-0, got %v", v.topic, pp.ActiveProducers)
	}
	return pp.ActiveProducers[0]
}

// marker is a hostile WriteTxnMarkers for the victim's producer id.
type marker struct {
	committed bool
	epoch     int32
	version   int32
}

func (m marker) String() string {
	kind := "ABORT"
	if m.committed {
		kind = "COMMIT"
	}
	return fmt.Sprintf("%s at epoch %d (transaction version %d)", kind, m.epoch, m.version)
}

// sendMarkers sends each marker to every client listener and requires the
// listener to refuse it.
func (v *victim) sendMarkers(st *pb.ProducerState, ms ...marker) {
	v.tg.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, addr := range v.tg.clientAddrs() {
		tc := pb.NewTransactionsClient(v.tg.raw(addr))
		for _, m := range ms {
			_, err := tc.WriteTxnMarkers(ctx, &pb.WriteTxnMarkersRequest{Markers: []*pb.TxnMarker{{
				ProducerId: st.ProducerId, ProducerEpoch: m.epoch, Committed: m.committed, CoordinatorEpoch: max(st.CoordinatorEpoch, 0),
				TransactionVersion: m.version, Partitions: []*pb.TopicPartition{{Topic: v.topic, Partition: 0}},
			}}}, grpc.WaitForReady(true))
			wantRefused(v.tg.t, "WriteTxnMarkers "+m.String(), err)
		}
	}
}

// TestClientMarkersCannotHideCommittedRecords: while the victim's
// transaction is open and its records acknowledged, a client sends ABORT
// markers for it (at the bumped epoch a coordinator would use, and at the
// current one, as the admin abort does). They are refused; the victim
// commits and read_committed readers see its records.
func TestClientMarkersCannotHideCommittedRecords(t *testing.T) {
	tg := devTarget(t)
	tg.createTopic("victim", 1, 1)
	v := newVictim(tg, "victim", "victim-commit")
	v.begin("v1", "v2")
	st := v.state()
	v.sendMarkers(st, marker{false, st.ProducerEpoch + 1, 2}, marker{false, st.ProducerEpoch, 0})
	if err := v.end(true); err != nil {
		t.Fatalf("victim's commit after the hostile markers: %v", err)
	}
	if got := tg.readAll("victim", 0, client.ReadCommitted, 2); !slices.Equal(got, []string{"v1", "v2"}) {
		t.Fatalf("read_committed after the victim committed v1 v2: %q", got)
	}
	// After the commit too: an ABORT at the epoch the commit left, and
	// at the next, hides nothing.
	st = v.state()
	v.sendMarkers(st, marker{false, st.ProducerEpoch, 2}, marker{false, st.ProducerEpoch + 1, 2}, marker{false, st.ProducerEpoch, 0})
	if got := tg.readAll("victim", 0, client.ReadCommitted, 2); !slices.Equal(got, []string{"v1", "v2"}) {
		t.Fatalf("read_committed after ABORT markers for the committed transaction: %q", got)
	}
	tg.assertServes()
}

// TestClientMarkersCannotCommitAbortedRecords: a client's COMMIT marker
// for the victim's open transaction is refused, and once the victim
// aborts, read_committed readers see none of its records.
func TestClientMarkersCannotCommitAbortedRecords(t *testing.T) {
	tg := devTarget(t)
	tg.createTopic("victim", 1, 1)
	v := newVictim(tg, "victim", "victim-abort")
	v.begin("kept")
	if err := v.end(true); err != nil {
		t.Fatal(err)
	}
	v.begin("x1", "x2")
	st := v.state()
	v.sendMarkers(st, marker{true, st.ProducerEpoch + 1, 2}, marker{true, st.ProducerEpoch, 0})
	if err := v.end(false); err != nil {
		t.Fatalf("victim's abort after the hostile markers: %v", err)
	}
	if got := tg.readAll("victim", 0, client.ReadCommitted, 1); !slices.Equal(got, []string{"kept"}) {
		t.Fatalf("read_committed after the victim aborted x1 x2: %q, want [kept]", got)
	}
	tg.assertServes()
}

// TestClientMarkerCannotLockOutProducer: markers at epoch 32767 for the
// victim's producer id, idle between transactions, are refused; the
// victim's next transaction commits and is read.
func TestClientMarkerCannotLockOutProducer(t *testing.T) {
	tg := devTarget(t)
	tg.createTopic("victim", 1, 1)
	v := newVictim(tg, "victim", "victim-epoch")
	v.begin("a")
	if err := v.end(true); err != nil {
		t.Fatal(err)
	}
	st := v.state()
	v.sendMarkers(st, marker{false, 32767, 2}, marker{true, 32767, 2}, marker{false, 32767, 0})
	v.begin("b")
	if err := v.end(true); err != nil {
		t.Fatalf("victim's next transaction after the hostile markers: %v", err)
	}
	if got := tg.readAll("victim", 0, client.ReadCommitted, 2); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("read_committed: %q, want [a b]", got)
	}
	tg.assertServes()
}

// TestAdminAbortCannotTearLiveTransaction: the administrator's abort
// (Transactions.AbortTransaction, what `strand transactions abort` sends)
// is a client RPC, so a hostile client can send it too. Aimed at the
// victim's live transaction — exactly named, at its current epoch, at the
// last epoch — it is refused (the transaction is younger than
// transaction.max.timeout.ms); aimed at the committed one, there is
// nothing open to abort. The victim commits and is read, and goes on.
func TestAdminAbortCannotTearLiveTransaction(t *testing.T) {
	tg := devTarget(t)
	tg.createTopic("victim", 1, 1)
	v := newVictim(tg, "victim", "victim-admin")
	v.begin("v1", "v2")
	st := v.state()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tc := pb.NewTransactionsClient(tg.raw(tg.dev.Addr()))
	abort := func(epoch int32, start int64) pb.ErrorCode {
		r, err := tc.AbortTransaction(ctx, &pb.AbortTransactionRequest{Topic: "victim", Partition: 0, ProducerId: st.ProducerId, ProducerEpoch: epoch, StartOffset: start})
		if err != nil {
			t.Fatalf("AbortTransaction: %v", err)
		}
		return r.ErrorCode
	}
	for _, c := range []struct {
		epoch int32
		start int64
		want  pb.ErrorCode
	}{
		{st.ProducerEpoch, st.CurrentTxnStartOffset, pb.ErrorCode_INVALID_TXN_STATE},
		{32767, st.CurrentTxnStartOffset, pb.ErrorCode_INVALID_PRODUCER_EPOCH},
		{st.ProducerEpoch, st.CurrentTxnStartOffset + 1, pb.ErrorCode_INVALID_TXN_STATE},
	} {
		if got := abort(c.epoch, c.start); got != c.want {
			t.Errorf("admin abort of the live transaction at epoch %d from offset %d: %v, want %v", c.epoch, c.start, got, c.want)
		}
	}
	if err := v.end(true); err != nil {
		t.Fatalf("victim's commit: %v", err)
	}
	if got := abort(st.ProducerEpoch, st.CurrentTxnStartOffset); got != pb.ErrorCode_INVALID_TXN_STATE {
		t.Errorf("admin abort of the committed transaction: %v, want INVALID_TXN_STATE", got)
	}
	v.begin("v3")
	if err := v.end(true); err != nil {
		t.Fatalf("victim's next transaction: %v", err)
	}
	if got := tg.readAll("victim", 0, client.ReadCommitted, 3); !slices.Equal(got, []string{"v1", "v2", "v3"}) {
		t.Fatalf("read_committed: %q, want [v1 v2 v3]", got)
	}
	tg.dropRaw()
	tg.assertServes()
}
