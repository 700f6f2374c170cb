package node_test

// Real node on real time: the metrics and debug HTTP endpoints listen on real TCP;
// MemNet does not carry them.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// TestDynamicBrokerConfigsApplyLive: dynamic broker configs reach a
// running broker without a restart. A cluster-wide log.segment.bytes and
// log.retention.ms become the config of an open log of a topic that does
// not set them (one that does keeps its own), the per-broker value beats
// the cluster-wide one, log.cleaner.io.max.bytes.per.second changes the
// cleaner's rate, the replication throttle rates show in /metrics, and
// deleting the configs brings back the static values.
func TestDynamicBrokerConfigsApplyLive(t *testing.T) {
	maddr := testutil.FreeAddr(t)
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) { cfg.MetricsListen = maddr })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm, err := client.NewAdmin(client.Bootstrap(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	for name, cfgs := range map[string]map[string]string{"plain": nil, "own": {"segment.bytes": "5000000"}} {
		if err := adm.CreateTopic(ctx, client.TopicSpec{Name: name, Partitions: 1, ReplicationFactor: 1, Configs: cfgs}); err != nil {
			t.Fatal(err)
		}
	}
	logOf := func(topic string) *storage.Log {
		if p := n.Parts.Get(storage.PartitionKey{Topic: topic}); p != nil {
			return p.Log
		}
		return nil
	}
	wait.Eventually(t, 5*time.Second, "the logs", func() bool { return logOf("plain") != nil && logOf("own") != nil })
	static := logOf("plain").Config()

	if err := adm.AlterBrokerConfigs(ctx, client.BrokerDefault, map[string]string{
		"log.segment.bytes": "2097152", "log.retention.ms": "7200000", "log.cleaner.io.max.bytes.per.second": "1000000",
		"leader.replication.throttled.rate": "5000", "follower.replication.throttled.rate": "9000",
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := adm.AlterBrokerConfigs(ctx, n.ID(), map[string]string{"log.retention.ms": "3600000", "follower.replication.throttled.rate": "7000"}, nil); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 5*time.Second, "the dynamic configs on the open logs", func() bool {
		pc, oc := logOf("plain").Config(), logOf("own").Config()
		return pc.SegmentBytes == 2097152 && pc.RetentionMs == 3600000 && oc.SegmentBytes == 5000000 && oc.RetentionMs == 3600000 &&
			n.Parts.CleanerIORate() == 1e6
	})
	body := scrape(t, maddr)
	if v := metric(t, body, `strand_replication_throttled_rate_bytes{side="leader"}`); v != 5000 {
		t.Fatalf("leader rate %v, want 5000", v)
	}
	if v := metric(t, body, `strand_replication_throttled_rate_bytes{side="follower"}`); v != 7000 {
		t.Fatalf("follower rate %v, want 7000 (the broker's own over the cluster-wide 9000)", v)
	}
	if !strings.Contains(body, `strand_replication_throttled_bytes_total{side="leader"}`) {
		t.Fatal("no strand_replication_throttled_bytes_total")
	}
	// A new partition opened now takes the dynamic defaults too.
	if err := adm.CreateTopic(ctx, client.TopicSpec{Name: "later", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 5*time.Second, "the new log", func() bool { return logOf("later") != nil })
	if c := logOf("later").Config(); c.SegmentBytes != 2097152 || c.RetentionMs != 3600000 {
		t.Fatalf("new log: segment.bytes %d retention.ms %d", c.SegmentBytes, c.RetentionMs)
	}

	for _, id := range []int32{client.BrokerDefault, n.ID()} {
		if err := adm.AlterBrokerConfigs(ctx, id, nil, []string{"log.segment.bytes", "log.retention.ms", "log.cleaner.io.max.bytes.per.second",
			"leader.replication.throttled.rate", "follower.replication.throttled.rate"}); err != nil {
			t.Fatal(err)
		}
	}
	wait.Eventually(t, 5*time.Second, "the static configs back", func() bool {
		pc := logOf("plain").Config()
		return pc.SegmentBytes == static.SegmentBytes && pc.RetentionMs == static.RetentionMs && n.Parts.CleanerIORate() == n.Parts.Config().Cleaner.IOMaxBytesPerSecond
	})
	body = scrape(t, maddr)
	if v := metric(t, body, `strand_replication_throttled_rate_bytes{side="follower"}`); v != -1 {
		t.Fatalf("follower rate %v after the delete, want -1 (none)", v)
	}
}

// TestCleanerBackoffIsDynamic: log.cleaner.backoff.ms is a dynamic broker
// config, as in Kafka: altered per broker it reaches the running cleaner
// (described with its dynamic source, not read-only), a bad value is
// INVALID_CONFIG, and deleting it brings back the static value.
func TestCleanerBackoffIsDynamic(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) { cfg.BrokerConfig.Cleaner.Backoff = time.Hour })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm, err := client.NewAdmin(client.Bootstrap(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if err := adm.AlterBrokerConfigs(ctx, n.ID(), map[string]string{"log.cleaner.backoff.ms": "250"}, nil); err != nil {
		t.Fatalf("alter log.cleaner.backoff.ms: %v", err)
	}
	wait.Eventually(t, 5*time.Second, "the cleaner's backoff at 250 ms", func() bool { return n.Parts.CleanerBackoff() == 250*time.Millisecond })
	entries, err := adm.DescribeBrokerConfigs(ctx, n.ID())
	if err != nil {
		t.Fatal(err)
	}
	var seen bool
	for _, e := range entries {
		if e.Name == "log.cleaner.backoff.ms" {
			seen = true
			if e.Value != "250" || e.Source != "dynamic_broker" || e.ReadOnly {
				t.Fatalf("described as %+v, want 250 from dynamic_broker, not read-only", e)
			}
		}
	}
	if !seen {
		t.Fatal("log.cleaner.backoff.ms not described")
	}
	if err := adm.AlterBrokerConfigs(ctx, n.ID(), map[string]string{"log.cleaner.backoff.ms": "-1"}, nil); errs.CodeOf(err) != pb.ErrorCode_INVALID_CONFIG {
		t.Fatalf("log.cleaner.backoff.ms=-1: %v, want INVALID_CONFIG", err)
	}
	if err := adm.AlterBrokerConfigs(ctx, n.ID(), nil, []string{"log.cleaner.backoff.ms"}); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 5*time.Second, "the static backoff back", func() bool { return n.Parts.CleanerBackoff() == time.Hour })
}
