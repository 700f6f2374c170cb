// Package kafkareq is one table of the Kafka requests the listener
// serves, each built to name given resources, with the code Kafka
// answers a principal that holds no grant for them. The authorization
// tests (api/kafka's with a test authorizer, testkit/hostile's through
// SASL_SSL with the standard authorizer) send it; each keeps its own
// selection of cases. Imports only franz-go's kmsg and the protocol.
package kafkareq

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// The codes a principal without grants is refused with.
const (
	TopicDenied   = int16(pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED)
	GroupDenied   = int16(pb.ErrorCode_GROUP_AUTHORIZATION_FAILED)
	ClusterDenied = int16(pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED)
	TxnDenied     = int16(pb.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
)

// Case is one request and the code its answer must hold.
type Case struct {
	Name  string
	Want  int16
	Build func() kmsg.Request
}

// AtMost caps the version a kgo client sends req at (it sends the
// highest both sides serve otherwise): Produce and Fetch name a topic by
// its name only below v13, by its id from v13.
func AtMost(req kmsg.Request, v int16) kmsg.Request { return pinned{req, v} }

type pinned struct {
	kmsg.Request
	max int16
}

func (p pinned) MaxVersion() int16 { return p.max }

// Names are the resources the requests name.
type Names struct {
	Topic         string   // an existing topic
	TopicID       [16]byte // Topic's id: when set, Produce and Fetch name it by id too
	NewTopic      string   // a topic that does not exist (and must not come to)
	Group         string   // a group
	TxnID         string   // a transactional id
	ProducerID    int64    // the transactional id's producer
	ProducerEpoch int16
	Records       []byte // the batch Produce writes
	Replica       int32  // the broker AlterPartitionAssignments names
	Principal     string // the principal CreateAcls grants everything
	ScramUser     string // the SCRAM user AlterUserScramCredentials deletes
	NewScramUser  string // and the one it adds
	QuotaUser     string // the user whose produce rate AlterClientQuotas sets (default "victim")
}

func str(s string) *string { return &s }

// Refusals is every case, naming n's resources; the names are unique.
func Refusals(n Names) []Case {
	produce := func(topic string, id [16]byte) func() kmsg.Request {
		return func() kmsg.Request {
			r := kmsg.NewPtrProduceRequest()
			r.Acks, r.TimeoutMillis = -1, 5000
			tp := kmsg.NewProduceRequestTopic()
			tp.Topic, tp.TopicID = topic, id
			p := kmsg.NewProduceRequestTopicPartition()
			p.Records = n.Records
			tp.Partitions = append(tp.Partitions, p)
			r.Topics = append(r.Topics, tp)
			if id == ([16]byte{}) {
				return AtMost(r, 12)
			}
			return r
		}
	}
	fetch := func(topic string, id [16]byte) func() kmsg.Request {
		return func() kmsg.Request {
			r := kmsg.NewPtrFetchRequest()
			r.ReplicaID, r.MaxBytes, r.SessionEpoch = -1, 1<<20, -1
			tp := kmsg.NewFetchRequestTopic()
			tp.Topic, tp.TopicID = topic, id
			p := kmsg.NewFetchRequestTopicPartition()
			p.PartitionMaxBytes, p.CurrentLeaderEpoch = 1<<20, -1
			tp.Partitions = append(tp.Partitions, p)
			r.Topics = append(r.Topics, tp)
			if id == ([16]byte{}) {
				return AtMost(r, 12)
			}
			return r
		}
	}
	metadata := func(topic string, autoCreate bool) func() kmsg.Request {
		return func() kmsg.Request {
			r := kmsg.NewPtrMetadataRequest()
			r.AllowAutoTopicCreation = autoCreate
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = str(topic)
			r.Topics = append(r.Topics, mt)
			return r
		}
	}
	var byID []Case
	if n.TopicID != ([16]byte{}) {
		byID = []Case{
			{"Produce by topic id", TopicDenied, produce("", n.TopicID)},
			{"Fetch by topic id", TopicDenied, fetch("", n.TopicID)},
		}
	}
	return append(byID, []Case{
		{"Produce", TopicDenied, produce(n.Topic, [16]byte{})},
		{"Fetch", TopicDenied, fetch(n.Topic, [16]byte{})},
		{"ListOffsets", TopicDenied, func() kmsg.Request {
			r := kmsg.NewPtrListOffsetsRequest()
			r.ReplicaID = -1
			tp := kmsg.NewListOffsetsRequestTopic()
			tp.Topic = n.Topic
			p := kmsg.NewListOffsetsRequestTopicPartition()
			p.Timestamp, p.CurrentLeaderEpoch = -1, -1
			tp.Partitions = append(tp.Partitions, p)
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"Metadata", TopicDenied, metadata(n.Topic, false)},
		{"OffsetForLeaderEpoch", TopicDenied, func() kmsg.Request {
			r := kmsg.NewPtrOffsetForLeaderEpochRequest()
			r.ReplicaID = -1
			tp := kmsg.NewOffsetForLeaderEpochRequestTopic()
			tp.Topic = n.Topic
			p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			p.CurrentLeaderEpoch = -1
			tp.Partitions = append(tp.Partitions, p)
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"FindCoordinator group", GroupDenied, func() kmsg.Request {
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.CoordinatorKey, r.CoordinatorKeys = n.Group, []string{n.Group}
			return r
		}},
		{"FindCoordinator transaction", TxnDenied, func() kmsg.Request {
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.CoordinatorType, r.CoordinatorKey, r.CoordinatorKeys = 1, n.TxnID, []string{n.TxnID}
			return r
		}},
		{"JoinGroup", GroupDenied, func() kmsg.Request {
			r := kmsg.NewPtrJoinGroupRequest()
			r.Group, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis, r.ProtocolType = n.Group, 10000, 10000, "consumer"
			p := kmsg.NewJoinGroupRequestProtocol()
			p.Name = "range"
			r.Protocols = append(r.Protocols, p)
			return r
		}},
		{"SyncGroup", GroupDenied, func() kmsg.Request {
			r := kmsg.NewPtrSyncGroupRequest()
			r.Group, r.MemberID = n.Group, "m"
			return r
		}},
		{"Heartbeat", GroupDenied, func() kmsg.Request {
			r := kmsg.NewPtrHeartbeatRequest()
			r.Group, r.MemberID = n.Group, "m"
			return r
		}},
		{"LeaveGroup", GroupDenied, func() kmsg.Request {
			r := kmsg.NewPtrLeaveGroupRequest()
			r.Group, r.MemberID = n.Group, "m"
			m := kmsg.NewLeaveGroupRequestMember()
			m.MemberID = "m"
			r.Members = append(r.Members, m)
			return r
		}},
		{"OffsetCommit", GroupDenied, func() kmsg.Request {
			r := kmsg.NewPtrOffsetCommitRequest()
			r.Group, r.Generation = n.Group, -1
			tp := kmsg.NewOffsetCommitRequestTopic()
			tp.Topic = n.Topic
			p := kmsg.NewOffsetCommitRequestTopicPartition()
			p.Offset = 999999
			tp.Partitions = append(tp.Partitions, p)
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"OffsetFetch", GroupDenied, func() kmsg.Request {
			r := kmsg.NewPtrOffsetFetchRequest()
			r.Group = n.Group
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = n.Group
			r.Groups = append(r.Groups, rg)
			return r
		}},
		{"OffsetFetch naming no topic", GroupDenied, func() kmsg.Request {
			r := kmsg.NewPtrOffsetFetchRequest()
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group, rg.Topics = n.Group, []kmsg.OffsetFetchRequestGroupTopic{} // empty, not null (all)
			r.Groups = append(r.Groups, rg)
			return r
		}},
		{"DescribeGroups", GroupDenied, func() kmsg.Request {
			r := kmsg.NewPtrDescribeGroupsRequest()
			r.Groups = []string{n.Group}
			return r
		}},
		{"DeleteGroups", GroupDenied, func() kmsg.Request {
			r := kmsg.NewPtrDeleteGroupsRequest()
			r.Groups = []string{n.Group}
			return r
		}},
		{"ConsumerGroupHeartbeat", GroupDenied, func() kmsg.Request {
			r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			r.Group, r.MemberID, r.RebalanceTimeoutMillis = n.Group, "kafkareq-member", 30000
			r.SubscribedTopicNames, r.Topics = []string{n.Topic}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			return r
		}},
		{"ConsumerGroupDescribe", GroupDenied, func() kmsg.Request {
			r := kmsg.NewPtrConsumerGroupDescribeRequest()
			r.Groups = []string{n.Group}
			return r
		}},
		{"OffsetDelete", GroupDenied, func() kmsg.Request {
			r := kmsg.NewPtrOffsetDeleteRequest()
			r.Group = n.Group
			tp := kmsg.NewOffsetDeleteRequestTopic()
			tp.Topic = n.Topic
			tp.Partitions = append(tp.Partitions, kmsg.NewOffsetDeleteRequestTopicPartition())
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"InitProducerId transactional", TxnDenied, func() kmsg.Request {
			r := kmsg.NewPtrInitProducerIDRequest()
			r.TransactionalID, r.TransactionTimeoutMillis = str(n.TxnID), 60000
			return r
		}},
		{"InitProducerId idempotent", ClusterDenied, func() kmsg.Request {
			return kmsg.NewPtrInitProducerIDRequest()
		}},
		{"AddPartitionsToTxn", TxnDenied, func() kmsg.Request {
			r := kmsg.NewPtrAddPartitionsToTxnRequest()
			r.TransactionalID, r.ProducerID, r.ProducerEpoch = n.TxnID, n.ProducerID, n.ProducerEpoch
			tp := kmsg.NewAddPartitionsToTxnRequestTopic()
			tp.Topic, tp.Partitions = n.Topic, []int32{0}
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"AddOffsetsToTxn", TxnDenied, func() kmsg.Request {
			r := kmsg.NewPtrAddOffsetsToTxnRequest()
			r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group = n.TxnID, n.ProducerID, n.ProducerEpoch, n.Group
			return r
		}},
		{"EndTxn", TxnDenied, func() kmsg.Request {
			r := kmsg.NewPtrEndTxnRequest()
			r.TransactionalID, r.ProducerID, r.ProducerEpoch = n.TxnID, n.ProducerID, n.ProducerEpoch
			return r
		}},
		{"TxnOffsetCommit", TxnDenied, func() kmsg.Request {
			r := kmsg.NewPtrTxnOffsetCommitRequest()
			r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch, r.Generation = n.TxnID, n.Group, n.ProducerID, n.ProducerEpoch, -1
			tp := kmsg.NewTxnOffsetCommitRequestTopic()
			tp.Topic = n.Topic
			p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			p.Offset = 999999
			tp.Partitions = append(tp.Partitions, p)
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"DescribeTransactions", TxnDenied, func() kmsg.Request {
			r := kmsg.NewPtrDescribeTransactionsRequest()
			r.TransactionalIDs = []string{n.TxnID}
			return r
		}},
		{"DescribeProducers", TopicDenied, func() kmsg.Request {
			r := kmsg.NewPtrDescribeProducersRequest()
			tp := kmsg.NewDescribeProducersRequestTopic()
			tp.Topic, tp.Partitions = n.Topic, []int32{0}
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"Metadata of a new topic, auto-create asked", TopicDenied, metadata(n.NewTopic, true)},
		{"Produce to a new topic", TopicDenied, produce(n.NewTopic, [16]byte{})},
		{"CreateTopics", TopicDenied, func() kmsg.Request {
			r := kmsg.NewPtrCreateTopicsRequest()
			r.TimeoutMillis = 5000
			tp := kmsg.NewCreateTopicsRequestTopic()
			tp.Topic, tp.NumPartitions, tp.ReplicationFactor = n.NewTopic, 1, 1
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"DeleteTopics", TopicDenied, func() kmsg.Request {
			r := kmsg.NewPtrDeleteTopicsRequest()
			r.TimeoutMillis, r.TopicNames = 5000, []string{n.Topic}
			tp := kmsg.NewDeleteTopicsRequestTopic()
			tp.Topic = str(n.Topic)
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"CreatePartitions", TopicDenied, func() kmsg.Request {
			r := kmsg.NewPtrCreatePartitionsRequest()
			r.TimeoutMillis = 5000
			tp := kmsg.NewCreatePartitionsRequestTopic()
			tp.Topic, tp.Count = n.Topic, 2
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"DescribeConfigs", TopicDenied, func() kmsg.Request {
			r := kmsg.NewPtrDescribeConfigsRequest()
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, n.Topic
			r.Resources = append(r.Resources, rr)
			return r
		}},
		{"AlterConfigs", TopicDenied, func() kmsg.Request {
			r := kmsg.NewPtrAlterConfigsRequest()
			rr := kmsg.NewAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, n.Topic
			c := kmsg.NewAlterConfigsRequestResourceConfig()
			c.Name, c.Value = "retention.ms", str("1")
			rr.Configs = append(rr.Configs, c)
			r.Resources = append(r.Resources, rr)
			return r
		}},
		{"IncrementalAlterConfigs", TopicDenied, func() kmsg.Request {
			r := kmsg.NewPtrIncrementalAlterConfigsRequest()
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, n.Topic
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Value = "retention.ms", str("1")
			rr.Configs = append(rr.Configs, c)
			r.Resources = append(r.Resources, rr)
			return r
		}},
		{"DeleteRecords", TopicDenied, func() kmsg.Request {
			r := kmsg.NewPtrDeleteRecordsRequest()
			r.TimeoutMillis = 5000
			tp := kmsg.NewDeleteRecordsRequestTopic()
			tp.Topic = n.Topic
			p := kmsg.NewDeleteRecordsRequestTopicPartition()
			p.Offset = -1
			tp.Partitions = append(tp.Partitions, p)
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"DescribeConfigs broker", ClusterDenied, func() kmsg.Request {
			r := kmsg.NewPtrDescribeConfigsRequest()
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
			r.Resources = append(r.Resources, rr)
			return r
		}},
		{"IncrementalAlterConfigs brokers", ClusterDenied, func() kmsg.Request {
			r := kmsg.NewPtrIncrementalAlterConfigsRequest()
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, ""
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Value = "log.retention.ms", str("1")
			rr.Configs = append(rr.Configs, c)
			r.Resources = append(r.Resources, rr)
			return r
		}},
		{"CreateAcls", ClusterDenied, func() kmsg.Request {
			r := kmsg.NewPtrCreateACLsRequest()
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLResourcePatternTypeLiteral
			c.Principal, c.Host, c.Operation, c.PermissionType = n.Principal, "*", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow
			r.Creations = append(r.Creations, c)
			return r
		}},
		{"DescribeAcls", ClusterDenied, func() kmsg.Request {
			r := kmsg.NewPtrDescribeACLsRequest()
			r.ResourceType, r.ResourcePatternType, r.Operation, r.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			return r
		}},
		{"DeleteAcls", ClusterDenied, func() kmsg.Request {
			r := kmsg.NewPtrDeleteACLsRequest()
			f := kmsg.NewDeleteACLsRequestFilter()
			f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			r.Filters = append(r.Filters, f)
			return r
		}},
		{"DescribeUserScramCredentials", ClusterDenied, func() kmsg.Request {
			return kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		}},
		{"AlterUserScramCredentials", ClusterDenied, func() kmsg.Request {
			r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
			d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
			d.Name, d.Mechanism = n.ScramUser, 1
			u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
			u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = n.NewScramUser, 1, 4096, []byte("salt"), make([]byte, 32)
			r.Deletions, r.Upsertions = append(r.Deletions, d), append(r.Upsertions, u)
			return r
		}},
		{"DescribeClientQuotas", ClusterDenied, func() kmsg.Request {
			r := kmsg.NewPtrDescribeClientQuotasRequest()
			c := kmsg.NewDescribeClientQuotasRequestComponent()
			c.EntityType, c.MatchType = "user", 2
			r.Components = append(r.Components, c)
			return r
		}},
		{"AlterClientQuotas", ClusterDenied, func() kmsg.Request {
			r := kmsg.NewPtrAlterClientQuotasRequest()
			e := kmsg.NewAlterClientQuotasRequestEntry()
			u := kmsg.NewAlterClientQuotasRequestEntryEntity()
			u.Type, u.Name = "user", str(cmp.Or(n.QuotaUser, "victim"))
			op := kmsg.NewAlterClientQuotasRequestEntryOp()
			op.Key, op.Value = "producer_byte_rate", 1
			e.Entity, e.Ops = append(e.Entity, u), append(e.Ops, op)
			c := kmsg.NewAlterClientQuotasRequestEntry()
			cl := kmsg.NewAlterClientQuotasRequestEntryEntity()
			cl.Type = "client-id" // the default client id
			c.Entity, c.Ops = append(c.Entity, cl), append(c.Ops, op)
			r.Entries = append(r.Entries, e, c)
			return r
		}},
		{"ElectLeaders", ClusterDenied, func() kmsg.Request {
			r := kmsg.NewPtrElectLeadersRequest()
			r.TimeoutMillis = 5000
			tp := kmsg.NewElectLeadersRequestTopic()
			tp.Topic, tp.Partitions = n.Topic, []int32{0}
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"AlterPartitionReassignments", ClusterDenied, func() kmsg.Request {
			r := kmsg.NewPtrAlterPartitionAssignmentsRequest()
			r.TimeoutMillis = 5000
			tp := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			tp.Topic = n.Topic
			p := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
			p.Replicas = []int32{n.Replica}
			tp.Partitions = append(tp.Partitions, p)
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"ListPartitionReassignments", ClusterDenied, func() kmsg.Request {
			return kmsg.NewPtrListPartitionReassignmentsRequest()
		}},
		{"DescribeQuorum", ClusterDenied, func() kmsg.Request {
			r := kmsg.NewPtrDescribeQuorumRequest()
			tp := kmsg.NewDescribeQuorumRequestTopic()
			tp.Topic = "__cluster_metadata"
			tp.Partitions = append(tp.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"AddRaftVoter", ClusterDenied, func() kmsg.Request {
			r := kmsg.NewPtrAddRaftVoterRequest()
			r.VoterID = 99
			l := kmsg.NewAddRaftVoterRequestListener()
			l.Name, l.Host, l.Port = "CONTROLLER", "127.0.0.1", 1
			r.Listeners = append(r.Listeners, l)
			return r
		}},
		{"RemoveRaftVoter", ClusterDenied, func() kmsg.Request {
			r := kmsg.NewPtrRemoveRaftVoterRequest()
			r.VoterID = 99
			return r
		}},
		{"UnregisterBroker", ClusterDenied, func() kmsg.Request {
			r := kmsg.NewPtrUnregisterBrokerRequest()
			r.BrokerID = 99
			return r
		}},
		{"DescribeLogDirs", ClusterDenied, func() kmsg.Request {
			return kmsg.NewPtrDescribeLogDirsRequest() // null topics: every partition
		}},
		{"UpdateFeatures", ClusterDenied, func() kmsg.Request {
			r := kmsg.NewPtrUpdateFeaturesRequest()
			u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
			u.Feature, u.MaxVersionLevel, u.UpgradeType = "transaction.version", 2, 1
			r.FeatureUpdates = append(r.FeatureUpdates, u)
			r.ValidateOnly = true
			return r
		}},
	}...)
}

// Only is the cases of cs named in names, in cs's order; it panics when
// a name matches none (a renamed case must not drop out silently).
func Only(cs []Case, names ...string) []Case {
	var out []Case
	for _, name := range names {
		if !slices.ContainsFunc(cs, func(c Case) bool { return c.Name == name }) {
			panic("kafkareq: no case " + name)
		}
	}
	for _, c := range cs {
		if slices.Contains(names, c.Name) {
			out = append(out, c)
		}
	}
	return out
}

// Collect walks resp (pointers, interfaces, slices, exported struct
// fields, at any depth) and returns what code finds in the fields named
// ErrorCode.
func Collect[T any](resp any, code func(reflect.Value) (T, bool)) []T {
	var out []T
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				f := v.Type().Field(i)
				if !f.IsExported() {
					continue
				}
				if f.Name == "ErrorCode" {
					if c, ok := code(v.Field(i)); ok {
						out = append(out, c)
						continue
					}
				}
				walk(v.Field(i))
			}
		}
	}
	walk(reflect.ValueOf(resp))
	return out
}

// Codes is every ErrorCode of a Kafka answer, at any depth.
func Codes(resp any) []int16 {
	return Collect(resp, func(v reflect.Value) (int16, bool) {
		if v.Kind() != reflect.Int16 {
			return 0, false
		}
		return int16(v.Int()), true
	})
}

// Check sends cases through br and returns what was not refused as it
// should be, one line each.
func Check(ctx context.Context, br *kgo.Broker, cases []Case) []string {
	var bad []string
	for _, c := range cases {
		resp, err := br.Request(ctx, c.Build())
		if err != nil {
			bad = append(bad, fmt.Sprintf("Kafka %s: %v, want code %d in the answer", c.Name, err, c.Want))
			continue
		}
		if got := Codes(resp); !slices.Contains(got, c.Want) {
			bad = append(bad, fmt.Sprintf("Kafka %s: codes %v, want %d", c.Name, got, c.Want))
		}
	}
	return bad
}
