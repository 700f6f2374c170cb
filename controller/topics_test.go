package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/controller"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/wait"
)

// topicController is an active controller on a one-voter quorum with
// brokers 1..live registered and unfenced and brokers live+1..n
// registered and fenced.
func topicController(t *testing.T, n, live int32, mutate func(*controller.Config)) *controller.Controller {
	t.Helper()
	addr := freeAddr(t)
	q := startLeader(t, quorumConfig(t.TempDir(), addr, []controller.Voter{{ID: 1, Addr: addr}}))
	t.Cleanup(func() { q.Close() })
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	cfg := controller.DefaultConfig(1)
	if mutate != nil {
		mutate(&cfg)
	}
	c := controller.New(cfg, q, clk)
	c.Start()
	t.Cleanup(c.Stop)
	wait.Eventually(t, 10*time.Second, "the controller to become active", func() bool {
		if c.IsActive() {
			return true
		}
		clk.Advance(250 * time.Millisecond)
		return false
	})
	ctx := context.Background()
	for id := int32(1); id <= n; id++ {
		epoch, code := register(c, id, "inc", "10.0.0."+string(rune('0'+id))+":9096")
		if code != pb.ErrorCode_NONE {
			t.Fatalf("register %d: %v", id, code)
		}
		if id > live {
			continue
		}
		if _, err := c.BrokerHeartbeat(ctx, &pb.BrokerHeartbeatRequest{NodeId: id, BrokerEpoch: epoch, CurrentMetadataOffset: epoch}); err != nil {
			t.Fatalf("heartbeat %d: %v", id, err)
		}
	}
	wait.Eventually(t, 10*time.Second, "the live brokers unfenced", func() bool {
		return len(q.FSM.Image().LiveBrokers()) == int(live)
	})
	return c
}

func createOne(t *testing.T, c *controller.Controller, internal bool, topic *pb.CreatableTopic) *pb.CreatableTopicResult {
	t.Helper()
	res, err := c.CreateTopics(context.Background(), &pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{topic}, InternalTopics: internal})
	if err != nil || len(res) != 1 {
		t.Fatalf("CreateTopics(%s): %v %v", topic.Name, res, err)
	}
	return res[0]
}

func assignment(parts ...[]int32) []*pb.CreatableReplicaAssignment {
	var out []*pb.CreatableReplicaAssignment
	for i, p := range parts {
		out = append(out, &pb.CreatableReplicaAssignment{PartitionIndex: int32(i), BrokerIds: p})
	}
	return out
}

// CreateTopics with replicas chosen by the client: served with Kafka's
// rules (ReplicationControlManager.createTopic). The partition's ISR is
// its replicas on live brokers, the first of them its leader.
func TestCreateTopicsManualAssignment(t *testing.T) {
	c := topicController(t, 4, 3, nil) // broker 4 is fenced
	res := createOne(t, c, false, &pb.CreatableTopic{Name: "placed", NumPartitions: -1, ReplicationFactor: -1,
		Assignments: assignment([]int32{3, 1}, []int32{4, 2}, []int32{2, 3})})
	if res.ErrorCode != pb.ErrorCode_NONE || res.NumPartitions != 3 || res.ReplicationFactor != 2 {
		t.Fatalf("create with an assignment: %+v", res)
	}
	top := c.Q.FSM.Image().Topic("placed")
	if top == nil || len(top.Partitions) != 3 {
		t.Fatalf("topic placed: %+v", top)
	}
	for i, want := range []struct {
		replicas, isr []int32
		leader        int32
	}{{[]int32{3, 1}, []int32{3, 1}, 3}, {[]int32{4, 2}, []int32{2}, 2}, {[]int32{2, 3}, []int32{2, 3}, 2}} {
		p := top.Partitions[i]
		if !equal(p.Replicas, want.replicas) || !equal(p.ISR, want.isr) || p.Leader != want.leader {
			t.Errorf("partition %d: replicas %v ISR %v leader %d, want %v %v %d", i, p.Replicas, p.ISR, p.Leader, want.replicas, want.isr, want.leader)
		}
	}
	for _, tc := range []struct {
		name   string
		np, rf int32
		assign []*pb.CreatableReplicaAssignment
		code   pb.ErrorCode
	}{
		{"rf-set", -1, 2, assignment([]int32{1, 2}), pb.ErrorCode_INVALID_REQUEST},
		{"np-set", 1, -1, assignment([]int32{1, 2}), pb.ErrorCode_INVALID_REQUEST},
		{"unknown-broker", -1, -1, assignment([]int32{1, 9}), pb.ErrorCode_INVALID_REPLICA_ASSIGNMENT},
		{"broker-twice", -1, -1, assignment([]int32{2, 2}), pb.ErrorCode_INVALID_REPLICA_ASSIGNMENT},
		{"empty", -1, -1, assignment([]int32{}), pb.ErrorCode_INVALID_REPLICA_ASSIGNMENT},
		{"uneven", -1, -1, assignment([]int32{1, 2}, []int32{3}), pb.ErrorCode_INVALID_REPLICA_ASSIGNMENT},
		{"all-fenced", -1, -1, assignment([]int32{4}), pb.ErrorCode_INVALID_REPLICA_ASSIGNMENT},
		{"gap", -1, -1, []*pb.CreatableReplicaAssignment{{PartitionIndex: 0, BrokerIds: []int32{1}}, {PartitionIndex: 2, BrokerIds: []int32{2}}}, pb.ErrorCode_INVALID_REPLICA_ASSIGNMENT},
		{"twice", -1, -1, []*pb.CreatableReplicaAssignment{{PartitionIndex: 0, BrokerIds: []int32{1}}, {PartitionIndex: 0, BrokerIds: []int32{2}}}, pb.ErrorCode_INVALID_REPLICA_ASSIGNMENT},
		{"negative", -1, -1, []*pb.CreatableReplicaAssignment{{PartitionIndex: -1, BrokerIds: []int32{1}}}, pb.ErrorCode_INVALID_REPLICA_ASSIGNMENT},
	} {
		res := createOne(t, c, false, &pb.CreatableTopic{Name: tc.name, NumPartitions: tc.np, ReplicationFactor: tc.rf, Assignments: tc.assign})
		if res.ErrorCode != tc.code {
			t.Errorf("%s: %v %q, want %v", tc.name, res.ErrorCode, res.ErrorMessage, tc.code)
		}
		if c.Q.FSM.Image().Topic(tc.name) != nil {
			t.Errorf("%s: created though refused", tc.name)
		}
	}
}

