package kafka_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/wait"
)

// TestKafkaDynamicBrokerConfigs: kadm alters broker configs per broker
// and cluster-wide (IncrementalAlterConfigs on resource type broker, name
// "<id>" or ""), describes them with Kafka's sources and synonyms in
// Kafka's precedence (DYNAMIC_BROKER_CONFIG > DYNAMIC_DEFAULT_BROKER_CONFIG
// > STATIC_BROKER_CONFIG > DEFAULT_CONFIG), gets INVALID_CONFIG for an unknown name or bad value
// and INVALID_REQUEST for a read-only config, deletes a broker config,
// and sets and deletes topic configs in one AlterTopicConfigs.
func TestKafkaDynamicBrokerConfigs(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Mutate: func(id int32, cfg *node.Config) {
		if id == 3 {
			cfg.BrokerConfig.Log.RetentionMs = 86400000 // a static value, between the dynamic ones and the default
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.CreateTopic("events", 1, 3, map[string]string{"segment.ms": "600000"})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	mustAlter := func(resps kadm.AlterConfigsResponses, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range resps {
			if r.Err != nil {
				t.Fatalf("alter %s: %v %s", r.Name, r.Err, r.ErrMessage)
			}
		}
	}
	mustAlter(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: ptr("7200000")},
		{Op: kadm.SetConfig, Name: "leader.replication.throttled.rate", Value: ptr("1048576")}})) // cluster-wide
	mustAlter(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: ptr("3600000")},
		{Op: kadm.SetConfig, Name: "follower.replication.throttled.rate", Value: ptr("2048")}}, 2))

	// describe: a broker config's value, source and synonyms (SOURCE:value,
	// in order); id < 0 is the cluster-wide default.
	describe := func(id int32, key string) (string, kmsg.ConfigSource, []string, bool) {
		var rcs kadm.ResourceConfigs
		var err error
		if id < 0 {
			rcs, err = adm.DescribeBrokerConfigs(ctx)
		} else {
			rcs, err = adm.DescribeBrokerConfigs(ctx, id)
		}
		if err != nil || len(rcs) != 1 || rcs[0].Err != nil {
			t.Fatalf("describe broker %d: %v %v", id, err, rcs)
		}
		for _, cf := range rcs[0].Configs {
			if cf.Key == key {
				var syn []string
				for _, s := range cf.Synonyms {
					syn = append(syn, fmt.Sprintf("%s:%s", s.Source, *s.Value))
				}
				return *cf.Value, cf.Source, syn, true
			}
		}
		return "", 0, nil, false
	}
	type want struct {
		id    int32
		key   string
		value string
		src   kmsg.ConfigSource
		syn   string
	}
	for _, w := range []want{
		{2, "log.retention.ms", "3600000", kmsg.ConfigSourceDynamicBrokerConfig, "[DYNAMIC_BROKER_CONFIG:3600000 DYNAMIC_DEFAULT_BROKER_CONFIG:7200000 DEFAULT_CONFIG:604800000]"},
		{1, "log.retention.ms", "7200000", kmsg.ConfigSourceDynamicDefaultBrokerConfig, "[DYNAMIC_DEFAULT_BROKER_CONFIG:7200000 DEFAULT_CONFIG:604800000]"},
		{2, "follower.replication.throttled.rate", "2048", kmsg.ConfigSourceDynamicBrokerConfig, "[DYNAMIC_BROKER_CONFIG:2048 DEFAULT_CONFIG:9223372036854775807]"},
		{3, "leader.replication.throttled.rate", "1048576", kmsg.ConfigSourceDynamicDefaultBrokerConfig, "[DYNAMIC_DEFAULT_BROKER_CONFIG:1048576 DEFAULT_CONFIG:9223372036854775807]"},
		{3, "log.retention.ms", "7200000", kmsg.ConfigSourceDynamicDefaultBrokerConfig, "[DYNAMIC_DEFAULT_BROKER_CONFIG:7200000 STATIC_BROKER_CONFIG:86400000 DEFAULT_CONFIG:604800000]"},
		{3, "log.segment.bytes", "1073741824", kmsg.ConfigSourceDefaultConfig, "[DEFAULT_CONFIG:1073741824]"},
		{-1, "log.retention.ms", "7200000", kmsg.ConfigSourceDynamicDefaultBrokerConfig, "[DYNAMIC_DEFAULT_BROKER_CONFIG:7200000]"},
	} {
		w := w
		wait.Eventually(t, 10*time.Second, fmt.Sprintf("broker %d describing %s", w.id, w.key), func() bool {
			v, src, syn, ok := describe(w.id, w.key)
			return ok && v == w.value && src == w.src && fmt.Sprint(syn) == w.syn
		})
	}
	if _, _, _, ok := describe(-1, "log.segment.bytes"); ok {
		t.Fatal("the cluster-wide default lists a config nobody set")
	}
	// Read-only: listed with read_only; refused on alter.
	rcs, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	var sawThreads bool
	for _, cf := range rcs[0].Configs {
		if cf.Key == "log.cleaner.threads" {
			sawThreads = true
		}
	}
	if !sawThreads {
		t.Fatal("broker 1 does not describe log.cleaner.threads")
	}
	for _, bad := range []struct {
		cfg  kadm.AlterConfig
		want error
	}{
		{kadm.AlterConfig{Op: kadm.SetConfig, Name: "no.such.config", Value: ptr("1")}, kerr.InvalidConfig},
		{kadm.AlterConfig{Op: kadm.SetConfig, Name: "log.segment.bytes", Value: ptr("big")}, kerr.InvalidConfig},
		{kadm.AlterConfig{Op: kadm.SetConfig, Name: "follower.replication.throttled.rate", Value: ptr("-1")}, kerr.InvalidConfig},
		{kadm.AlterConfig{Op: kadm.SetConfig, Name: "log.cleaner.threads", Value: ptr("4")}, kerr.InvalidRequest},
	} {
		resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{bad.cfg}, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(resps) != 1 || !errors.Is(resps[0].Err, bad.want) {
			t.Fatalf("%s=%s: %v %s, want %v", bad.cfg.Name, *bad.cfg.Value, resps[0].Err, resps[0].ErrMessage, bad.want)
		}
	}
	// Deleting broker 2's own retention falls back to the cluster-wide one.
	mustAlter(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "log.retention.ms"}}, 2))
	wait.Eventually(t, 10*time.Second, "broker 2 back on the cluster-wide retention", func() bool {
		v, src, _, ok := describe(2, "log.retention.ms")
		return ok && v == "7200000" && src == kmsg.ConfigSourceDynamicDefaultBrokerConfig
	})

	// Topic: set and delete in one alter; the throttled-replicas lists are topic configs.
	mustAlter(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: ptr("1000")},
		{Op: kadm.SetConfig, Name: "leader.replication.throttled.replicas", Value: ptr("0:1,0:2")},
		{Op: kadm.DeleteConfig, Name: "segment.ms"},
	}, "events"))
	wait.Eventually(t, 10*time.Second, "the topic's configs", func() bool {
		rv, rs := configValue(ctx, t, adm, "events", "retention.ms")
		sv, ss := configValue(ctx, t, adm, "events", "segment.ms")
		tv, ts := configValue(ctx, t, adm, "events", "leader.replication.throttled.replicas")
		return rv == "1000" && rs == kmsg.ConfigSourceDynamicTopicConfig && sv == "604800000" && ss == kmsg.ConfigSourceDefaultConfig &&
			tv == "0:1,0:2" && ts == kmsg.ConfigSourceDynamicTopicConfig
	})
	resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "follower.replication.throttled.replicas", Value: ptr("0-1")}}, "events")
	if err != nil || len(resps) != 1 || !errors.Is(resps[0].Err, kerr.InvalidConfig) {
		t.Fatalf("a bad throttled replicas list: %v %v", err, resps)
	}
}
