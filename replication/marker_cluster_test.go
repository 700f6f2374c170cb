package replication_test

// Real cluster on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"testing"
	"time"

	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/planted"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/replication"
	"github.com/strand-io/strand/testkit/testcluster"
)

const (
	rigTopic = "tm"
	rigPID   = int64(4242)
)

// markerRig is a partition on two broker-only nodes (node 1 is the only
// controller, so cutting the link between the brokers holds the follower's
// fetches and nothing else) with a transaction whose COMMIT marker is on
// the leader only: the follower could not fetch it, so the first
// WriteMarker timed out waiting for the HW.
type markerRig struct {
	c                *testcluster.Cluster
	leader, follower int32
	repl             *replication.Manager
	lp               *broker.Partition // the leader's replica
	txnFirst         int64             // the transaction's first offset
	marker           int64             // the marker's offset
}

func newMarkerRig(t *testing.T) *markerRig {
	t.Helper()
	// ReplicaLag: the held follower must stay in the ISR for the whole
	// test, so the HW can only pass the marker once it fetches again.
	c := testcluster.New(t, testcluster.Options{Nodes: 3, ReplicaLag: 10 * time.Minute,
		Roles: func(id int32) (bool, bool) { return id != 1, id == 1 }})
	c.CreateTopic(rigTopic, 1, 2, nil)
	part := c.Partition(rigTopic, 0)
	r := &markerRig{c: c, leader: part.Leader}
	for _, id := range part.Replicas {
		if id != part.Leader {
			r.follower = id
		}
	}
	n := c.Member(r.leader).Node
	r.repl = n.Repl
	r.lp = n.Parts.Get(storage.PartitionKey{Topic: rigTopic, Partition: 0})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	appendAll := func(opts record.BatchOptions, n int) storage.AppendResult {
		t.Helper()
		recs := make([]record.Record, n)
		for i := range recs {
			recs[i] = record.Record{Value: []byte("v")}
		}
		b, err := record.Build(opts, recs)
		if err != nil {
			t.Fatal(err)
		}
		a := r.repl.AppendLeader(rigTopic, 0, b, -1)
		if err := a.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		return a.Result
	}
	appendAll(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, 2) // 0..1
	txn := appendAll(record.BatchOptions{ProducerID: rigPID, ProducerEpoch: 0, BaseSequence: 0, Transactional: true}, 3)
	r.txnFirst = txn.FirstOffset // 2..4, on both replicas (acks=all)
	c.Net.Cut(c.Member(r.leader).Name(), c.Member(r.follower).Name())
	res, err := r.writeMarker(2, 300*time.Millisecond)
	if code := errs.CodeOf(err); code != pb.ErrorCode_REQUEST_TIMED_OUT {
		t.Fatalf("first WriteMarker with the follower held: %v, want REQUEST_TIMED_OUT", err)
	}
	if res.AlreadyDone || res.Offset != txn.LastOffset+1 {
		t.Fatalf("first WriteMarker: %+v, want the marker appended at %d", res, txn.LastOffset+1)
	}
	r.marker = res.Offset
	if hw := r.lp.HighWatermark(); hw != r.marker {
		t.Fatalf("HW %d with the follower held, want %d (at the marker)", hw, r.marker)
	}
	return r
}

// writeMarker (re-)sends the COMMIT marker of the rig's transaction, as a
// coordinator of transaction version txnVersion would.
func (r *markerRig) writeMarker(txnVersion int32, timeout time.Duration) (storage.MarkerResult, error) {
	return r.repl.WriteMarker(context.Background(), rigTopic, 0, rigPID, 1, 0, record.ControlCommit, txnVersion, timeout)
}

func (r *markerRig) heal() { r.c.Net.HealAll() }

// fetchCommitted is what a read_committed consumer's Fetch from offset 0
// gets: the LSO the leader reports and the offset after the last record
// it is given.
func (r *markerRig) fetchCommitted(t *testing.T) (lso, end int64) {
	t.Helper()
	resp := r.repl.Fetch(context.Background(), &pb.FetchRequest{ReplicaId: -1, MaxBytes: 1 << 20, IsolationLevel: pb.IsolationLevel_READ_COMMITTED,
		Partitions: []*pb.FetchPartition{{Topic: rigTopic, Partition: 0, FetchOffset: 0, CurrentLeaderEpoch: -1, PartitionMaxBytes: 1 << 20}}})
	if len(resp.Partitions) != 1 || resp.Partitions[0].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("read_committed fetch: %v", resp)
	}
	p := resp.Partitions[0]
	return p.LastStableOffset, nextOffset(p.Records)
}

