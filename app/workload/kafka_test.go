package workload_test

// Real cluster on real time: the workload's Kafka front door is franz-go over real
// TCP (with real TLS in one case); testkit/sim runs the SDK front door on MemNet.

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strand-io/strand/app/drill"
	"github.com/strand-io/strand/app/workload"
	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/testutil"
)

// TestWorkloadKafkaProtocol runs the verify workload with its data path
// (transactional producers, the consume-transform-produce stage, the live
// and final readers) through the Kafka listeners with franz-go: the
// checker must find nothing, and the run must have committed, aborted and
// staged transactions and read them back. Under -short it runs a few
// seconds without drills; otherwise a leader and a transaction coordinator
// are killed and restarted while it runs.
func TestWorkloadKafkaProtocol(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Mutate: func(id int32, cfg *node.Config) {
		cfg.GroupConfig.InitialRebalanceDelay = 0
		cfg.TxnTopic.Partitions, cfg.OffsetsTopic.Partitions = 3, 3
	}})
	cfg := workload.Config{
		Bootstrap:      c.Bootstrap(),
		ClientOpts:     c.ClientOpts(),
		Protocol:       workload.ProtocolKafka,
		KafkaBootstrap: c.KafkaAddrs(),
		KafkaDial: func(ctx context.Context, _, host string) (net.Conn, error) {
			return c.Net.Dial(ctx, "client", host)
		},
		Duration:           5 * time.Second,
		Partitions:         2,
		Producers:          2,
		StageWorkers:       1,
		AbortRate:          0.2,
		TransactionTimeout: 8 * time.Second,
		Seed:               11,
	}
	timeout := 2 * time.Minute
	if !testing.Short() {
		cfg.Duration, cfg.Partitions, cfg.StageWorkers = 20*time.Second, 4, 2
		cfg.Drills = []string{"kill-leader", "kill-coordinator"}
		cfg.Target = &clusterTarget{c: c}
		cfg.DrillEnv = drill.Env{Down: time.Second, SettleTimeout: 60 * time.Second}
		timeout = 4 * time.Minute
	}
	out := &testutil.LogBuffer{}
	cfg.Out = out
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := workload.Run(ctx, cfg)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + res.Report.Table())
	if !res.Report.OK() {
		t.Errorf("anomalies found")
	}
	for _, d := range res.Drills {
		if !d.OK() || d.Skipped != "" {
			t.Errorf("drill %s: error %q, skipped %q", d.Drill, d.Err, d.Skipped)
		}
	}
	if len(res.Drills) != len(cfg.Drills) {
		t.Errorf("%d drills ran, want %d", len(res.Drills), len(cfg.Drills))
	}
	tot := res.Report.Totals
	if tot.CommittedTxns < 10 || tot.AbortedTxns == 0 || tot.StageTxns == 0 || tot.FinalReads == 0 {
		t.Errorf("too little to judge: %+v", tot)
	}
}

// TestWorkloadRefusesUnknownProtocol: a protocol the workload does not
// speak, or the Kafka one without listeners, is an error before anything
// runs.
func TestWorkloadRefusesUnknownProtocol(t *testing.T) {
	ctx := context.Background()
	if _, err := workload.Run(ctx, workload.Config{Bootstrap: []string{"127.0.0.1:1"}, Protocol: "amqp"}); err == nil {
		t.Error("protocol amqp accepted")
	}
	if _, err := workload.Run(ctx, workload.Config{Bootstrap: []string{"127.0.0.1:1"}, Protocol: workload.ProtocolKafka}); err == nil {
		t.Error("protocol kafka accepted without Kafka listeners")
	}
}

// TestWorkloadOverTLS: with TLS on every listener and client certificates
// required, the workload runs through both front doors with the TLS
// options it is given (the SDK's through ClientOpts, franz-go's through
// KafkaOpts), and the checker finds nothing.
func TestWorkloadOverTLS(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{TLS: &testcluster.TLSOptions{}, Mutate: func(id int32, cfg *node.Config) {
		cfg.GroupConfig.InitialRebalanceDelay = 0
		cfg.TxnTopic.Partitions, cfg.OffsetsTopic.Partitions = 3, 3
	}})
	tlsCfg := c.TLS.ClientConfig(t, c.TLS.Client(t, "verify"))
	for _, proto := range []string{workload.ProtocolGRPC, workload.ProtocolKafka} {
		t.Run(proto, func(t *testing.T) {
			cfg := workload.Config{
				Bootstrap:          c.Bootstrap(),
				ClientOpts:         []client.Opt{client.WithTLS(tlsCfg)},
				Protocol:           proto,
				KafkaBootstrap:     c.KafkaAddrs(),
				KafkaOpts:          []kgo.Opt{kgo.DialTLSConfig(tlsCfg)},
				Duration:           3 * time.Second,
				Partitions:         2,
				Producers:          2,
				StageWorkers:       1,
				AbortRate:          0.2,
				TransactionTimeout: 8 * time.Second,
				RunID:              "tls-" + proto,
				Seed:               12,
			}
			out := &testutil.LogBuffer{}
			cfg.Out = out
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := workload.Run(ctx, cfg)
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			if !res.Report.OK() {
				t.Errorf("anomalies found:\n%s", res.Report.Table())
			}
			if tot := res.Report.Totals; tot.CommittedTxns < 5 || tot.StageTxns == 0 || tot.FinalReads == 0 {
				t.Errorf("too little to judge: %+v", tot)
			}
		})
	}
}
