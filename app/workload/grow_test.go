package workload_test

// Real cluster on real time: the moved replicas run under a replication throttle,
// real bytes per real second; testkit/sim covers grow/shrink without the throttle.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/app/workload"
	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// TestGrowAndShrinkUnderWorkload is the operator's grow-and-shrink story under a
// running exactly-once workload: a three-node cluster grows to four (a
// broker-only node joins), a third of all partitions, the internal topics'
// included, move onto the new node under a replication throttle, and an
// original node is drained (its replicas reassigned), removed from the
// controller quorum, stopped and unregistered. The checker must find
// nothing lost, duplicated or aborted-yet-visible over the whole run.
func TestGrowAndShrinkUnderWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster run under load")
	}
	c := testcluster.New(t, testcluster.Options{Mutate: func(id int32, cfg *node.Config) {
		cfg.GroupConfig.InitialRebalanceDelay = 0
		cfg.TxnTopic.Partitions, cfg.OffsetsTopic.Partitions = 6, 6
	}})
	out := &testutil.LogBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const runID = "grow"
	type result struct {
		res *workload.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := workload.Run(ctx, workload.Config{
			Bootstrap:          c.Bootstrap()[1:], // node 1 leaves the cluster mid-run
			ClientOpts:         c.ClientOpts(client.RetryBackoff(20*time.Millisecond, 200*time.Millisecond)),
			Duration:           40 * time.Second,
			Partitions:         6,
			AbortRate:          0.2,
			RunID:              runID,
			TransactionTimeout: 8 * time.Second,
			Out:                out,
			Seed:               21,
		})
		done <- result{res, err}
	}()
	defer func() {
		if t.Failed() {
			t.Log("\n" + out.String())
		}
	}()

	adm, err := client.NewAdmin(c.ClientOpts(client.Bootstrap(c.Bootstrap()[1:]...))...)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	src, dst := "verify-"+runID+"-src", "verify-"+runID+"-dst"
	internal := []string{"__transaction_state", "__consumer_offsets"}
	wait.Eventually(t, 60*time.Second, "the workload's topics exist and carry data", func() bool {
		md, err := adm.Metadata(ctx, true, append([]string{src, dst}, internal...)...)
		if err != nil || len(md.Topics) != 4 {
			return false
		}
		for _, tp := range md.Topics {
			if tp.ErrorCode != 0 || len(tp.Partitions) == 0 {
				return false
			}
		}
		return true
	})
	// Transactions under way before the moves: the stage has committed
	// records to the destination topic (its last stable offset moved).
	dstTPs := make([]client.TopicPartition, 6)
	for i := range dstTPs {
		dstTPs[i] = client.TopicPartition{Topic: dst, Partition: int32(i)}
	}
	wait.Eventually(t, 60*time.Second, "committed transactions in "+dst, func() bool {
		offs, err := adm.ListOffsets(ctx, dstTPs, client.OffsetLatest, client.ReadCommitted)
		if err != nil {
			return false
		}
		for _, o := range offs {
			if o.Err == nil && o.LastStableOffset > 0 {
				return true
			}
		}
		return false
	})

	// Grow: a broker-only node joins by gossip and is usable at once.
	m4 := c.AddNode(testcluster.NodeSpec{Broker: true})
	if m4.ID != 4 {
		t.Fatalf("new node id %d, want 4", m4.ID)
	}

	// Throttle (what `strand reassign-partitions --throttle` writes): a
	// rate on every broker, every partition of the moving topics throttled.
	const rate = "1048576"
	for _, id := range []int32{1, 2, 3, 4} {
		if err := adm.AlterBrokerConfigs(ctx, id, map[string]string{
			"leader.replication.throttled.rate": rate, "follower.replication.throttled.rate": rate,
		}, nil); err != nil {
			t.Fatalf("throttle rate on broker %d: %v", id, err)
		}
	}
	topics := append([]string{src, dst}, internal...)
	for _, tp := range topics {
		if err := adm.AlterTopicConfigsSetDelete(ctx, tp, map[string]string{
			"leader.replication.throttled.replicas": "*", "follower.replication.throttled.replicas": "*",
		}, nil); err != nil {
			t.Fatalf("throttled replicas on %s: %v", tp, err)
		}
	}

	// Move every third partition of every topic onto node 4, replacing
	// node 1 where it is a replica (the last replica otherwise).
	md, err := adm.Metadata(ctx, true, topics...)
	if err != nil {
		t.Fatal(err)
	}
	plan := map[client.TopicPartition][]int32{}
	perTopic := map[string]int{}
	for _, tp := range md.Topics {
		sort.Slice(tp.Partitions, func(i, j int) bool { return tp.Partitions[i].Partition < tp.Partitions[j].Partition })
		for _, p := range tp.Partitions {
			if p.Partition%3 != 0 {
				continue
			}
			reps := slices.Clone(p.Replicas)
			i := slices.Index(reps, 1)
			if i < 0 {
				i = len(reps) - 1
			}
			reps[i] = 4
			plan[client.TopicPartition{Topic: tp.Name, Partition: p.Partition}] = reps
			perTopic[tp.Name]++
		}
	}
	for _, tp := range topics {
		if perTopic[tp] == 0 {
			t.Fatalf("plan moves no partition of %s: %v", tp, plan)
		}
	}
	t0 := time.Now()
	res, err := adm.AlterPartitionReassignments(ctx, plan)
	if err != nil {
		t.Fatal(err)
	}
	for tp, e := range res {
		if e != nil {
			t.Fatalf("reassign %v: %v", tp, e)
		}
	}
	if err := adm.WaitReassignments(ctx); err != nil {
		t.Fatalf("waiting for the moves onto node 4: %v", err)
	}
	t.Logf("moved %d partitions onto node 4 in %v", len(plan), time.Since(t0).Round(time.Millisecond))
	// The nodes' images follow the controller's by a moment.
	wait.EventuallyNil(t, 10*time.Second, "every planned partition on node 4 with no move left", func() error {
		img := c.Image()
		for tp, want := range plan {
			p := img.Partition(tp.Topic, tp.Partition)
			if p == nil || !p.IsReplica(4) || len(p.AddingReplicas)+len(p.RemovingReplicas) != 0 {
				return fmt.Errorf("%v after the move: %+v, want replicas %v", tp, p, want)
			}
		}
		return nil
	})

	// Throttles off, as `--verify` does once the moves are done.
	for _, id := range []int32{1, 2, 3, 4} {
		if err := adm.AlterBrokerConfigs(ctx, id, nil, []string{"leader.replication.throttled.rate", "follower.replication.throttled.rate"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tp := range topics {
		if err := adm.AlterTopicConfigsSetDelete(ctx, tp, nil, []string{"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"}); err != nil {
			t.Fatal(err)
		}
	}

	// Shrink: drain node 1, take it out of the quorum, stop and unregister it.
	drain, answers, err := adm.MoveReplicasOff(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	for tp, e := range answers {
		if e != nil {
			t.Fatalf("drain %v: %v", tp, e)
		}
	}
	if err := adm.WaitReassignments(ctx); err != nil {
		t.Fatalf("waiting for node 1's drain: %v", err)
	}
	t.Logf("drained node 1: %d partitions moved", len(drain))
	wait.EventuallyNil(t, 10*time.Second, "no partition left on node 1", func() error {
		for _, tp := range c.Image().Topics {
			for _, p := range tp.Partitions {
				if p.IsReplica(1) {
					return fmt.Errorf("%s-%d still has node 1 after the drain: %v", p.Topic, p.Partition, p.Replicas)
				}
			}
		}
		return nil
	})
	if err := adm.RemoveVoter(ctx, 1); err != nil {
		t.Fatalf("remove voter 1: %v", err)
	}
	c.Stop(1)
	wait.EventuallyNil(t, 30*time.Second, "node 1 unregistered", func() error {
		err := adm.UnregisterBroker(ctx, 1)
		if err != nil && !strings.Contains(err.Error(), "BROKER_ID_NOT_REGISTERED") {
			return err
		}
		if b := activeImageBroker(c, 1); b {
			return fmt.Errorf("broker 1 still registered")
		}
		return nil
	})

	r := <-done
	t.Log("\n" + out.String())
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Log("\n" + r.res.Report.Table())
	if !r.res.Report.OK() {
		t.Errorf("anomalies found while the cluster grew and shrank")
	}
	tot := r.res.Report.Totals
	if tot.CommittedTxns < 50 || tot.AbortedTxns == 0 || tot.StageTxns == 0 || tot.FinalReads == 0 {
		t.Errorf("too little to judge: %+v", tot)
	}
}

// activeImageBroker: whether a running node's metadata image still lists broker id.
func activeImageBroker(c *testcluster.Cluster, id int32) bool {
	img := c.Image()
	if img == nil {
		return true
	}
	_, ok := img.Brokers[id]
	return ok
}
