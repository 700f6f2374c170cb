package coordinator_test

// Real node on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/coordinator"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/testutil"
)

// oneNode is a one-node cluster whose internal topics have the given
// partition counts and replication factor 1; mutate adjusts more.
func oneNode(t *testing.T, offsets, txns int32, mutate func(*node.Config)) *testcluster.Cluster {
	return testcluster.New(t, testcluster.Options{Nodes: 1, Mutate: func(_ int32, cfg *node.Config) {
		cfg.OffsetsTopic.Partitions, cfg.OffsetsTopic.ReplicationFactor, cfg.OffsetsTopic.MinISR = offsets, 1, 1
		cfg.TxnTopic.Partitions, cfg.TxnTopic.ReplicationFactor, cfg.TxnTopic.MinISR = txns, 1, 1
		if mutate != nil {
			mutate(cfg)
		}
	}})
}

func kafkaAdmin(t *testing.T, c *testcluster.Cluster, opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.KafkaAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// commitAndRead commits offset at of topic-0 for group and reads it back.
func commitAndRead(ctx context.Context, adm *kadm.Client, group, topic string, at int64) error {
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: at, LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(ctx, group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("commit for %s: %w", group, err)
	}
	got, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = got.Error()
	}
	if err != nil {
		return fmt.Errorf("fetch for %s: %w", group, err)
	}
	if o, ok := got.Lookup(topic, 0); !ok || o.At != at {
		return fmt.Errorf("group %s reads %+v, want %d", group, o, at)
	}
	return nil
}

