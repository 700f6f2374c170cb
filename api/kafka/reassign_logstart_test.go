package kafka_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strand-io/strand/testkit/testcluster"
)

// TestReassignAfterMidBatchDeleteRecords: DeleteRecords moves the log start
// into a batch (offset 5 of a 10-record batch at 0); the partition is then
// moved onto a broker that held no replica. The new replica starts empty at
// the leader's log start, receives the whole batch from 0 (a leader never
// splits one) and must accept it: the reassignment completes, and the new
// replica, leading, serves every record at or above the log start and
// nothing below it.
func TestReassignAfterMidBatchDeleteRecords(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 4, Roles: func(id int32) (bool, bool) { return true, id <= 3 }})
	adm := kadmClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const topic = "reassign-logstart"
	c.CreateTopic(topic, 1, 2, nil)
	before := c.Partition(topic, 0)
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const batches, per = 3, 10
	for b := 0; b < batches; b++ {
		recs := make([]*kgo.Record, per)
		for i := range recs {
			recs[i] = &kgo.Record{Value: []byte(strconv.Itoa(b*per + i)), Partition: 0}
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	const start = 5
	// The leader's batch holding the new start must begin below it.
	res, err := c.Log(before.Leader, topic, 0).Read(start, 1<<20, 1<<62, true)
	if err != nil || len(res.Records) < 8 {
		t.Fatalf("read at %d on the leader: %+v %v", start, res, err)
	}
	if base := int64(binary.BigEndian.Uint64(res.Records)); base >= start {
		t.Fatalf("the batch holding %d starts at %d: the test needs a log start inside a batch", start, base)
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: start})
	dr, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := dr.Lookup(topic, 0); !ok || r.Err != nil || r.LowWatermark != start {
		t.Fatalf("DeleteRecords below %d: %+v", start, dr)
	}
	// The leader leaves; the broker that had no replica joins and leads.
	var spare int32 = -1
	for _, m := range c.Members() {
		if !before.IsReplica(m.ID) {
			spare = m.ID
			break
		}
	}
	var follower int32
	for _, id := range before.Replicas {
		if id != before.Leader {
			follower = id
		}
	}
	target := []int32{spare, follower}
	alter(t, ctx, adm, topic, 0, target)
	after := waitMoved(t, c, topic, 0, target)
	if after.Leader != spare {
		t.Fatalf("after the move the leader is %d, want the new replica %d", after.Leader, spare)
	}
	l := c.Log(spare, topic, 0)
	if l == nil || l.LogStartOffset() != start || l.LogEndOffset() != batches*per {
		t.Fatalf("the new replica's log: %v", l)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[int64]string{}
	for len(got) < batches*per-start && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { got[r.Offset] = string(r.Value) })
	}
	for off := int64(0); off < batches*per; off++ {
		v, ok := got[off]
		switch {
		case off < start && ok:
			t.Fatalf("record %d below the log start %d was served", off, start)
		case off >= start && (!ok || v != fmt.Sprint(off)):
			t.Fatalf("record %d: %q (found %v), want %q", off, v, ok, fmt.Sprint(off))
		}
	}
}
