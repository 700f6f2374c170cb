package hostile

// Real cluster on real time: real TLS (and SASL) handshakes over TCP; MemNet's
// listeners serve no TLS.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/certs"
	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/internal/tlsconf"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/kafkareq"
	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/wait"
)

// Every security setting on at once: a 3-node cluster with TLS on every
// listener and client certificates required, the Kafka listener
// SASL_SSL with SCRAM, the standard authorizer with
// allow.everyone.if.no.acl.found=false, a super user (certificate
// CN=admin) and an application principal (certificate CN=app) holding
// exactly the ACLs a transactional exactly-once producer needs. While the
// application commits transactions, hostile clients try every door:
// without proof of identity, with a wrong one, authenticated but
// unauthorised (through gRPC and through the Kafka protocol), posing as a
// broker. Each is refused with Kafka's code for it, and at the end the
// application's topic holds exactly what it committed.

const (
	secTopic   = "app-topic"
	secGuarded = "guarded" // a topic nobody but the super user may touch
	secGroup   = "app-group"
	secTxnID   = "app-tx"
	secApp     = "User:CN=app"
	evilValue  = "evil"
	evilTopic  = "evil-new"
	evilUser   = "eve"
	malloryPw  = "mallory-secret"
)

// appACLs are the application's grants: what a transactional producer
// that commits its group's offsets in the transaction needs (Write
// implies Describe on the transactional id, as in Kafka).
func appACLs() []client.ACLBinding {
	b := func(rt client.ACLResourceType, name string, op client.ACLOperation) client.ACLBinding {
		return client.ACLBinding{ResourceType: rt, ResourceName: name, PatternType: client.ACLPatternLiteral, Principal: secApp, Host: "*",
			Operation: op, Permission: client.ACLPermissionAllow}
	}
	return []client.ACLBinding{
		b(client.ACLResourceTopic, secTopic, client.ACLOpWrite),
		b(client.ACLResourceTopic, secTopic, client.ACLOpDescribe),
		// TxnOffsetCommit asks Read on the topic whose offsets it commits
		// (as Kafka: the consuming half of consume-transform-produce).
		b(client.ACLResourceTopic, secTopic, client.ACLOpRead),
		b(client.ACLResourceTransactionalID, secTxnID, client.ACLOpWrite),
		b(client.ACLResourceGroup, secGroup, client.ACLOpRead),
	}
}

// grpcCodes collects every ErrorCode of a gRPC answer.
func grpcCodes(resp any) []pb.ErrorCode {
	return kafkareq.Collect(resp, func(v reflect.Value) (pb.ErrorCode, bool) {
		c, ok := v.Interface().(pb.ErrorCode)
		return c, ok
	})
}

