package kafka_test

// Real node on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"encoding/base64"
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
	"github.com/strand-io/strand/testkit/kafkareq"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

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
	// Every request of the table, naming the resources above (Produce
	// and Fetch by name, and by topic a's id as Kafka 4 clients do).
	var idA [16]byte
	if b, err := base64.RawURLEncoding.DecodeString(h.Repl.Image().Topic("a").ID); err != nil || copy(idA[:], b) != 16 {
		t.Fatalf("topic a's id: %v", err)
	}
	cases := kafkareq.Refusals(kafkareq.Names{
		Topic: "a", TopicID: idA, NewTopic: "c", Group: "g", TxnID: "tx",
		ProducerID: ip.ProducerId, ProducerEpoch: int16(ip.ProducerEpoch),
		Records: batch, Replica: n.ID(),
		Principal: "User:mallory", ScramUser: "mallory", NewScramUser: "eve",
	})
	for _, b := range kafkareq.Check(ctx, br, cases) {
		t.Error(b)
	}
	// Asked by id, the refusal does not tell the topic's name.
	if pr, err := br.Request(ctx, kafkareq.Only(cases, "Produce by topic id")[0].Build()); err != nil {
		t.Error(err)
	} else if p := pr.(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorMessage != nil {
		t.Errorf("Produce by topic id refused with the message %q, which names the topic", *p.ErrorMessage)
	}
	// AlterClientQuotas refused stored nothing.
	if dq, err := h.DescribeClientQuotas(ctx, &pb.DescribeClientQuotasRequest{}); err != nil || len(dq.Entries) != 0 {
		t.Errorf("quotas after the refused AlterClientQuotas: %v %v", dq, err)
	}
	// IncrementalAlterConfigs really names topic a: with AlterConfigs on
	// it granted, the same request (validate only) is served.
	g.mu.Lock()
	g.allow[authz.Action{Op: authz.OpAlterConfigs, Type: authz.ResourceTopic, Name: "a"}] = true
	g.mu.Unlock()
	iac := kafkareq.Only(cases, "IncrementalAlterConfigs")[0].Build().(*kmsg.IncrementalAlterConfigsRequest)
	iac.ValidateOnly = true
	if resp, err := br.Request(ctx, iac); err != nil || !slices.Equal(kafkareq.Codes(resp), []int16{0}) {
		t.Errorf("IncrementalAlterConfigs of topic a with AlterConfigs granted: %v %v, want served", resp, err)
	}
	g.mu.Lock()
	g.allow = map[authz.Action]bool{}
	g.mu.Unlock()

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
