package kafka_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/testkit/kafkareq"
	"github.com/strand-io/strand/testkit/testcluster"
)

// TestFencedBrokersNotListed: once a broker is fenced (its process gone,
// its session expired), Metadata and DescribeCluster list only the live
// brokers, as Kafka's do: a client handed the dead one picks it for its
// next metadata, coordinator or describe request and waits out a
// connection timeout there. DescribeCluster v2 lists it on request, marked
// fenced (KIP-1073).
func TestFencedBrokersNotListed(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c.Kill(3)
	// Asked of broker 1: its own image, which follows the controller's.
	c.Eventually(30*time.Second, "broker 3 fenced in broker 1's image", func() bool {
		b := c.Member(1).Node.Handler().Repl.Image().Brokers[3]
		return b != nil && b.Fenced
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Member(1).Cfg.KafkaListen))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	br := cl.Broker(1)

	md, err := br.Request(ctx, kmsg.NewPtrMetadataRequest())
	if err != nil {
		t.Fatal(err)
	}
	var ids []int32
	for _, b := range md.(*kmsg.MetadataResponse).Brokers {
		ids = append(ids, b.NodeID)
	}
	if sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] }); len(ids) != 2 || ids[0] != 1 || ids[1] != 2 {
		t.Errorf("Metadata lists brokers %v, want the live ones [1 2]", ids)
	}

	describe := func(version int16, withFenced bool) map[int32]bool {
		t.Helper()
		req := kmsg.NewPtrDescribeClusterRequest()
		req.IncludeFencedBrokers = withFenced
		resp, err := br.Request(ctx, kafkareq.AtMost(req, version))
		if err != nil {
			t.Fatal(err)
		}
		dc := resp.(*kmsg.DescribeClusterResponse)
		if dc.ControllerID == 3 {
			t.Errorf("DescribeCluster v%d names the fenced broker 3 as the controller to send to", version)
		}
		out := map[int32]bool{}
		for _, b := range dc.Brokers {
			out[b.NodeID] = b.IsFenced
		}
		return out
	}
	if got := describe(1, false); len(got) != 2 || got[3] {
		t.Errorf("DescribeCluster v1 lists %v, want brokers 1 and 2", got)
	}
	if got := describe(2, false); len(got) != 2 {
		t.Errorf("DescribeCluster v2 lists %v, want brokers 1 and 2", got)
	}
	if got := describe(2, true); len(got) != 3 || !got[3] || got[1] || got[2] {
		t.Errorf("DescribeCluster v2 with fenced brokers lists %v (id: fenced), want 1 and 2 live, 3 fenced", got)
	}
}
