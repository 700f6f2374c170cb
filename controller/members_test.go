package controller_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/controller"
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/testcluster"
)

func voterIDs(vs []controller.Voter) []int32 {
	var out []int32
	for _, v := range vs {
		out = append(out, v.ID)
	}
	slices.Sort(out)
	return out
}

func wantCode(t *testing.T, what string, err error, code pb.ErrorCode) {
	t.Helper()
	if got := errs.CodeOf(err); got != code {
		t.Fatalf("%s: %v (code %s), want %s", what, err, got, code)
	}
}

// TestGrowBrokerOnly: three combined nodes, then a fourth broker-only
// node joins by gossip (strand server --roles broker --join). At once it
// is registered, unfenced and in Metadata, and a topic with a replica on
// every broker is written and read through it. Then UnregisterBroker: its
// errors, its effect on a stopped broker, and a live broker registering
// again.
func TestGrowBrokerOnly(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 3})
	m := c.AddNode(testcluster.NodeSpec{Broker: true})
	if m.ID != 4 || m.Node.Quorum != nil {
		t.Fatalf("added node %d, quorum %v: want broker-only node 4", m.ID, m.Node.Quorum)
	}
	// Ready means the new broker's own image lists it registered and unfenced.
	if b := m.Node.Repl.Image().Brokers[4]; b == nil || b.Fenced {
		t.Fatalf("node 4 in its own image: %+v", b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(m.Cfg.KafkaListen), kgo.DefaultProduceTopic("grown"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := md.Brokers.NodeIDs(); !slices.Equal(got, []int32{1, 2, 3, 4}) {
		t.Fatalf("Metadata brokers through node 4 = %v", got)
	}
	// Replication factor 4: a replica on the new broker, created and used
	// through it.
	created, err := adm.CreateTopic(ctx, 2, 4, nil, "grown")
	if err != nil || created.Err != nil {
		t.Fatalf("CreateTopic: %v %v", err, created.Err)
	}
	c.Eventually(20*time.Second, "grown's ISRs hold all four brokers", func() bool {
		tp := c.Image().Topic("grown")
		if tp == nil {
			return false
		}
		for _, p := range tp.Partitions {
			if len(p.ISR) != 4 || !slices.Contains(p.Replicas, 4) {
				return false
			}
		}
		return true
	})
	for i := 0; i < 20; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("produce through node 4: %v", err)
		}
	}
	rd, err := kgo.NewClient(kgo.SeedBrokers(m.Cfg.KafkaListen), kgo.ConsumeTopics("grown"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	got := 0
	for got < 20 {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of 20 records through node 4", got)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		got += fs.NumRecords()
	}

	// UnregisterBroker: unknown ids are BROKER_ID_NOT_REGISTERED.
	sdk, err := client.NewAdmin(c.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer sdk.Close()
	// The new broker follows the metadata log: DescribeQuorum lists it as
	// an observer with its log end offset, beside the three voters.
	c.Eventually(10*time.Second, "node 4 an observer in DescribeQuorum", func() bool {
		q, err := sdk.DescribeQuorum(ctx)
		if err != nil || len(q.Voters) != 3 || len(q.Observers) != 1 {
			return false
		}
		o := q.Observers[0]
		return o.NodeId == 4 && o.LogEndOffset > 0 && o.LastFetchTimestampMs > 0 && q.HighWatermark >= o.LogEndOffset
	})
	wantCode(t, "UnregisterBroker(99)", sdk.UnregisterBroker(ctx, 99), pb.ErrorCode_BROKER_ID_NOT_REGISTERED)
	// A stopped broker's registration goes; its replicas stay listed (as
	// in Kafka) but it leaves every ISR.
	c.Stop(4)
	if err := sdk.UnregisterBroker(ctx, 4); err != nil {
		t.Fatalf("UnregisterBroker(4): %v", err)
	}
	c.Eventually(10*time.Second, "broker 4 gone from every image and ISR", func() bool {
		for _, r := range c.Running() {
			img := r.Node.Repl.Image()
			if img.Brokers[4] != nil {
				return false
			}
			for _, p := range img.Topic("grown").Partitions {
				if p.InISR(4) || p.Leader == 4 {
					return false
				}
			}
		}
		return true
	})
	wantCode(t, "UnregisterBroker(4) twice", sdk.UnregisterBroker(ctx, 4), pb.ErrorCode_BROKER_ID_NOT_REGISTERED)
	// The same through the Kafka listener (franz-go's kmsg: kadm has no
	// UnregisterBroker).
	kc, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	ureq := kmsg.NewPtrUnregisterBrokerRequest()
	ureq.BrokerID = 4
	uresp, err := ureq.RequestWith(ctx, kc)
	if err != nil || uresp.ErrorCode != int16(pb.ErrorCode_BROKER_ID_NOT_REGISTERED) {
		t.Fatalf("Kafka UnregisterBroker(4) = %+v, %v; want BROKER_ID_NOT_REGISTERED", uresp, err)
	}
	// A live broker unregistered registers again on its next heartbeat,
	// with a new broker epoch.
	old := c.Image().Brokers[3].Epoch
	ureq.BrokerID = 3
	if uresp, err = ureq.RequestWith(ctx, kc); err != nil || uresp.ErrorCode != 0 {
		t.Fatalf("Kafka UnregisterBroker(3) = %+v, %v", uresp, err)
	}
	c.Eventually(20*time.Second, "broker 3 registered again and unfenced", func() bool {
		b := c.Image().Brokers[3]
		return b != nil && b.Epoch > old && !b.Fenced
	})
}

// TestQuorumAddRemoveVoter: a fourth node with the controller role starts
// as no voter (its --controller-voters do not name it), AddRaftVoter
// through the Kafka listener makes it one, the quorum then survives losing
// an original voter, and RemoveVoter shrinks the quorum back to three.
// The Raft configuration is asserted at each step.
func TestQuorumAddRemoveVoter(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 3})
	m := c.AddNode(testcluster.NodeSpec{Broker: true, Controller: true})
	if got := m.Node.Quorum.Voters(); len(got) != 0 {
		t.Fatalf("a new controller started with Raft configuration %v, want none", got)
	}
	leaderVoters := func() []int32 {
		a := c.ActiveController()
		if a < 0 {
			return nil
		}
		return voterIDs(c.Member(a).Node.Quorum.Voters())
	}
	if got := leaderVoters(); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("voters before = %v", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	kc, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()[:3]...))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	add := kmsg.NewPtrAddRaftVoterRequest()
	add.VoterID, add.TimeoutMillis = 4, 10000
	l := kmsg.NewAddRaftVoterRequestListener()
	host, port := splitHostPort(t, m.Cfg.ControllerListen)
	l.Name, l.Host, l.Port = "CONTROLLER", host, port
	add.Listeners = append(add.Listeners, l)
	aresp, err := add.RequestWith(ctx, kc)
	if err != nil || aresp.ErrorCode != 0 {
		t.Fatalf("AddRaftVoter(4) = %+v, %v", aresp, err)
	}
	if got := leaderVoters(); !slices.Equal(got, []int32{1, 2, 3, 4}) {
		t.Fatalf("voters after AddRaftVoter = %v", got)
	}
	c.Eventually(20*time.Second, "node 4's Raft has the four voters", func() bool {
		return slices.Equal(voterIDs(m.Node.Quorum.Voters()), []int32{1, 2, 3, 4})
	})
	c.WaitReady(30 * time.Second)
	if aresp, err = add.RequestWith(ctx, kc); err != nil || aresp.ErrorCode != int16(pb.ErrorCode_DUPLICATE_VOTER) {
		t.Fatalf("AddRaftVoter(4) again = %+v, %v; want DUPLICATE_VOTER", aresp, err)
	}
	// DescribeQuorum through the Kafka listener lists the four voters.
	dq := kmsg.NewPtrDescribeQuorumRequest()
	dt := kmsg.NewDescribeQuorumRequestTopic()
	dt.Topic = "__cluster_metadata"
	dt.Partitions = append(dt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	dq.Topics = append(dq.Topics, dt)
	dresp, err := dq.RequestWith(ctx, kc)
	if err != nil || dresp.ErrorCode != 0 || len(dresp.Topics) != 1 || len(dresp.Topics[0].Partitions) != 1 {
		t.Fatalf("DescribeQuorum = %+v, %v", dresp, err)
	}
	var ids []int32
	for _, v := range dresp.Topics[0].Partitions[0].CurrentVoters {
		ids = append(ids, v.ReplicaID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []int32{1, 2, 3, 4}) {
		t.Fatalf("DescribeQuorum voters = %v", ids)
	}

	// Lose an original voter, the active controller if it is one.
	victim := c.ActiveController()
	if victim == 4 || victim < 0 {
		victim = 1
	}
	c.Kill(victim)
	c.Eventually(20*time.Second, "an active controller after losing voter "+fmt.Sprint(victim), func() bool {
		a := c.ActiveController()
		return a >= 0 && a != victim
	})
	c.CreateTopic("after-loss", 1, 3, nil)

	sdk, err := client.NewAdmin(c.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer sdk.Close()
	if err := sdk.RemoveVoter(ctx, victim); err != nil {
		t.Fatalf("RemoveVoter(%d): %v", victim, err)
	}
	want := slices.DeleteFunc([]int32{1, 2, 3, 4}, func(id int32) bool { return id == victim })
	if got := leaderVoters(); !slices.Equal(got, want) {
		t.Fatalf("voters after RemoveVoter(%d) = %v, want %v", victim, got, want)
	}
	wantCode(t, "RemoveVoter twice", sdk.RemoveVoter(ctx, victim), pb.ErrorCode_VOTER_NOT_FOUND)
	q, err := sdk.DescribeQuorum(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var qv []int32
	for _, v := range q.Voters {
		qv = append(qv, v.NodeId)
	}
	slices.Sort(qv)
	if !slices.Equal(qv, want) || q.LeaderId != c.ActiveController() || q.HighWatermark <= 0 || q.LeaderEpoch <= 0 {
		t.Fatalf("DescribeQuorum = %+v, want voters %v", q, want)
	}
	// The three voters left still commit.
	c.CreateTopic("after-shrink", 1, 2, nil)

	// Restarts with the unchanged command line (--controller-voters as at
	// first start) find their changed Raft configuration: an original
	// voter and the added one.
	for _, id := range []int32{want[0], 4} {
		c.Stop(id)
		c.Start(id)
		c.WaitReady(30 * time.Second)
		if got := voterIDs(c.Member(id).Node.Quorum.Voters()); !slices.Equal(got, want) {
			t.Fatalf("node %d restarted with voters %v, want %v", id, got, want)
		}
	}
	c.CreateTopic("after-restarts", 1, 3, nil)
}

func splitHostPort(t *testing.T, addr string) (string, uint16) {
	t.Helper()
	var host string
	var port uint16
	i := len(addr) - 1
	for i >= 0 && addr[i] != ':' {
		i--
	}
	host = addr[:i]
	if _, err := fmt.Sscan(addr[i+1:], &port); err != nil {
		t.Fatal(err)
	}
	return host, port
}

// TestQuorumChangeErrors: the refusals of AddVoter and RemoveVoter on a
// one-voter quorum.
func TestQuorumChangeErrors(t *testing.T) {
	addr := freeAddr(t)
	q := startLeader(t, quorumConfig(t.TempDir(), addr, []controller.Voter{{ID: 1, Addr: addr}}))
	defer q.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wantCode(t, "AddVoter(self)", q.AddVoter(ctx, 1, addr), pb.ErrorCode_DUPLICATE_VOTER)
	wantCode(t, "AddVoter bad address", q.AddVoter(ctx, 2, "nohostport"), pb.ErrorCode_INVALID_REQUEST)
	wantCode(t, "AddVoter negative id", q.AddVoter(ctx, -1, "127.0.0.1:1"), pb.ErrorCode_INVALID_REQUEST)
	wantCode(t, "AddVoter nothing listening", q.AddVoter(ctx, 2, freeAddr(t)), pb.ErrorCode_REQUEST_TIMED_OUT)
	wantCode(t, "RemoveVoter unknown", q.RemoveVoter(ctx, 9), pb.ErrorCode_VOTER_NOT_FOUND)
	wantCode(t, "RemoveVoter last", q.RemoveVoter(ctx, 1), pb.ErrorCode_INVALID_REQUEST)
	if got := voterIDs(q.Voters()); !slices.Equal(got, []int32{1}) {
		t.Fatalf("voters after refused changes = %v", got)
	}
	var e *errs.Error
	if err := q.RemoveVoter(ctx, 1); !errors.As(err, &e) || e.Message == "" {
		t.Fatalf("RemoveVoter last: %v, want a message", err)
	}
}
