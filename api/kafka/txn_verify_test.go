package kafka_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/request"
	"github.com/strand-io/strand/testkit/testcluster"
)

// highWatermark is a partition's high watermark (ListOffsets,
// read_uncommitted, latest).
func highWatermark(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, p int32) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = p, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	for _, r := range cl.RequestSharded(ctx, req) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		for _, t2 := range r.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p2 := range t2.Partitions {
				if err := kerr.ErrorForCode(p2.ErrorCode); err != nil {
					t.Fatalf("ListOffsets %s/%d: %v", topic, p, err)
				}
				return p2.Offset
			}
		}
	}
	t.Fatalf("ListOffsets %s/%d: no answer", topic, p)
	return -1
}

// TestVerifiedBatchOvertakenByItsAbort: a transactional producer's first
// batch to a partition is checked with the coordinator and answered yes;
// before the leader appends it, the transaction is aborted (EndTxn, on
// another connection) and the abort completes, its marker written to the
// partition. The batch then reaches the log. Version 1 (Produce v11, the
// leader verifies): it must be refused INVALID_TXN_STATE, and the last
// stable offset follows the high watermark. With the guard put back (the
// planted bug) the batch is written and opens a transaction no marker
// will end: the LSO stays at it while the log goes on. Version 2
// (Produce v12, the leader adds the partition): the abort's marker
// carries the bumped epoch, and the late batch is refused too.
func TestVerifiedBatchOvertakenByItsAbort(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const topic = "overtaken"
	c.CreateTopic(topic, 1, 3, nil)
	plain := capped(t, c, kmsg.Produce, 12)

	run := func(t *testing.T, id string, version2 bool) (code int16, lsoAt, hw int64) {
		r := &rawTxn{t: t, ctx: ctx, c: c, id: id, topic: topic, leader: c.Partition(topic, 0).Leader}
		init := r.initProducerID(4, -1, -1)
		wantCode(t, "InitProducerId", init.ErrorCode, nil)
		r.pid, r.epoch = init.ProducerID, init.ProducerEpoch
		produceV, endV := int16(11), int16(4)
		if version2 {
			produceV, endV = 12, 5
		} else {
			wantCode(t, "AddPartitionsToTxn v3", r.addPartition(3), nil)
		}
		prodCl := capped(t, c, kmsg.Produce, produceV)
		if err := prodCl.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		endCl := capped(t, c, kmsg.EndTxn, endV)
		// The produce stops between its verification and its append until
		// the abort is done.
		verified, resume := make(chan struct{}), make(chan struct{})
		var once sync.Once
		restore := request.SetTxnVerifiedHookForTesting(func(tp string, _ int32) {
			if tp == topic {
				once.Do(func() {
					close(verified)
					<-resume
				})
			}
		})
		defer restore()
		type answer struct {
			code int16
			err  error
		}
		done := make(chan answer, 1)
		go func() {
			code, err := produceTxnOnce(ctx, prodCl, r, produceV, "late")
			done <- answer{code, err}
		}()
		select {
		case <-verified:
		case a := <-done:
			t.Fatalf("the produce was answered (%v, %v) before it was verified", kerr.ErrorForCode(a.code), a.err)
		}
		end := r.endTxnWith(endCl, false)
		wantCode(t, "EndTxn abort", end.ErrorCode, nil)
		settled(t, ctx, plain, id)
		close(resume)
		a := <-done
		if a.err != nil {
			t.Fatal(a.err)
		}
		// Records after it: the high watermark moves on.
		if err := plain.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(id + "-after")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		return a.code, lso(t, ctx, plain, topic, 0), highWatermark(t, ctx, plain, topic, 0)
	}

	// A producer the coordinator does not know: refused for good, and the
	// partition keeps no verification for it.
	bogus := &rawTxn{t: t, ctx: ctx, c: c, id: "nobody", pid: 987654, topic: topic, leader: c.Partition(topic, 0).Leader}
	wantCode(t, "Produce v11 of an unknown producer", bogus.produce(11, "x"), kerr.InvalidProducerIDMapping)
	if v, ok := c.Log(bogus.leader, topic, 0).TxnVerification(bogus.pid); ok {
		t.Fatalf("a verification the coordinator refused for good was kept: %+v", v)
	}

	code, lsoAt, hw := run(t, "overtaken-v1", false)
	wantCode(t, "the late batch (Produce v11)", code, kerr.InvalidTxnState)
	if lsoAt != hw {
		t.Fatalf("after the refused batch the LSO is %d, the high watermark %d; want them equal", lsoAt, hw)
	}
	code, lsoAt, hw = run(t, "overtaken-v2", true)
	wantCode(t, "the late batch (Produce v12)", code, kerr.InvalidProducerEpoch)
	if lsoAt != hw {
		t.Fatalf("after the refused version 2 batch the LSO is %d, the high watermark %d; want them equal", lsoAt, hw)
	}

	t.Run("planted", func(t *testing.T) {
		defer planted.Set(planted.TxnVerificationUnguarded)()
		before := highWatermark(t, ctx, plain, topic, 0)
		code, lsoAt, hw := run(t, "overtaken-planted", false)
		wantCode(t, "the late batch with the guard put back", code, nil)
		if lsoAt != before || hw <= before {
			t.Fatalf("with the guard put back the LSO is %d and the high watermark %d; want the LSO stuck at the late batch (%d) below the high watermark", lsoAt, hw, before)
		}
	})
}

// produceTxnOnce sends one transactional record of r at its next sequence
// to the partition's leader with Produce at version v and returns the
// partition's error code; it may run off the test's goroutine.
func produceTxnOnce(ctx context.Context, cl *kgo.Client, r *rawTxn, v int16, value string) (int16, error) {
	batch, err := record.Build(record.BatchOptions{ProducerID: r.pid, ProducerEpoch: r.epoch, BaseSequence: r.seq, Transactional: true,
		PartitionLeaderEpoch: -1, FirstTimestamp: time.Now().UnixMilli()}, []record.Record{{Value: []byte(value)}})
	if err != nil {
		return 0, err
	}
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID, req.Acks, req.TimeoutMillis = &r.id, -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = r.topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Broker(int(r.leader)).Request(ctx, req)
	if err != nil {
		return 0, err
	}
	pr := resp.(*kmsg.ProduceResponse)
	if pr.Version != v {
		return 0, fmt.Errorf("Produce sent at v%d, not v%d", pr.Version, v)
	}
	return pr.Topics[0].Partitions[0].ErrorCode, nil
}
