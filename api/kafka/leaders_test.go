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
)

// leadersCluster is a 3-node cluster without auto leader rebalance (so
// only the elections a test asks for move leaders), a kgo client and kadm.
func leadersCluster(t *testing.T) (*testcluster.Cluster, *kgo.Client, *kadm.Client) {
	t.Helper()
	c := testcluster.New(t, testcluster.Options{Mutate: func(_ int32, cfg *node.Config) { cfg.ControllerConfig.AutoLeaderRebalance = false }})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return c, cl, kadm.NewClient(cl)
}

// preferredNotController is a partition of topic whose preferred replica is
// not the active controller (killing it then leaves the quorum alone).
func preferredNotController(t *testing.T, c *testcluster.Cluster, topic string, n int32) (int32, int32) {
	t.Helper()
	ctl := c.ActiveController()
	for p := int32(0); p < n; p++ {
		if pr := c.Partition(topic, p).Replicas[0]; pr != ctl {
			return p, pr
		}
	}
	t.Fatalf("every partition of %s prefers the controller %d", topic, ctl)
	return 0, 0
}

// TestKafkaElectLeaders: kadm.ElectLeaders against the Kafka listener.
// Preferred: ELECTION_NOT_NEEDED while the preferred replica leads,
// PREFERRED_LEADER_NOT_AVAILABLE while it is down, and after its restart
// (back in the ISR) the election moves leadership back to it. All
// partitions (nil set) report only the partitions that needed an election.
// Unclean: ELECTION_NOT_NEEDED on a partition with a leader; unknown
// partitions answer UNKNOWN_TOPIC_OR_PARTITION.
func TestKafkaElectLeaders(t *testing.T) {
	c, _, adm := leadersCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, "el"); err != nil {
		t.Fatal(err)
	}
	c.Eventually(10*time.Second, "leaders for el", func() bool {
		for p := int32(0); p < 3; p++ {
			if pp := c.Partition("el", p); pp == nil || pp.Leader != pp.Replicas[0] || len(pp.ISR) != 3 {
				return false
			}
		}
		return true
	})
	part, pref := preferredNotController(t, c, "el", 3)
	one := func(how kadm.ElectLeadersHow, topic string, p int32) kadm.ElectLeadersResult {
		t.Helper()
		s := kadm.TopicsSet{}
		s.Add(topic, p)
		res, err := adm.ElectLeaders(ctx, how, s)
		if err != nil {
			t.Fatal(err)
		}
		r, ok := res[topic][p]
		if !ok {
			t.Fatalf("ElectLeaders answered %+v, without %s-%d", res, topic, p)
		}
		return r
	}
	if r := one(kadm.ElectPreferredReplica, "el", part); !errors.Is(r.Err, kerr.ElectionNotNeeded) {
		t.Fatalf("preferred election while the preferred replica leads: %v, want ELECTION_NOT_NEEDED", r.Err)
	}
	if r := one(kadm.ElectLiveReplica, "el", part); !errors.Is(r.Err, kerr.ElectionNotNeeded) {
		t.Fatalf("unclean election of a partition with a leader: %v, want ELECTION_NOT_NEEDED", r.Err)
	}
	if r := one(kadm.ElectPreferredReplica, "el", 7); !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("election of el-7: %v, want UNKNOWN_TOPIC_OR_PARTITION", r.Err)
	}
	all, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
	if err != nil || len(all) != 0 {
		t.Fatalf("electing all balanced partitions: %+v, %v; want nothing to report", all, err)
	}

	c.Kill(pref)
	c.Eventually(20*time.Second, "leadership of el to move off the killed node", func() bool {
		p := c.Partition("el", part)
		return p.Leader >= 0 && p.Leader != pref
	})
	if r := one(kadm.ElectPreferredReplica, "el", part); !errors.Is(r.Err, kerr.PreferredLeaderNotAvailable) {
		t.Fatalf("preferred election while the preferred replica is down: %v, want PREFERRED_LEADER_NOT_AVAILABLE", r.Err)
	}
	c.Start(pref)
	c.Eventually(30*time.Second, "the restarted node back in the ISR", func() bool {
		return c.Partition("el", part).InISR(pref)
	})
	if p := c.Partition("el", part); p.Leader == pref {
		t.Fatalf("leader moved back on its own (auto rebalance is off): %+v", p)
	}
	all, err = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := all["el"][part]; !ok || r.Err != nil {
		t.Fatalf("electing all: %+v, want el-%d elected", all, part)
	}
	c.Eventually(10*time.Second, "the preferred replica to lead again", func() bool {
		return c.Partition("el", part).Leader == pref
	})
}