// A re-sent marker the partition already applied is answered only once the
// ISR has it: while the follower still cannot fetch, a
// re-send of either transaction version times out; once it can, the
// answer comes after the follower has the marker and the HW passed it.
func TestResentMarkerWaitsForTheISR(t *testing.T) {
	r := newMarkerRig(t)
	for _, tv := range []int32{2, 1} {
		res, err := r.writeMarker(tv, 300*time.Millisecond)
		if err == nil {
			t.Fatalf("re-sent marker (transaction version %d) answered success with the HW at %d, not past the marker at %d", tv, r.lp.HighWatermark(), r.marker)
		}
		if code := errs.CodeOf(err); code != pb.ErrorCode_REQUEST_TIMED_OUT || !res.AlreadyDone {
			t.Fatalf("re-sent marker (transaction version %d): %+v, %v; want AlreadyDone and REQUEST_TIMED_OUT", tv, res, err)
		}
	}
	if end := r.c.Log(r.leader, rigTopic, 0).LogEndOffset(); end != r.marker+1 {
		t.Fatalf("re-sends wrote something: leader log end %d, want %d", end, r.marker+1)
	}
	r.heal()
	res, err := r.writeMarker(2, 30*time.Second)
	if err != nil || !res.AlreadyDone {
		t.Fatalf("re-sent marker once the follower fetches: %+v, %v", res, err)
	}
	if end := r.c.Log(r.follower, rigTopic, 0).LogEndOffset(); end <= r.marker {
		t.Fatalf("re-sent marker answered with the follower's log ending at %d, before the marker at %d", end, r.marker)
	}
	if hw := r.lp.HighWatermark(); hw <= r.marker {
		t.Fatalf("re-sent marker answered with the HW at %d, not past the marker at %d", hw, r.marker)
	}
}

// With marker-retry-unreplicated planted the re-send is a success at once,
// while the marker is on the leader only.
func TestResentMarkerWaitsForTheISRCatchesPlantedBug(t *testing.T) {
	r := newMarkerRig(t)
	defer planted.Set(planted.MarkerRetryUnreplicated)()
	if _, err := r.writeMarker(2, 300*time.Millisecond); err != nil {
		t.Fatalf("with the bug planted the re-send still failed (%v): the planted bug is not exercised", err)
	}
	if hw := r.lp.HighWatermark(); hw > r.marker {
		t.Fatalf("HW %d passed the marker at %d while the follower was held", hw, r.marker)
	}
}

// The last stable offset does not pass a transaction whose marker the HW
// has not passed, on the partition and in what a
// read_committed Fetch returns; once the follower has the marker and the HW
// passes it, the LSO moves past the transaction, on the follower as well.
func TestLSOHeldUntilTheMarkerIsReplicated(t *testing.T) {
	r := newMarkerRig(t)
	if lso := r.lp.LastStableOffset(); lso != r.txnFirst {
		t.Fatalf("LSO %d with the commit marker at %d on the leader only (HW %d), want %d (the transaction's first offset)", lso, r.marker, r.lp.HighWatermark(), r.txnFirst)
	}
	if lso, end := r.fetchCommitted(t); lso != r.txnFirst || end > r.txnFirst {
		t.Fatalf("read_committed fetch: LSO %d, records up to %d; want LSO %d and nothing of the transaction", lso, end, r.txnFirst)
	}
	r.heal()
	r.c.Eventually(30*time.Second, "the HW past the marker", func() bool { return r.lp.HighWatermark() > r.marker })
	if lso, hw := r.lp.LastStableOffset(), r.lp.HighWatermark(); lso != hw {
		t.Fatalf("LSO %d, HW %d once the HW passed the marker at %d: want them equal", lso, hw, r.marker)
	}
	if lso, end := r.fetchCommitted(t); lso != r.marker+1 || end != r.marker+1 {
		t.Fatalf("read_committed fetch after replication: LSO %d, records up to %d; want both %d", lso, end, r.marker+1)
	}
	fp := r.c.Member(r.follower).Node.Parts.Get(storage.PartitionKey{Topic: rigTopic, Partition: 0})
	r.c.Eventually(30*time.Second, "the follower's LSO past the transaction", func() bool {
		return fp.HighWatermark() > r.marker && fp.LastStableOffset() == fp.HighWatermark()
	})
}

// With lso-passes-unreplicated-marker planted the LSO moves to the HW (the
// marker's offset) as soon as the marker is on the leader, and a
// read_committed consumer is given the transaction's records.
func TestLSOHeldUntilTheMarkerIsReplicatedCatchesPlantedBug(t *testing.T) {
	r := newMarkerRig(t)
	defer planted.Set(planted.LSOPassesUnreplicatedMarker)()
	lso := r.lp.LastStableOffset()
	fetched, end := r.fetchCommitted(t)
	if lso == r.txnFirst && fetched == r.txnFirst {
		t.Fatalf("with the bug planted the LSO still stayed at %d", lso)
	}
	if lso != r.marker || end != r.marker {
		t.Fatalf("planted bug: LSO %d, read_committed records up to %d; expected both at the marker %d", lso, end, r.marker)
	}
}
