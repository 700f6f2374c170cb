package workload_test

// Real cluster on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet
// (testkit/sim runs the same workload and drills there).

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/strand-io/strand/app/drill"
	"github.com/strand-io/strand/app/verify"
	"github.com/strand-io/strand/app/workload"
	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// clusterTarget drills an in-process test cluster: kill and restart a
// node, cut it off through the fault network. Pausing a goroutine-based
// node is not possible, so pause is unsupported here (the process and
// compose targets do it with SIGSTOP and docker pause).
type clusterTarget struct {
	mu sync.Mutex
	c  *testcluster.Cluster
}

func (t *clusterTarget) Name() string   { return "in-process test cluster" }
func (t *clusterTarget) Nodes() []int32 { return []int32{1, 2, 3} }

// take removes node id from its member (nil if it is down): killing or
// stopping it then runs without the lock, so a slow graceful stop does not
// hold up a kill of another node.
func (t *clusterTarget) take(id int32) *node.Node {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.c.Member(id)
	n := m.Node
	m.Node = nil
	return n
}

func (t *clusterTarget) Kill(ctx context.Context, id int32) error {
	if n := t.take(id); n != nil {
		n.Kill()
	}
	return nil
}

// Stop is a graceful stop: the node's controlled shutdown moves its
// leaderships first.
func (t *clusterTarget) Stop(ctx context.Context, id int32) error {
	if n := t.take(id); n != nil {
		return n.Stop()
	}
	return nil
}

func (t *clusterTarget) running(id int32) (*node.Node, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := t.c.Member(id).Node; n != nil {
		return n, nil
	}
	return nil, fmt.Errorf("node %d is down", id)
}

func (t *clusterTarget) HoldFollowerFetch(ctx context.Context, id int32, topic string, partition int32, d time.Duration) error {
	n, err := t.running(id)
	if err != nil {
		return err
	}
	_, err = n.HoldFollowerFetch(topic, partition, d)
	return err
}

func (t *clusterTarget) ReleaseFollowerFetch(ctx context.Context, id int32, topic string, partition int32) error {
	n, err := t.running(id)
	if err != nil {
		return err
	}
	n.ReleaseFollowerFetch(topic, partition)
	return nil
}
func (t *clusterTarget) Start(ctx context.Context, id int32) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	// Not testcluster.Start: it fails the test with Fatalf, which must not
	// be called from the drill goroutine.
	m := t.c.Member(id)
	if m.Node != nil {
		return nil
	}
	// A port of the killed node may still be closing: retry until it starts.
	return wait.UntilNil(5*time.Second, "the node to start again", func() error {
		n, err := node.Start(m.Cfg)
		if err == nil {
			m.Node = n
		}
		return err
	})
}
func (t *clusterTarget) Pause(ctx context.Context, id int32) error  { return drill.ErrUnsupported }
func (t *clusterTarget) Resume(ctx context.Context, id int32) error { return drill.ErrUnsupported }
func (t *clusterTarget) Isolate(ctx context.Context, id int32) error {
	t.c.Isolate(id)
	return nil
}
func (t *clusterTarget) Heal(ctx context.Context, id int32) error {
	t.c.Heal(id)
	return nil
}

// TestWorkloadWithDrills runs the verify workload on a three-node cluster
// while the leader of the busiest partition, the busiest transactional
// id's coordinator and the active controller are killed and restarted, and
// a leader is cut off the network: every anomaly count must be zero, and
// the run must have committed, aborted and staged transactions to judge.
func TestWorkloadWithDrills(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster run with drills")
	}
	c := testcluster.New(t, testcluster.Options{Mutate: func(id int32, cfg *node.Config) {
		cfg.GroupConfig.InitialRebalanceDelay = 0
		cfg.TxnTopic.Partitions, cfg.OffsetsTopic.Partitions = 6, 6
	}})
	out := &testutil.LogBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := workload.Run(ctx, workload.Config{
		Bootstrap:  c.Bootstrap(),
		ClientOpts: c.ClientOpts(client.RetryBackoff(20*time.Millisecond, 200*time.Millisecond)),
		Duration:   35 * time.Second,
		Partitions: 4,
		AbortRate:  0.2,
		Drills:     []string{"kill-leader", "kill-coordinator", "kill-controller", "partition"},
		Target:     &clusterTarget{c: c},
		DrillEnv:   drill.Env{Down: time.Second, Cut: 4 * time.Second, SettleTimeout: 60 * time.Second},
		// The test cluster's session timeout is 2 s.
		TransactionTimeout: 8 * time.Second,
		Out:                out,
		Seed:               7,
	})
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + res.Report.Table())
	if !res.Report.OK() {
		t.Errorf("anomalies found")
	}
	if len(res.Drills) != 4 {
		t.Errorf("%d drills ran, want 4", len(res.Drills))
	}
	for _, d := range res.Drills {
		if !d.OK() || d.Skipped != "" {
			t.Errorf("drill %s: error %q, skipped %q", d.Drill, d.Err, d.Skipped)
		}
	}
	tot := res.Report.Totals
	if tot.CommittedTxns < 50 || tot.AbortedTxns == 0 || tot.StageTxns == 0 || tot.FinalReads == 0 {
		t.Errorf("too little to judge: %+v", tot)
	}
}

// TestWorkloadCatchesLoss checks the whole pipeline can fail: a history
// from a clean run, with one committed record removed from the final
// read_committed read-back, must be reported as a lost write.
func TestWorkloadCatchesLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster run")
	}
	c := testcluster.New(t, testcluster.Options{Mutate: func(id int32, cfg *node.Config) {
		cfg.GroupConfig.InitialRebalanceDelay = 0
		cfg.TxnTopic.Partitions, cfg.OffsetsTopic.Partitions = 3, 3
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := workload.Run(ctx, workload.Config{
		Bootstrap: c.Bootstrap(), ClientOpts: c.ClientOpts(),
		Duration: 5 * time.Second, Partitions: 2, Producers: 2, AbortRate: 0.2, StageWorkers: 1, TransactionTimeout: 8 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Report.OK() {
		t.Fatalf("clean run found anomalies:\n%s", res.Report.Table())
	}
	h := res.History
	for i, r := range h.Reads {
		if r.Final && r.ReadCommitted && r.Topic == h.SourceTopic {
			h.Reads = append(h.Reads[:i], h.Reads[i+1:]...)
			break
		}
	}
	if got := verify.Check(h); got.LostWrites.Count != 1 {
		t.Errorf("lost writes = %d after dropping one committed record, want 1:\n%s", got.LostWrites.Count, got.Table())
	}
}