// TestKafkaOffsetsAndDeleteRecords: kadm's ListStartOffsets,
// ListEndOffsets and ListMaxTimestampOffsets, UpdatePartitions
// (INVALID_PARTITIONS when not raising the count), and DeleteRecords: the
// low watermark, -1 for the high watermark, OFFSET_OUT_OF_RANGE past it,
// a fetch below the new start is OFFSET_OUT_OF_RANGE, the answer comes
// once the followers' log starts have followed, and the start survives a
// follower takeover and the old leader's restart.
func TestKafkaOffsetsAndDeleteRecords(t *testing.T) {
	c, cl, adm := leadersCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 2, 3, nil, "dr"); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-10 * time.Minute)
	for i := 0; i < 10; i++ {
		ts := base.Add(time.Duration(i) * time.Second)
		if i == 6 {
			ts = time.Now() // the max timestamp
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "dr", Partition: 0, Value: []byte(fmt.Sprint(i)), Timestamp: ts}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	offsetOf := func(lo kadm.ListedOffsets, err error) int64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		o, ok := lo.Lookup("dr", 0)
		if !ok || o.Err != nil {
			t.Fatalf("offsets %+v", lo)
		}
		return o.Offset
	}
	if s, e, m := offsetOf(adm.ListStartOffsets(ctx, "dr")), offsetOf(adm.ListEndOffsets(ctx, "dr")), offsetOf(adm.ListMaxTimestampOffsets(ctx, "dr")); s != 0 || e != 10 || m != 6 {
		t.Fatalf("start %d end %d max-timestamp %d, want 0, 10, 6", s, e, m)
	}

	// CreatePartitions: 2 → 2 is refused, 2 → 3 adds one.
	if r, err := adm.UpdatePartitions(ctx, 2, "dr"); err != nil || !errors.Is(r["dr"].Err, kerr.InvalidPartitions) {
		t.Fatalf("UpdatePartitions to the current count: %+v %v, want INVALID_PARTITIONS", r, err)
	}
	if r, err := adm.UpdatePartitions(ctx, 3, "dr"); err != nil || r["dr"].Err != nil {
		t.Fatalf("UpdatePartitions to 3: %+v %v", r, err)
	}

	del := func(p int32, at int64) kadm.DeleteRecordsResponse {
		t.Helper()
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: "dr", Partition: p, At: at})
		res, err := adm.DeleteRecords(ctx, os)
		if err != nil {
			t.Fatal(err)
		}
		r, ok := res.Lookup("dr", p)
		if !ok {
			t.Fatalf("DeleteRecords answered %+v", res)
		}
		return r
	}
	if r := del(0, 11); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("delete below 11 (HW 10): %+v, want OFFSET_OUT_OF_RANGE", r)
	}
	if r := del(0, 4); r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("delete below 4: %+v", r)
	}
	if r := del(1, -1); r.Err != nil || r.LowWatermark != 0 {
		t.Fatalf("delete below the HW of an empty partition: %+v", r)
	}
	// A partition named twice is answered once, as Kafka answers it (its
	// handler collects the request into a map).
	{
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.TimeoutMillis = 30000
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = "dr"
		for _, at := range []int64{-1, 0} {
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Partition, rp.Offset = 1, at
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := cl.Broker(int(c.Partition("dr", 1).Leader)).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		r := resp.(*kmsg.DeleteRecordsResponse)
		if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 || r.Topics[0].Partitions[0].ErrorCode != 0 || r.Topics[0].Partitions[0].LowWatermark != 0 {
			t.Fatalf("DeleteRecords naming dr-1 twice answered %+v", r.Topics)
		}
	}
	if s := offsetOf(adm.ListStartOffsets(ctx, "dr")); s != 4 {
		t.Fatalf("start offset after the delete %d, want 4", s)
	}
	leader := c.Partition("dr", 0).Leader
	fetch := func(at int64) int16 {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MaxBytes = 100, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "dr", topicIDOf(ctx, t, cl, "dr")
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, at, 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := cl.Broker(int(leader)).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode
	}
	if ec := fetch(3); ec != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch at 3 below the start 4: code %d, want OFFSET_OUT_OF_RANGE", ec)
	}
	if ec := fetch(4); ec != 0 {
		t.Fatalf("fetch at the start 4: code %d", ec)
	}

	// The answer came once every live replica's log start had reached 4
	// (Kafka's low watermark); one of the followers takes over and keeps it.
	for _, m := range c.Running() {
		if l := c.Log(m.ID, "dr", 0); l == nil || l.LogStartOffset() != 4 {
			t.Fatalf("replica on node %d starts at %d after DeleteRecords answered, want 4", m.ID, l.LogStartOffset())
		}
	}
	c.Kill(leader)
	c.Eventually(20*time.Second, "a new leader for dr-0", func() bool {
		p := c.Partition("dr", 0)
		return p.Leader >= 0 && p.Leader != leader
	})
	// (The client learns the new leader once it fails to reach the old one.)
	c.Eventually(20*time.Second, "the new leader to answer start offset 4", func() bool {
		cl.ForceMetadataRefresh()
		lo, err := adm.ListStartOffsets(ctx, "dr")
		if err != nil {
			return false
		}
		o, ok := lo.Lookup("dr", 0)
		if ok && o.Err == nil && o.Offset != 4 {
			t.Fatalf("start offset on the new leader %d, want 4", o.Offset)
		}
		return ok && o.Err == nil
	})
	if r := del(0, 6); r.Err != nil || r.LowWatermark != 6 {
		t.Fatalf("delete below 6 on the new leader: %+v", r)
	}
	c.Start(leader)
	// Its log opens at the start it checkpointed (4) or, once it fetched,
	// the new leader's (6); never below 4.
	c.Eventually(10*time.Second, "the restarted node's replica of dr-0", func() bool {
		l := c.Log(leader, "dr", 0)
		if l != nil && l.LogStartOffset() < 4 {
			t.Fatalf("the restarted replica starts at %d, below the deleted 4", l.LogStartOffset())
		}
		return l != nil
	})
	c.Eventually(30*time.Second, "the restarted replica's log to start at 6", func() bool {
		l := c.Log(leader, "dr", 0)
		return l != nil && l.LogStartOffset() == 6 && l.LogEndOffset() == 10
	})
}
