package main

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/controller"
	"github.com/strand-io/strand/coordinator/group"
	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/node"
)

// testingFaultsEnv switches on the test-only fault endpoints of the
// metrics listener (POST /debug/faults/...), which drills use to hold a
// partition's follower fetches. Never set it in production.
const testingFaultsEnv = "STRAND_TESTING_FAULTS"

func serverCmd() *cobra.Command {
	var (
		nodeID                                     int32
		listen, advertise, ctrlListen, ctrlAdv     string
		gossipListen, gossipAdv, dataDir, voters   string
		join, roles, configFile, logLevel, logJSON string
		metricsListen, extListen, extAdvertise     string
		ibListen, ibAdvertise                      string
		kafkaListen, kafkaAdvertise                string
		socketRequestMaxBytes                      int32
		dev, debugEndpoints                        bool
	)
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a Strand node (controller and broker by default)",
		Long: `Run a Strand node. Every flag can also be given as an environment variable
STRAND_<FLAG> (for example STRAND_NODE_ID=2), and broker settings with Kafka's
names (log.segment.bytes, min.insync.replicas, …) in --config, one
"key: value" per line.

Kafka clients (kcat, franz-go, the Java client) connect to --kafka-listen
(127.0.0.1:9092 unless moved; "" turns it off); the strand CLI and the Go
SDK use the gRPC listener, --listen (127.0.0.1:9097).

With --dev the node is a one-node cluster holding every role, and internal
topics use replication factor 1.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A drill that asks a release binary for a planted bug must
			// fail, not rehearse nothing.
			if err := planted.CheckEnv(); err != nil {
				return err
			}
			if err := envDefaults(cmd.Flags()); err != nil {
				return err
			}
			lg := newLogger(logLevel, logJSON == "true")
			slog.SetDefault(lg)
			if pct, ok := serverGCPercent(os.Getenv); ok {
				debug.SetGCPercent(pct)
				lg.Debug("garbage collector target set (GOGC unset)", "gogc", pct)
			}
			cfg := node.DefaultConfig(nodeID, dataDir)
			cfg.Logger = lg
			cfg.Listen, cfg.Advertise = listen, advertise
			cfg.ExternalListen, cfg.ExternalAdvertise = extListen, extAdvertise
			if extListen != "" && extAdvertise == "" {
				cfg.ExternalAdvertise = extListen
			}
			cfg.Dev = dev
			for _, r := range strings.Split(roles, ",") {
				switch strings.TrimSpace(r) {
				case "broker":
					cfg.Broker = true
				case "controller":
					cfg.Controller = true
				case "":
				default:
					return fmt.Errorf("--roles: unknown role %q (broker, controller)", r)
				}
			}
			if roles != "" {
				cfg.Broker = strings.Contains(roles, "broker")
				cfg.Controller = strings.Contains(roles, "controller")
			}
			if ctrlListen == "" {
				var err error
				if ctrlListen, err = shiftPort(listen, 1); err != nil {
					return err
				}
			}
			if ibListen == "" {
				var err error
				if ibListen, err = shiftPort(listen, 4); err != nil {
					return err
				}
			}
			// An empty advertise address is settled by node.Start: the
			// bound address, or, on 0.0.0.0, --advertise's host.
			cfg.InterBrokerListen, cfg.InterBrokerAdvertise = ibListen, ibAdvertise
			cfg.ControllerListen, cfg.ControllerAdvertise = ctrlListen, ctrlAdv
			if voters == "" {
				if !dev {
					return fmt.Errorf("--controller-voters is required (or use --dev for a one-node cluster)")
				}
				adv := ctrlAdv
				if adv == "" {
					adv = ctrlListen
				}
				voters = fmt.Sprintf("%d@%s", nodeID, adv)
			}
			vs, err := controller.ParseVoters(voters)
			if err != nil {
				return err
			}
			cfg.Voters = vs
			if join != "" {
				cfg.Join = strings.Split(join, ",")
			}
			if gossipListen == "" && (len(vs) > 1 || join != "") {
				if gossipListen, err = shiftPort(listen, 2); err != nil {
					return err
				}
			}
			cfg.GossipListen, cfg.GossipAdvertise = gossipListen, gossipAdv
			if metricsListen == "" {
				if metricsListen, err = shiftPort(listen, 3); err != nil {
					return err
				}
			}
			if metricsListen != "off" {
				cfg.MetricsListen = metricsListen
			}
			switch v := os.Getenv(testingFaultsEnv); v {
			case "", "0", "false":
			case "1", "true":
				// Test-only fault endpoints for drills (node/faults.go);
				// node.Start logs a warning.
				cfg.TestingFaults = true
			default:
				return fmt.Errorf("%s=%q: want 1 (or unset)", testingFaultsEnv, v)
			}
			if dev {
				lg.Warn("dev mode: one node, every role, internal topics with replication factor 1 and min.insync.replicas 1; not for production")
			}
			if configFile != "" {
				if err := applyConfigFile(&cfg, configFile, lg); err != nil {
					return err
				}
			}
			if err := applyKafkaFlags(&cfg, kafkaListen, kafkaAdvertise, socketRequestMaxBytes, cmd.Flags().Changed("socket-request-max-bytes")); err != nil {
				return err
			}
			if cmd.Flags().Changed("debug-endpoints") {
				cfg.DebugEndpoints = debugEndpoints // over debug.endpoints.enable in --config
			}
			if dev {
				// One voter: no need to wait out a cluster-sized election timeout.
				cfg.QuorumTimeouts = node.QuorumTimeouts{Heartbeat: 200 * time.Millisecond, Election: 200 * time.Millisecond, LeaderLease: 200 * time.Millisecond}
				cfg.HeartbeatInterval = 500 * time.Millisecond
			}
			if err := applyDevDefaults(&cfg); err != nil {
				return err
			}
			n, err := node.Start(cfg)
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			select {
			case <-ctx.Done():
				lg.Info("shutting down")
				return n.Stop()
			case <-n.StorageFailed():
				// As Kafka halts a broker whose log directories have all
				// failed: leadership moves away, and the restart's recovery
				// re-checks what the failed fsync may have lost.
				err := n.StorageErr()
				lg.Error("an fsync of a partition log failed; stopping this node (restart it to recover the log)", "err", err)
				_ = n.Stop()
				return fmt.Errorf("storage failure: %w", err)
			case <-n.MetadataUnreadable():
				// Metadata written in a newer format than this binary
				// reads: applying the rest would diverge from the cluster.
				err := n.MetadataErr()
				lg.Error("this binary cannot read the cluster's metadata; stopping this node", "err", err)
				_ = n.Stop()
				return fmt.Errorf("unreadable metadata: %w", err)
			}
		},
	}
	f := cmd.Flags()
	f.Int32Var(&nodeID, "node-id", 1, "this node's id")
	f.StringVar(&kafkaListen, "kafka-listen", "127.0.0.1:9092", "Kafka wire-protocol listen address, for Kafka clients (kcat, franz-go, the Java client); \"\" turns it off")
	f.StringVar(&kafkaAdvertise, "kafka-advertise", "", "address Kafka clients are handed to reach --kafka-listen (default: --kafka-listen; on 0.0.0.0, --advertise's host with its port)")
	f.Int32Var(&socketRequestMaxBytes, "socket-request-max-bytes", 104857600, "largest Kafka request accepted, in bytes (Kafka's socket.request.max.bytes; also settable in --config)")
	f.StringVar(&listen, "listen", "127.0.0.1:9097", "client gRPC listen address (what the strand CLI and the Go SDK bootstrap from)")
	f.StringVar(&advertise, "advertise", "", "address clients use to reach --listen (default: --listen)")
	f.StringVar(&ibListen, "inter-broker-listen", "", "inter-broker gRPC listen address: what other nodes send (controller, replication, transaction markers), served to the cluster's addresses only (default: --listen port+4)")
	f.StringVar(&ibAdvertise, "inter-broker-advertise", "", "address other nodes use to reach --inter-broker-listen (default: --inter-broker-listen; on 0.0.0.0, --advertise's host with its port)")
	f.StringVar(&extListen, "external-listen", "", "a second, client-facing gRPC listener (like Kafka's EXTERNAL listener)")
	f.StringVar(&extAdvertise, "external-advertise", "", "the address clients use to reach --external-listen")
	f.StringVar(&ctrlListen, "controller-listen", "", "Raft transport listen address (default: --listen port+1)")
	f.StringVar(&ctrlAdv, "controller-advertise", "", "address peers use to reach --controller-listen")
	f.StringVar(&gossipListen, "gossip-listen", "", "memberlist listen address (default: --listen port+2 in a multi-node cluster)")
	f.StringVar(&gossipAdv, "gossip-advertise", "", "address peers use to reach --gossip-listen")
	f.StringVar(&dataDir, "data-dir", "./data", "where logs and controller state live")
	f.StringVar(&voters, "controller-voters", "", "the controller quorum: id@host:raftport,…")
	f.StringVar(&join, "join", "", "memberlist seeds host:port,…")
	f.StringVar(&roles, "roles", "broker,controller", "roles of this node: broker, controller, or both")
	f.BoolVar(&dev, "dev", false, "one-node development cluster")
	f.StringVar(&configFile, "config", "", "file of broker settings with Kafka's names (key: value per line)")
	f.StringVar(&metricsListen, "metrics-listen", "", "HTTP address for /metrics, /debug/pprof (with --debug-endpoints) and the web console (default: --listen port+3; \"off\" disables)")
	f.BoolVar(&debugEndpoints, "debug-endpoints", false, "serve /debug/pprof on --metrics-listen, to super users and brokers only (debug.endpoints.enable; also settable in --config)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn, error")
	f.StringVar(&logJSON, "log-json", "false", "log as JSON")
	return cmd
}

func newLogger(level string, asJSON bool) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if asJSON {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

func shiftPort(addr string, by int) (string, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("address %q: %w", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return "", fmt.Errorf("address %q: %w", addr, err)
	}
	return net.JoinHostPort(h, strconv.Itoa(n+by)), nil
}

// applyKafkaFlags sets the Kafka listener from --kafka-listen,
// --kafka-advertise and --socket-request-max-bytes, after --config: the
// flag (or STRAND_SOCKET_REQUEST_MAX_BYTES) wins over the file's
// socket.request.max.bytes when given (maxBytesSet), and its default
// applies when neither is.
func applyKafkaFlags(cfg *node.Config, listen, advertise string, maxBytes int32, maxBytesSet bool) error {
	if listen == "" && advertise != "" {
		return fmt.Errorf("--kafka-advertise %q without --kafka-listen: the Kafka listener is off", advertise)
	}
	if maxBytes < 1 {
		return fmt.Errorf("--socket-request-max-bytes %d: want at least 1", maxBytes)
	}
	cfg.KafkaListen, cfg.KafkaAdvertise = listen, advertise
	if maxBytesSet || cfg.SocketRequestMaxBytes == 0 {
		cfg.SocketRequestMaxBytes = maxBytes
	}
	return nil
}

// applyDevDefaults: dev mode lowers what a single node cannot meet.
func applyDevDefaults(cfg *node.Config) error {
	if cfg.Dev {
		cfg.BrokerConfig.MinInsyncReplicas = 1
	}
	return nil
}

// serverSettings maps Kafka-named settings onto the node config.
var serverSettings = map[string]func(cfg *node.Config, v string) error{
	"log.segment.bytes":               bounded(14, math.MaxInt32, intSetting(func(c *node.Config, n int64) { c.BrokerConfig.Log.SegmentBytes = n })),
	"log.roll.ms":                     bounded(1, math.MaxInt64, intSetting(func(c *node.Config, n int64) { c.BrokerConfig.Log.SegmentMs = n })),
	"log.retention.ms":                bounded(-1, math.MaxInt64, intSetting(func(c *node.Config, n int64) { c.BrokerConfig.Log.RetentionMs = n })),
	"log.retention.bytes":             bounded(-1, math.MaxInt64, intSetting(func(c *node.Config, n int64) { c.BrokerConfig.Log.RetentionBytes = n })),
	"log.flush.interval.messages":     bounded(1, math.MaxInt64, intSetting(func(c *node.Config, n int64) { c.BrokerConfig.Log.FlushMessages = n })),
	"log.flush.interval.ms":           bounded(0, math.MaxInt64, intSetting(func(c *node.Config, n int64) { c.BrokerConfig.Log.FlushMs = n })),
	"log.index.interval.bytes":        bounded(0, math.MaxInt32, intSetting(func(c *node.Config, n int64) { c.BrokerConfig.Log.IndexIntervalBytes = int(n) })),
	"log.retention.check.interval.ms": bounded(1, math.MaxInt64, msSetting(func(c *node.Config, d time.Duration) { c.BrokerConfig.RetentionCheckInterval = d })),
	"producer.id.expiration.ms":       bounded(1, math.MaxInt32, intSetting(func(c *node.Config, n int64) { c.BrokerConfig.Log.ProducerIDExpirationMs = n })),
	// Compaction: the topic configs' broker defaults, then the cleaner's own.
	"log.cleanup.policy": func(c *node.Config, v string) error {
		p, ok := broker.ParseCleanupPolicy(v)
		if !ok {
			return fmt.Errorf("%q: want delete, compact or compact,delete", v)
		}
		c.BrokerConfig.Log.Cleanup = p
		return nil
	},
	"log.cleaner.min.cleanable.ratio":           ratioSetting(func(c *node.Config, f float64) { c.BrokerConfig.Log.MinCleanableDirtyRatio = f }),
	"log.cleaner.min.compaction.lag.ms":         bounded(0, math.MaxInt64, intSetting(func(c *node.Config, n int64) { c.BrokerConfig.Log.MinCompactionLagMs = n })),
	"log.cleaner.max.compaction.lag.ms":         bounded(1, math.MaxInt64, intSetting(func(c *node.Config, n int64) { c.BrokerConfig.Log.MaxCompactionLagMs = n })),
	"log.cleaner.delete.retention.ms":           bounded(0, math.MaxInt64, intSetting(func(c *node.Config, n int64) { c.BrokerConfig.Log.DeleteRetentionMs = n })),
	"log.cleaner.enable":                        boolSetting(func(c *node.Config, b bool) { c.BrokerConfig.Cleaner.Enable = b }),
	"log.cleaner.threads":                       bounded(0, math.MaxInt32, intSetting(func(c *node.Config, n int64) { setCleanerThreads(c, int(n)) })),
	"log.cleaner.dedupe.buffer.size":            bounded(bytesPerCleanerKey, math.MaxInt64, intSetting(func(c *node.Config, n int64) { c.BrokerConfig.Cleaner.DedupeBufferSize = n })),
	"log.cleaner.io.max.bytes.per.second":       positiveFloatSetting(func(c *node.Config, f float64) { c.BrokerConfig.Cleaner.IOMaxBytesPerSecond = f }),
	"log.cleaner.backoff.ms":                    bounded(0, math.MaxInt64, msSetting(func(c *node.Config, d time.Duration) { c.BrokerConfig.Cleaner.Backoff = d })),
	"min.insync.replicas":                       bounded(1, math.MaxInt32, intSetting(func(c *node.Config, n int64) { c.BrokerConfig.MinInsyncReplicas = int(n) })),
	"offset.metadata.max.bytes":                 bounded(0, math.MaxInt32, intSetting(func(c *node.Config, n int64) { c.OffsetMetadataMaxBytes = int(n) })),
	"sasl.enabled.mechanisms":                   saslMechanismsSetting,                                        // server_sasl.go
	"connection.failed.authentication.delay.ms": bounded(0, math.MaxInt32, msSetting(failedAuthDelaySetting)), // server_sasl.go
	"socket.request.max.bytes":                  bounded(1, math.MaxInt32, intSetting(func(c *node.Config, n int64) { c.SocketRequestMaxBytes = int32(n) })),
	"message.max.bytes":                         bounded(0, math.MaxInt32, intSetting(func(c *node.Config, n int64) { c.MessageMaxBytes = int(n) })),
	"max.in.flight.requests.per.stream":         bounded(1, 1<<16, intSetting(func(c *node.Config, n int64) { c.ProduceMaxInFlight = int(n) })),
	"log.message.timestamp.before.max.ms":       bounded(0, math.MaxInt64, intSetting(func(c *node.Config, n int64) { c.TimestampBeforeMaxMs = n })),
	"log.message.timestamp.after.max.ms":        bounded(0, math.MaxInt64, intSetting(func(c *node.Config, n int64) { c.TimestampAfterMaxMs = n })),
	"num.partitions":                            bounded(1, math.MaxInt32, intSetting(func(c *node.Config, n int64) { c.ControllerConfig.DefaultPartitions = int32(n) })),
	"max.broker.partitions":                     bounded(1, math.MaxInt32, intSetting(func(c *node.Config, n int64) { c.ControllerConfig.MaxBrokerPartitions = int(n) })),
	"default.replication.factor":                bounded(1, math.MaxInt16, intSetting(func(c *node.Config, n int64) { c.ControllerConfig.DefaultReplicationFactor = int32(n) })),
	"broker.session.timeout.ms":                 bounded(1, math.MaxInt32, msSetting(func(c *node.Config, d time.Duration) { c.ControllerConfig.SessionTimeout = d })),
	"broker.heartbeat.interval.ms":              bounded(1, math.MaxInt32, msSetting(func(c *node.Config, d time.Duration) { c.HeartbeatInterval = d })),
	"controller.quorum.fetch.timeout.ms":        bounded(5, math.MaxInt32, msSetting(func(c *node.Config, d time.Duration) { c.QuorumTimeouts.Heartbeat = d })),
	"controller.quorum.election.timeout.ms":     bounded(5, math.MaxInt32, msSetting(func(c *node.Config, d time.Duration) { c.QuorumTimeouts.Election = d })),
	"broker.unreachable.session.timeout.ms":     bounded(0, math.MaxInt32, msSetting(func(c *node.Config, d time.Duration) { c.ControllerConfig.UnreachableSessionTimeout = d })),
	"leader.imbalance.check.interval.seconds":   bounded(1, math.MaxInt64, secondsSetting(func(c *node.Config, d time.Duration) { c.ControllerConfig.LeaderImbalanceInterval = d })),
	"auto.leader.rebalance.enable":              boolSetting(func(c *node.Config, b bool) { c.ControllerConfig.AutoLeaderRebalance = b }),
	"leader.imbalance.per.broker.percentage":    bounded(0, 100, intSetting(func(c *node.Config, n int64) { c.ControllerConfig.LeaderImbalancePercentage = int(n) })),
	"replica.lag.time.max.ms":                   bounded(1, math.MaxInt64, msSetting(func(c *node.Config, d time.Duration) { c.ReplicationConfig.ReplicaLagTimeMax = d })),
	"replica.fetch.wait.max.ms":                 bounded(0, math.MaxInt32, msSetting(func(c *node.Config, d time.Duration) { c.ReplicationConfig.FetchWaitMax = d })),
	"replica.fetch.max.bytes":                   bounded(0, math.MaxInt32, intSetting(func(c *node.Config, n int64) { c.ReplicationConfig.FetchMaxBytes = int(n) })),
	"replica.fetch.response.max.bytes":          bounded(0, 1<<30, intSetting(func(c *node.Config, n int64) { c.ReplicationConfig.FetchResponseMaxBytes = int(n) })),
	"fetch.max.bytes": bounded(0, math.MaxInt32, intSetting(func(c *node.Config, n int64) {
		c.ReplicationConfig.ConsumerFetchMaxBytes = int(min(max(n, 1024), 1<<30))
	})),
	"max.incremental.fetch.session.cache.slots": bounded(0, math.MaxInt32, intSetting(func(c *node.Config, n int64) { c.ReplicationConfig.FetchSessionSlots = int(n) })),
	"connections.max.idle.ms":                   bounded(1, math.MaxInt64, msSetting(func(c *node.Config, d time.Duration) { c.ConnectionsMaxIdle = d })),
	"max.connections":                           bounded(0, math.MaxInt32, intSetting(func(c *node.Config, n int64) { c.MaxConnections = int(n) })),
	"max.connections.per.ip":                    bounded(0, math.MaxInt32, intSetting(func(c *node.Config, n int64) { c.MaxConnectionsPerIP = int(n) })),
	"max.connections.per.ip.overrides":          perIPOverrides,
	"transaction.max.timeout.ms":                bounded(1, math.MaxInt32, msSetting(func(c *node.Config, d time.Duration) { c.TxnConfig.MaxTimeout = d })),
	// The internal topics, as the cluster creates them (in dev mode the
	// replication factors and min ISR are 1 whatever these say).
	"offsets.topic.num.partitions":                                bounded(1, math.MaxInt32, intSetting(func(c *node.Config, n int64) { c.OffsetsTopic.Partitions = int32(n) })),
	"offsets.topic.replication.factor":                            bounded(1, math.MaxInt16, intSetting(func(c *node.Config, n int64) { c.OffsetsTopic.ReplicationFactor = int32(n) })),
	"offsets.topic.segment.bytes":                                 bounded(14, math.MaxInt32, intSetting(func(c *node.Config, n int64) { c.OffsetsTopic.SegmentBytes = n })),
	"transaction.state.log.num.partitions":                        bounded(1, math.MaxInt32, intSetting(func(c *node.Config, n int64) { c.TxnTopic.Partitions = int32(n) })),
	"transaction.state.log.replication.factor":                    bounded(1, math.MaxInt16, intSetting(func(c *node.Config, n int64) { c.TxnTopic.ReplicationFactor = int32(n) })),
	"transaction.state.log.min.isr":                               bounded(1, math.MaxInt32, intSetting(func(c *node.Config, n int64) { c.TxnTopic.MinISR = int(n) })),
	"transaction.state.log.segment.bytes":                         bounded(14, math.MaxInt32, intSetting(func(c *node.Config, n int64) { c.TxnTopic.SegmentBytes = n })),
	"transactional.id.expiration.ms":                              bounded(1, math.MaxInt32, msSetting(func(c *node.Config, d time.Duration) { c.TxnConfig.IDExpiration = d })),
	"transaction.abort.timed.out.transaction.cleanup.interval.ms": bounded(1, math.MaxInt32, msSetting(func(c *node.Config, d time.Duration) { c.TxnConfig.AbortTimedOutInterval = d })),
	// Authorization.
	"authorizer.class.name": func(c *node.Config, v string) error {
		v = strings.TrimSpace(v)
		if err := node.ValidAuthorizerClass(v); err != nil {
			return err
		}
		c.Authorizer.ClassName = v
		return nil
	},
	"super.users": func(c *node.Config, v string) error {
		ps, err := authz.ParseSuperUsers(v)
		if err != nil {
			return err
		}
		c.Authorizer.SuperUsers = ps
		return nil
	},
	"allow.everyone.if.no.acl.found": boolSetting(func(c *node.Config, b bool) { c.Authorizer.AllowEveryoneIfNoACLFound = b }),
	// Debug endpoints, client quotas' windows, the cap
	// on open transactions per principal.
	"debug.endpoints.enable":             boolSetting(func(c *node.Config, b bool) { c.DebugEndpoints = b }),
	"quota.window.num":                   bounded(1, math.MaxInt32, intSetting(func(c *node.Config, n int64) { c.Quotas.Windows = int(n) })),
	"quota.window.size.seconds":          bounded(1, math.MaxInt32, secondsSetting(func(c *node.Config, d time.Duration) { c.Quotas.Window = d })),
	"transaction.max.open.per.principal": bounded(0, math.MaxInt32, intSetting(func(c *node.Config, n int64) { c.TxnConfig.MaxOpenPerPrincipal = int(n) })),
	// Consumer groups of the consumer rebalance protocol (KIP-848).
	"group.coordinator.rebalance.protocols": rebalanceProtocolsSetting,
	"group.consumer.heartbeat.interval.ms":  bounded(1, math.MaxInt32, msSetting(func(c *node.Config, d time.Duration) { c.GroupConfig.ConsumerHeartbeatInterval = d })),
	"group.consumer.session.timeout.ms":     bounded(1, math.MaxInt32, msSetting(func(c *node.Config, d time.Duration) { c.GroupConfig.ConsumerSessionTimeout = d })),
	"group.consumer.max.size":               bounded(1, math.MaxInt32, intSetting(func(c *node.Config, n int64) { c.GroupConfig.ConsumerMaxSize = int(n) })),
	"group.consumer.assignors":              consumerAssignorsSetting,
	"group.consumer.migration.policy": func(c *node.Config, v string) error {
		v = strings.ToLower(strings.TrimSpace(v))
		if !group.ValidMigrationPolicy(v) {
			return fmt.Errorf("%q: want bidirectional, upgrade, downgrade or disabled", v)
		}
		c.GroupConfig.MigrationPolicy = v
		return nil
	},
	// Testing only (drills): new transactional ids start at this epoch, so
	// producers cross the end of their epochs after a few transactions.
	"strand.testing.transaction.first.producer.epoch": intSetting(func(c *node.Config, n int64) { c.TxnConfig.FirstEpoch = int16(min(max(n, 0), 32766)) }),
}

// deprecatedSettings are names Strand used before it took Kafka's; they
// still work, with a warning naming the setting to use instead.
var deprecatedSettings = map[string]struct {
	instead string
	set     func(*node.Config, string) error
}{
	"leader.imbalance.check.interval.ms": {"leader.imbalance.check.interval.seconds",
		msSetting(func(c *node.Config, d time.Duration) { c.ControllerConfig.LeaderImbalanceInterval = d })},
}

// rebalanceProtocolsSetting parses group.coordinator.rebalance.protocols:
// "classic" (which Kafka requires) and, to serve consumer groups of the
// consumer rebalance protocol, "consumer".
func rebalanceProtocolsSetting(c *node.Config, v string) error {
	classic, consumer := false, false
	for _, p := range strings.Split(v, ",") {
		switch strings.ToLower(strings.TrimSpace(p)) {
		case "classic":
			classic = true
		case "consumer":
			consumer = true
		case "":
		default:
			return fmt.Errorf("%q: unknown protocol %q (Strand serves classic and consumer)", v, strings.TrimSpace(p))
		}
	}
	if !classic {
		return fmt.Errorf("%q: the classic protocol is required", v)
	}
	c.GroupConfig.ConsumerProtocol = consumer
	return nil
}

// consumerAssignorsSetting parses group.consumer.assignors: the server
// assignors consumer groups may use, the first the default ("uniform",
// "range", or Kafka's class names of them).
func consumerAssignorsSetting(c *node.Config, v string) error {
	var names []string
	for _, a := range strings.Split(v, ",") {
		a = strings.TrimSpace(a)
		switch a {
		case "":
			continue
		case "org.apache.kafka.coordinator.group.assignor.UniformAssignor":
			a = "uniform"
		case "org.apache.kafka.coordinator.group.assignor.RangeAssignor":
			a = "range"
		}
		if !group.KnownAssignor(a) {
			return fmt.Errorf("%q: unknown assignor %q (Strand has uniform and range)", v, a)
		}
		names = append(names, a)
	}
	if len(names) == 0 {
		return fmt.Errorf("%q: no assignor", v)
	}
	c.GroupConfig.ConsumerAssignors = names
	return nil
}

// perIPOverrides parses max.connections.per.ip.overrides: host:count
// pairs separated by commas (an IPv6 address is written as is; the count
// follows its last colon).
func perIPOverrides(c *node.Config, v string) error {
	out := map[string]int{}
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		i := strings.LastIndex(item, ":")
		if i <= 0 {
			return fmt.Errorf("want host:count, got %q", item)
		}
		n, err := strconv.Atoi(strings.TrimSpace(item[i+1:]))
		if err != nil || n < 0 {
			return fmt.Errorf("want host:count with a count >= 0, got %q", item)
		}
		out[strings.Trim(strings.TrimSpace(item[:i]), "[]")] = n
	}
	c.MaxConnectionsPerIPOverrides = out
	return nil
}

// bounded refuses a value outside [lo, hi] before set sees it: the range
// Kafka's ConfigDef gives the setting (an INT setting fits an int32, a
// LONG one an int64, each at or above its floor). A duration must also fit
// Go's time.Duration.
func bounded(lo, hi int64, set func(*node.Config, string) error) func(*node.Config, string) error {
	return func(c *node.Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer in [%d, %d]: %q", lo, hi, v)
		}
		if n < lo || n > hi {
			return fmt.Errorf("%d is outside [%d, %d]", n, lo, hi)
		}
		return set(c, v)
	}
}

func intSetting(f func(*node.Config, int64)) func(*node.Config, string) error {
	return func(c *node.Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer: %q", v)
		}
		f(c, n)
		return nil
	}
}

func msSetting(f func(*node.Config, time.Duration)) func(*node.Config, string) error {
	return durationSetting(time.Millisecond, f)
}

func secondsSetting(f func(*node.Config, time.Duration)) func(*node.Config, string) error {
	return durationSetting(time.Second, f)
}

// durationSetting reads a count of unit; one too large for a Go duration
// (about 292 years) is refused rather than wrapped around.
func durationSetting(unit time.Duration, f func(*node.Config, time.Duration)) func(*node.Config, string) error {
	return func(c *node.Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer: %q", v)
		}
		if n > math.MaxInt64/int64(unit) || n < math.MinInt64/int64(unit) {
			return fmt.Errorf("%d is too large a duration (at most %d)", n, math.MaxInt64/int64(unit))
		}
		f(c, time.Duration(n)*unit)
		return nil
	}
}

// bytesPerCleanerKey: a dedupe buffer smaller than one key's entry could
// not clean anything.
const bytesPerCleanerKey = 24

// setCleanerThreads: Kafka takes 0 threads as no cleaning (its
// LogCleaner starts none); so does Strand.
func setCleanerThreads(c *node.Config, n int) {
	if n == 0 {
		c.BrokerConfig.Cleaner.Enable = false
		return
	}
	c.BrokerConfig.Cleaner.Threads = n
}

// ratioSetting reads a DOUBLE in [0, 1].
func ratioSetting(f func(*node.Config, float64)) func(*node.Config, string) error {
	return func(c *node.Config, v string) error {
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(x) || x < 0 || x > 1 {
			return fmt.Errorf("not a number in [0, 1]: %q", v)
		}
		f(c, x)
		return nil
	}
}

// positiveFloatSetting reads a DOUBLE above 0.
func positiveFloatSetting(f func(*node.Config, float64)) func(*node.Config, string) error {
	return func(c *node.Config, v string) error {
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(x) || x <= 0 {
			return fmt.Errorf("not a number above 0: %q", v)
		}
		f(c, x)
		return nil
	}
}

func boolSetting(f func(*node.Config, bool)) func(*node.Config, string) error {
	return func(c *node.Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("not a boolean: %q", v)
		}
		f(c, b)
		return nil
	}
}

// applyConfigFile reads "key: value" (or key=value) lines. A deprecated
// key is applied with a warning on lg.
func applyConfigFile(cfg *node.Config, path string, lg *slog.Logger) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		k, v, ok := strings.Cut(s, ":")
		if !ok || strings.Contains(k, "=") {
			k, v, ok = strings.Cut(s, "=")
		}
		if !ok {
			return fmt.Errorf("%s:%d: want key: value", path, line)
		}
		k, v = strings.TrimSpace(k), strings.Trim(strings.TrimSpace(v), `"'`)
		set, known := serverSettings[k]
		if d, old := deprecatedSettings[k]; !known && old {
			lg.Warn("deprecated setting: use Kafka's name "+d.instead+" (in its unit) instead", "setting", k, "file", path, "line", line)
			set, known = d.set, true
		}
		if !known {
			return fmt.Errorf("%s:%d: unknown setting %q", path, line, k)
		}
		if err := set(cfg, v); err != nil {
			return fmt.Errorf("%s:%d: %s: %w", path, line, k, err)
		}
	}
	return sc.Err()
}

var _ = context.Background

// defaultServerGOGC is the garbage collector's target for a server when the
// GOGC environment variable is unset. A broker's live heap is small (tens
// of MB) while it allocates per request, so Go's default of 100 collects
// many times a second. 200 halves that: 6-14 % more records/s at 1 KiB
// in alternating runs on the process cluster (docs/BENCHMARKS.md), for
// about 5 MB more resident memory per node at that load. GOGC (and
// GOMEMLIMIT) set by the operator win.
const defaultServerGOGC = 200

// serverGCPercent is the GC percent the server sets, and whether it sets
// one at all (not when the operator chose GOGC).
func serverGCPercent(getenv func(string) string) (int, bool) {
	if getenv("GOGC") != "" {
		return 0, false
	}
	return defaultServerGOGC, true
}
