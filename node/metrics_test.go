package node_test

// Real node on real time: the metrics and debug HTTP endpoints listen on real TCP;
// MemNet does not carry them.

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func metric(t *testing.T, body, name string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` ([0-9.e+-]+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no %s in /metrics", name)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// devWithTopic starts a dev node serving /metrics and creates a topic of
// one partition there; the context ends with the test.
func devWithTopic(t *testing.T, topic string, configs map[string]string) (*node.Node, string, context.Context) {
	t.Helper()
	maddr := testutil.FreeAddr(t)
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) { cfg.MetricsListen = maddr })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	adm, _ := client.NewAdmin(client.Bootstrap(n.Addr()))
	defer adm.Close()
	if err := adm.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: 1, ReplicationFactor: 1, Configs: configs}); err != nil {
		t.Fatal(err)
	}
	return n, maddr, ctx
}

// TestMetricsShowTheOpenTransaction: while a transaction is open its
// partition's LSO lag and oldest-open-transaction age are visible.
func TestMetricsShowTheOpenTransaction(t *testing.T) {
	n, maddr, ctx := devWithTopic(t, "m", nil)
	p, _ := client.NewProducer(client.Bootstrap(n.Addr()), client.TransactionalID("metrics"), client.WithPartitioner(client.ManualPartitioner{}))
	defer p.Close(ctx)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &client.Record{Topic: "m", Value: []byte("x")}, &client.Record{Topic: "m", Value: []byte("y")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var body string
	wait.Eventually(t, 5*time.Second, "the open transaction to show an age", func() bool {
		body = scrape(t, maddr)
		return metric(t, body, `strand_partition_oldest_open_txn_age_seconds{partition="0",topic="m"}`) > 0
	})
	if lag := metric(t, body, `strand_partition_last_stable_offset_lag{partition="0",topic="m"}`); lag != 2 {
		t.Fatalf("LSO lag %v with two records of an open transaction", lag)
	}
	if age := metric(t, body, `strand_partition_oldest_open_txn_age_seconds{partition="0",topic="m"}`); age <= 0 {
		t.Fatalf("oldest open transaction age %v", age)
	}
	if metric(t, body, "strand_producer_id_count") < 1 {
		t.Fatal("producer id count is 0")
	}
	if metric(t, body, "strand_controller_active") != 1 {
		t.Fatal("dev node is not the active controller")
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 5*time.Second, "the LSO lag to drop after the commit", func() bool {
		return metric(t, scrape(t, maddr), `strand_partition_last_stable_offset_lag{partition="0",topic="m"}`) == 0
	})
}

// TestMetricsCountLogFlushes: with flush.messages=1 every acknowledged
// produce is fsynced, and the flush counters (LogFlushRateAndTimeMs) show
// it; no log has failed.
func TestMetricsCountLogFlushes(t *testing.T) {
	n, maddr, ctx := devWithTopic(t, "f", map[string]string{"flush.messages": "1"})
	before := metric(t, scrape(t, maddr), "strand_log_flush_total")
	p, _ := client.NewProducer(client.Bootstrap(n.Addr()))
	defer p.Close(ctx)
	const sends = 5
	for i := range sends {
		if err := p.ProduceSync(ctx, &client.Record{Topic: "f", Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	body := scrape(t, maddr)
	// One at least per acknowledged produce: each waited for its fsync.
	if got := metric(t, body, "strand_log_flush_total") - before; got < sends {
		t.Fatalf("strand_log_flush_total rose by %v for %d acknowledged produces under flush.messages=1", got, sends)
	}
	if s := metric(t, body, "strand_log_flush_seconds_total"); s <= 0 {
		t.Fatalf("strand_log_flush_seconds_total %v", s)
	}
	if f := metric(t, body, "strand_failed_log_count"); f != 0 {
		t.Fatalf("strand_failed_log_count %v", f)
	}
}

// TestStorageFailureIsReported: a failed fsync of a partition log fails
// the produce waiting for it and is reported to the node (StorageFailed,
// which `strand server` answers by stopping) and in the metrics.
func TestStorageFailureIsReported(t *testing.T) {
	n, maddr, ctx := devWithTopic(t, "f", map[string]string{"flush.messages": "1"})
	p, _ := client.NewProducer(client.Bootstrap(n.Addr()), client.DeliveryTimeout(3*time.Second), client.RequestTimeout(time.Second))
	defer p.Close(ctx)
	if err := p.ProduceSync(ctx, &client.Record{Topic: "f", Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.StorageFailed():
		t.Fatal("storage failure reported before any failed fsync")
	default:
	}
	part := n.Parts.Get(storage.PartitionKey{Topic: "f", Partition: 0})
	part.Log.SetSyncHookForTesting(func(storage.File) error { return errors.New("input/output error") })
	if err := p.ProduceSync(ctx, &client.Record{Topic: "f", Value: []byte("after")}).FirstErr(); err == nil {
		t.Fatal("a produce was acknowledged although its fsync failed")
	}
	select {
	case <-n.StorageFailed():
	case <-time.After(10 * time.Second):
		t.Fatal("the failed fsync was not reported to the node")
	}
	if err := n.StorageErr(); err == nil || !strings.Contains(err.Error(), "f-0") {
		t.Fatalf("StorageErr %v, want the partition f-0 named", err)
	}
	if f := metric(t, scrape(t, maddr), "strand_failed_log_count"); f != 1 {
		t.Fatalf("strand_failed_log_count %v, want 1", f)
	}
}

// The connection metrics are served from the start, for every listener
// and reason, and follow the connections.
func TestConnectionMetricsServed(t *testing.T) {
	maddr := testutil.FreeAddr(t)
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) { cfg.MetricsListen = maddr; cfg.MaxConnectionsPerIP = 1 })
	body := scrape(t, maddr)
	for _, l := range []string{"client", "inter_broker"} {
		metric(t, body, `strand_connections{listener="`+l+`"}`)
		for _, r := range []string{"max_connections", "max_connections_per_ip"} {
			metric(t, body, `strand_connections_rejected_total{listener="`+l+`",reason="`+r+`"}`)
		}
	}
	c1, err := net.Dial("tcp", n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	waitMetric(t, maddr, `strand_connections{listener="client"}`, 5*time.Second, func(v float64) bool { return v == 1 })
	c2, err := net.Dial("tcp", n.Addr())
	if err == nil {
		defer c2.Close()
	}
	waitMetric(t, maddr, `strand_connections_rejected_total{listener="client",reason="max_connections_per_ip"}`, 5*time.Second, func(v float64) bool { return v == 1 })
	c1.Close()
	waitMetric(t, maddr, `strand_connections{listener="client"}`, 5*time.Second, func(v float64) bool { return v == 0 })
}

// TestMetricsShowTheCleaner: the log cleaner's gauges are served under
// Kafka's names, and the per-log dirty ratio is shown for compacted logs
// only.
func TestMetricsShowTheCleaner(t *testing.T) {
	maddr := testutil.FreeAddr(t)
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) {
		cfg.MetricsListen = maddr
		cfg.BrokerConfig.Cleaner.Backoff = 20 * time.Millisecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm, _ := client.NewAdmin(client.Bootstrap(n.Addr()))
	defer adm.Close()
	for name, policy := range map[string]string{"compacted": "compact", "deleted": "delete"} {
		if err := adm.CreateTopic(ctx, client.TopicSpec{Name: name, Partitions: 1, ReplicationFactor: 1, Configs: map[string]string{"cleanup.policy": policy}}); err != nil {
			t.Fatal(err)
		}
	}
	var body string
	wait.Eventually(t, 5*time.Second, "the compacted log's dirty ratio", func() bool {
		body = scrape(t, maddr)
		return strings.Contains(body, `strand_log_cleaner_dirty_ratio{partition="0",topic="compacted"}`)
	})
	if strings.Contains(body, `strand_log_cleaner_dirty_ratio{partition="0",topic="deleted"}`) {
		t.Fatal("a dirty ratio for a topic that is not compacted")
	}
	for _, name := range []string{"strand_log_cleaner_max_dirty_percent", "strand_log_cleaner_recopy_percent", "strand_log_cleaner_max_clean_time_seconds",
		"strand_log_cleaner_max_buffer_utilization_percent", "strand_log_cleaner_uncleanable_partitions_count"} {
		if v := metric(t, body, name); v != 0 {
			t.Errorf("%s = %v on a node with nothing to clean", name, v)
		}
	}
}
