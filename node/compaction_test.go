package node_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testutil"
)

// Under the broker default log.cleanup.policy=compact a topic that sets
// no cleanup.policy is compacted: DescribeConfigs says so (source
// default), and a keyless record is refused INVALID_RECORD; a topic that
// sets delete takes it.
func TestBrokerDefaultCleanupPolicy(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) { cfg.BrokerConfig.Log.Cleanup = storage.CleanupCompact })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm, _ := client.NewAdmin(client.Bootstrap(n.Addr()))
	defer adm.Close()
	for name, cfg := range map[string]map[string]string{"table": nil, "events": {"cleanup.policy": "delete"}} {
		if err := adm.CreateTopic(ctx, client.TopicSpec{Name: name, Partitions: 1, ReplicationFactor: 1, Configs: cfg}); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := adm.DescribeTopicConfigs(ctx, "table")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name == "cleanup.policy" && (e.Value != "compact" || e.Source != "default") {
			t.Fatalf("cleanup.policy = %s (%s), want compact from the broker default", e.Value, e.Source)
		}
	}
	p, _ := client.NewProducer(client.Bootstrap(n.Addr()))
	defer p.Close(ctx)
	if err := p.ProduceSync(ctx, &client.Record{Topic: "table", Value: []byte("x")}).FirstErr(); !errors.Is(err, client.ErrInvalidRecord) {
		t.Fatalf("keyless record under log.cleanup.policy=compact: %v, want INVALID_RECORD", err)
	}
	if err := p.ProduceSync(ctx, &client.Record{Topic: "events", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("keyless record to a topic with cleanup.policy=delete: %v", err)
	}
}