// The internal topics belong to the cluster. A client's CreateTopics of
// their names is refused INVALID_REQUEST on both doors (Kafka's answer for
// the name it reserves), so no client can create __consumer_offsets first
// with one partition and retention.ms=1000; a client that filled
// max.broker.partitions does not keep the cluster from creating them, with
// the configured partition counts. A client's Produce to one and its
// DeleteRecords of one are INVALID_TOPIC_EXCEPTION (Kafka's
// ReplicaManager); DeleteTopics and CreatePartitions of one are refused.
func TestInternalTopicsBelongToTheCluster(t *testing.T) {
	c := oneNode(t, 4, 3, func(cfg *node.Config) { cfg.ControllerConfig.MaxBrokerPartitions = 12 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, adm := kafkaAdmin(t, c)

	req := kmsg.NewPtrCreateTopicsRequest()
	for _, name := range []string{"__consumer_offsets", "__cluster_metadata"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		rc := kmsg.NewCreateTopicsRequestTopicConfig()
		rc.Name, rc.Value = "retention.ms", kmsg.StringPtr("1000")
		rt.Configs = append(rt.Configs, rc)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for i, rt := range resp.Topics {
		want := "Creation of internal topic " + req.Topics[i].Topic + " is prohibited."
		if rt.ErrorCode != kerr.InvalidRequest.Code || rt.ErrorMessage == nil || *rt.ErrorMessage != want || rt.NumPartitions != -1 {
			t.Errorf("Kafka door: CreateTopics %s answered %d %v (%d partitions), want INVALID_REQUEST %q", rt.Topic, rt.ErrorCode, rt.ErrorMessage, rt.NumPartitions, want)
		}
	}
	sdk, err := client.NewAdmin(c.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer sdk.Close()
	err = sdk.CreateTopic(ctx, client.TopicSpec{Name: "__transaction_state", Partitions: 1, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "1000"}})
	if errs.CodeOf(err) != pb.ErrorCode_INVALID_REQUEST {
		t.Errorf("SDK: CreateTopic __transaction_state: %v, want INVALID_REQUEST", err)
	}
	// The flag only a broker's creation carries is not a client's to set.
	if _, err := sdk.Metadata(ctx, false); err != nil {
		t.Fatal(err)
	}
	cc, err := sdk.BrokerConn(1)
	if err != nil {
		t.Fatal(err)
	}
	flagged, err := pb.NewAdminClient(cc).CreateTopics(ctx, &pb.CreateTopicsRequest{InternalTopics: true,
		Topics: []*pb.CreatableTopic{{Name: "__consumer_offsets", NumPartitions: 1, ReplicationFactor: 1}}})
	if err != nil || len(flagged.Topics) != 1 || flagged.Topics[0].ErrorCode != pb.ErrorCode_INVALID_REQUEST {
		t.Errorf("gRPC CreateTopics of __consumer_offsets flagged internal: %v %v, want INVALID_REQUEST", flagged, err)
	}
	if img := c.Image(); img.Topic("__consumer_offsets") != nil || img.Topic("__transaction_state") != nil || img.Topic("__cluster_metadata") != nil {
		t.Fatal("a client's CreateTopics made an internal topic")
	}

	// A client takes every partition max.broker.partitions allows.
	if _, err := adm.CreateTopic(ctx, 12, 1, nil, "filler"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "one-more"); !errors.Is(err, kerr.InvalidPartitions) {
		t.Fatalf("a client topic over max.broker.partitions: %v, want INVALID_PARTITIONS", err)
	}
	// Groups and transactions still work: the cluster creates the
	// internal topics with the configured partition counts.
	for i := 0; i < 8; i++ {
		if err := commitAndRead(ctx, adm, fmt.Sprintf("g-%d", i), "filler", int64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKeys = 1, []string{"tx-a", "tx-b", "tx-c"}
	fresp, err := fc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, co := range fresp.Coordinators {
		if co.ErrorCode != 0 || co.NodeID != 1 {
			t.Fatalf("FindCoordinator(transaction, %s): %d %v node %d", co.Key, co.ErrorCode, co.ErrorMessage, co.NodeID)
		}
	}
	img := c.Image()
	for name, n := range map[string]int{"__consumer_offsets": 4, "__transaction_state": 3} {
		if top := img.Topic(name); top == nil || !top.Internal || len(top.Partitions) != n || len(top.Partitions[0].Replicas) != 1 {
			t.Fatalf("%s: %+v, want internal with %d partitions of replication factor 1", name, top, n)
		}
	}

	// What a client may not do to them.
	perr := cl.ProduceSync(ctx, &kgo.Record{Topic: "__consumer_offsets", Partition: 0, Value: []byte("garbage")}).FirstErr()
	if !errors.Is(perr, kerr.InvalidTopicException) {
		t.Errorf("Produce to __consumer_offsets: %v, want INVALID_TOPIC_EXCEPTION", perr)
	}
	var dr kadm.Offsets
	dr.Add(kadm.Offset{Topic: "__consumer_offsets", Partition: 0, At: 0})
	drr, err := adm.DeleteRecords(ctx, dr)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := drr.Lookup("__consumer_offsets", 0); !ok || !errors.Is(r.Err, kerr.InvalidTopicException) {
		t.Errorf("DeleteRecords of __consumer_offsets: %+v, want INVALID_TOPIC_EXCEPTION", r)
	}
	if dt, err := adm.DeleteTopics(ctx, "__consumer_offsets"); err != nil || !errors.Is(dt["__consumer_offsets"].Err, kerr.InvalidRequest) {
		t.Errorf("DeleteTopics __consumer_offsets: %v %v, want INVALID_REQUEST", dt, err)
	}
	if cp, err := adm.CreatePartitions(ctx, 1, "__transaction_state"); err != nil || !errors.Is(cp["__transaction_state"].Err, kerr.InvalidRequest) {
		t.Errorf("CreatePartitions __transaction_state: %v %v, want INVALID_REQUEST", cp, err)
	}
	if top := c.Image().Topic("__consumer_offsets"); top == nil || len(top.Partitions) != 4 {
		t.Fatal("__consumer_offsets changed")
	}
}

// Where a group or transactional id is coordinated follows the internal
// topic as it exists in the metadata (hash % its partition count), never
// the configured count: a node restarted with offsets.topic.num.partitions
// and transaction.state.log.num.partitions raised from 3 to 7 serves
// every group and transactional id on the 3 partitions the topics have,
// ids that would map past them included, and says at WARN that the topics
// differ from its configuration (the state of a cluster whose internal
// topic a client created before the names were reserved).
func TestCoordinatorsFollowTheInternalTopicAsItIs(t *testing.T) {
	c := oneNode(t, 3, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, adm := kafkaAdmin(t, c)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "data"); err != nil {
		t.Fatal(err)
	}
	if err := commitAndRead(ctx, adm, "warm-up", "data", 1); err != nil {
		t.Fatal(err)
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKeys = 1, []string{"warm-up"}
	if resp, err := fc.RequestWith(ctx, cl); err != nil || resp.Coordinators[0].ErrorCode != 0 {
		t.Fatalf("FindCoordinator(transaction): %v %v", resp, err)
	}
	cl.Close()

	c.Stop(1)
	m := c.Member(1)
	m.Cfg.OffsetsTopic.Partitions, m.Cfg.TxnTopic.Partitions = 7, 7
	var logs testutil.LogBuffer
	m.Cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c.Start(1)
	c.WaitReady(30 * time.Second)
	_, adm = kafkaAdmin(t, c)

	// Ids whose partition out of 7 is past the three that exist.
	var ids []string
	for i := 0; len(ids) < 4; i++ {
		id := fmt.Sprintf("id-%d", i)
		if coordinator.PartitionFor(id, 7) >= 3 {
			ids = append(ids, id)
		}
	}
	for i, g := range ids {
		gctx, gcancel := context.WithTimeout(ctx, 15*time.Second)
		err := commitAndRead(gctx, adm, g, "data", int64(10+i))
		gcancel()
		if err != nil {
			t.Fatalf("group %s (partition %d of 7, %d of 3): %v", g, coordinator.PartitionFor(g, 7), coordinator.PartitionFor(g, 3), err)
		}
	}
	for _, id := range ids[:2] {
		tctx, tcancel := context.WithTimeout(ctx, 20*time.Second)
		err := transact(tctx, c, id)
		tcancel()
		if err != nil {
			t.Fatalf("transactional id %s (partition %d of 7, %d of 3): %v", id, coordinator.PartitionFor(id, 7), coordinator.PartitionFor(id, 3), err)
		}
	}
	out := logs.String()
	for _, topic := range []string{"__consumer_offsets", "__transaction_state"} {
		found := false
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "level=WARN") && strings.Contains(line, "internal topic differs") && strings.Contains(line, "topic="+topic) &&
				strings.Contains(line, "partitions=3") && strings.Contains(line, "configuredPartitions=7") {
				found = true
			}
		}
		if !found {
			t.Errorf("no WARN that %s has 3 partitions where 7 are configured", topic)
		}
	}
}

// transact commits one transaction of transactional id id with franz-go.
func transact(ctx context.Context, c *testcluster.Cluster, id string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "data", Partition: 0, Value: []byte(id)}).FirstErr(); err != nil {
		return err
	}
	return cl.EndTransaction(ctx, kgo.TryCommit)
}
