package kafka_test

// Real node on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/testutil"
)

// grantTable is an authz.Checker allowing exactly the actions it holds
// (whoever asks), counting its denials.
type grantTable struct {
	mu      sync.Mutex
	allow   map[authz.Action]bool
	denials int
}

func (g *grantTable) Authorize(_ context.Context, _ auth.Session, a authz.Action) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	a.Request = ""
	if !g.allow[a] {
		g.denials++
	}
	return g.allow[a]
}

func (g *grantTable) AuthorizeAny(_ context.Context, _ auth.Session, op authz.Operation, t authz.ResourceType, _ string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for a := range g.allow {
		if a.Op == op && a.Type == t {
			return true
		}
	}
	g.denials++
	return false
}

// TestAuthorizationThroughBothDoors: one node whose request layer asks a
// grant table, every client connection carrying the session of
// User:alice (node.Config.TestSession, test-only), who may Write, Read
// and Describe topic a and nothing else. Through the Kafka listener
// (franz-go) and the gRPC client listener alike: Metadata lists a only,
// a produce to a is written and one to b refused
// TOPIC_AUTHORIZATION_FAILED, a transactional producer is refused
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, an offset commit to a group
// GROUP_AUTHORIZATION_FAILED; the gRPC refusals travel in the answers,
// not as gRPC errors.
func TestAuthorizationThroughBothDoors(t *testing.T) {
	g := &grantTable{allow: map[authz.Action]bool{}}
	for _, op := range []authz.Operation{authz.OpWrite, authz.OpRead, authz.OpDescribe} {
		g.allow[authz.Action{Op: op, Type: authz.ResourceTopic, Name: "a"}] = true
	}
	sess := auth.Session{Principal: auth.User("alice"), Host: "127.0.0.1", Listener: auth.ListenerKafka}
	kafkaAddr := testutil.FreeAddr(t)
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) {
		cfg.KafkaListen = kafkaAddr
		cfg.TestAuthorizer = g
		cfg.TestSession = &sess
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// From inside the process (no session): allowed.
	ct, err := n.Handler().CreateTopics(ctx, &pb.CreateTopicsRequest{TimeoutMs: 30000, Topics: []*pb.CreatableTopic{
		{Name: "a", NumPartitions: 1, ReplicationFactor: 1}, {Name: "b", NumPartitions: 1, ReplicationFactor: 1}}})
	if err != nil || ct.Topics[0].ErrorCode != pb.ErrorCode_NONE || ct.Topics[1].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("CreateTopics: %v %v", ct, err)
	}

	t.Run("kafka", func(t *testing.T) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.RequestRetries(1), kgo.RecordRetries(2), kgo.RetryTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		md, err := adm.Metadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if names := md.Topics.Names(); len(names) != 1 || names[0] != "a" {
			t.Fatalf("Metadata of all topics lists %v, want [a]", names)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "a", Value: []byte("ok")}).FirstErr(); err != nil {
			t.Fatalf("produce to a: %v", err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "b", Value: []byte("no")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("produce to b: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
		// A consumer of a (Metadata, ListOffsets, Fetch with sessions) reads it.
		cons, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"a": {0: kgo.NewOffset().AtStart()}}))
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		fs := cons.PollFetches(ctx)
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("consume a: %v", errs)
		}
		if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "ok" {
			t.Fatalf("consume a: %v, want the one record", recs)
		}
		oc, err := adm.CommitOffsets(ctx, "g", kadm.OffsetsFromRecords(kgo.Record{Topic: "a", Partition: 0, Offset: 0}))
		if err == nil {
			err = oc.Error()
		}
		if !errors.Is(err, kerr.GroupAuthorizationFailed) {
			t.Fatalf("commit to group g: %v, want GROUP_AUTHORIZATION_FAILED", err)
		}

		tx, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.TransactionalID("tx"), kgo.RequestRetries(1), kgo.RetryTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Close()
		err = tx.BeginTransaction()
		if err == nil {
			err = tx.ProduceSync(ctx, &kgo.Record{Topic: "a", Value: []byte("t")}).FirstErr()
		}
		if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
			t.Fatalf("transactional producer without Write on tx: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
		}
	})

	t.Run("grpc", func(t *testing.T) {
		cc, err := grpc.NewClient("passthrough:///"+n.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		md, err := pb.NewMetadataClient(cc).Metadata(ctx, &pb.MetadataRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(md.Topics) != 1 || md.Topics[0].Name != "a" {
			t.Fatalf("Metadata of all topics lists %v, want a only", md.Topics)
		}
		md, err = pb.NewMetadataClient(cc).Metadata(ctx, &pb.MetadataRequest{Topics: []string{"b"}})
		if err != nil || md.Topics[0].ErrorCode != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
			t.Fatalf("Metadata of b: %v %v", md, err)
		}
		stream, err := pb.NewProducerClient(cc).Produce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		plain := record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
		for i, topic := range []string{"a", "b"} {
			b, err := record.Build(plain, []record.Record{{Value: []byte("v"), Timestamp: time.Now().UnixMilli()}})
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(&pb.ProduceRequest{CorrelationId: int64(i), Acks: -1, TimeoutMs: 5000, Partitions: []*pb.PartitionRecords{{Topic: topic, Records: b}}}); err != nil {
				t.Fatal(err)
			}
			r, err := stream.Recv()
			if err != nil {
				t.Fatalf("produce to %s: a gRPC error %v, want the answer", topic, err)
			}
			want := pb.ErrorCode_NONE
			if topic == "b" {
				want = pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED
			}
			if r.Partitions[0].ErrorCode != want {
				t.Fatalf("produce to %s: %v %q, want %v", topic, r.Partitions[0].ErrorCode, r.Partitions[0].ErrorMessage, want)
			}
		}
		_ = stream.CloseSend()
		ip, err := pb.NewTransactionsClient(cc).InitProducerId(ctx, &pb.InitProducerIdRequest{TransactionalId: "tx", TransactionTimeoutMs: 60000, ProducerId: -1, ProducerEpoch: -1})
		if err != nil || ip.ErrorCode != pb.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED {
			t.Fatalf("InitProducerId tx: %v %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED in the answer", ip, err)
		}
		oc, err := pb.NewGroupsClient(cc).OffsetCommit(ctx, &pb.OffsetCommitRequest{GroupId: "g", GenerationId: -1, Offsets: []*pb.PartitionOffset{{Topic: "a", Offset: 1}}})
		if err != nil || len(oc.Partitions) != 1 || oc.Partitions[0].ErrorCode != pb.ErrorCode_GROUP_AUTHORIZATION_FAILED {
			t.Fatalf("OffsetCommit to g: %v %v", oc, err)
		}
		// The SDK's DescribeProducers of b: Kafka's admin client fails it
		// with the metadata's TOPIC_AUTHORIZATION_FAILED.
		sdk, err := client.NewAdmin(client.Bootstrap(n.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		defer sdk.Close()
		if _, err := sdk.DescribeProducers(ctx, client.TopicPartition{Topic: "b"}, -1); errs.CodeOf(err) != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
			t.Fatalf("SDK DescribeProducers of b: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
		// Client quotas: AlterConfigs / DescribeConfigs on the cluster, as
		// Kafka; alice may not throttle another user.
		adm := pb.NewAdminClient(cc)
		aq, err := adm.AlterClientQuotas(ctx, &pb.AlterClientQuotasRequest{Entries: []*pb.AlterClientQuotasEntry{{
			Entity: &pb.QuotaEntity{Parts: []*pb.QuotaEntityPart{{EntityType: "user", Name: "bob"}}},
			Ops:    []*pb.QuotaOp{{Key: "producer_byte_rate", Value: 1}}}}})
		if err != nil || len(aq.Entries) != 1 || aq.Entries[0].ErrorCode != pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED {
			t.Fatalf("AlterClientQuotas of bob: %v %v, want CLUSTER_AUTHORIZATION_FAILED", aq, err)
		}
		dq, err := adm.DescribeClientQuotas(ctx, &pb.DescribeClientQuotasRequest{})
		if err != nil || dq.ErrorCode != pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED || len(dq.Entries) != 0 {
			t.Fatalf("DescribeClientQuotas: %v %v, want CLUSTER_AUTHORIZATION_FAILED", dq, err)
		}
		if q, ok := n.Quotas().Quota("bob", "", "producer_byte_rate"); ok {
			t.Fatalf("bob's produce rate set to %v by alice", q)
		}
	})
}
