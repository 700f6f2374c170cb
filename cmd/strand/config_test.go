package main

import (
	"bytes"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/node"
)

func configFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "server.conf")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The preferred-leader check interval has Kafka's name and unit
// (leader.imbalance.check.interval.seconds, default 300); the name Strand
// used before (…interval.ms) still works, with a deprecation warning.
func TestLeaderImbalanceIntervalHasKafkasName(t *testing.T) {
	cfg := node.DefaultConfig(1, t.TempDir())
	if got := cfg.ControllerConfig.LeaderImbalanceInterval; got != 300*time.Second {
		t.Fatalf("default interval %v, want Kafka's 300 s", got)
	}
	var logs bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&logs, nil))
	if err := applyConfigFile(&cfg, configFile(t, "leader.imbalance.check.interval.seconds: 30\n"), lg); err != nil {
		t.Fatal(err)
	}
	if got := cfg.ControllerConfig.LeaderImbalanceInterval; got != 30*time.Second {
		t.Fatalf("leader.imbalance.check.interval.seconds: 30 gave %v", got)
	}
	if logs.Len() != 0 {
		t.Fatalf("the Kafka name logged: %s", logs.String())
	}
	if err := applyConfigFile(&cfg, configFile(t, "leader.imbalance.check.interval.ms: 45000\n"), lg); err != nil {
		t.Fatal(err)
	}
	if got := cfg.ControllerConfig.LeaderImbalanceInterval; got != 45*time.Second {
		t.Fatalf("leader.imbalance.check.interval.ms: 45000 gave %v", got)
	}
	if !strings.Contains(logs.String(), "deprecated") || !strings.Contains(logs.String(), "leader.imbalance.check.interval.seconds") {
		t.Fatalf("no deprecation warning naming the new setting: %q", logs.String())
	}
	// The compose cluster's settings file uses the new name.
	if err := applyConfigFile(&cfg, filepath.Join("..", "..", "deploy", "server.conf"), slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
}

// The connection settings have Kafka's names; overrides are host:count
// pairs (IPv6 addresses bare or in brackets).
func TestConnectionSettings(t *testing.T) {
	cfg := node.DefaultConfig(1, t.TempDir())
	if cfg.ConnectionsMaxIdle != 10*time.Minute {
		t.Fatalf("default connections.max.idle.ms %v, want Kafka's 600000", cfg.ConnectionsMaxIdle)
	}
	body := "connections.max.idle.ms: 30000\nmax.connections: 500\nmax.connections.per.ip: 20\n" +
		"max.connections.per.ip.overrides: 10.0.0.1:100, ::1:7,[fe80::1]:0,broker-a:50\n"
	if err := applyConfigFile(&cfg, configFile(t, body), slog.Default()); err != nil {
		t.Fatal(err)
	}
	if cfg.ConnectionsMaxIdle != 30*time.Second || cfg.MaxConnections != 500 || cfg.MaxConnectionsPerIP != 20 {
		t.Fatalf("got idle %v, max %d, per ip %d", cfg.ConnectionsMaxIdle, cfg.MaxConnections, cfg.MaxConnectionsPerIP)
	}
	want := map[string]int{"10.0.0.1": 100, "::1": 7, "fe80::1": 0, "broker-a": 50}
	if len(cfg.MaxConnectionsPerIPOverrides) != len(want) {
		t.Fatalf("overrides %v, want %v", cfg.MaxConnectionsPerIPOverrides, want)
	}
	for h, n := range want {
		if cfg.MaxConnectionsPerIPOverrides[h] != n {
			t.Fatalf("overrides %v, want %v", cfg.MaxConnectionsPerIPOverrides, want)
		}
	}
	if err := applyConfigFile(&cfg, configFile(t, "max.connections.per.ip.overrides: 10.0.0.1\n"), slog.Default()); err == nil {
		t.Fatal("an override without a count was accepted")
	}
}

