package kafka_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/api/kafka"
	"github.com/strand-io/strand/testkit/kafkareq"
	"github.com/strand-io/strand/testkit/testcluster"
)

// TestFetchSessions: KIP-227 as a consumer sees it. The first fetch opens
// a session and answers every partition; incremental fetches name only
// what changed and are answered only what changed; a wrong epoch, an
// unknown id and a closed session are refused with Kafka's codes.
func TestFetchSessions(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 1})
	c.CreateTopic("s", 2, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()[0]), kgo.DefaultProduceTopic("s"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 3 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	broker := cl.Broker(1)
	fetch := func(id, epoch int32, parts map[int32]int64, forget ...int32) *kmsg.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 20, 1, 1<<20
		req.SessionID, req.SessionEpoch = id, epoch
		if len(parts) > 0 {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = "s"
			for p, off := range parts {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, off, 1<<20, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		if len(forget) > 0 {
			req.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{{Topic: "s", Partitions: forget}}
		}
		// By name: below v13 (kgo sends the highest version otherwise).
		resp, err := broker.Request(ctx, kafkareq.AtMost(req, 12))
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.FetchResponse)
	}
	answered := func(resp *kmsg.FetchResponse) map[int32]bool {
		out := map[int32]bool{}
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				out[p.Partition] = len(p.RecordBatches) > 0
			}
		}
		return out
	}

	first := fetch(0, 0, map[int32]int64{0: 0, 1: 0})
	if first.ErrorCode != 0 || first.SessionID == 0 {
		t.Fatalf("opening fetch: error %d, session %d; want a session", first.ErrorCode, first.SessionID)
	}
	if got := answered(first); len(got) != 2 || !got[0] || got[1] {
		t.Fatalf("opening fetch answered %v, want both partitions, records on 0 only", got)
	}
	id := first.SessionID
	// The client moved partition 0 past its records; nothing changed.
	if got := answered(fetch(id, 1, map[int32]int64{0: 3})); len(got) != 0 {
		t.Fatalf("incremental fetch with nothing new answered %v, want no partition", got)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Partition 1's new record arrives though the request names no partition.
	if got := answered(fetch(id, 2, nil)); len(got) != 1 || !got[1] {
		t.Fatalf("incremental fetch after a produce to 1 answered %v, want partition 1 with its record", got)
	}
	if r := fetch(id, 7, nil); r.ErrorCode != 71 {
		t.Fatalf("wrong epoch answered %d, want INVALID_FETCH_SESSION_EPOCH (71)", r.ErrorCode)
	}
	if r := fetch(id+1, 1, nil); r.ErrorCode != 70 {
		t.Fatalf("unknown session answered %d, want FETCH_SESSION_ID_NOT_FOUND (70)", r.ErrorCode)
	}
	// Forgetting partition 1 leaves it out even when it changes.
	fetch(id, 3, nil, 1)
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("y")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if got := answered(fetch(id, 4, nil)); len(got) != 0 {
		t.Fatalf("after forgetting partition 1 the session answered %v", got)
	}
	if r := fetch(id, -1, map[int32]int64{0: 0}); r.SessionID != 0 || r.ErrorCode != 0 {
		t.Fatalf("closing fetch: session %d error %d, want a full sessionless answer", r.SessionID, r.ErrorCode)
	}
	if r := fetch(id, 5, nil); r.ErrorCode != 70 {
		t.Fatalf("fetch on a closed session answered %d, want FETCH_SESSION_ID_NOT_FOUND (70)", r.ErrorCode)
	}
}

// TestFetchSessionNotHeldThroughWait: a fetch of a session waiting for
// records (up to its MaxWaitMs) does not hold the session: another
// request naming it meanwhile, here a retry at the epoch the waiting one
// took (from another connection), is answered at once,
// INVALID_FETCH_SESSION_EPOCH, as Kafka answers it, while the first is
// still waiting; the waiting fetch then completes with the session.
func TestFetchSessionNotHeldThroughWait(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 1})
	c.CreateTopic("w", 1, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()[0]))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	a, b := client(), client()
	fetch := func(ctx context.Context, cl *kgo.Client, id, epoch int32, waitMs int32) (*kmsg.FetchResponse, error) {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, waitMs, 1, 1<<20
		req.SessionID, req.SessionEpoch = id, epoch
		if epoch == 0 {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = "w"
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, 1<<20, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := cl.Broker(1).Request(ctx, kafkareq.AtMost(req, 12))
		if err != nil {
			return nil, err
		}
		return resp.(*kmsg.FetchResponse), nil
	}
	first, err := fetch(ctx, a, 0, 0, 0)
	if err != nil || first.ErrorCode != 0 || first.SessionID == 0 {
		t.Fatalf("opening fetch: %v, %+v", err, first)
	}
	id := first.SessionID

	waiting, release := make(chan struct{}), make(chan struct{})
	var once, released sync.Once
	releaseFirst := func() { released.Do(func() { close(release) }) }
	defer releaseFirst()
	restore := kafka.SetFetchWaitHookForTesting(func(sid int32) {
		if sid == id {
			once.Do(func() {
				close(waiting)
				<-release
			})
		}
	})
	defer restore()
	type answer struct {
		resp *kmsg.FetchResponse
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := fetch(ctx, a, id, 1, 500)
		done <- answer{r, err}
	}()
	<-waiting
	// Only a guard against a hang (the session held): the answer does not
	// wait for anything.
	bctx, bcancel := context.WithTimeout(ctx, 20*time.Second)
	r, err := fetch(bctx, b, id, 1, 500)
	bcancel()
	if err != nil {
		t.Fatalf("a request naming the session while a fetch of it waited: %v (the session was held through the wait)", err)
	}
	if r.ErrorCode != 71 {
		t.Fatalf("the retry at the taken epoch answered %d, want INVALID_FETCH_SESSION_EPOCH (71)", r.ErrorCode)
	}
	select {
	case <-done:
		t.Fatal("the waiting fetch finished before it was released")
	default:
	}
	releaseFirst()
	ans := <-done
	if ans.err != nil || ans.resp.ErrorCode != 0 || ans.resp.SessionID != id {
		t.Fatalf("the waiting fetch: %v, error %d session %d", ans.err, ans.resp.ErrorCode, ans.resp.SessionID)
	}
	if r, err := fetch(ctx, a, id, 2, 0); err != nil || r.ErrorCode != 0 {
		t.Fatalf("the session's next fetch: %v %+v", err, r)
	}
}
