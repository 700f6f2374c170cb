package workload_test

// Real cluster on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet
// (testkit/sim runs the same drills there).

import (
	"context"
	"testing"
	"time"

	"github.com/strand-io/strand/app/drill"
	"github.com/strand-io/strand/app/verify"
	"github.com/strand-io/strand/app/workload"
	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/testutil"
)

// markerRun runs the verify workload on a fresh three-node cluster whose
// transactional ids start near the end of their epochs, with the given
// marker drills, and returns the result.
func markerRun(t *testing.T, drills ...string) *workload.Result {
	t.Helper()
	c := testcluster.New(t, testcluster.Options{
		// The marker drills hold a partition's follower fetches for up to
		// 10 s: its followers must stay in the ISR meanwhile.
		ReplicaLag: 15 * time.Second,
		Mutate: func(id int32, cfg *node.Config) {
			cfg.GroupConfig.InitialRebalanceDelay = 0
			cfg.TxnTopic.Partitions, cfg.OffsetsTopic.Partitions = 6, 6
			// 8 transactions to the end of the epochs: a short run reaches
			// it even under -race on a loaded machine.
			cfg.TxnConfig.FirstEpoch = 32758
			cfg.TxnConfig.AbortTimedOutInterval = time.Second
		}})
	out := &testutil.LogBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := workload.Run(ctx, workload.Config{
		Bootstrap:       c.Bootstrap(),
		ClientOpts:      c.ClientOpts(),
		Duration:        8 * time.Second,
		Partitions:      3,
		Producers:       3,
		StageWorkers:    1,
		AbortRate:       0.2,
		EarlyAbortShare: 0.5,
		ZombieFenceRate: 0.05,
		Drills:          drills,
		Target:          &clusterTarget{c: c},
		DrillEnv:        drill.Env{Down: 500 * time.Millisecond, SettleTimeout: 60 * time.Second, Hold: 10 * time.Second},
		// The test cluster's session timeout is 2 s; the coordinators scan
		// for timed-out transactions every second.
		TransactionTimeout: 5 * time.Second,
		HangGrace:          10 * time.Second,
		Out:                out,
		Seed:               11,
	})
	t.Logf("run took %s\n%s", time.Since(start).Round(100*time.Millisecond), out.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + res.Report.Table())
	for _, d := range res.Drills {
		if !d.OK() || d.Skipped != "" {
			t.Errorf("drill %s: error %q, skipped %q", d.Drill, d.Err, d.Skipped)
		}
	}
	return res
}

// TestWorkloadCatchesPlantedBugs is the planted-bug check of the
// transaction fault checks: the workload with the marker-failover drill, producers
// driven across the end of their epochs (the cluster's transactional ids
// start at epoch 32740), zombie fences and early aborts finds nothing on
// the fixed code and shows each fault ran; with each fix undone (a planted
// switch; every node runs in this process, so planted.Set reaches them
// all) it fails with the finding that names the bug.
func TestWorkloadCatchesPlantedBugs(t *testing.T) {
	if testing.Short() {
		t.Skip("five cluster runs with drills")
	}
	t.Run("fixed", func(t *testing.T) {
		res := markerRun(t, "marker-failover", "marker-leader-loss")
		if !res.Report.OK() {
			t.Fatalf("anomalies found on the fixed code")
		}
		tot := res.Report.Totals
		if tot.EpochEndFences == 0 || tot.Rotations == 0 || tot.EarlyAborts == 0 || tot.EmptyAborts == 0 || tot.UnsentWrites == 0 ||
			tot.MarkerFailovers != 1 || tot.MarkerLeaderLosses != 1 || tot.SpansDelivered == 0 || tot.MaxEpoch != verify.MaxProducerEpoch {
			t.Errorf("the new faults did not all run: %+v", tot)
		}
		if tot.CommittedTxns < 50 {
			t.Errorf("too little to judge: %+v", tot)
		}
	})
	for _, tc := range []struct {
		bug   planted.Bug
		check string
	}{
		{planted.MarkerRetryUnreplicated, "hanging-txns"},
		{planted.LSOPassesUnreplicatedMarker, "read-committed-before-replicated"},
		{planted.FenceEpochOverflow, "epoch-anomalies"},
		{planted.EmptyAbortRefused, "abort-failed"},
	} {
		t.Run(tc.bug.String(), func(t *testing.T) {
			defer planted.Set(tc.bug)()
			res := markerRun(t, "marker-failover")
			if res.Report.OK() {
				t.Fatalf("with %s put back the report is OK", tc.bug)
			}
			for _, c := range res.Report.Checks() {
				if c.Name == tc.check && c.Count == 0 {
					t.Errorf("with %s put back, %s found nothing", tc.bug, tc.check)
				}
			}
		})
	}
}
