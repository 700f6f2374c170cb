package kafka_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/wait"
)

// TestTxnTimeoutAnsweredInKafkaCodes: a transaction version 1 client's
// transaction outlives its transaction.timeout.ms and the coordinator
// aborts it. Every request the client then sends is answered in Kafka's
// codes, as Kafka answers the producer its timeout abort fenced, never
// Strand's TRANSACTION_TIMED_OUT (10001), which Kafka clients cannot read:
// AddPartitionsToTxn, AddOffsetsToTxn and EndTxn PRODUCER_FENCED, or
// INVALID_PRODUCER_EPOCH below v2; Produce (to a partition the abort's
// markers did not reach, so the leader asks the coordinator) and
// TxnOffsetCommit INVALID_PRODUCER_EPOCH at every version.
func TestTxnTimeoutAnsweredInKafkaCodes(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Mutate: func(_ int32, cfg *node.Config) {
		cfg.TxnConfig.AbortTimedOutInterval = 50 * time.Millisecond
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.CreateTopic("slow", 2, 3, nil)
	r := &rawTxn{t: t, ctx: ctx, c: c, id: "slow-v1", topic: "slow", leader: c.Partition("slow", 0).Leader}
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis, init.ProducerID, init.ProducerEpoch = &r.id, 300, -1, -1
	iresp, err := init.RequestWith(ctx, capped(t, c, kmsg.InitProducerID, 4))
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "InitProducerId", iresp.ErrorCode, nil)
	r.pid, r.epoch = iresp.ProducerID, iresp.ProducerEpoch
	wantCode(t, "AddPartitionsToTxn v3", r.addPartition(3), nil)
	wantCode(t, "Produce v11", r.produce(11, "before"), nil)
	wantCode(t, "AddOffsetsToTxn v3", r.addOffsets(3, "slow-group"), nil)
	plain := capped(t, c, kmsg.DescribeTransactions, 0)
	if st := settled(t, ctx, plain, r.id); st.State != "CompleteAbort" || st.ProducerEpoch != r.epoch+1 {
		t.Fatalf("after the timeout the coordinator has %s at epoch %d; want CompleteAbort at %d", st.State, st.ProducerEpoch, r.epoch+1)
	}

	for v := int16(0); v <= 3; v++ {
		want := kerr.ProducerFenced
		if v < 2 {
			want = kerr.InvalidProducerEpoch
		}
		wantCode(t, fmt.Sprintf("AddPartitionsToTxn v%d", v), r.addPartition(v), want)
		wantCode(t, fmt.Sprintf("AddOffsetsToTxn v%d", v), r.addOffsets(v, "slow-group"), want)
	}
	wantCode(t, "AddOffsetsToTxn v4", r.addOffsets(4, "slow-group"), kerr.ProducerFenced)
	for v := int16(0); v <= 5; v++ {
		wantCode(t, fmt.Sprintf("TxnOffsetCommit v%d", v), r.commitOffset(v, "slow-group"), kerr.InvalidProducerEpoch)
	}
	r.partition, r.leader = 1, c.Partition("slow", 1).Leader // no marker reached it: the leader asks the coordinator
	for _, v := range []int16{3, 10, 11} {
		wantCode(t, fmt.Sprintf("Produce v%d", v), r.produce(v, "after"), kerr.InvalidProducerEpoch)
	}
	for v := int16(0); v <= 5; v++ {
		want := kerr.ProducerFenced
		if v < 2 {
			want = kerr.InvalidProducerEpoch
		}
		wantCode(t, fmt.Sprintf("EndTxn v%d commit", v), r.endTxn(v, true).ErrorCode, want)
	}
}

// TestFencedTxnOffsetCommit: a fenced producer's TxnOffsetCommit is
// answered INVALID_PRODUCER_EPOCH at every version, as Kafka's group
// coordinator answers it (the fence the transaction coordinator reports,
// turned into the epoch error producers abort on), never PRODUCER_FENCED.
func TestFencedTxnOffsetCommit(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.CreateTopic("fenced-offsets", 1, 3, nil)
	r := &rawTxn{t: t, ctx: ctx, c: c, id: "fenced-offsets", topic: "fenced-offsets", leader: c.Partition("fenced-offsets", 0).Leader}
	old := r.initProducerID(4, -1, -1)
	wantCode(t, "InitProducerId", old.ErrorCode, nil)
	r.pid, r.epoch = old.ProducerID, old.ProducerEpoch
	wantCode(t, "AddOffsetsToTxn v3", r.addOffsets(3, "fenced-group"), nil)
	// A new instance fences it (its open transaction is aborted first).
	newer := &rawTxn{t: t, ctx: ctx, c: c, id: r.id}
	wait.Eventually(t, 20*time.Second, "the new instance's InitProducerId", func() bool {
		return newer.initProducerID(4, -1, -1).ErrorCode == 0
	})
	for v := int16(0); v <= 5; v++ {
		wantCode(t, fmt.Sprintf("the fenced producer's TxnOffsetCommit v%d", v), r.commitOffset(v, "fenced-group"), kerr.InvalidProducerEpoch)
	}
}