// evilBatch is one record a hostile client tries to write.
func evilBatch(t testing.TB) []byte {
	t.Helper()
	b, err := record.Build(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []record.Record{{Value: []byte(evilValue), Timestamp: time.Now().UnixMilli()}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type grpcCase struct {
	name string
	want pb.ErrorCode
	call func(ctx context.Context) (any, error)
}

// grpcRefusals are the requests an authenticated principal without ACLs
// sends through the gRPC client listener, naming the application's
// resources (and topic for the data requests).
func grpcRefusals(t testing.TB, cc grpc.ClientConnInterface, topic string) []grpcCase {
	md, cs, ad := pb.NewMetadataClient(cc), pb.NewConsumerClient(cc), pb.NewAdminClient(cc)
	gr, tx := pb.NewGroupsClient(cc), pb.NewTransactionsClient(cc)
	const (
		topicDenied   = pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED
		groupDenied   = pb.ErrorCode_GROUP_AUTHORIZATION_FAILED
		clusterDenied = pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED
		txnDenied     = pb.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED
	)
	batch := evilBatch(t)
	return []grpcCase{
		{"Produce", topicDenied, func(ctx context.Context) (any, error) {
			s, err := pb.NewProducerClient(cc).Produce(ctx)
			if err != nil {
				return nil, err
			}
			defer s.CloseSend()
			if err := s.Send(&pb.ProduceRequest{Acks: -1, TimeoutMs: 5000, Partitions: []*pb.PartitionRecords{{Topic: topic, Records: batch}}}); err != nil {
				return nil, err
			}
			return s.Recv()
		}},
		{"Fetch", topicDenied, func(ctx context.Context) (any, error) {
			return cs.Fetch(ctx, &pb.FetchRequest{ReplicaId: -1, MaxBytes: 1 << 20, Partitions: []*pb.FetchPartition{{Topic: topic, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1}}})
		}},
		{"ListOffsets", topicDenied, func(ctx context.Context) (any, error) {
			return cs.ListOffsets(ctx, &pb.ListOffsetsRequest{Partitions: []*pb.ListOffsetsPartition{{Topic: topic, Timestamp: -1, CurrentLeaderEpoch: -1}}})
		}},
		{"Metadata", topicDenied, func(ctx context.Context) (any, error) {
			return md.Metadata(ctx, &pb.MetadataRequest{Topics: []string{topic}})
		}},
		{"FindCoordinator group", groupDenied, func(ctx context.Context) (any, error) {
			return md.FindCoordinator(ctx, &pb.FindCoordinatorRequest{Keys: []string{secGroup}})
		}},
		{"FindCoordinator transaction", txnDenied, func(ctx context.Context) (any, error) {
			return md.FindCoordinator(ctx, &pb.FindCoordinatorRequest{KeyType: pb.CoordinatorType_TRANSACTION, Keys: []string{secTxnID}})
		}},
		{"JoinGroup", groupDenied, func(ctx context.Context) (any, error) {
			return gr.JoinGroup(ctx, &pb.JoinGroupRequest{GroupId: secGroup, SessionTimeoutMs: 10000, RebalanceTimeoutMs: 10000, ProtocolType: "consumer", Protocols: []*pb.GroupProtocol{{Name: "range"}}})
		}},
		{"SyncGroup", groupDenied, func(ctx context.Context) (any, error) {
			return gr.SyncGroup(ctx, &pb.SyncGroupRequest{GroupId: secGroup, MemberId: "m"})
		}},
		{"Heartbeat", groupDenied, func(ctx context.Context) (any, error) {
			return gr.Heartbeat(ctx, &pb.HeartbeatRequest{GroupId: secGroup, MemberId: "m"})
		}},
		{"OffsetCommit", groupDenied, func(ctx context.Context) (any, error) {
			return gr.OffsetCommit(ctx, &pb.OffsetCommitRequest{GroupId: secGroup, GenerationId: -1, Offsets: []*pb.PartitionOffset{{Topic: topic, Offset: 999999}}})
		}},
		{"OffsetFetch", groupDenied, func(ctx context.Context) (any, error) {
			return gr.OffsetFetch(ctx, &pb.OffsetFetchRequest{GroupId: secGroup})
		}},
		{"TxnOffsetCommit", txnDenied, func(ctx context.Context) (any, error) {
			return gr.TxnOffsetCommit(ctx, &pb.TxnOffsetCommitRequest{TransactionalId: secTxnID, GroupId: secGroup, ProducerId: 1, ProducerEpoch: 0,
				GenerationId: -1, Offsets: []*pb.PartitionOffset{{Topic: topic, Offset: 999999}}})
		}},
		{"InitProducerId transactional", txnDenied, func(ctx context.Context) (any, error) {
			return tx.InitProducerId(ctx, &pb.InitProducerIdRequest{TransactionalId: secTxnID, TransactionTimeoutMs: 60000, ProducerId: -1, ProducerEpoch: -1})
		}},
		{"InitProducerId idempotent", clusterDenied, func(ctx context.Context) (any, error) {
			return tx.InitProducerId(ctx, &pb.InitProducerIdRequest{ProducerId: -1, ProducerEpoch: -1})
		}},
		{"EndTxn", txnDenied, func(ctx context.Context) (any, error) {
			return tx.EndTxn(ctx, &pb.EndTxnRequest{TransactionalId: secTxnID, ProducerId: 1, ProducerEpoch: 0})
		}},
		{"LeaveGroup", groupDenied, func(ctx context.Context) (any, error) {
			return gr.LeaveGroup(ctx, &pb.LeaveGroupRequest{GroupId: secGroup, MemberId: "m"})
		}},
		{"DescribeGroups", groupDenied, func(ctx context.Context) (any, error) {
			return gr.DescribeGroups(ctx, &pb.DescribeGroupsRequest{GroupIds: []string{secGroup}})
		}},
		{"OffsetDelete", groupDenied, func(ctx context.Context) (any, error) {
			return gr.OffsetDelete(ctx, &pb.OffsetDeleteRequest{GroupId: secGroup, Partitions: []*pb.TopicPartition{{Topic: topic}}})
		}},
		{"DeleteGroups", groupDenied, func(ctx context.Context) (any, error) {
			return gr.DeleteGroups(ctx, &pb.DeleteGroupsRequest{GroupIds: []string{secGroup}})
		}},
		{"OffsetForLeaderEpoch", topicDenied, func(ctx context.Context) (any, error) {
			return cs.OffsetForLeaderEpoch(ctx, &pb.OffsetForLeaderEpochRequest{ReplicaId: -1, Partitions: []*pb.OffsetForLeaderEpochPartition{{Topic: topic, CurrentLeaderEpoch: -1}}})
		}},
		{"DescribeTransactions", txnDenied, func(ctx context.Context) (any, error) {
			return tx.DescribeTransactions(ctx, &pb.DescribeTransactionsRequest{TransactionalIds: []string{secTxnID}})
		}},
		{"DescribeProducers", topicDenied, func(ctx context.Context) (any, error) {
			return tx.DescribeProducers(ctx, &pb.DescribeProducersRequest{Partitions: []*pb.TopicPartition{{Topic: topic}}})
		}},
		{"Produce to a new topic", topicDenied, func(ctx context.Context) (any, error) {
			s, err := pb.NewProducerClient(cc).Produce(ctx)
			if err != nil {
				return nil, err
			}
			defer s.CloseSend()
			if err := s.Send(&pb.ProduceRequest{Acks: -1, TimeoutMs: 5000, Partitions: []*pb.PartitionRecords{{Topic: evilTopic, Records: batch}}}); err != nil {
				return nil, err
			}
			return s.Recv()
		}},
		{"Metadata of a new topic", topicDenied, func(ctx context.Context) (any, error) {
			return md.Metadata(ctx, &pb.MetadataRequest{Topics: []string{evilTopic}})
		}},
		{"CreateTopics", topicDenied, func(ctx context.Context) (any, error) {
			return ad.CreateTopics(ctx, &pb.CreateTopicsRequest{TimeoutMs: 5000, Topics: []*pb.CreatableTopic{{Name: evilTopic, NumPartitions: 1, ReplicationFactor: 1}}})
		}},
		{"DeleteTopics", topicDenied, func(ctx context.Context) (any, error) {
			return ad.DeleteTopics(ctx, &pb.DeleteTopicsRequest{Names: []string{topic}})
		}},
		{"CreatePartitions", topicDenied, func(ctx context.Context) (any, error) {
			return ad.CreatePartitions(ctx, &pb.CreatePartitionsRequest{TimeoutMs: 5000, Topics: []*pb.CreatePartitionsTopic{{Name: topic, Count: 2}}})
		}},
		{"DescribeConfigs", topicDenied, func(ctx context.Context) (any, error) {
			return ad.DescribeConfigs(ctx, &pb.DescribeConfigsRequest{Resources: []*pb.ConfigResource{{Type: "topic", Name: topic}}})
		}},
		{"IncrementalAlterConfigs", topicDenied, func(ctx context.Context) (any, error) {
			return ad.IncrementalAlterConfigs(ctx, &pb.IncrementalAlterConfigsRequest{Resource: &pb.ConfigResource{Type: "topic", Name: topic}, Set: map[string]string{"retention.ms": "1"}})
		}},
		{"DeleteRecords", topicDenied, func(ctx context.Context) (any, error) {
			return ad.DeleteRecords(ctx, &pb.DeleteRecordsRequest{TimeoutMs: 5000, Partitions: []*pb.DeleteRecordsPartition{{Topic: topic, Offset: -1}}})
		}},
		{"DescribeConfigs broker", clusterDenied, func(ctx context.Context) (any, error) {
			return ad.DescribeConfigs(ctx, &pb.DescribeConfigsRequest{Resources: []*pb.ConfigResource{{Type: "broker", Name: "1"}}})
		}},
		{"IncrementalAlterConfigs brokers", clusterDenied, func(ctx context.Context) (any, error) {
			return ad.IncrementalAlterConfigs(ctx, &pb.IncrementalAlterConfigsRequest{Resource: &pb.ConfigResource{Type: "broker"}, Set: map[string]string{"log.retention.ms": "1"}})
		}},
		{"CreateAcls", clusterDenied, func(ctx context.Context) (any, error) {
			return ad.CreateAcls(ctx, &pb.CreateAclsRequest{Creations: []*pb.AclBinding{{ResourceType: int32(client.ACLResourceCluster), ResourceName: "kafka-cluster",
				PatternType: int32(client.ACLPatternLiteral), Principal: "User:CN=mallory", Host: "*", Operation: int32(client.ACLOpAll), Permission: int32(client.ACLPermissionAllow)}}})
		}},
		{"DescribeAcls", clusterDenied, func(ctx context.Context) (any, error) {
			return ad.DescribeAcls(ctx, &pb.DescribeAclsRequest{Filter: &pb.AclBindingFilter{ResourceType: int32(client.ACLResourceAny), PatternType: int32(client.ACLPatternAny),
				Operation: int32(client.ACLOpAny), Permission: int32(client.ACLPermissionAny)}})
		}},
		{"DeleteAcls", clusterDenied, func(ctx context.Context) (any, error) {
			return ad.DeleteAcls(ctx, &pb.DeleteAclsRequest{Filters: []*pb.AclBindingFilter{{ResourceType: int32(client.ACLResourceAny), PatternType: int32(client.ACLPatternAny),
				Operation: int32(client.ACLOpAny), Permission: int32(client.ACLPermissionAny)}}})
		}},
		{"DescribeUserScramCredentials", clusterDenied, func(ctx context.Context) (any, error) {
			return ad.DescribeUserScramCredentials(ctx, &pb.DescribeUserScramCredentialsRequest{})
		}},
		{"AlterUserScramCredentials", clusterDenied, func(ctx context.Context) (any, error) {
			return ad.AlterUserScramCredentials(ctx, &pb.AlterUserScramCredentialsRequest{
				Deletions:  []*pb.ScramCredentialDeletion{{Name: "mallory", Mechanism: 1}},
				Upsertions: []*pb.ScramCredentialUpsertion{{Name: evilUser, Mechanism: 1, Iterations: 4096, Salt: []byte("salt"), SaltedPassword: make([]byte, 32)}}})
		}},
		{"DescribeClientQuotas", clusterDenied, func(ctx context.Context) (any, error) {
			return ad.DescribeClientQuotas(ctx, &pb.DescribeClientQuotasRequest{})
		}},
		{"AlterClientQuotas", clusterDenied, func(ctx context.Context) (any, error) {
			// The application's produce rate to 1 B/s.
			return ad.AlterClientQuotas(ctx, &pb.AlterClientQuotasRequest{Entries: []*pb.AlterClientQuotasEntry{{
				Entity: &pb.QuotaEntity{Parts: []*pb.QuotaEntityPart{{EntityType: "user", Name: "CN=app"}}},
				Ops:    []*pb.QuotaOp{{Key: "producer_byte_rate", Value: 1}}}}})
		}},
		{"ElectLeaders", clusterDenied, func(ctx context.Context) (any, error) {
			return ad.ElectLeaders(ctx, &pb.ElectLeadersRequest{TimeoutMs: 5000, Topics: []*pb.ElectLeadersTopic{{Topic: topic, Partitions: []int32{0}}}})
		}},
		{"AlterPartitionReassignments", clusterDenied, func(ctx context.Context) (any, error) {
			return ad.AlterPartitionReassignments(ctx, &pb.AlterPartitionReassignmentsRequest{TimeoutMs: 5000})
		}},
		{"DescribeLogDirs", clusterDenied, func(ctx context.Context) (any, error) {
			return ad.DescribeLogDirs(ctx, &pb.DescribeLogDirsRequest{All: true})
		}},
		{"UpdateFeatures", clusterDenied, func(ctx context.Context) (any, error) {
			return ad.UpdateFeatures(ctx, &pb.UpdateFeaturesRequest{ValidateOnly: true,
				Updates: []*pb.FeatureUpdate{{Feature: "transaction.version", MaxVersionLevel: 2, UpgradeType: 1}}})
		}},
	}
}

// checkGRPC runs cases and returns what was not refused as it should be.
func checkGRPC(ctx context.Context, cases []grpcCase) []string {
	var bad []string
	for _, c := range cases {
		resp, err := c.call(ctx)
		if err != nil {
			bad = append(bad, fmt.Sprintf("gRPC %s: a gRPC error %v, want %v in the answer", c.name, err, c.want))
			continue
		}
		if got := grpcCodes(resp); !slices.Contains(got, c.want) {
			bad = append(bad, fmt.Sprintf("gRPC %s: codes %v, want %v", c.name, got, c.want))
		}
	}
	return bad
}

// kafkaRefusals are the Kafka requests an authenticated principal without
// ACLs sends, naming the application's resources (and topic for data).
func kafkaRefusals(t testing.TB, topic string) []kafkareq.Case {
	return kafkareq.Refusals(kafkareq.Names{
		Topic: topic, NewTopic: evilTopic, Group: secGroup, TxnID: secTxnID,
		ProducerID: 1, ProducerEpoch: 0, Records: evilBatch(t), Replica: 1,
		Principal: "User:mallory", ScramUser: "mallory", NewScramUser: evilUser, QuotaUser: "CN=app",
	})
}

// kafkaFrame is req framed for the wire, with correlation id corr.
func kafkaFrame(req kmsg.Request, corr int32) []byte {
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("hostile")).AppendRequest(nil, req, corr)
}

// kafkaAsk writes f on conn and reads one answer's body (after the
// correlation id); an error when the connection closes first.
func kafkaAsk(conn net.Conn, f []byte) ([]byte, error) {
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write(f); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return nil, err
	}
	n := int(size[0])<<24 | int(size[1])<<16 | int(size[2])<<8 | int(size[3])
	if n < 4 || n > 1<<20 {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(conn, body); err != nil {
		return nil, err
	}
	return body[4:], nil
}

func metadataV9() kmsg.Request {
	m := kmsg.NewPtrMetadataRequest()
	m.SetVersion(9)
	return m
}

// closedNotTimedOut: err says the peer closed the connection (not that
// it kept silent).
func closedNotTimedOut(err error) bool {
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// tlsRefusal asks for metadata over cfg on the gRPC client listener and
// returns the refusal: the gRPC code, and the TLS alert the server sends
// a connection made with cfg (read after the handshake: with TLS 1.3 the
// server judges the client's certificate after the client has finished).
func tlsRefusal(t *testing.T, addr string, cfg *tls.Config) (codes.Code, string) {
	t.Helper()
	code := status.Code(metadataErr(t, addr, cfg))
	c := cfg.Clone()
	c.ServerName, c.NextProtos = "127.0.0.1", []string{"h2"}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", addr, c)
	if err != nil {
		return code, err.Error()
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	for err == nil { // the server's settings frame; then the alert
		_, err = conn.Read(make([]byte, 1024))
	}
	return code, err.Error()
}

func TestSecurityEverythingOn(t *testing.T) {
	start := time.Now()
	c := testcluster.New(t, testcluster.Options{Nodes: 3,
		TLS: &testcluster.TLSOptions{ClientCN: "admin", Protocols: map[string]tlsconf.Protocol{auth.ListenerKafka: tlsconf.SASLSSL}},
		Mutate: func(_ int32, cfg *node.Config) {
			cfg.Authorizer = node.AuthorizerConfig{ClassName: authz.StandardClassName, SuperUsers: []auth.Principal{auth.User("CN=admin")}, AllowEveryoneIfNoACLFound: false}
		}})
	ct := c.TLS
	tg := &target{t: t, cluster: c}
	addr := c.Member(1).Cfg.Listen
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// The super user sets the cluster up: topics, the application's
	// ACLs, mallory's SCRAM credential.
	adm := tg.admin()
	tg.createTopic(secTopic, 1, 3)
	tg.createTopic(secGuarded, 1, 3)
	if res, err := adm.AlterUserScramCredentials(ctx, []client.ScramUpsertion{{User: "mallory", Mechanism: "SCRAM-SHA-256", Password: malloryPw}}, nil); err != nil || res["mallory"] != nil {
		t.Fatalf("AlterUserScramCredentials: %v %v", res, err)
	}
	appPair, malloryPair := ct.Client(t, "app"), ct.Client(t, "mallory")
	appOpts := func(extra ...client.Opt) []client.Opt {
		return c.ClientOpts(append([]client.Opt{client.DialOptions(grpc.WithTransportCredentials(credentials.NewTLS(ct.ClientConfig(t, appPair))))}, extra...)...)
	}
	newApp := func() *client.Producer {
		p, err := client.NewProducer(appOpts(client.TransactionalID(secTxnID), client.RequiredAcks(client.AllISRAcks),
			client.WithPartitioner(client.ManualPartitioner{}))...)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	t.Run("the application's ACLs matter", func(t *testing.T) {
		p := newApp()
		defer p.Close(context.Background())
		err := p.InitTransactions(ctx)
		if errs.CodeOf(err) != pb.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED {
			t.Fatalf("InitTransactions before the grants: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
		}
	})
	created, err := adm.CreateACLs(ctx, appACLs())
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range created {
		if e != nil {
			t.Fatalf("CreateACLs %d: %v", i, e)
		}
	}

	// The application: transactions of three records and its group's
	// offset, acks=all, committed one after another until told to stop.
	var (
		appMu     sync.Mutex
		committed []string
		appErr    error
		lastOff   int64
	)
	appStop := make(chan struct{})
	appDone := make(chan struct{})
	// Every broker takes the new ACLs in its own time: a fresh producer
	// per attempt, until one is let in.
	var p *client.Producer
	wait.Eventually(t, 30*time.Second, "the application's InitTransactions", func() bool {
		p = newApp()
		if err := p.InitTransactions(ctx); err != nil {
			p.Close(context.Background())
			return false
		}
		return true
	})
	defer p.Close(context.Background())
	go func() {
		defer close(appDone)
		fail := func(what string, err error) {
			appMu.Lock()
			appErr = fmt.Errorf("%s: %w", what, err)
			appMu.Unlock()
		}
		for i := 0; ; i++ {
			select {
			case <-appStop:
				return
			default:
			}
			if err := p.BeginTransaction(); err != nil {
				fail("begin", err)
				return
			}
			var recs []*client.Record
			var vals []string
			for j := range 3 {
				v := fmt.Sprintf("app-%d-%d", i, j)
				vals = append(vals, v)
				recs = append(recs, &client.Record{Topic: secTopic, Partition: 0, Value: []byte(v)})
			}
			if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				fail("produce", err)
				return
			}
			off := int64(i + 1)
			if err := p.SendOffsetsToTransaction(ctx, map[client.TopicPartition]int64{{Topic: secTopic, Partition: 0}: off}, client.GroupMetadata{GroupID: secGroup, GenerationID: -1}); err != nil {
				fail("send offsets", err)
				return
			}
			if err := p.CommitTransaction(ctx); err != nil {
				fail("commit", err)
				return
			}
			appMu.Lock()
			committed = append(committed, vals...)
			lastOff = off
			appMu.Unlock()
		}
	}()
	appCommitted := func() int {
		appMu.Lock()
		defer appMu.Unlock()
		if appErr != nil {
			return 1 << 30 // stop waiting: reported below
		}
		return len(committed)
	}
	wait.Eventually(t, 20*time.Second, "the application's first commit", func() bool { return appCommitted() > 0 })

	t.Run("TLS: the gRPC client listener refuses what proves nothing", func(t *testing.T) {
		other, _ := certs.NewCA("other-ca", time.Time{}, time.Time{})
		foreign, _ := other.Issue(certs.Spec{CommonName: "admin", Client: true})
		now := time.Now()
		expired, _ := ct.CA.Issue(certs.Spec{CommonName: "admin", Client: true, NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-time.Hour)})
		revoked := ct.Client(t, "admin")
		if err := metadataErr(t, addr, ct.ClientConfig(t, revoked)); err != nil {
			t.Fatalf("CN=admin before revocation: %v", err)
		}
		if err := ct.Revoke(revoked.Cert); err != nil {
			t.Fatal(err)
		}
		wait.Eventually(t, 10*time.Second, "the CRL taken", func() bool { return metadataErr(t, addr, ct.ClientConfig(t, revoked)) != nil })
		for _, tc := range []struct {
			name  string
			cfg   *tls.Config
			alert string
		}{
			{"no certificate", ct.ClientConfig(t, nil), "certificate required"},
			{"another CA's certificate", anyCert(t, ct.ClientConfig(t, nil), foreign), "unknown certificate authority"},
			{"an expired certificate", anyCert(t, ct.ClientConfig(t, nil), expired), "expired certificate"},
			{"a revoked certificate", ct.ClientConfig(t, revoked), "bad certificate"},
		} {
			code, msg := tlsRefusal(t, addr, tc.cfg)
			if code != codes.Unavailable || !strings.Contains(msg, tc.alert) {
				t.Errorf("%s: %v %q, want Unavailable with the TLS alert %q", tc.name, code, msg, tc.alert)
			}
		}
		// The CRL check is what refuses the revoked certificate.
		restore := planted.Set(planted.TLSRevocationIgnored)
		err := metadataErr(t, addr, ct.ClientConfig(t, revoked))
		restore()
		if err != nil {
			t.Errorf("with tls-revocation-ignored the revoked certificate is still refused: %v", err)
		}
	})

	kafkaTLS := func(pair *certs.Pair) *tls.Config {
		cfg := ct.ClientConfig(t, pair)
		cfg.ServerName = "127.0.0.1"
		return cfg
	}
	kafkaAddr := c.KafkaAddrs()[0]

	t.Run("TLS: plaintext on the SASL_SSL Kafka listener", func(t *testing.T) {
		conn, err := net.DialTimeout("tcp", kafkaAddr, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write(kafkaFrame(kmsg.NewPtrApiVersionsRequest(), 1)); err != nil {
			return // refused before it was read
		}
		got, err := io.ReadAll(conn)
		if !closedNotTimedOut(err) && err != nil {
			t.Fatalf("a plaintext ApiVersions was neither answered nor closed: %v", err)
		}
		// Nothing but a TLS alert record (type 21) may come back.
		if len(got) > 0 && got[0] != 21 {
			t.Fatalf("a plaintext ApiVersions was answered: % x", got[:min(len(got), 16)])
		}
		t.Logf("a plaintext ApiVersions: %d bytes back (% x), then closed", len(got), got[:min(len(got), 8)])
	})

	t.Run("SASL: wrong password, unknown user, a request before authenticating", func(t *testing.T) {
		dial := func() net.Conn {
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", kafkaAddr, kafkaTLS(malloryPair))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			return conn
		}
		scramFails := func(user, pass string) {
			t.Helper()
			conn := dial()
			hs := kmsg.NewPtrSASLHandshakeRequest()
			hs.SetVersion(1)
			hs.Mechanism = "SCRAM-SHA-256"
			body, err := kafkaAsk(conn, kafkaFrame(hs, 1))
			if err != nil {
				t.Fatalf("%s: handshake: %v", user, err)
			}
			hr := kmsg.NewPtrSASLHandshakeResponse()
			hr.SetVersion(hs.GetVersion())
			if err := hr.ReadFrom(body); err != nil || hr.ErrorCode != 0 {
				t.Fatalf("%s: handshake: %v %d", user, err, hr.ErrorCode)
			}
			sess, first, err := scram.Auth{User: user, Pass: pass}.AsSha256Mechanism().Authenticate(ctx, kafkaAddr)
			if err != nil {
				t.Fatal(err)
			}
			msg := first
			for step := int32(2); step < 5; step++ {
				ar := kmsg.NewPtrSASLAuthenticateRequest()
				ar.SetVersion(2)
				ar.SASLAuthBytes = msg
				body, err := kafkaAsk(conn, kafkaFrame(ar, step))
				if err != nil {
					t.Fatalf("%s: SaslAuthenticate step %d: %v", user, step, err)
				}
				resp := kmsg.NewPtrSASLAuthenticateResponse()
				resp.SetVersion(ar.GetVersion())
				if ar.IsFlexible() {
					body = body[1:] // response header v1: a tag byte
				}
				if err := resp.ReadFrom(body); err != nil {
					t.Fatal(err)
				}
				if resp.ErrorCode != 0 {
					if resp.ErrorCode != int16(pb.ErrorCode_SASL_AUTHENTICATION_FAILED) {
						t.Fatalf("%s: code %d, want SASL_AUTHENTICATION_FAILED", user, resp.ErrorCode)
					}
					// Then the connection is closed.
					if _, err := kafkaAsk(conn, kafkaFrame(metadataV9(), 9)); !closedNotTimedOut(err) {
						t.Fatalf("%s: after the failed authentication: %v, want the connection closed", user, err)
					}
					return
				}
				done, next, err := sess.Challenge(resp.SASLAuthBytes)
				if err != nil || done {
					t.Fatalf("%s: the server's answer was taken (done %v, %v)", user, done, err)
				}
				msg = next
			}
			t.Fatalf("%s: authenticated", user)
		}
		scramFails("mallory", "wrong")
		scramFails("nobody", malloryPw)

		// franz-go says the same.
		for _, a := range []scram.Auth{{User: "mallory", Pass: "wrong"}, {User: "nobody", Pass: malloryPw}} {
			cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.DialTLSConfig(kafkaTLS(malloryPair)), kgo.SASL(a.AsSha256Mechanism()), kgo.RequestRetries(0))
			if err != nil {
				t.Fatal(err)
			}
			_, err = cl.Request(ctx, kmsg.NewPtrMetadataRequest())
			cl.Close()
			if !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Errorf("franz-go as %s: %v, want SASL_AUTHENTICATION_FAILED", a.User, err)
			}
		}

		// Before authenticating only ApiVersions is answered; Metadata
		// closes the connection (with the gate planted open, it would be
		// answered).
		restore := planted.Set(planted.SaslGateOpen)
		_, err := kafkaAsk(dial(), kafkaFrame(metadataV9(), 1))
		restore()
		if err != nil {
			t.Fatalf("with sasl-gate-open Metadata before authentication is still refused: %v", err)
		}
		conn := dial()
		if _, err := kafkaAsk(conn, kafkaFrame(kmsg.NewPtrApiVersionsRequest(), 1)); err != nil {
			t.Fatalf("ApiVersions before authentication: %v", err)
		}
		if _, err := kafkaAsk(conn, kafkaFrame(metadataV9(), 2)); !closedNotTimedOut(err) {
			t.Fatalf("Metadata before authentication: %v, want the connection closed", err)
		}
	})

	// mallory, authenticated (SCRAM on Kafka; certificate on gRPC), holds
	// no ACL. On Kafka mallory presents the super user's certificate (the
	// same CA's CN=admin, stolen): the SASL principal is the one that
	// counts, so that changes nothing.
	mk, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.DialTLSConfig(kafkaTLS(ct.Client(t, "admin"))),
		kgo.SASL(scram.Auth{User: "mallory", Pass: malloryPw}.AsSha256Mechanism()), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer mk.Close()
	mg := tlsClientConn(t, addr, ct.ClientConfig(t, malloryPair))

	t.Run("ACLs: an authenticated principal without grants, through both doors", func(t *testing.T) {
		// Each node's door, so that every coordinator and leader is asked.
		for _, m := range c.Running() {
			br := mk.Broker(int(m.ID))
			for _, b := range kafkareq.Check(ctx, br, kafkaRefusals(t, secTopic)) {
				t.Errorf("node %d: %s", m.ID, b)
			}
			g := tlsClientConn(t, m.Cfg.Listen, ct.ClientConfig(t, malloryPair))
			for _, b := range checkGRPC(ctx, grpcRefusals(t, g, secTopic)) {
				t.Errorf("node %d: %s", m.ID, b)
			}
			// The refused AlterClientQuotas set no quota on the application.
			if q, ok := m.Node.Quotas().Quota("CN=app", "", "producer_byte_rate"); ok {
				t.Errorf("node %d: the application's produce rate is %v", m.ID, q)
			}
		}
		// The internal topics' names (Strand keeps offsets and
		// transaction state out of topics; to mallory the names are
		// refused like any other topic's, as Kafka's are).
		internal := map[string]bool{"Produce": true, "Fetch": true, "ListOffsets": true, "DeleteTopics": true, "CreatePartitions": true, "DeleteRecords": true}
		for _, topic := range []string{"__consumer_offsets", "__transaction_state"} {
			var kc []kafkareq.Case
			for _, k := range kafkaRefusals(t, topic) {
				if internal[k.Name] {
					kc = append(kc, k)
				}
			}
			var gc []grpcCase
			for _, g := range grpcRefusals(t, mg, topic) {
				if internal[g.name] {
					gc = append(gc, g)
				}
			}
			if len(kc) != len(internal) || len(gc) != len(internal) {
				t.Fatalf("%d and %d internal-topic cases", len(kc), len(gc))
			}
			for _, b := range append(kafkareq.Check(ctx, mk.Broker(1), kc), checkGRPC(ctx, gc)...) {
				t.Errorf("%s: %s", topic, b)
			}
		}
		// The transaction requests only brokers send are not served on
		// the client listener at all (a gRPC status, no Kafka code).
		tx := pb.NewTransactionsClient(mg)
		if _, err := tx.AddPartitionsToTxn(ctx, &pb.AddPartitionsToTxnRequest{}); status.Code(err) != codes.Unimplemented {
			t.Errorf("gRPC AddPartitionsToTxn: %v, want Unimplemented", err)
		}
		if _, err := tx.WriteTxnMarkers(ctx, &pb.WriteTxnMarkersRequest{}); status.Code(err) != codes.Unimplemented {
			t.Errorf("gRPC WriteTxnMarkers: %v, want Unimplemented", err)
		}
		// The listings hide what mallory may not describe.
		md, err := mk.Request(ctx, kmsg.NewPtrMetadataRequest())
		if err != nil || len(md.(*kmsg.MetadataResponse).Topics) != 0 {
			t.Errorf("Kafka Metadata of all topics: %v %v, want no topic", md, err)
		}
		if r, err := pb.NewMetadataClient(mg).Metadata(ctx, &pb.MetadataRequest{}); err != nil || len(r.Topics) != 0 {
			t.Errorf("gRPC Metadata of all topics: %v %v, want no topic", r, err)
		}
		for _, m := range c.Running() {
			br := mk.Broker(int(m.ID))
			lg, err := br.Request(ctx, kmsg.NewPtrListGroupsRequest())
			if err != nil || len(lg.(*kmsg.ListGroupsResponse).Groups) != 0 {
				t.Errorf("node %d: Kafka ListGroups: %v %v, want none", m.ID, lg, err)
			}
			lt, err := br.Request(ctx, kmsg.NewPtrListTransactionsRequest())
			if err != nil || len(lt.(*kmsg.ListTransactionsResponse).TransactionStates) != 0 {
				t.Errorf("node %d: Kafka ListTransactions: %v %v, want none", m.ID, lt, err)
			}
			g := tlsClientConn(t, m.Cfg.Listen, ct.ClientConfig(t, malloryPair))
			if r, err := pb.NewGroupsClient(g).ListGroups(ctx, &pb.ListGroupsRequest{}); err != nil || len(r.Groups) != 0 {
				t.Errorf("node %d: gRPC ListGroups: %v %v, want none", m.ID, r, err)
			}
			if r, err := pb.NewTransactionsClient(g).ListTransactions(ctx, &pb.ListTransactionsRequest{DurationFilterMs: -1}); err != nil || len(r.Transactions) != 0 {
				t.Errorf("node %d: gRPC ListTransactions: %v %v, want none", m.ID, r, err)
			}
		}
	})

	t.Run("the application can do no more than its grants", func(t *testing.T) {
		ac := tlsClientConn(t, addr, ct.ClientConfig(t, appPair))
		var cases []grpcCase
		for _, gc := range grpcRefusals(t, ac, secGuarded) {
			switch gc.name {
			// (Its idempotent InitProducerId is served: Write on any
			// topic implies IdempotentWrite, as in Kafka since KIP-679.)
			case "Produce", "Fetch", "Metadata", "CreateTopics", "CreateAcls", "AlterUserScramCredentials":
				cases = append(cases, gc)
			}
		}
		for _, gc := range grpcRefusals(t, ac, secTopic) {
			switch gc.name {
			case "DeleteTopics", "CreatePartitions", "DeleteRecords", "IncrementalAlterConfigs", "DescribeConfigs":
				cases = append(cases, gc)
			}
		}
		if len(cases) != 11 {
			t.Fatalf("%d cases", len(cases))
		}
		for _, b := range checkGRPC(ctx, cases) {
			t.Error("the application: " + b)
		}
	})

	t.Run("a planted bug is reported", func(t *testing.T) {
		produce := func(cs []kafkareq.Case) []kafkareq.Case { return kafkareq.Only(cs, "Produce") }
		gproduce := func(cs []grpcCase) []grpcCase { return cs[:1] }
		restore := planted.Set(planted.AuthzSkipProduceTopicWrite)
		kb := kafkareq.Check(ctx, mk.Broker(int(c.Partition(secGuarded, 0).Leader)), produce(kafkaRefusals(t, secGuarded)))
		gb := checkGRPC(ctx, gproduce(grpcRefusals(t, tlsClientConn(t, c.Member(c.Partition(secGuarded, 0).Leader).Cfg.Listen, ct.ClientConfig(t, malloryPair)), secGuarded)))
		restore()
		if len(kb) != 1 || len(gb) != 1 {
			t.Fatalf("with %s the suite reports %q and %q; want the Produce of each door", "authz-skip-produce-topic-write", kb, gb)
		}
		t.Logf("reported: %s; %s", kb[0], gb[0])
		if got := tg.readOnce(secGuarded, 0, client.ReadUncommitted); !slices.Contains(got, evilValue) {
			t.Fatalf("the planted bug's records are not in %s: %q", secGuarded, got)
		}

		// AlterUserScramCredentials without Alter on the cluster (the
		// check this suite found missing): a throwaway user, removed after.
		probe := []kafkareq.Case{{Name: "AlterUserScramCredentials", Want: kafkareq.ClusterDenied, Build: func() kmsg.Request {
			r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
			u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
			u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = "planted-probe", 1, 4096, []byte("salt"), make([]byte, 32)
			r.Upsertions = append(r.Upsertions, u)
			return r
		}}}
		restore = planted.Set(planted.AuthzSkipScramAlter)
		sb := kafkareq.Check(ctx, mk.Broker(1), probe)
		restore()
		if len(sb) != 1 {
			t.Fatalf("with authz-skip-scram-alter the suite reports %q", sb)
		}
		t.Logf("reported: %s", sb[0])
		if res, err := adm.AlterUserScramCredentials(ctx, nil, []client.ScramDeletion{{User: "planted-probe", Mechanism: "SCRAM-SHA-256"}}); err != nil || res["planted-probe"] != nil {
			t.Fatalf("removing the probe: %v %v", res, err)
		}
	})

	t.Run("posing as a broker", func(t *testing.T) {
		ib := c.Member(1).Node.InterBrokerAddr()
		img := c.Image()
		mc := tlsClientConn(t, ib, ct.ClientConfig(t, malloryPair))
		for name, err := range controllerCalls(ctx, pb.NewControllerClient(mc), img, secTopic) {
			if !notAPeer(err) {
				t.Errorf("mallory's Controller %s: %v, want CLUSTER_AUTHORIZATION_FAILED", name, err)
			}
		}
		for name, err := range replicaCalls(ctx, pb.NewConsumerClient(mc), pb.NewTransactionsClient(mc), img, secTopic) {
			if !notAPeer(err) {
				t.Errorf("mallory's %s: %v, want CLUSTER_AUTHORIZATION_FAILED", name, err)
			}
		}
		// The client services are not served there (to anyone).
		notServed := func(err error) bool { return notAPeer(err) || status.Code(err) == codes.Unimplemented }
		if _, err := pb.NewMetadataClient(mc).Metadata(ctx, &pb.MetadataRequest{}); !notServed(err) {
			t.Errorf("mallory's Metadata on the inter-broker listener: %v", err)
		}
		if ps, err := pb.NewProducerClient(mc).Produce(ctx); err == nil {
			_ = ps.Send(&pb.ProduceRequest{Acks: -1, TimeoutMs: 5000, Partitions: []*pb.PartitionRecords{{Topic: secTopic, Records: evilBatch(t)}}})
			if _, err := ps.Recv(); !notServed(err) {
				t.Errorf("mallory's Produce on the inter-broker listener: %v", err)
			}
		}
		// The client listener serves no cluster control to mallory.
		cl := tlsClientConn(t, addr, ct.ClientConfig(t, malloryPair))
		for name, err := range controllerCalls(ctx, pb.NewControllerClient(cl), img, secTopic) {
			if !notServed(err) {
				t.Errorf("mallory's Controller %s on the client listener: %v", name, err)
			}
		}
		// The application's principal is no broker either.
		ac := tlsClientConn(t, ib, ct.ClientConfig(t, appPair))
		_, err := pb.NewControllerClient(ac).DescribeQuorum(ctx, &pb.DescribeQuorumRequest{})
		if !notAPeer(err) {
			t.Errorf("the application's DescribeQuorum on the inter-broker listener: %v", err)
		}
	})

	// Let the application commit a few more transactions after the
	// hostile cases, then stop it.
	n0 := appCommitted()
	wait.Eventually(t, 20*time.Second, "two more application commits", func() bool { return appCommitted() >= n0+6 })
	close(appStop)
	<-appDone
	if appErr != nil {
		t.Fatalf("the application failed: %v", appErr)
	}

	t.Run("nothing acknowledged lost, nothing hostile changed", func(t *testing.T) {
		got := tg.readAll(secTopic, 0, client.ReadCommitted, len(committed))
		if !slices.Equal(got, committed) {
			t.Fatalf("read_committed %s: %d values, want the %d committed, in order, once each\n got %q\nwant %q", secTopic, len(got), len(committed), got, committed)
		}
		if all := tg.readOnce(secTopic, 0, client.ReadUncommitted); slices.Contains(all, evilValue) {
			t.Fatalf("a hostile record in %s", secTopic)
		}
		ag := tlsClientConn(t, addr, ct.ClientConfig(t, ct.Client(t, "admin")))
		md, err := pb.NewMetadataClient(ag).Metadata(ctx, &pb.MetadataRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tm := range md.Topics {
			names = append(names, tm.Name)
			if tm.Name == secTopic && len(tm.Partitions) != 1 {
				t.Errorf("%s has %d partitions", secTopic, len(tm.Partitions))
			}
		}
		sort.Strings(names)
		if !slices.Contains(names, secTopic) || slices.Contains(names, evilTopic) {
			t.Errorf("topics %v", names)
		}
		dc, err := pb.NewAdminClient(ag).DescribeConfigs(ctx, &pb.DescribeConfigsRequest{Resources: []*pb.ConfigResource{{Type: "topic", Name: secTopic}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range dc.Results[0].Entries {
			if e.Name == "retention.ms" && e.Value == "1" {
				t.Errorf("retention.ms of %s altered", secTopic)
			}
		}
		lo, err := adm.ListOffsets(ctx, []client.TopicPartition{{Topic: secTopic}}, client.OffsetEarliest, client.ReadUncommitted)
		if err != nil || lo[client.TopicPartition{Topic: secTopic}].Offset != 0 {
			t.Errorf("log start of %s: %v %v", secTopic, lo, err)
		}
		of, err := pb.NewGroupsClient(ag).OffsetFetch(ctx, &pb.OffsetFetchRequest{GroupId: secGroup})
		if err != nil || len(of.Partitions) != 1 || of.Partitions[0].Offset != lastOff {
			t.Errorf("%s's offsets: %v %v, want %d", secGroup, of, err, lastOff)
		}
		// What mallory's listings hid is there for the super user.
		var groups, txns []string
		for _, m := range c.Running() {
			g := tlsClientConn(t, m.Cfg.Listen, ct.ClientConfig(t, ct.Client(t, "admin")))
			if r, err := pb.NewGroupsClient(g).ListGroups(ctx, &pb.ListGroupsRequest{}); err == nil {
				for _, lg := range r.Groups {
					groups = append(groups, lg.GroupId)
				}
			}
			if r, err := pb.NewTransactionsClient(g).ListTransactions(ctx, &pb.ListTransactionsRequest{DurationFilterMs: -1}); err == nil {
				for _, tl := range r.Transactions {
					txns = append(txns, tl.TransactionalId)
				}
			}
		}
		if !slices.Contains(groups, secGroup) || !slices.Contains(txns, secTxnID) {
			t.Errorf("the super user lists groups %v and transactions %v", groups, txns)
		}
		acls, err := adm.DescribeACLs(ctx, client.AnyACL())
		if err != nil || len(acls) != len(appACLs()) {
			t.Errorf("ACLs %v %v, want the application's %d", acls, err, len(appACLs()))
		}
		users, _, err := adm.DescribeUserScramCredentials(ctx)
		if err != nil || len(users) != 1 || len(users["mallory"]) != 1 {
			t.Errorf("SCRAM users %v %v, want mallory's one", users, err)
		}
	})
	tg.assertServes()
	t.Logf("%d records in %d transactions; %v", len(committed), lastOff, time.Since(start).Round(time.Millisecond))
}
