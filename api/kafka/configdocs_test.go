package kafka_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/testkit/testcluster"
)

// DescribeConfigs v3+ tells each config's type as Kafka's ConfigDef types
// it, and its documentation when include_documentation asks (KIP-569),
// for topic and broker resources; without the ask the documentation is
// null.
func TestKafkaDescribeConfigsTypesAndDocumentation(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 1})
	c.CreateTopic("typed", 1, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	describe := func(doc bool) *kmsg.DescribeConfigsResponse {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.IncludeDocumentation = doc
		for _, r := range []struct {
			typ  kmsg.ConfigResourceType
			name string
		}{{kmsg.ConfigResourceTypeTopic, "typed"}, {kmsg.ConfigResourceTypeBroker, "1"}} {
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = r.typ, r.name
			req.Resources = append(req.Resources, rr)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Version < 3 {
			t.Fatalf("answered at version %d", resp.Version)
		}
		return resp
	}
	want := map[string]kmsg.ConfigType{
		"segment.bytes": kmsg.ConfigTypeInt, "retention.ms": kmsg.ConfigTypeLong, "cleanup.policy": kmsg.ConfigTypeList,
		"unclean.leader.election.enable": kmsg.ConfigTypeBoolean, "min.cleanable.dirty.ratio": kmsg.ConfigTypeDouble,
		"message.timestamp.type": kmsg.ConfigTypeString, "min.insync.replicas": kmsg.ConfigTypeInt,
		"log.cleaner.enable": kmsg.ConfigTypeBoolean, "log.cleaner.io.max.bytes.per.second": kmsg.ConfigTypeDouble,
		"log.cleaner.backoff.ms": kmsg.ConfigTypeLong, "log.cleanup.policy": kmsg.ConfigTypeList, "log.segment.bytes": kmsg.ConfigTypeInt,
		"leader.replication.throttled.rate": kmsg.ConfigTypeLong, "leader.replication.throttled.replicas": kmsg.ConfigTypeList,
	}
	seen := map[string]bool{}
	for _, res := range describe(true).Resources {
		if res.ErrorCode != 0 || len(res.Configs) == 0 {
			t.Fatalf("%s: error %d, %d configs", res.ResourceName, res.ErrorCode, len(res.Configs))
		}
		for _, cf := range res.Configs {
			if cf.ConfigType == kmsg.ConfigTypeUnknown {
				t.Errorf("%s %s: type UNKNOWN", res.ResourceName, cf.Name)
			}
			if cf.Documentation == nil || *cf.Documentation == "" {
				t.Errorf("%s %s: no documentation though asked", res.ResourceName, cf.Name)
			}
			if w, ok := want[cf.Name]; ok {
				seen[cf.Name] = true
				if cf.ConfigType != w {
					t.Errorf("%s: type %v, want %v", cf.Name, cf.ConfigType, w)
				}
			}
		}
	}
	if len(seen) != len(want) {
		t.Errorf("described %d of the %d configs checked: %v", len(seen), len(want), seen)
	}
	for _, res := range describe(false).Resources {
		for _, cf := range res.Configs {
			if cf.Documentation != nil || cf.ConfigType == kmsg.ConfigTypeUnknown {
				t.Errorf("%s %s without include_documentation: documentation %v, type %v", res.ResourceName, cf.Name, cf.Documentation, cf.ConfigType)
			}
		}
	}
}