func equal(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A topic named twice in one CreateTopics or DeleteTopics: every
// occurrence is answered INVALID_REQUEST "Duplicate topic name." (Kafka's
// ControllerApis) and nothing is done for that name; the other topics are.
func TestTopicNamedTwice(t *testing.T) {
	c := topicController(t, 1, 1, nil)
	ctx := context.Background()
	res, err := c.CreateTopics(ctx, &pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{
		{Name: "twin", NumPartitions: 1, ReplicationFactor: 1}, {Name: "single", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "twin", NumPartitions: 2, ReplicationFactor: 1}}})
	if err != nil || len(res) != 3 {
		t.Fatalf("CreateTopics: %v %v", res, err)
	}
	for _, i := range []int{0, 2} {
		if res[i].Name != "twin" || res[i].ErrorCode != pb.ErrorCode_INVALID_REQUEST || res[i].ErrorMessage != "Duplicate topic name." {
			t.Errorf("answer %d: %+v, want twin INVALID_REQUEST \"Duplicate topic name.\"", i, res[i])
		}
	}
	if res[1].ErrorCode != pb.ErrorCode_NONE {
		t.Errorf("single: %+v", res[1])
	}
	if c.Q.FSM.Image().Topic("twin") != nil || c.Q.FSM.Image().Topic("single") == nil {
		t.Fatalf("after the create: twin %v, single %v", c.Q.FSM.Image().Topic("twin"), c.Q.FSM.Image().Topic("single"))
	}
	createOne(t, c, false, &pb.CreatableTopic{Name: "other", NumPartitions: 1, ReplicationFactor: 1})
	del, err := c.DeleteTopics(ctx, &pb.DeleteTopicsRequest{Names: []string{"single", "other", "single"}})
	if err != nil || len(del) != 3 {
		t.Fatalf("DeleteTopics: %v %v", del, err)
	}
	for _, i := range []int{0, 2} {
		if del[i].ErrorCode != pb.ErrorCode_INVALID_REQUEST || del[i].ErrorMessage != "Duplicate topic name." {
			t.Errorf("delete answer %d: %+v", i, del[i])
		}
	}
	if del[1].ErrorCode != pb.ErrorCode_NONE {
		t.Errorf("other: %+v", del[1])
	}
	if c.Q.FSM.Image().Topic("single") == nil || c.Q.FSM.Image().Topic("other") != nil {
		t.Fatal("a duplicated name was deleted, or the other was not")
	}
	createOne(t, c, false, &pb.CreatableTopic{Name: "grown", NumPartitions: 1, ReplicationFactor: 1})
	grow, err := c.CreatePartitions(ctx, &pb.CreatePartitionsRequest{Topics: []*pb.CreatePartitionsTopic{
		{Name: "single", Count: 2}, {Name: "grown", Count: 3}, {Name: "single", Count: 4}}})
	if err != nil || len(grow) != 3 {
		t.Fatalf("CreatePartitions: %v %v", grow, err)
	}
	for _, i := range []int{0, 2} {
		if grow[i].ErrorCode != pb.ErrorCode_INVALID_REQUEST || grow[i].ErrorMessage != "Duplicate topic name." {
			t.Errorf("create partitions answer %d: %+v", i, grow[i])
		}
	}
	if grow[1].ErrorCode != pb.ErrorCode_NONE {
		t.Errorf("grown: %+v", grow[1])
	}
	if n := len(c.Q.FSM.Image().Topic("single").Partitions); n != 1 {
		t.Fatalf("single has %d partitions after a CreatePartitions naming it twice, want 1 (untouched)", n)
	}
}

