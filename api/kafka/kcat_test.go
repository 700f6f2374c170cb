package kafka_test

// Real cluster on real time: kcat is an external process (librdkafka) that
// dials the Kafka listeners over real TCP.

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKcatConsumerGroup: kcat's balanced consumer (librdkafka's classic
// consumer group: JoinGroup v5, SyncGroup v3, OffsetCommit v7,
// OffsetFetch v7 against this listener) reads every record of a topic
// and commits where it stopped. Skipped where kcat is not installed.
func TestKcatConsumerGroup(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed")
	}
	c := groupCluster(t)
	const topic, group = "kc", "kcat-group"
	c.CreateTopic(topic, 2, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	addrs := c.KafkaAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produceEach(ctx, t, cl, topic, 2, 0, 10)

	cmd := exec.CommandContext(ctx, kcat, "-b", strings.Join(addrs, ","), "-G", group, "-c", "20", "-f", "%p %s\n",
		"-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=10000", "-q", topic)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	seen := map[string]bool{}
	for _, l := range lines {
		seen[l] = true
	}
	if len(lines) != 20 || len(seen) != 20 {
		t.Fatalf("kcat read %d records (%d distinct), want the 20 produced:\n%s", len(lines), len(seen), out.String())
	}
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		if o, ok := offs.Lookup(topic, p); !ok || o.At != 10 {
			t.Fatalf("kcat's committed offset of %s/%d: %+v (found %v), want 10\nstderr:\n%s", topic, p, o, ok, stderr.String())
		}
	}
}
