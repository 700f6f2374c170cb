package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strand-io/strand/app/drill"
	"github.com/strand-io/strand/app/workload"
)

func init() { extraCommands = append(extraCommands, verifyCmd) }

func verifyCmd() *cobra.Command {
	var (
		cfg         workload.Config
		drills      []string
		target      string
		dataDir     string
		jsonPath    string
		historyOut  string
		faultConfig string
		minTxns     int
		maxGap      time.Duration
		kafkaFast   bool
	)
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Run an exactly-once workload (with fault drills) and check what it saw",
		Long: `verify runs transactional producers (some transactions aborted on purpose, some of
those right after the records are handed to the client, before they are sent; producers
fenced by a new incarnation when their epoch reaches 32766 and now and then at random)
writing unique values to a source topic, a consume-transform-produce stage copying it to
a sink topic, a live read_committed reader and a protocol-level read_committed reader
(raw Fetch), while the drills kill, pause or cut off nodes and lose transaction markers.
It then reads every partition back with read_committed and read_uncommitted and counts:
lost acknowledged records, duplicates, aborted records visible, records visible before
their commit, out-of-order records, offsets inconsistent between reads, torn transactions,
stage offsets that disagree with the output, values nobody wrote, hanging transactions,
records handed to read_committed before their marker was replicated, producer epoch
anomalies and failed aborts. Exit status: 0 when every count is zero and every drill
succeeded, 1 otherwise, 2 when the run could not be completed.

With --protocol kafka the producers, the stage and both readers move their records
through the Kafka listeners (--kafka-bootstrap) with franz-go; the drills, the
administration and the protocol-level reader still use the gRPC bootstrap.

Drills: ` + strings.Join(drill.Names, ", ") + `
(all of them: all), and ` + strings.Join(drill.Optional, ", ") + ` (only when named).
Targets: the docker compose cluster of deploy/docker-compose.yml (containers
strand-node1..3), the local process cluster of 'make run' (pids under --data-dir), or
auto (compose if its containers run).
The marker drills hold a partition's follower fetches through the nodes' test-only
endpoint, which a node serves only when started with STRAND_TESTING_FAULTS=1 (else they
are skipped); their --hold must stay below the brokers' replica.lag.time.max.ms.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, d := range drills {
				if d == "all" {
					cfg.Drills = append(cfg.Drills, drill.Names...)
					continue
				}
				for _, one := range strings.Split(d, ",") {
					if !drill.Valid(one) {
						return fmt.Errorf("--drill %q: want one of %s or all", one, strings.Join(append(slices.Clone(drill.Names), drill.Optional...), ", "))
					}
					cfg.Drills = append(cfg.Drills, one)
				}
			}
			ctx, stop := signalContext()
			defer stop()
			if len(cfg.Drills) > 0 || target != "auto" {
				faultTLS := security.TLS
				if faultConfig != "" {
					fc, err := loadCommandConfig(faultConfig)
					if err != nil {
						return fmt.Errorf("--fault-command-config: %w", err)
					}
					faultTLS = fc.TLS
				}
				t, err := pickTarget(ctx, target, dataDir, faultTLS)
				if err != nil {
					return err
				}
				cfg.Target = t
				if t != nil {
					fmt.Printf("drill target: %s\n", t.Name())
				}
			}
			cfg.Bootstrap = bootstrap(cmd)
			cfg.ClientOpts = append(cfg.ClientOpts, security.sdkOpts...)
			cfg.KafkaOpts = append(cfg.KafkaOpts, security.kgoOpts()...)
			if kafkaFast {
				cfg.KafkaOpts = append(cfg.KafkaOpts, kafkaFailoverOpts()...)
			}
			proto, kafkaAddrs, err := protocolOf(cmd)
			if err != nil {
				return err
			}
			cfg.Protocol, cfg.KafkaBootstrap = proto, kafkaAddrs
			if proto == workload.ProtocolKafka {
				fmt.Printf("data path: Kafka listeners %s (franz-go)\n", strings.Join(kafkaAddrs, ","))
			}
			cfg.Out = os.Stdout
			res, err := workload.Run(ctx, cfg)
			if err != nil {
				fmt.Fprintln(os.Stderr, "strand verify:", err)
				os.Exit(2)
			}
			fmt.Println()
			if len(res.Drills) > 0 {
				fmt.Println("DRILL               NODE  SETTLED  COMMIT GAP  RESULT")
				for _, d := range res.Drills {
					result := "ok"
					switch {
					case d.Skipped != "":
						result = "skipped: " + d.Skipped
					case d.Err != "":
						result = "FAIL: " + d.Err
					}
					node := "-"
					if d.Node > 0 {
						node = fmt.Sprint(d.Node)
					}
					gap := "-"
					if d.CommitGap > 0 {
						gap = fmt.Sprintf("%.2fs", d.CommitGap)
					}
					fmt.Printf("%-19s %-5s %6.1fs  %10s  %s\n", d.Drill, node, d.Settle, gap, result)
				}
				fmt.Println()
			}
			fmt.Print(res.Report.Table())
			if g := res.LongestCommitGap; !g.From.IsZero() {
				fmt.Printf("longest time without a commit: %.2fs (%s to %s UTC)\n", g.Seconds(),
					g.From.UTC().Format("15:04:05.000"), g.To.UTC().Format("15:04:05.000"))
			}
			fmt.Printf("run %s: %.0fs, %s committed txns/s, %s committed records/s\n", res.RunID, res.Elapsed,
				res.Rates["committed_txns_per_sec"], res.Rates["records_per_sec"])
			if jsonPath != "" {
				if err := writeJSON(jsonPath, res); err != nil {
					return err
				}
			}
			if historyOut != "" {
				if err := writeJSON(historyOut, res.History); err != nil {
					return err
				}
			}
			if !res.OK() {
				return fmt.Errorf("exactly-once violated or a drill failed (see above)")
			}
			if maxGap > 0 && res.LongestCommitGapSec > maxGap.Seconds() {
				return fmt.Errorf("commits stopped for %.2fs, --max-commit-gap allows %v", res.LongestCommitGapSec, maxGap)
			}
			if n := res.Report.Totals.CommittedTxns; n < minTxns {
				return fmt.Errorf("only %d transactions committed, --min-committed asks for %d: too little was tested", n, minTxns)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.DurationVar(&cfg.Duration, "duration", time.Minute, "how long producers run (drills are spread over it)")
	f.StringArrayVar(&drills, "drill", nil, "drill to run (repeatable, comma-separated, or all): "+strings.Join(append(slices.Clone(drill.Names), drill.Optional...), ", "))
	f.BoolVar(&cfg.Repeat, "repeat", false, "cycle through the drills until --duration ends (a soak)")
	f.StringVar(&target, "target", "auto", "where drills act: auto, compose, process or none")
	f.StringVar(&dataDir, "data-dir", "data/cluster", "the process cluster's directory (node<N>.pid / node<N>.cmd)")
	f.IntVar(&cfg.Producers, "producers", 3, "transactional producers")
	f.IntVar(&cfg.StageWorkers, "stage-workers", 2, "consume-transform-produce workers")
	f.BoolVar(&cfg.NoStage, "no-stage", false, "run without the consume-transform-produce stage")
	f.Int32Var(&cfg.Partitions, "partitions", 6, "partitions of the source and sink topics")
	f.IntVar(&cfg.TxnMaxRecords, "txn-max-records", 8, "records per producer transaction, at most")
	f.Float64Var(&cfg.AbortRate, "abort-rate", 0.2, "fraction of producer transactions aborted on purpose")
	f.StringVar(&cfg.RunID, "run-id", "", "names the run's topics and transactional ids (default: the start time)")
	f.DurationVar(&cfg.ProgressEvery, "progress-interval", 5*time.Second, "period of progress lines")
	f.DurationVar(&cfg.DrillEnv.Down, "down", 3*time.Second, "how long a killed node stays down")
	f.DurationVar(&cfg.DrillEnv.Cut, "cut", 12*time.Second, "how long a node stays paused or cut off (past the 9 s session timeout)")
	f.DurationVar(&cfg.DrillEnv.SettleTimeout, "settle-timeout", 90*time.Second, "how long to wait for the cluster to be whole after a drill")
	f.DurationVar(&cfg.DrillEnv.Hold, "hold", 20*time.Second, "marker drills: how long a partition's follower fetches are held at most (below replica.lag.time.max.ms)")
	f.Float64Var(&cfg.EarlyAbortShare, "early-abort-share", 0.5, "share of the deliberate aborts made before the records are sent (negative: none)")
	f.Float64Var(&cfg.ZombieFenceRate, "zombie-fence-rate", 0.02, "fraction of transactions whose producer is fenced by a new incarnation (negative: none; producers are always fenced at epoch 32766)")
	f.DurationVar(&cfg.HangGrace, "hang-grace", 0, "how long open transactions may take to end after the producers stop before they count as hanging (default: 30s past the transaction timeout)")
	f.StringVar(&jsonPath, "json", "", "write the result (report, drills) as JSON to this file (- for stdout)")
	f.BoolVar(&kafkaFast, "kafka-failover-settings", false, "with --protocol kafka: franz-go with the settings the README's Failover section gives for following a failover within seconds (metadata at most 100 ms old, 1 s request timeouts, a flat 100 ms retry backoff), as make bench-failover uses")
	f.DurationVar(&maxGap, "max-commit-gap", 0, "fail when commits stop for longer than this between the first commit and the producers' stop (0: report only)")
	f.IntVar(&minTxns, "min-committed", 0, "fail unless at least this many transactions committed (CI uses 1000)")
	f.StringVar(&faultConfig, "fault-command-config", "", "Kafka client properties whose TLS certificate the marker drills call the nodes' fault endpoints with: a super user's, where the nodes run an authorizer (default: --command-config's)")
	f.StringVar(&historyOut, "history", "", "write the full history (every write and read) as JSON to this file")
	addProtocolFlags(cmd)
	return cmd
}

// pickTarget resolves --target.
// faultTLS is the TLS configuration the drills call the nodes' fault
// endpoints with (the metrics listeners speak TLS where the brokers do,
// HTTP:SSL; with TLS there only a super user or a broker may call them).
func pickTarget(ctx context.Context, name, dataDir string, faultTLS *tls.Config) (drill.Target, error) {
	compose := drill.NewCompose()
	proc := &drill.Process{Dir: dataDir, N: 3}
	compose.HTTPTLS, proc.HTTPTLS = faultTLS, faultTLS
	switch name {
	case "none":
		return nil, nil
	case "compose":
		return compose, nil
	case "process":
		if !proc.Detect() {
			return nil, fmt.Errorf("no process cluster under %s (start one with make run)", dataDir)
		}
		return proc, nil
	case "auto":
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if compose.Detect(cctx) {
			return compose, nil
		}
		if proc.Detect() {
			return proc, nil
		}
		return nil, fmt.Errorf("drills need a target: no compose containers (strand-node1..3) and no process cluster under %s; pass --target", dataDir)
	}
	return nil, fmt.Errorf("--target %q: want auto, compose, process or none", name)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = os.Stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
