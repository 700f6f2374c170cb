package hostile

// Real node on real time: the hostile requests are raw bytes on a real TCP connection
// to the Kafka listener; could dial MemNet inside synctest; not moved yet.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strand-io/strand/metadata"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/testutil"
)

// brokerState is what a hostile client must not be able to change about
// a broker registration.
type brokerState struct {
	addr   string
	epoch  int64
	fenced bool
}

func brokerStates(img *metadata.Image) map[int32]brokerState {
	out := map[int32]brokerState{}
	for id, b := range img.Brokers {
		out[id] = brokerState{b.Address, b.Epoch, b.Fenced}
	}
	return out
}

// controllerCalls sends every Controller RPC, aimed at doing harm where it
// can (node 1 re-registered at an address the attacker owns, node 2 fenced
// with its real broker epoch, an ISR shrunk, topics made and deleted),
// and returns each call's error by name.
func controllerCalls(ctx context.Context, c pb.ControllerClient, img *metadata.Image, topic string) map[string]error {
	out := map[string]error{}
	var e2 int64
	if b := img.Brokers[2]; b != nil {
		e2 = b.Epoch
	}
	for i := 0; i < 5; i++ { // the loop of the report: re-register node 1 over and over
		_, out["RegisterBroker"] = c.RegisterBroker(ctx, &pb.RegisterBrokerRequest{NodeId: 1, IncarnationId: fmt.Sprintf("hostile-%d", i), Address: "127.0.0.1:1", ClusterId: img.ClusterID})
	}
	_, out["BrokerHeartbeat"] = c.BrokerHeartbeat(ctx, &pb.BrokerHeartbeatRequest{NodeId: 2, BrokerEpoch: e2, CurrentMetadataOffset: img.Offset, WantFence: true})
	_, out["AllocateProducerIds"] = c.AllocateProducerIds(ctx, &pb.AllocateProducerIdsRequest{BrokerId: 2, BrokerEpoch: e2})
	if p := img.Partition(topic, 0); p != nil {
		_, out["AlterPartition"] = c.AlterPartition(ctx, &pb.AlterPartitionRequest{BrokerId: p.Leader, BrokerEpoch: img.Brokers[p.Leader].Epoch,
			Partitions: []*pb.AlterPartitionItem{{Topic: topic, Partition: 0, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewIsr: []int32{p.Leader}}}})
	}
	_, out["CreateTopics"] = c.CreateTopics(ctx, &pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{{Name: "hostile-made", NumPartitions: 1, ReplicationFactor: 1}}})
	_, out["DeleteTopics"] = c.DeleteTopics(ctx, &pb.DeleteTopicsRequest{Names: []string{topic}})
	_, out["IncrementalAlterConfigs"] = c.IncrementalAlterConfigs(ctx, &pb.IncrementalAlterConfigsRequest{
		Resource: &pb.ConfigResource{Type: "topic", Name: topic}, Set: map[string]string{"min.insync.replicas": "1"}})
	_, out["DescribeQuorum"] = c.DescribeQuorum(ctx, &pb.DescribeQuorumRequest{})
	// The membership RPCs: an attacker's voter, a voter removed,
	// a live broker unregistered.
	_, out["AddVoter"] = c.AddVoter(ctx, &pb.AddVoterRequest{NodeId: 9, Address: "127.0.0.1:1"})
	_, out["RemoveVoter"] = c.RemoveVoter(ctx, &pb.RemoveVoterRequest{NodeId: 2})
	_, out["UnregisterBroker"] = c.UnregisterBroker(ctx, &pb.UnregisterBrokerRequest{BrokerId: 2})
	_, out["QuorumStatus"] = c.QuorumStatus(ctx, &pb.QuorumStatusRequest{})
	// The ACL RPCs: an ACL granting the attacker everything, every ACL deleted.
	_, out["CreateAcls"] = c.CreateAcls(ctx, &pb.CreateAclsRequest{Creations: []*pb.AclBinding{{ResourceType: 4, ResourceName: "kafka-cluster",
		PatternType: 3, Principal: "User:hostile", Host: "*", Operation: 2, Permission: 3}}})
	_, out["DeleteAcls"] = c.DeleteAcls(ctx, &pb.DeleteAclsRequest{Filters: []*pb.AclBindingFilter{{ResourceType: 1, PatternType: 1, Operation: 1, Permission: 1}}})
	if st, err := c.FetchMetadata(ctx, &pb.FetchMetadataRequest{NodeId: 9, FromOffset: 0}); err != nil {
		out["FetchMetadata"] = err
	} else {
		_, out["FetchMetadata"] = st.Recv()
	}
	return out
}

