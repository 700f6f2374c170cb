package kafka_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/testkit/wait"
)

// TestKafkaLastStableOffsetNotBelowLogStart: a transaction left open at
// offset 2, DeleteRecords below 4 (inside it, under the HW): ListOffsets
// LATEST under read_committed is not below EARLIEST, and a read_committed
// fetch carries an LSO not below its log start. Once the transaction
// commits, the committed end is the log end again.
func TestKafkaLastStableOffsetNotBelowLogStart(t *testing.T) {
	c, cl, adm := leadersCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "lso"); err != nil {
		t.Fatal(err)
	}
	produce := func(cl *kgo.Client, n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "lso", Partition: 0, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(cl, 2) // 0..1
	tx, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID("lso-tx"))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(tx, 3) // 2..4, open
	produce(cl, 2) // 5..6

	offsetOf := func(lo kadm.ListedOffsets, err error) int64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		o, ok := lo.Lookup("lso", 0)
		if !ok || o.Err != nil {
			t.Fatalf("offsets %+v", lo)
		}
		return o.Offset
	}
	if lso := offsetOf(adm.ListCommittedOffsets(ctx, "lso")); lso != 2 {
		t.Fatalf("committed end %d with the transaction open at 2, want 2", lso)
	}
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "lso", Partition: 0, At: 4})
	res, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := res.Lookup("lso", 0); !ok || r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("DeleteRecords below 4: %+v", res)
	}
	start, lso := offsetOf(adm.ListStartOffsets(ctx, "lso")), offsetOf(adm.ListCommittedOffsets(ctx, "lso"))
	if start != 4 || lso < start {
		t.Fatalf("EARLIEST %d, LATEST read_committed %d: want 4 and not below it", start, lso)
	}

	leader := c.Partition("lso", 0).Leader
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MaxBytes, req.IsolationLevel = 100, 1<<20, 1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = "lso", topicIDOf(ctx, t, cl, "lso")
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, 4, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	fp := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if fp.ErrorCode != 0 || fp.LastStableOffset < fp.LogStartOffset {
		t.Fatalf("read_committed fetch at 4: code %d, LSO %d, log start %d: want no error and the LSO not below the log start", fp.ErrorCode, fp.LastStableOffset, fp.LogStartOffset)
	}

	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 30*time.Second, "the committed end to reach the log end after the commit", func() bool {
		end, lso := offsetOf(adm.ListEndOffsets(ctx, "lso")), offsetOf(adm.ListCommittedOffsets(ctx, "lso"))
		return end == 8 && lso == end
	})
}
