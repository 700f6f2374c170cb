package kafka_test

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// errorCodes collects every ErrorCode field of a response, at any depth.
func errorCodes(v reflect.Value, out *[]int16) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			errorCodes(v.Elem(), out)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			errorCodes(v.Index(i), out)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16 {
				*out = append(*out, int16(v.Field(i).Int()))
				continue
			}
			if f.IsExported() {
				errorCodes(v.Field(i), out)
			}
		}
	}
}

// TestKafkaDoorRefusesWithoutGrants: a principal with no grant at all
// sends each request the Kafka listener serves, naming resources that
// exist (topic a, group g with committed offsets, transactional id tx
// with a producer): every one is refused with Kafka's code for it, and
// the requests that list (Metadata of all topics, ListGroups,
// ListTransactions) list nothing.
func TestKafkaDoorRefusesWithoutGrants(t *testing.T) {
	g := &grantTable{allow: map[authz.Action]bool{}}
	sess := auth.Session{Principal: auth.User("mallory"), Host: "127.0.0.1", Listener: auth.ListenerKafka}
	kafkaAddr := testutil.FreeAddr(t)
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) {
		cfg.KafkaListen = kafkaAddr
		cfg.TestAuthorizer = g
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
		ip, err = h.InitProducerId(ctx, &pb.InitProducerIdRequest{TransactionalId: "tx", TransactionTimeoutMs: 60000, ProducerId: -1, ProducerEpoch: -1})
		if err != nil || ip.ErrorCode != pb.ErrorCode_NONE {
			return false
		}
		oc, err := h.OffsetCommit(ctx, &pb.OffsetCommitRequest{GroupId: "g", GenerationId: -1, Offsets: []*pb.PartitionOffset{{Topic: "a", Offset: 0}}})
		return err == nil && oc.Partitions[0].ErrorCode == pb.ErrorCode_NONE
	})

	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	br := cl.Broker(int(n.ID()))
	batch, err := record.Build(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []record.Record{{Value: []byte("v"), Timestamp: time.Now().UnixMilli()}})
	if err != nil {
		t.Fatal(err)
	}
	str := func(s string) *string { return &s }
	const (
		topicDenied   = int16(pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED)
		groupDenied   = int16(pb.ErrorCode_GROUP_AUTHORIZATION_FAILED)
		clusterDenied = int16(pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED)
		txnDenied     = int16(pb.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
	)
	cases := []struct {
		name string
		want int16
		req  func() kmsg.Request
	}{
		{"Produce", topicDenied, func() kmsg.Request {
			r := kmsg.NewPtrProduceRequest()
			r.Acks, r.TimeoutMillis = 1, 5000
			tp := kmsg.NewProduceRequestTopic()
			tp.Topic = "a"
			p := kmsg.NewProduceRequestTopicPartition()
			p.Records = batch
			tp.Partitions = append(tp.Partitions, p)
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"Fetch", topicDenied, func() kmsg.Request {
			r := kmsg.NewPtrFetchRequest()
			r.ReplicaID, r.MaxBytes, r.SessionEpoch = -1, 1<<20, -1
			tp := kmsg.NewFetchRequestTopic()
			tp.Topic = "a"
			p := kmsg.NewFetchRequestTopicPartition()
			p.PartitionMaxBytes, p.CurrentLeaderEpoch = 1<<20, -1
			tp.Partitions = append(tp.Partitions, p)
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"ListOffsets", topicDenied, func() kmsg.Request {
			r := kmsg.NewPtrListOffsetsRequest()
			r.ReplicaID = -1
			tp := kmsg.NewListOffsetsRequestTopic()
			tp.Topic = "a"
			p := kmsg.NewListOffsetsRequestTopicPartition()
			p.Timestamp, p.CurrentLeaderEpoch = -1, -1
			tp.Partitions = append(tp.Partitions, p)
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"Metadata", topicDenied, func() kmsg.Request {
			r := kmsg.NewPtrMetadataRequest()
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = str("a")
			r.Topics = append(r.Topics, mt)
			return r
		}},
		{"OffsetForLeaderEpoch", topicDenied, func() kmsg.Request {
			r := kmsg.NewPtrOffsetForLeaderEpochRequest()
			r.ReplicaID = -1
			tp := kmsg.NewOffsetForLeaderEpochRequestTopic()
			tp.Topic = "a"
			p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			p.CurrentLeaderEpoch = -1
			tp.Partitions = append(tp.Partitions, p)
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"FindCoordinator group", groupDenied, func() kmsg.Request {
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.CoordinatorKey, r.CoordinatorKeys = "g", []string{"g"}
			return r
		}},
		{"FindCoordinator transaction", txnDenied, func() kmsg.Request {
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.CoordinatorType, r.CoordinatorKey, r.CoordinatorKeys = 1, "tx", []string{"tx"}
			return r
		}},
		{"JoinGroup", groupDenied, func() kmsg.Request {
			r := kmsg.NewPtrJoinGroupRequest()
			r.Group, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis, r.ProtocolType = "g", 10000, 10000, "consumer"
			p := kmsg.NewJoinGroupRequestProtocol()
			p.Name = "range"
			r.Protocols = append(r.Protocols, p)
			return r
		}},
		{"SyncGroup", groupDenied, func() kmsg.Request {
			r := kmsg.NewPtrSyncGroupRequest()
			r.Group, r.MemberID = "g", "m"
			return r
		}},
		{"Heartbeat", groupDenied, func() kmsg.Request {
			r := kmsg.NewPtrHeartbeatRequest()
			r.Group, r.MemberID = "g", "m"
			return r
		}},
		{"LeaveGroup", groupDenied, func() kmsg.Request {
			r := kmsg.NewPtrLeaveGroupRequest()
			r.Group, r.MemberID = "g", "m"
			m := kmsg.NewLeaveGroupRequestMember()
			m.MemberID = "m"
			r.Members = append(r.Members, m)
			return r
		}},
		{"OffsetCommit", groupDenied, func() kmsg.Request {
			r := kmsg.NewPtrOffsetCommitRequest()
			r.Group, r.Generation = "g", -1
			tp := kmsg.NewOffsetCommitRequestTopic()
			tp.Topic = "a"
			p := kmsg.NewOffsetCommitRequestTopicPartition()
			p.Offset = 1
			tp.Partitions = append(tp.Partitions, p)
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"OffsetFetch", groupDenied, func() kmsg.Request {
			r := kmsg.NewPtrOffsetFetchRequest()
			r.Group = "g"
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = "g"
			r.Groups = append(r.Groups, rg)
			return r
		}},
		{"DescribeGroups", groupDenied, func() kmsg.Request {
			r := kmsg.NewPtrDescribeGroupsRequest()
			r.Groups = []string{"g"}
			return r
		}},
		{"DeleteGroups", groupDenied, func() kmsg.Request {
			r := kmsg.NewPtrDeleteGroupsRequest()
			r.Groups = []string{"g"}
			return r
		}},
		{"OffsetDelete", groupDenied, func() kmsg.Request {
			r := kmsg.NewPtrOffsetDeleteRequest()
			r.Group = "g"
			tp := kmsg.NewOffsetDeleteRequestTopic()
			tp.Topic = "a"
			tp.Partitions = append(tp.Partitions, kmsg.NewOffsetDeleteRequestTopicPartition())
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"InitProducerId transactional", txnDenied, func() kmsg.Request {
			r := kmsg.NewPtrInitProducerIDRequest()
			r.TransactionalID, r.TransactionTimeoutMillis = str("tx"), 60000
			return r
		}},
		{"InitProducerId idempotent", clusterDenied, func() kmsg.Request {
			r := kmsg.NewPtrInitProducerIDRequest()
			return r
		}},
		{"AddPartitionsToTxn", txnDenied, func() kmsg.Request {
			r := kmsg.NewPtrAddPartitionsToTxnRequest()
			r.TransactionalID, r.ProducerID, r.ProducerEpoch = "tx", ip.ProducerId, int16(ip.ProducerEpoch)
			tp := kmsg.NewAddPartitionsToTxnRequestTopic()
			tp.Topic, tp.Partitions = "a", []int32{0}
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"AddOffsetsToTxn", txnDenied, func() kmsg.Request {
			r := kmsg.NewPtrAddOffsetsToTxnRequest()
			r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group = "tx", ip.ProducerId, int16(ip.ProducerEpoch), "g"
			return r
		}},
		{"EndTxn", txnDenied, func() kmsg.Request {
			r := kmsg.NewPtrEndTxnRequest()
			r.TransactionalID, r.ProducerID, r.ProducerEpoch = "tx", ip.ProducerId, int16(ip.ProducerEpoch)
			return r
		}},
		{"TxnOffsetCommit", txnDenied, func() kmsg.Request {
			r := kmsg.NewPtrTxnOffsetCommitRequest()
			r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch, r.Generation = "tx", "g", ip.ProducerId, int16(ip.ProducerEpoch), -1
			tp := kmsg.NewTxnOffsetCommitRequestTopic()
			tp.Topic = "a"
			p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			p.Offset = 1
			tp.Partitions = append(tp.Partitions, p)
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"DescribeTransactions", txnDenied, func() kmsg.Request {
			r := kmsg.NewPtrDescribeTransactionsRequest()
			r.TransactionalIDs = []string{"tx"}
			return r
		}},
		{"DescribeProducers", topicDenied, func() kmsg.Request {
			r := kmsg.NewPtrDescribeProducersRequest()
			tp := kmsg.NewDescribeProducersRequestTopic()
			tp.Topic, tp.Partitions = "a", []int32{0}
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"CreateTopics", topicDenied, func() kmsg.Request {
			r := kmsg.NewPtrCreateTopicsRequest()
			r.TimeoutMillis = 5000
			tp := kmsg.NewCreateTopicsRequestTopic()
			tp.Topic, tp.NumPartitions, tp.ReplicationFactor = "c", 1, 1
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"DeleteTopics", topicDenied, func() kmsg.Request {
			r := kmsg.NewPtrDeleteTopicsRequest()
			r.TimeoutMillis, r.TopicNames = 5000, []string{"a"}
			tp := kmsg.NewDeleteTopicsRequestTopic()
			tp.Topic = str("a")
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"CreatePartitions", topicDenied, func() kmsg.Request {
			r := kmsg.NewPtrCreatePartitionsRequest()
			r.TimeoutMillis = 5000
			tp := kmsg.NewCreatePartitionsRequestTopic()
			tp.Topic, tp.Count = "a", 2
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"DescribeConfigs topic", topicDenied, func() kmsg.Request {
			r := kmsg.NewPtrDescribeConfigsRequest()
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "a"
			r.Resources = append(r.Resources, rr)
			return r
		}},
		{"DescribeConfigs broker", clusterDenied, func() kmsg.Request {
			r := kmsg.NewPtrDescribeConfigsRequest()
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
			r.Resources = append(r.Resources, rr)
			return r
		}},
		{"AlterConfigs", topicDenied, func() kmsg.Request {
			r := kmsg.NewPtrAlterConfigsRequest()
			rr := kmsg.NewAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "a"
			c := kmsg.NewAlterConfigsRequestResourceConfig()
			c.Name, c.Value = "retention.ms", str("100000")
			rr.Configs = append(rr.Configs, c)
			r.Resources = append(r.Resources, rr)
			return r
		}},
		{"IncrementalAlterConfigs", topicDenied, func() kmsg.Request {
			r := kmsg.NewPtrIncrementalAlterConfigsRequest()
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "a"
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Value = "retention.ms", str("100000")
			rr.Configs = append(rr.Configs, c)
			r.Resources = append(r.Resources, rr)
			return r
		}},
		{"DeleteRecords", topicDenied, func() kmsg.Request {
			r := kmsg.NewPtrDeleteRecordsRequest()
			r.TimeoutMillis = 5000
			tp := kmsg.NewDeleteRecordsRequestTopic()
			tp.Topic = "a"
			tp.Partitions = append(tp.Partitions, kmsg.NewDeleteRecordsRequestTopicPartition())
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"ElectLeaders", clusterDenied, func() kmsg.Request {
			r := kmsg.NewPtrElectLeadersRequest()
			r.TimeoutMillis = 5000
			tp := kmsg.NewElectLeadersRequestTopic()
			tp.Topic, tp.Partitions = "a", []int32{0}
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"AlterPartitionAssignments", clusterDenied, func() kmsg.Request {
			r := kmsg.NewPtrAlterPartitionAssignmentsRequest()
			r.TimeoutMillis = 5000
			tp := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			tp.Topic = "a"
			p := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
			p.Replicas = []int32{n.ID()}
			tp.Partitions = append(tp.Partitions, p)
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"ListPartitionReassignments", clusterDenied, func() kmsg.Request {
			return kmsg.NewPtrListPartitionReassignmentsRequest()
		}},
		{"DescribeQuorum", clusterDenied, func() kmsg.Request {
			r := kmsg.NewPtrDescribeQuorumRequest()
			tp := kmsg.NewDescribeQuorumRequestTopic()
			tp.Topic = "__cluster_metadata"
			tp.Partitions = append(tp.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"AddRaftVoter", clusterDenied, func() kmsg.Request {
			r := kmsg.NewPtrAddRaftVoterRequest()
			r.VoterID = 99
			l := kmsg.NewAddRaftVoterRequestListener()
			l.Name, l.Host, l.Port = "CONTROLLER", "127.0.0.1", 1
			r.Listeners = append(r.Listeners, l)
			return r
		}},
		{"RemoveRaftVoter", clusterDenied, func() kmsg.Request {
			r := kmsg.NewPtrRemoveRaftVoterRequest()
			r.VoterID = 99
			return r
		}},
		{"UnregisterBroker", clusterDenied, func() kmsg.Request {
			r := kmsg.NewPtrUnregisterBrokerRequest()
			r.BrokerID = 99
			return r
		}},
	}
	for _, c := range cases {
		resp, err := br.Request(ctx, c.req())
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var codes []int16
		errorCodes(reflect.ValueOf(resp), &codes)
		if !slices.Contains(codes, c.want) {
			t.Errorf("%s: error codes %v, want %d", c.name, codes, c.want)
		}
	}

	// The listings list nothing.
	md, err := br.Request(ctx, kmsg.NewPtrMetadataRequest())
	if err != nil || len(md.(*kmsg.MetadataResponse).Topics) != 0 || len(md.(*kmsg.MetadataResponse).Brokers) != 1 {
		t.Errorf("Metadata of all topics: %v %v; want the broker and no topic", md, err)
	}
	lg, err := br.Request(ctx, kmsg.NewPtrListGroupsRequest())
	if err != nil || len(lg.(*kmsg.ListGroupsResponse).Groups) != 0 {
		t.Errorf("ListGroups: %v %v; want none", lg, err)
	}
	lt, err := br.Request(ctx, kmsg.NewPtrListTransactionsRequest())
	if err != nil || len(lt.(*kmsg.ListTransactionsResponse).TransactionStates) != 0 {
		t.Errorf("ListTransactions: %v %v; want none", lt, err)
	}
}
