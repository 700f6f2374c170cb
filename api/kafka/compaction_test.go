package kafka_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testcluster"
)

// TestCompactedTopicConfigsAndKeys: a compacted topic's configs are
// described on both front doors with Kafka's names, values and sources
// (cleanup.policy normalised from "delete,compact"), and a record without
// a key is refused INVALID_RECORD with Kafka's message, while keyed
// records are taken.
func TestCompactedTopicConfigsAndKeys(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Mutate: func(id int32, cfg *node.Config) {
		if id == 2 {
			cfg.BrokerConfig.Cleaner.Threads = 3
			cfg.BrokerConfig.Cleaner.IOMaxBytesPerSecond = 5e6
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.CreateTopic("changelog", 1, 3, map[string]string{"cleanup.policy": "delete,compact", "min.cleanable.dirty.ratio": "0.1"})

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, want := range []struct {
		key, value string
		src        kmsg.ConfigSource
	}{
		{"cleanup.policy", "compact,delete", kmsg.ConfigSourceDynamicTopicConfig},
		{"min.cleanable.dirty.ratio", "0.1", kmsg.ConfigSourceDynamicTopicConfig},
		{"min.compaction.lag.ms", "0", kmsg.ConfigSourceDefaultConfig},
		{"max.compaction.lag.ms", "9223372036854775807", kmsg.ConfigSourceDefaultConfig},
		{"delete.retention.ms", "86400000", kmsg.ConfigSourceDefaultConfig},
	} {
		if v, src := configValue(ctx, t, adm, "changelog", want.key); v != want.value || src != want.src {
			t.Errorf("Kafka door: %s = %s (source %v), want %s (%v)", want.key, v, src, want.value, want.src)
		}
	}
	sdk, err := client.NewAdmin(c.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer sdk.Close()
	entries, err := sdk.DescribeTopicConfigs(ctx, "changelog")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, e := range entries {
		seen[e.Name] = e.Value + "/" + e.Source
	}
	if seen["cleanup.policy"] != "compact,delete/topic" || seen["min.cleanable.dirty.ratio"] != "0.1/topic" || seen["delete.retention.ms"] != "86400000/default" {
		t.Fatalf("SDK door describes %v", seen)
	}
	// A broker describes its own log and cleaner settings: Kafka's
	// defaults, or what its configuration set (node 2's).
	for id, want := range map[int32]map[string]string{
		1: {"log.cleaner.threads": "1/DEFAULT_CONFIG", "log.cleaner.io.max.bytes.per.second": "1.7976931348623157E308/DEFAULT_CONFIG",
			"log.cleaner.enable": "true/DEFAULT_CONFIG", "log.cleaner.dedupe.buffer.size": "134217728/DEFAULT_CONFIG",
			"log.cleaner.backoff.ms": "15000/DEFAULT_CONFIG", "log.cleanup.policy": "delete/DEFAULT_CONFIG",
			"log.cleaner.min.cleanable.ratio": "0.5/DEFAULT_CONFIG", "log.cleaner.delete.retention.ms": "86400000/DEFAULT_CONFIG",
			"log.cleaner.min.compaction.lag.ms": "0/DEFAULT_CONFIG", "log.cleaner.max.compaction.lag.ms": "9223372036854775807/DEFAULT_CONFIG"},
		2: {"log.cleaner.threads": "3/STATIC_BROKER_CONFIG", "log.cleaner.io.max.bytes.per.second": "5000000.0/STATIC_BROKER_CONFIG"},
	} {
		rcs, err := adm.DescribeBrokerConfigs(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On(fmt.Sprint(id), nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("describe broker %d: %v %v", id, err, rc.Err)
		}
		got := map[string]string{}
		for _, e := range rc.Configs {
			got[e.Key] = str(e.Value) + "/" + e.Source.String()
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("broker %d: %s = %s, want %s", id, k, got[k], v)
			}
		}
	}
	// A broker asked for another's configs refuses, as Kafka's does.
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "2"
	req.Resources = append(req.Resources, rr)
	resp, err := cl.Broker(1).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res := resp.(*kmsg.DescribeConfigsResponse).Resources; len(res) != 1 || res[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("broker 1 describing broker 2: %+v, want INVALID_REQUEST", res)
	}

	// A topic config outside Kafka's range is refused at alter.
	ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.cleanable.dirty.ratio", Value: ptr("1.5")}}, "changelog")
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := ar.On("changelog", nil); !errors.Is(r.Err, kerr.InvalidConfig) {
		t.Fatalf("min.cleanable.dirty.ratio=1.5: %v, want INVALID_CONFIG", r.Err)
	}
	// So is min.compaction.lag.ms above max.compaction.lag.ms, at create,
	// at alter and at a validate-only alter.
	if _, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.compaction.lag.ms": ptr("10"), "max.compaction.lag.ms": ptr("5")}, "lags"); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("create with min.compaction.lag.ms > max.compaction.lag.ms: %v, want INVALID_CONFIG", err)
	}
	lagged := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.compaction.lag.ms", Value: ptr("5")}, {Op: kadm.SetConfig, Name: "min.compaction.lag.ms", Value: ptr("10")}}
	for _, validateOnly := range []bool{true, false} {
		alter := adm.AlterTopicConfigs
		if validateOnly {
			alter = adm.ValidateAlterTopicConfigs
		}
		ar, err := alter(ctx, lagged, "changelog")
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := ar.On("changelog", nil); !errors.Is(r.Err, kerr.InvalidConfig) {
			t.Fatalf("alter (validate only: %v) to min.compaction.lag.ms > max.compaction.lag.ms: %v, want INVALID_CONFIG", validateOnly, r.Err)
		}
	}

	// cleanup.policy is Kafka's one list config: APPEND and SUBTRACT edit
	// it, starting from Kafka's default when the topic sets none; on any
	// other config they are INVALID_CONFIG.
	c.CreateTopic("events", 1, 3, nil)
	for _, step := range []struct {
		op    kadm.IncrementalOp
		value string
		want  string
	}{
		{kadm.AppendConfig, "compact", "compact,delete"},
		{kadm.SubtractConfig, "delete", "compact"},
		{kadm.AppendConfig, "compact", "compact"},
	} {
		ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: step.op, Name: "cleanup.policy", Value: ptr(step.value)}}, "events")
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := ar.On("events", nil); r.Err != nil {
			t.Fatalf("%v %s: %v", step.op, step.value, r.Err)
		}
		configEverywhere(ctx, t, c, cl, "events", "cleanup.policy", step.want)
	}
	for _, bad := range []kadm.AlterConfig{
		{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: ptr("compact")}, // nothing left
		{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: ptr("purge")},
		{Op: kadm.AppendConfig, Name: "retention.ms", Value: ptr("1")},
	} {
		ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{bad}, "events")
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := ar.On("events", nil); !errors.Is(r.Err, kerr.InvalidConfig) {
			t.Fatalf("%v %s=%s: %v, want INVALID_CONFIG", bad.Op, bad.Name, *bad.Value, r.Err)
		}
	}

	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "changelog", Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("keyed record: %v", err)
	}
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "changelog", Value: []byte("no key")}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless record to a compacted topic: %v, want INVALID_RECORD", err)
	}
	// The SDK is answered the same, with Kafka's message.
	p, err := client.NewProducer(c.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	err = p.ProduceSync(ctx, &client.Record{Topic: "changelog", Value: []byte("no key")}).FirstErr()
	if !errors.Is(err, client.ErrInvalidRecord) || !strings.Contains(err.Error(), "Compacted topic cannot accept message without key") {
		t.Fatalf("SDK keyless record to a compacted topic: %v, want INVALID_RECORD: Compacted topic cannot accept message without key", err)
	}
}

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// TestCompactedTopicEndToEnd: on a three-broker cluster a compacted topic
// with tiny segments takes overwrites of ten keys and tombstones for three
// of them; every replica's cleaner compacts its own log, and a
// read_committed consumer reading from the start then sees each live key
// once, with its latest value, and the deleted keys not at all (tombstones
// go once delete.retention.ms=0 has passed and a later pass ran).
func TestCompactedTopicEndToEnd(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Mutate: func(_ int32, cfg *node.Config) {
		cfg.BrokerConfig.Cleaner.Backoff = 100 * time.Millisecond
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c.CreateTopic("table", 1, 3, map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0",
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	send := func(key string, value []byte) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "table", Key: []byte(key), Value: value}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", key, err)
		}
	}
	const keys, rounds = 10, 30
	pad := strings.Repeat("x", 100)
	for r := 0; r < rounds; r++ {
		for k := 0; k < keys; k++ {
			send(fmt.Sprintf("k%d", k), []byte(fmt.Sprintf("r%d-%s", r, pad)))
		}
	}
	for k := 0; k < 3; k++ {
		send(fmt.Sprintf("k%d", k), nil) // tombstones
	}
	// Fill past the tombstones so they leave the active segment (never
	// cleaned); each poll below adds a little more, so later passes find
	// something dirty and the tombstones' delete horizon passes.
	filler := 0
	more := func(n int) {
		for i := 0; i < n; i++ {
			send("filler", []byte(fmt.Sprintf("f%d-%s", filler, pad)))
			filler++
		}
	}
	more(40)

	var last map[string][]string
	c.Eventually(60*time.Second, "the cleaner to leave one record per key and no tombstones", func() bool {
		more(5)
		last = readTable(ctx, t, c, cl)
		for k := 0; k < keys; k++ {
			vs := last[fmt.Sprintf("k%d", k)]
			if k < 3 && len(vs) != 0 || k >= 3 && len(vs) != 1 {
				return false
			}
		}
		return true
	})
	for k := 3; k < keys; k++ {
		if v := last[fmt.Sprintf("k%d", k)][0]; !strings.HasPrefix(v, fmt.Sprintf("r%d-", rounds-1)) {
			t.Fatalf("k%d reads %.8s…, want its last value r%d", k, v, rounds-1)
		}
	}
	if fs := last["filler"]; !strings.HasPrefix(fs[len(fs)-1], fmt.Sprintf("f%d-", filler-1)) {
		t.Fatalf("filler's last value %.8s…, want f%d", fs[len(fs)-1], filler-1)
	}
	// Every replica cleaned its own log: each broker's cleaner wrote.
	for _, m := range c.Running() {
		if cm := m.Node.Parts.CleanerMetrics(); cm.RecopyPercent <= 0 {
			t.Errorf("node %d: no cleaning pass wrote anything (%+v)", m.ID, cm)
		}
	}
}

// readTable reads partition 0 of "table" from the start to its high
// watermark, read_committed, and returns each key's values in order (a
// tombstone as the empty string).
func readTable(ctx context.Context, t *testing.T, c *testcluster.Cluster, cl *kgo.Client) map[string][]string {
	t.Helper()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "table")
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup("table", 0)
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"table": {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	out := map[string][]string{}
	for next := int64(0); next < end.Offset; {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read up to %d of %d: %v", next, end.Offset, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			out[string(r.Key)] = append(out[string(r.Key)], string(r.Value))
			next = r.Offset + 1
		})
	}
	return out
}