// replicaCalls sends the RPCs only followers send (replica_id >= 0) and
// those only coordinators and partition leaders send, in a peer's name.
func replicaCalls(ctx context.Context, cc pb.ConsumerClient, tc pb.TransactionsClient, img *metadata.Image, topic string) map[string]error {
	out := map[string]error{}
	var epoch int64
	if b := img.Brokers[2]; b != nil {
		epoch = b.Epoch
	}
	_, out["Fetch(replica_id=2)"] = cc.Fetch(ctx, &pb.FetchRequest{ReplicaId: 2, ReplicaEpoch: epoch, MaxBytes: 1 << 20,
		Partitions: []*pb.FetchPartition{{Topic: topic, Partition: 0, FetchOffset: 1 << 40, CurrentLeaderEpoch: -1, PartitionMaxBytes: 1 << 20}}})
	_, out["OffsetForLeaderEpoch(replica_id=2)"] = cc.OffsetForLeaderEpoch(ctx, &pb.OffsetForLeaderEpochRequest{ReplicaId: 2,
		Partitions: []*pb.OffsetForLeaderEpochPartition{{Topic: topic, Partition: 0, LeaderEpoch: 0, CurrentLeaderEpoch: -1}}})
	_, out["WriteTxnMarkers"] = tc.WriteTxnMarkers(ctx, &pb.WriteTxnMarkersRequest{Markers: []*pb.TxnMarker{{ProducerId: 1, ProducerEpoch: 32767,
		Partitions: []*pb.TopicPartition{{Topic: topic, Partition: 0}}, TransactionVersion: 2}}})
	_, out["AddPartitionsToTxn"] = tc.AddPartitionsToTxn(ctx, &pb.AddPartitionsToTxnRequest{Transactions: []*pb.AddPartitionsToTxnTransaction{{
		TransactionalId: "hostile", ProducerId: 1, ProducerEpoch: 0, Partitions: []*pb.TopicPartition{{Topic: topic, Partition: 0}}}}})
	return out
}

// TestClientListenerServesNoClusterControl: a client on any node's client
// listener gets every internal RPC refused — the Controller service, the
// follower-only Fetch and OffsetForLeaderEpoch, WriteTxnMarkers and
// AddPartitionsToTxn — and changes nothing: no broker re-registered at
// the attacker's address, none fenced, the topic and its ISR intact; the
// cluster serves well-behaved clients throughout and the refusals leave
// no goroutine or heap behind.
func TestClientListenerServesNoClusterControl(t *testing.T) {
	tg := clusterTarget(t, 3)
	tg.createTopic("kept", 1, 3)
	img := tg.cluster.Image()
	before := brokerStates(img)
	isr := len(img.Partition("kept", 0).ISR)
	b := measure(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, addr := range tg.clientAddrs() {
		cc := tg.raw(addr)
		for name, err := range controllerCalls(ctx, pb.NewControllerClient(cc), img, "kept") {
			wantRefused(t, addr+" Controller."+name, err)
		}
		for name, err := range replicaCalls(ctx, pb.NewConsumerClient(cc), pb.NewTransactionsClient(cc), img, "kept") {
			wantRefused(t, addr+" "+name, err)
		}
	}
	// The refusals leave no goroutine or heap behind (checked before
	// settle and the probe add topics of their own).
	cancel()
	tg.dropRaw()
	b.check(50, 16<<20)
	// The effects would take a moment to show: wait for them.
	tg.settle(tg.cluster.Image)
	now := tg.cluster.Image()
	after := brokerStates(now)
	for id, s := range before {
		if got := after[id]; got != s {
			t.Errorf("broker %d changed under a hostile client: %+v, was %+v", id, got, s)
		}
	}
	if now.Topic("hostile-made") != nil {
		t.Error("a hostile client created a topic through the Controller service")
	}
	if p := now.Partition("kept", 0); p == nil || len(p.ISR) != isr {
		t.Errorf("a hostile client changed topic kept: %+v", p)
	}
	tg.assertServes()
}

// TestExternalListenerServesNoClusterControl: the external (client-facing)
// listener refuses the internal RPCs too.
func TestExternalListenerServesNoClusterControl(t *testing.T) {
	var ext string
	tg := devTarget(t, func(cfg *node.Config) {
		ext = testutil.FreeAddr(t)
		cfg.ExternalListen, cfg.ExternalAdvertise = ext, ext
	})
	tg.createTopic("kept", 1, 1)
	img := tg.dev.Repl.Image()
	before := brokerStates(img)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cc := tg.raw(ext)
	for name, err := range controllerCalls(ctx, pb.NewControllerClient(cc), img, "kept") {
		wantRefused(t, "external Controller."+name, err)
	}
	for name, err := range replicaCalls(ctx, pb.NewConsumerClient(cc), pb.NewTransactionsClient(cc), img, "kept") {
		wantRefused(t, "external "+name, err)
	}
	tg.settle(tg.dev.Repl.Image)
	after := brokerStates(tg.dev.Repl.Image())
	for id, s := range before {
		if got := after[id]; got != s {
			t.Errorf("broker %d changed under a hostile client: %+v, was %+v", id, got, s)
		}
	}
	tg.assertServes()
}
