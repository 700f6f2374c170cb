package kafka_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/testkit/kafkareq"
	"github.com/strand-io/strand/testkit/testcluster"
)

// TestLeaderHintsKIP951: a Produce from v10 and a Fetch from v16 sent to
// a broker that does not lead the partition are answered
// NOT_LEADER_OR_FOLLOWER with the partition's current leader and epoch
// and that broker's endpoint (its Kafka listener, as Metadata gives it),
// so a client moves without asking Metadata first. Below those versions
// the answer names no leader, as Kafka's.
func TestLeaderHintsKIP951(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	c.CreateTopic("lh", 1, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	id := topicIDOf(ctx, t, cl, "lh")
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	leader := c.Partition("lh", 0)
	var want kmsg.MetadataResponseBroker
	other := int32(-1)
	for _, b := range md.Brokers {
		if b.NodeID == leader.Leader {
			want = b
		} else {
			other = b.NodeID
		}
	}
	if want.Host == "" || other < 0 {
		t.Fatalf("metadata brokers %+v, leader %d", md.Brokers, leader.Leader)
	}
	br := cl.Broker(int(other))
	// endpoint is one of an answer's NodeEndpoints.
	type endpoint struct {
		NodeID int32
		Host   string
		Port   int32
	}
	checkHint := func(what string, code int16, leaderID, leaderEpoch int32, endpoints []endpoint) {
		t.Helper()
		if code != kerr.NotLeaderForPartition.Code {
			t.Fatalf("%s to broker %d: code %d, want NOT_LEADER_OR_FOLLOWER", what, other, code)
		}
		if leaderID != leader.Leader || leaderEpoch != leader.LeaderEpoch {
			t.Fatalf("%s: current leader %d epoch %d, want %d epoch %d", what, leaderID, leaderEpoch, leader.Leader, leader.LeaderEpoch)
		}
		if len(endpoints) != 1 || endpoints[0] != (endpoint{want.NodeID, want.Host, want.Port}) {
			t.Fatalf("%s: endpoints %+v, want the leader's %s:%d", what, endpoints, want.Host, want.Port)
		}
	}

	produce := func(max int16) *kmsg.ProduceResponse {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = 1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = "lh", id
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batchOf(t, "x")
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := br.Request(ctx, kafkareq.AtMost(req, max))
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.ProduceResponse)
	}
	pr := produce(13)
	var eps []endpoint
	for _, b := range pr.Brokers {
		eps = append(eps, endpoint{b.NodeID, b.Host, b.Port})
	}
	pp := pr.Topics[0].Partitions[0]
	checkHint("Produce v13", pp.ErrorCode, pp.CurrentLeader.LeaderID, pp.CurrentLeader.LeaderEpoch, eps)
	if old := produce(9); old.Topics[0].Partitions[0].CurrentLeader.LeaderID != -1 || len(old.Brokers) != 0 {
		t.Fatalf("Produce v9 named leader %d and endpoints %+v; KIP-951 starts at v10", old.Topics[0].Partitions[0].CurrentLeader.LeaderID, old.Brokers)
	}

	fetch := func(max int16) *kmsg.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes, req.SessionEpoch = 1<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "lh", id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := br.Request(ctx, kafkareq.AtMost(req, max))
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.FetchResponse)
	}
	fr := fetch(17)
	eps = nil
	for _, b := range fr.Brokers {
		eps = append(eps, endpoint{b.NodeID, b.Host, b.Port})
	}
	fp := fr.Topics[0].Partitions[0]
	checkHint("Fetch v17", fp.ErrorCode, fp.CurrentLeader.LeaderID, fp.CurrentLeader.LeaderEpoch, eps)
	if old := fetch(15); old.Topics[0].Partitions[0].CurrentLeader.LeaderID != -1 || len(old.Brokers) != 0 {
		t.Fatalf("Fetch v15 named leader %d and endpoints %+v; KIP-951 starts at v16", old.Topics[0].Partitions[0].CurrentLeader.LeaderID, old.Brokers)
	}
}
