package api_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// denyAll is an authz.Checker that allows nothing.
type denyAll struct{}

func (denyAll) Authorize(context.Context, auth.Session, authz.Action) bool { return false }
func (denyAll) AuthorizeAny(context.Context, auth.Session, authz.Operation, authz.ResourceType, string) bool {
	return false
}

// codesOf collects every ErrorCode field of a response message, at any depth.
func codesOf(v reflect.Value, out *[]pb.ErrorCode) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			codesOf(v.Elem(), out)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			codesOf(v.Index(i), out)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			if f.Name == "ErrorCode" {
				if c, ok := v.Field(i).Interface().(pb.ErrorCode); ok {
					*out = append(*out, c)
				}
				continue
			}
			codesOf(v.Field(i), out)
		}
	}
}

// TestGRPCClientListenerRefusesWithoutGrants: a principal with no grant
// (node.Config.TestSession, test-only) calls each method of the client
// listener's services naming resources that exist; each is refused with
// Kafka's code in its answer, never a gRPC error, and the listings list
// nothing. (WriteTxnMarkers and AddPartitionsToTxn are not served here:
// api/listeners.go; the request layer's own tests cover them.)
func TestGRPCClientListenerRefusesWithoutGrants(t *testing.T) {
	sess := auth.Session{Principal: auth.User("mallory"), Host: "127.0.0.1", Listener: auth.ListenerClient}
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) {
		cfg.TestAuthorizer = denyAll{}
		cfg.TestSession = &sess
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	h := n.Handler() // no session: from inside the process, allowed
	if ct, err := h.CreateTopics(ctx, &pb.CreateTopicsRequest{TimeoutMs: 30000, Topics: []*pb.CreatableTopic{{Name: "a", NumPartitions: 1, ReplicationFactor: 1}}}); err != nil || ct.Topics[0].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("CreateTopics: %v %v", ct, err)
	}
	var ip *pb.InitProducerIdResponse
	wait.Eventually(t, 30*time.Second, "the coordinators", func() bool {
		for kt, key := range map[pb.CoordinatorType]string{pb.CoordinatorType_TRANSACTION: "tx", pb.CoordinatorType_GROUP: "g"} {
			fc, err := h.FindCoordinator(ctx, &pb.FindCoordinatorRequest{KeyType: kt, Keys: []string{key}})
			if err != nil || fc.Coordinators[0].ErrorCode != pb.ErrorCode_NONE {
				return false
			}
		}
		var err error
		if ip, err = h.InitProducerId(ctx, &pb.InitProducerIdRequest{TransactionalId: "tx", TransactionTimeoutMs: 60000, ProducerId: -1, ProducerEpoch: -1}); err != nil || ip.ErrorCode != pb.ErrorCode_NONE {
			return false
		}
		oc, err := h.OffsetCommit(ctx, &pb.OffsetCommitRequest{GroupId: "g", GenerationId: -1, Offsets: []*pb.PartitionOffset{{Topic: "a", Offset: 0}}})
		return err == nil && oc.Partitions[0].ErrorCode == pb.ErrorCode_NONE
	})

	cc, err := grpc.NewClient("passthrough:///"+n.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	md, cs, ad := pb.NewMetadataClient(cc), pb.NewConsumerClient(cc), pb.NewAdminClient(cc)
	gr, tx := pb.NewGroupsClient(cc), pb.NewTransactionsClient(cc)
	tp := []*pb.TopicPartition{{Topic: "a"}}
	const (
		topicDenied   = pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED
		groupDenied   = pb.ErrorCode_GROUP_AUTHORIZATION_FAILED
		clusterDenied = pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED
		txnDenied     = pb.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED
	)
	cases := []struct {
		name string
		want pb.ErrorCode
		call func() (any, error)
	}{
		{"Metadata", topicDenied, func() (any, error) { return md.Metadata(ctx, &pb.MetadataRequest{Topics: []string{"a"}}) }},
		{"FindCoordinator group", groupDenied, func() (any, error) {
			return md.FindCoordinator(ctx, &pb.FindCoordinatorRequest{Keys: []string{"g"}})
		}},
		{"FindCoordinator transaction", txnDenied, func() (any, error) {
			return md.FindCoordinator(ctx, &pb.FindCoordinatorRequest{KeyType: pb.CoordinatorType_TRANSACTION, Keys: []string{"tx"}})
		}},
		{"Fetch", topicDenied, func() (any, error) {
			return cs.Fetch(ctx, &pb.FetchRequest{ReplicaId: -1, MaxBytes: 1 << 20, Partitions: []*pb.FetchPartition{{Topic: "a", PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1}}})
		}},
		{"ListOffsets", topicDenied, func() (any, error) {
			return cs.ListOffsets(ctx, &pb.ListOffsetsRequest{Partitions: []*pb.ListOffsetsPartition{{Topic: "a", Timestamp: -1, CurrentLeaderEpoch: -1}}})
		}},
		{"OffsetForLeaderEpoch", topicDenied, func() (any, error) {
			return cs.OffsetForLeaderEpoch(ctx, &pb.OffsetForLeaderEpochRequest{ReplicaId: -1, Partitions: []*pb.OffsetForLeaderEpochPartition{{Topic: "a", CurrentLeaderEpoch: -1}}})
		}},
		{"JoinGroup", groupDenied, func() (any, error) {
			return gr.JoinGroup(ctx, &pb.JoinGroupRequest{GroupId: "g", SessionTimeoutMs: 10000, RebalanceTimeoutMs: 10000, ProtocolType: "consumer", Protocols: []*pb.GroupProtocol{{Name: "range"}}})
		}},
		{"SyncGroup", groupDenied, func() (any, error) { return gr.SyncGroup(ctx, &pb.SyncGroupRequest{GroupId: "g", MemberId: "m"}) }},
		{"Heartbeat", groupDenied, func() (any, error) { return gr.Heartbeat(ctx, &pb.HeartbeatRequest{GroupId: "g", MemberId: "m"}) }},
		{"LeaveGroup", groupDenied, func() (any, error) { return gr.LeaveGroup(ctx, &pb.LeaveGroupRequest{GroupId: "g", MemberId: "m"}) }},
		{"OffsetCommit", groupDenied, func() (any, error) {
			return gr.OffsetCommit(ctx, &pb.OffsetCommitRequest{GroupId: "g", GenerationId: -1, Offsets: []*pb.PartitionOffset{{Topic: "a", Offset: 1}}})
		}},
		{"OffsetFetch", groupDenied, func() (any, error) { return gr.OffsetFetch(ctx, &pb.OffsetFetchRequest{GroupId: "g"}) }},
		{"TxnOffsetCommit", txnDenied, func() (any, error) {
			return gr.TxnOffsetCommit(ctx, &pb.TxnOffsetCommitRequest{TransactionalId: "tx", GroupId: "g", ProducerId: ip.ProducerId, ProducerEpoch: ip.ProducerEpoch,
				GenerationId: -1, Offsets: []*pb.PartitionOffset{{Topic: "a", Offset: 1}}})
		}},
		{"DescribeGroups", groupDenied, func() (any, error) { return gr.DescribeGroups(ctx, &pb.DescribeGroupsRequest{GroupIds: []string{"g"}}) }},
		{"DeleteGroups", groupDenied, func() (any, error) { return gr.DeleteGroups(ctx, &pb.DeleteGroupsRequest{GroupIds: []string{"g"}}) }},
		{"OffsetDelete", groupDenied, func() (any, error) {
			return gr.OffsetDelete(ctx, &pb.OffsetDeleteRequest{GroupId: "g", Partitions: tp})
		}},
		{"InitProducerId transactional", txnDenied, func() (any, error) {
			return tx.InitProducerId(ctx, &pb.InitProducerIdRequest{TransactionalId: "tx", TransactionTimeoutMs: 60000, ProducerId: -1, ProducerEpoch: -1})
		}},
		{"InitProducerId idempotent", clusterDenied, func() (any, error) {
			return tx.InitProducerId(ctx, &pb.InitProducerIdRequest{ProducerId: -1, ProducerEpoch: -1})
		}},
		{"EndTxn", txnDenied, func() (any, error) {
			return tx.EndTxn(ctx, &pb.EndTxnRequest{TransactionalId: "tx", ProducerId: ip.ProducerId, ProducerEpoch: ip.ProducerEpoch})
		}},
		{"AbortTransaction", clusterDenied, func() (any, error) {
			return tx.AbortTransaction(ctx, &pb.AbortTransactionRequest{Topic: "a", ProducerId: ip.ProducerId, ProducerEpoch: ip.ProducerEpoch})
		}},
		{"DescribeTransactions", txnDenied, func() (any, error) {
			return tx.DescribeTransactions(ctx, &pb.DescribeTransactionsRequest{TransactionalIds: []string{"tx"}})
		}},
		{"DescribeProducers", topicDenied, func() (any, error) { return tx.DescribeProducers(ctx, &pb.DescribeProducersRequest{Partitions: tp}) }},
		{"CreateTopics", topicDenied, func() (any, error) {
			return ad.CreateTopics(ctx, &pb.CreateTopicsRequest{TimeoutMs: 5000, Topics: []*pb.CreatableTopic{{Name: "c", NumPartitions: 1, ReplicationFactor: 1}}})
		}},
		{"DeleteTopics", topicDenied, func() (any, error) { return ad.DeleteTopics(ctx, &pb.DeleteTopicsRequest{Names: []string{"a"}}) }},
		{"CreatePartitions", topicDenied, func() (any, error) {
			return ad.CreatePartitions(ctx, &pb.CreatePartitionsRequest{TimeoutMs: 5000, Topics: []*pb.CreatePartitionsTopic{{Name: "a", Count: 2}}})
		}},
		{"DescribeConfigs topic", topicDenied, func() (any, error) {
			return ad.DescribeConfigs(ctx, &pb.DescribeConfigsRequest{Resources: []*pb.ConfigResource{{Type: "topic", Name: "a"}}})
		}},
		{"DescribeConfigs broker", clusterDenied, func() (any, error) {
			return ad.DescribeConfigs(ctx, &pb.DescribeConfigsRequest{Resources: []*pb.ConfigResource{{Type: "broker", Name: "1"}}})
		}},
		{"IncrementalAlterConfigs", topicDenied, func() (any, error) {
			return ad.IncrementalAlterConfigs(ctx, &pb.IncrementalAlterConfigsRequest{Resource: &pb.ConfigResource{Type: "topic", Name: "a"}, Set: map[string]string{"retention.ms": "100000"}})
		}},
		{"DeleteRecords", topicDenied, func() (any, error) {
			return ad.DeleteRecords(ctx, &pb.DeleteRecordsRequest{TimeoutMs: 5000, Partitions: []*pb.DeleteRecordsPartition{{Topic: "a"}}})
		}},
		{"ElectLeaders", clusterDenied, func() (any, error) {
			return ad.ElectLeaders(ctx, &pb.ElectLeadersRequest{TimeoutMs: 5000, Topics: []*pb.ElectLeadersTopic{{Topic: "a", Partitions: []int32{0}}}})
		}},
		{"AlterPartitionReassignments", clusterDenied, func() (any, error) {
			return ad.AlterPartitionReassignments(ctx, &pb.AlterPartitionReassignmentsRequest{TimeoutMs: 5000})
		}},
		{"ListPartitionReassignments", clusterDenied, func() (any, error) {
			return ad.ListPartitionReassignments(ctx, &pb.ListPartitionReassignmentsRequest{TimeoutMs: 5000})
		}},
		{"AddVoter", clusterDenied, func() (any, error) { return ad.AddVoter(ctx, &pb.AddVoterRequest{NodeId: 99, Address: "127.0.0.1:1"}) }},
		{"RemoveVoter", clusterDenied, func() (any, error) { return ad.RemoveVoter(ctx, &pb.RemoveVoterRequest{NodeId: 99}) }},
		{"DescribeQuorum", clusterDenied, func() (any, error) { return ad.DescribeQuorum(ctx, &pb.QuorumStatusRequest{}) }},
		{"UnregisterBroker", clusterDenied, func() (any, error) { return ad.UnregisterBroker(ctx, &pb.UnregisterBrokerRequest{BrokerId: 99}) }},
	}
	for _, c := range cases {
		resp, err := c.call()
		if err != nil {
			t.Errorf("%s: a gRPC error %v, want the refusal in the answer", c.name, err)
			continue
		}
		var codes []pb.ErrorCode
		codesOf(reflect.ValueOf(resp), &codes)
		if !slices.Contains(codes, c.want) {
			t.Errorf("%s: error codes %v, want %v", c.name, codes, c.want)
		}
	}

	// The produce stream: the partition refused.
	stream, err := pb.NewProducerClient(cc).Produce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := record.Build(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []record.Record{{Value: []byte("v"), Timestamp: time.Now().UnixMilli()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&pb.ProduceRequest{Acks: 1, Partitions: []*pb.PartitionRecords{{Topic: "a", Records: b}}}); err != nil {
		t.Fatal(err)
	}
	if r, err := stream.Recv(); err != nil || r.Partitions[0].ErrorCode != topicDenied {
		t.Errorf("Produce: %v %v, want TOPIC_AUTHORIZATION_FAILED", r, err)
	}
	_ = stream.CloseSend()

	// The listings list nothing; DescribeCluster its broker, no controller.
	if r, err := md.Metadata(ctx, &pb.MetadataRequest{}); err != nil || len(r.Topics) != 0 || len(r.Brokers) != 1 {
		t.Errorf("Metadata of all topics: %v %v", r, err)
	}
	if r, err := gr.ListGroups(ctx, &pb.ListGroupsRequest{}); err != nil || len(r.Groups) != 0 {
		t.Errorf("ListGroups: %v %v", r, err)
	}
	if r, err := tx.ListTransactions(ctx, &pb.ListTransactionsRequest{DurationFilterMs: -1}); err != nil || len(r.Transactions) != 0 {
		t.Errorf("ListTransactions: %v %v", r, err)
	}
	if r, err := ad.DescribeCluster(ctx, &pb.DescribeClusterRequest{}); err != nil || len(r.Brokers) != 1 || len(r.Controllers) != 0 {
		t.Errorf("DescribeCluster: %v %v", r, err)
	}
}