// The internal topics' names are reserved: only a broker's creation of
// them (internal_topics) makes one, with the partitions it asks for, and
// outside max.broker.partitions, so clients filling the cap cannot keep
// the cluster from creating them; their replicas do not count against
// clients either. Neither they nor __cluster_metadata can be created by a
// client, and an internal creation names only internal topics.
func TestInternalTopicsReservedAndOutsideClientCap(t *testing.T) {
	c := topicController(t, 1, 1, func(cfg *controller.Config) { cfg.MaxBrokerPartitions = 10 })
	for _, name := range []string{"__consumer_offsets", "__transaction_state", "__cluster_metadata"} {
		res := createOne(t, c, false, &pb.CreatableTopic{Name: name, NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "1000"}})
		if res.ErrorCode != pb.ErrorCode_INVALID_REQUEST || res.ErrorMessage != "Creation of internal topic "+name+" is prohibited." {
			t.Errorf("client creation of %s: %v %q", name, res.ErrorCode, res.ErrorMessage)
		}
	}
	if res := createOne(t, c, true, &pb.CreatableTopic{Name: "plain", NumPartitions: 1, ReplicationFactor: 1}); res.ErrorCode != pb.ErrorCode_INVALID_REQUEST {
		t.Errorf("internal creation of a plain topic: %v %q", res.ErrorCode, res.ErrorMessage)
	}
	if res := createOne(t, c, true, &pb.CreatableTopic{Name: "__cluster_metadata", NumPartitions: 1, ReplicationFactor: 1}); res.ErrorCode != pb.ErrorCode_INVALID_REQUEST {
		t.Errorf("internal creation of __cluster_metadata: %v %q", res.ErrorCode, res.ErrorMessage)
	}
	// A client fills the cap.
	if res := createOne(t, c, false, &pb.CreatableTopic{Name: "filler", NumPartitions: 10, ReplicationFactor: 1}); res.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("filler: %v %q", res.ErrorCode, res.ErrorMessage)
	}
	if res := createOne(t, c, false, &pb.CreatableTopic{Name: "one-more", NumPartitions: 1, ReplicationFactor: 1}); res.ErrorCode != pb.ErrorCode_INVALID_PARTITIONS {
		t.Fatalf("over the cap: %v %q, want INVALID_PARTITIONS", res.ErrorCode, res.ErrorMessage)
	}
	for _, name := range []string{"__consumer_offsets", "__transaction_state"} {
		res := createOne(t, c, true, &pb.CreatableTopic{Name: name, NumPartitions: 6, ReplicationFactor: 1})
		if res.ErrorCode != pb.ErrorCode_NONE || res.NumPartitions != 6 {
			t.Fatalf("the cluster's creation of %s with clients at the cap: %v %q", name, res.ErrorCode, res.ErrorMessage)
		}
		if top := c.Q.FSM.Image().Topic(name); top == nil || !top.Internal || len(top.Partitions) != 6 {
			t.Fatalf("%s: %+v", name, top)
		}
	}
	// Deleting a client topic frees room for clients, whatever the
	// internal topics hold.
	if _, err := c.DeleteTopics(context.Background(), &pb.DeleteTopicsRequest{Names: []string{"filler"}}); err != nil {
		t.Fatal(err)
	}
	if res := createOne(t, c, false, &pb.CreatableTopic{Name: "fits", NumPartitions: 10, ReplicationFactor: 1}); res.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("a client topic of 10 with 12 internal replicas on the broker: %v %q", res.ErrorCode, res.ErrorMessage)
	}
	// Deleting or growing an internal topic is refused.
	del, err := c.DeleteTopics(context.Background(), &pb.DeleteTopicsRequest{Names: []string{"__consumer_offsets"}})
	if err != nil || del[0].ErrorCode != pb.ErrorCode_INVALID_REQUEST || !strings.Contains(del[0].ErrorMessage, "internal") {
		t.Fatalf("delete __consumer_offsets: %v %v", del, err)
	}
	cp, err := c.CreatePartitions(context.Background(), &pb.CreatePartitionsRequest{Topics: []*pb.CreatePartitionsTopic{{Name: "__transaction_state", Count: 7}}})
	if err != nil || cp[0].ErrorCode != pb.ErrorCode_INVALID_REQUEST {
		t.Fatalf("add a partition to __transaction_state: %v %v", cp, err)
	}
}
