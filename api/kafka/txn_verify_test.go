package kafka_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/coordinator"
	"github.com/strand-io/strand/coordinator/group"
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

// TestTxnOffsetCommitOvertakenByItsAbort is TestVerifiedBatchOvertakenByItsAbort
// for the group coordinator's transactional offset write: a TxnOffsetCommit's
// __consumer_offsets partition is verified with the transaction coordinator
// (answered yes); before the offsets are appended, the transaction is
// aborted (EndTxn, on another connection) and the abort completes, its
// marker sent to the partition. The write must then be refused, nothing
// written and nothing left open on the partition: INVALID_TXN_STATE to
// TxnOffsetCommit v3 and v4 (transaction version 1, as Kafka answers the
// append's refusal at every version), INVALID_PRODUCER_EPOCH to v5
// (version 2: the abort's marker carries the bumped epoch). With the guard
// put back (the planted bug) the late write is accepted and opens a
// transaction no marker will end on the partition, which holds back the
// load of every group there.
func TestTxnOffsetCommitOvertakenByItsAbort(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const topic, grp = "overtaken-offsets", "overtaken-group"
	c.CreateTopic(topic, 1, 3, nil)
	plain := capped(t, c, kmsg.Produce, 12)

	// A transaction that commits offsets of the group first: it creates
	// __consumer_offsets and lets every coordinator learn of it.
	warm := &rawTxn{t: t, ctx: ctx, c: c, id: "overtaken-warm", topic: topic}
	init := warm.initProducerID(4, -1, -1)
	wantCode(t, "InitProducerId", init.ErrorCode, nil)
	warm.pid, warm.epoch = init.ProducerID, init.ProducerEpoch
	wantCode(t, "AddOffsetsToTxn v3", warm.addOffsets(3, grp), nil)
	wantCode(t, "TxnOffsetCommit v3", warm.commitOffset(3, grp), nil)
	wantCode(t, "EndTxn commit", warm.endTxn(4, true).ErrorCode, nil)
	settled(t, ctx, plain, warm.id)
	offsets := c.Image().Topics["__consumer_offsets"]
	if offsets == nil {
		t.Fatal("no __consumer_offsets after a transactional offset commit")
	}
	part := coordinator.PartitionFor(grp, int32(len(offsets.Partitions)))
	leader := c.Partition("__consumer_offsets", part).Leader

	run := func(t *testing.T, id string, v int16) (code int16, open bool) {
		r := &rawTxn{t: t, ctx: ctx, c: c, id: id, topic: topic}
		init := r.initProducerID(4, -1, -1)
		wantCode(t, "InitProducerId", init.ErrorCode, nil)
		r.pid, r.epoch = init.ProducerID, init.ProducerEpoch
		endV := int16(4)
		if v >= 5 {
			endV = 5
		} else {
			wantCode(t, "AddOffsetsToTxn v3", r.addOffsets(3, grp), nil)
		}
		commitCl := capped(t, c, kmsg.TxnOffsetCommit, v)
		if err := commitCl.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		endCl := capped(t, c, kmsg.EndTxn, endV)
		// The write stops between its verification and its append until
		// the abort is done.
		verified, resume := make(chan struct{}), make(chan struct{})
		var once sync.Once
		restore := group.SetTxnVerifiedHookForTesting(func(tp string, p int32) {
			if tp == "__consumer_offsets" && p == part {
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
			code, err := txnOffsetCommitOnce(ctx, commitCl, r, grp, v)
			done <- answer{code, err}
		}()
		select {
		case <-verified:
		case a := <-done:
			t.Fatalf("the TxnOffsetCommit was answered (%v, %v) before it was verified", kerr.ErrorForCode(a.code), a.err)
		}
		end := r.endTxnWith(endCl, false)
		wantCode(t, "EndTxn abort", end.ErrorCode, nil)
		settled(t, ctx, plain, id)
		close(resume)
		a := <-done
		if a.err != nil {
			t.Fatal(a.err)
		}
		for _, o := range c.Log(leader, "__consumer_offsets", part).OngoingTxns() {
			if o.ProducerID == r.pid {
				open = true
			}
		}
		return a.code, open
	}

	for _, tc := range []struct {
		v    int16
		want error
	}{{3, kerr.InvalidTxnState}, {4, kerr.InvalidTxnState}, {5, kerr.InvalidProducerEpoch}} {
		t.Run(fmt.Sprintf("v%d", tc.v), func(t *testing.T) {
			code, open := run(t, fmt.Sprintf("overtaken-offsets-v%d", tc.v), tc.v)
			wantCode(t, fmt.Sprintf("the late TxnOffsetCommit v%d", tc.v), code, tc.want)
			if open {
				t.Fatalf("the refused write left its producer's transaction open on __consumer_offsets-%d", part)
			}
		})
	}

	t.Run("planted", func(t *testing.T) {
		defer planted.Set(planted.TxnVerificationUnguarded)()
		code, open := run(t, "overtaken-offsets-planted", 3)
		wantCode(t, "the late TxnOffsetCommit with the guard put back", code, nil)
		if !open {
			t.Fatalf("with the guard put back no transaction was left open on __consumer_offsets-%d", part)
		}
	})
}

// txnOffsetCommitOnce sends r's TxnOffsetCommit of offset 1 of its
// topic's partition 0 for group (standalone) at version v and returns the
// partition's error code; it may run off the test's goroutine.
func txnOffsetCommitOnce(ctx context.Context, cl *kgo.Client, r *rawTxn, group string, v int16) (int16, error) {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = r.id, group, r.pid, r.epoch
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = r.topic
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	if resp.Version != v {
		return 0, fmt.Errorf("TxnOffsetCommit sent at v%d, not v%d", resp.Version, v)
	}
	return resp.Topics[0].Partitions[0].ErrorCode, nil
}
