package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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