// Broker settings take the ranges Kafka's ConfigDef gives them: an INT
// setting at int64 max, a value under its floor, or a duration too long
// for Go's time.Duration is refused at start-up instead of wrapping.
func TestBrokerSettingRanges(t *testing.T) {
	lg := slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))
	for _, line := range []string{
		"log.segment.bytes: 9223372036854775807",
		"message.max.bytes: 2147483648",
		"min.insync.replicas: 0",
		"num.partitions: 0",
		"default.replication.factor: 40000",
		"replica.fetch.max.bytes: -1",
		"log.retention.ms: -2",
		"transaction.max.timeout.ms: 9223372036854775807",
		"replica.lag.time.max.ms: 9223372036854775807",
		"log.retention.check.interval.ms: 9223372036854775807",
		"leader.imbalance.check.interval.seconds: 9223372036854775807",
	} {
		cfg := node.DefaultConfig(1, t.TempDir())
		if err := applyConfigFile(&cfg, configFile(t, line+"\n"), lg); err == nil {
			t.Errorf("%q accepted, want refused", line)
		}
	}
	cfg := node.DefaultConfig(1, t.TempDir())
	if err := applyConfigFile(&cfg, configFile(t, "log.retention.ms: 9223372036854775807\nlog.segment.bytes: 2147483647\nmin.insync.replicas: 2\n"), lg); err != nil {
		t.Fatalf("values in range refused: %v", err)
	}
	if cfg.BrokerConfig.Log.SegmentBytes != 2147483647 || cfg.BrokerConfig.MinInsyncReplicas != 2 {
		t.Fatalf("values in range not applied: %+v", cfg.BrokerConfig)
	}
}

// The compaction settings have Kafka's names and defaults, reach the
// broker's config, and refuse what Kafka's ConfigDef refuses.
func TestCleanerSettings(t *testing.T) {
	cfg := node.DefaultConfig(1, t.TempDir())
	b := cfg.BrokerConfig
	if b.Log.Cleanup != storage.CleanupDelete || b.Log.MinCleanableDirtyRatio != 0.5 || b.Log.MinCompactionLagMs != 0 ||
		b.Log.MaxCompactionLagMs != math.MaxInt64 || b.Log.DeleteRetentionMs != 86400000 {
		t.Fatalf("topic defaults %+v, want Kafka's (delete, 0.5, 0, Long.MAX, 86400000)", b.Log)
	}
	if c := b.Cleaner; !c.Enable || c.Threads != 1 || c.DedupeBufferSize != 134217728 || c.IOMaxBytesPerSecond != math.MaxFloat64 || c.Backoff != 15*time.Second {
		t.Fatalf("cleaner defaults %+v, want Kafka's", c)
	}
	body := "log.cleanup.policy: delete,compact\nlog.cleaner.min.cleanable.ratio: 0.25\nlog.cleaner.min.compaction.lag.ms: 1000\n" +
		"log.cleaner.max.compaction.lag.ms: 60000\nlog.cleaner.delete.retention.ms: 5000\nlog.cleaner.threads: 3\n" +
		"log.cleaner.dedupe.buffer.size: 1048576\nlog.cleaner.io.max.bytes.per.second: 1e6\nlog.cleaner.backoff.ms: 200\n"
	if err := applyConfigFile(&cfg, configFile(t, body), slog.Default()); err != nil {
		t.Fatal(err)
	}
	b = cfg.BrokerConfig
	if b.Log.Cleanup != storage.CleanupCompactDelete || b.Log.MinCleanableDirtyRatio != 0.25 || b.Log.MinCompactionLagMs != 1000 ||
		b.Log.MaxCompactionLagMs != 60000 || b.Log.DeleteRetentionMs != 5000 {
		t.Fatalf("topic defaults not applied: %+v", b.Log)
	}
	if c := b.Cleaner; c.Threads != 3 || c.DedupeBufferSize != 1048576 || c.IOMaxBytesPerSecond != 1e6 || c.Backoff != 200*time.Millisecond || !c.Enable {
		t.Fatalf("cleaner settings not applied: %+v", c)
	}
	if err := applyConfigFile(&cfg, configFile(t, "log.cleaner.enable: false\n"), slog.Default()); err != nil || cfg.BrokerConfig.Cleaner.Enable {
		t.Fatalf("log.cleaner.enable: false gave %v, %v", cfg.BrokerConfig.Cleaner.Enable, err)
	}
	for _, line := range []string{
		"log.cleanup.policy: compact,purge",
		"log.cleanup.policy: ",
		"log.cleaner.min.cleanable.ratio: 1.5",
		"log.cleaner.min.cleanable.ratio: -0.1",
		"log.cleaner.max.compaction.lag.ms: 0",
		"log.cleaner.threads: -1",
		"log.cleaner.io.max.bytes.per.second: 0",
		"log.cleaner.backoff.ms: -1",
	} {
		cfg := node.DefaultConfig(1, t.TempDir())
		if err := applyConfigFile(&cfg, configFile(t, line+"\n"), slog.Default()); err == nil {
			t.Errorf("%q accepted, want refused", line)
		}
	}
}

