package kafka_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/testcluster"
)

// TestKafkaMembership: DescribeQuorum, AddRaftVoter, RemoveRaftVoter and
// UnregisterBroker through the Kafka listener (franz-go: kadm has none of
// them, so kmsg requests on kadm's client), with their refusals.
func TestKafkaMembership(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ckey := func(code int16, want pb.ErrorCode, what string, msg *string) {
		t.Helper()
		if code != int16(want) {
			m := ""
			if msg != nil {
				m = *msg
			}
			t.Fatalf("%s: error code %d (%s), want %s", what, code, m, want)
		}
	}

	dq := kmsg.NewPtrDescribeQuorumRequest()
	for _, name := range []string{"__cluster_metadata", "other"} {
		dt := kmsg.NewDescribeQuorumRequestTopic()
		dt.Topic = name
		dt.Partitions = append(dt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
		dq.Topics = append(dq.Topics, dt)
	}
	dresp, err := dq.RequestWith(ctx, cl)
	if err != nil || dresp.ErrorCode != 0 || len(dresp.Topics) != 2 {
		t.Fatalf("DescribeQuorum = %+v, %v", dresp, err)
	}
	p := dresp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.LeaderID != 1 || p.LeaderEpoch < 1 || p.HighWatermark < 1 || len(p.CurrentVoters) != 1 || p.CurrentVoters[0].ReplicaID != 1 ||
		p.CurrentVoters[0].LogEndOffset < p.HighWatermark || p.CurrentVoters[0].LastFetchTimestamp <= 0 || len(p.Observers) != 0 {
		t.Fatalf("DescribeQuorum partition = %+v", p)
	}
	if len(dresp.Nodes) != 1 || dresp.Nodes[0].NodeID != 1 || len(dresp.Nodes[0].Listeners) != 1 || dresp.Nodes[0].Listeners[0].Name != "CONTROLLER" {
		t.Fatalf("DescribeQuorum nodes = %+v", dresp.Nodes)
	}
	ckey(dresp.Topics[1].Partitions[0].ErrorCode, pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "DescribeQuorum of another topic", nil)

	add := kmsg.NewPtrAddRaftVoterRequest()
	add.VoterID = 1
	aresp, err := add.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	ckey(aresp.ErrorCode, pb.ErrorCode_INVALID_REQUEST, "AddRaftVoter without a listener", aresp.ErrorMessage)
	l := kmsg.NewAddRaftVoterRequestListener()
	l.Name, l.Host, l.Port = "CONTROLLER", "127.0.0.1", 1
	add.Listeners = append(add.Listeners, l)
	aresp, _ = add.RequestWith(ctx, cl)
	ckey(aresp.ErrorCode, pb.ErrorCode_DUPLICATE_VOTER, "AddRaftVoter of a voter", aresp.ErrorMessage)
	add.ClusterID = kmsg.StringPtr("not-this-cluster")
	aresp, _ = add.RequestWith(ctx, cl)
	ckey(aresp.ErrorCode, pb.ErrorCode_INCONSISTENT_CLUSTER_ID, "AddRaftVoter for another cluster", aresp.ErrorMessage)

	rm := kmsg.NewPtrRemoveRaftVoterRequest()
	rm.VoterID = 7
	rresp, err := rm.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	ckey(rresp.ErrorCode, pb.ErrorCode_VOTER_NOT_FOUND, "RemoveRaftVoter of no voter", rresp.ErrorMessage)
	rm.VoterID = 1
	rresp, _ = rm.RequestWith(ctx, cl)
	ckey(rresp.ErrorCode, pb.ErrorCode_INVALID_REQUEST, "RemoveRaftVoter of the last voter", rresp.ErrorMessage)

	un := kmsg.NewPtrUnregisterBrokerRequest()
	un.BrokerID = 9
	uresp, err := un.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	ckey(uresp.ErrorCode, pb.ErrorCode_BROKER_ID_NOT_REGISTERED, "UnregisterBroker of no broker", uresp.ErrorMessage)

	// ApiVersions (kadm) advertises the four.
	vs, err := adm.ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, bv := range vs {
		for _, k := range []kmsg.Key{kmsg.DescribeQuorum, kmsg.AddRaftVoter, kmsg.RemoveRaftVoter, kmsg.UnregisterBroker} {
			if _, _, ok := bv.KeyVersions(int16(k)); !ok {
				t.Fatalf("ApiVersions lacks %s", k.Name())
			}
		}
	}
}