// TestQuotaAndDebugSettings: debug.endpoints.enable (default
// off), the quota windows and transaction.max.open.per.principal (default
// 0: no cap) have Kafka's names.
func TestQuotaAndDebugSettings(t *testing.T) {
	cfg := node.DefaultConfig(1, t.TempDir())
	if cfg.DebugEndpoints || cfg.TxnConfig.MaxOpenPerPrincipal != 0 {
		t.Fatalf("defaults: debug endpoints %v, open-transactions cap %d", cfg.DebugEndpoints, cfg.TxnConfig.MaxOpenPerPrincipal)
	}
	body := "debug.endpoints.enable: true\nquota.window.num: 5\nquota.window.size.seconds: 2\ntransaction.max.open.per.principal: 3\n"
	if err := applyConfigFile(&cfg, configFile(t, body), slog.Default()); err != nil {
		t.Fatal(err)
	}
	if !cfg.DebugEndpoints || cfg.Quotas.Windows != 5 || cfg.Quotas.Window != 2*time.Second || cfg.TxnConfig.MaxOpenPerPrincipal != 3 {
		t.Fatalf("got %v %d %v %d", cfg.DebugEndpoints, cfg.Quotas.Windows, cfg.Quotas.Window, cfg.TxnConfig.MaxOpenPerPrincipal)
	}
	if err := applyConfigFile(&cfg, configFile(t, "transaction.max.open.per.principal: -1\n"), slog.Default()); err == nil {
		t.Fatal("a negative cap accepted")
	}
}

// The internal topics' settings have Kafka's names and defaults, reach the
// node's configuration of the topics the cluster creates, and refuse what
// Kafka's ConfigDef refuses.
func TestInternalTopicSettings(t *testing.T) {
	cfg := node.DefaultConfig(1, t.TempDir())
	if o, x := cfg.OffsetsTopic, cfg.TxnTopic; o.Partitions != 50 || o.ReplicationFactor != 3 || o.SegmentBytes != 104857600 ||
		x.Partitions != 50 || x.ReplicationFactor != 3 || x.MinISR != 2 || x.SegmentBytes != 104857600 {
		t.Fatalf("defaults %+v and %+v, want Kafka's (50 partitions, replication factor 3, min ISR 2, 100 MiB segments)", o, x)
	}
	body := "offsets.topic.num.partitions: 7\noffsets.topic.replication.factor: 2\noffsets.topic.segment.bytes: 1048576\n" +
		"transaction.state.log.num.partitions: 5\ntransaction.state.log.replication.factor: 4\n" +
		"transaction.state.log.min.isr: 3\ntransaction.state.log.segment.bytes: 2097152\n"
	if err := applyConfigFile(&cfg, configFile(t, body), slog.Default()); err != nil {
		t.Fatal(err)
	}
	if o, x := cfg.OffsetsTopic, cfg.TxnTopic; o.Partitions != 7 || o.ReplicationFactor != 2 || o.SegmentBytes != 1048576 ||
		x.Partitions != 5 || x.ReplicationFactor != 4 || x.MinISR != 3 || x.SegmentBytes != 2097152 {
		t.Fatalf("settings not applied: %+v, %+v", o, x)
	}
	for _, line := range []string{
		"offsets.topic.num.partitions: 0",
		"offsets.topic.replication.factor: 0",
		"offsets.topic.replication.factor: 32768",
		"transaction.state.log.num.partitions: -1",
		"transaction.state.log.min.isr: 0",
		"transaction.state.log.segment.bytes: 2147483648",
	} {
		cfg := node.DefaultConfig(1, t.TempDir())
		if err := applyConfigFile(&cfg, configFile(t, line+"\n"), slog.Default()); err == nil {
			t.Errorf("%q accepted, want refused", line)
		}
	}
}
