package client

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/fakebroker"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// groupsClient dials a node's Groups service directly, to play a member by hand.
func groupsClient(t *testing.T, addr string) pb.GroupsClient {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return pb.NewGroupsClient(cc)
}

func devGroupNode(t *testing.T) *node.Node {
	return testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) {
		cfg.GroupConfig.InitialRebalanceDelay = 0
		cfg.GroupConfig.GroupMinSessionTimeout = 500 * time.Millisecond
		cfg.OffsetsTopic.Partitions = 5
	})
}

// pollLoop polls c until the test ends.
func pollLoop(t *testing.T, c *Consumer) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if _, err := c.Poll(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("poll: %v", err)
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		c.Close(context.Background())
	})
}

func groupOpts(addr, group, topic string, extra ...Opt) []Opt {
	return append([]Opt{Bootstrap(addr), Logger(testutil.Logger()), GroupID(group), Topics(topic), Assignors("range"),
		HeartbeatInterval(100 * time.Millisecond), SessionTimeout(3 * time.Second), FetchMaxWait(100 * time.Millisecond),
		AutoOffsetReset(ResetEarliest)}, extra...)
}

// TestGroupSilentMemberExpires: a member that stops heartbeating is
// removed after its session timeout and its partitions go to the others.
func TestGroupSilentMemberExpires(t *testing.T) {
	n := devGroupNode(t)
	adm, _ := NewAdmin(Bootstrap(n.Addr()))
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := adm.CreateTopic(ctx, TopicSpec{Name: "silent", Partitions: 6, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	c, err := NewConsumer(groupOpts(n.Addr(), "sg", "silent")...)
	if err != nil {
		t.Fatal(err)
	}
	pollLoop(t, c)
	wait.Eventually(t, 10*time.Second, "the consumer to own all six partitions", func() bool { return len(c.Assignment()) == 6 })

	// A hand-played member joins with a one-second session, takes its
	// share, then goes silent.
	gc := groupsClient(t, n.Addr())
	meta := encodeSubscription(subscription{topics: []string{"silent"}, generation: -1})
	var jr *pb.JoinGroupResponse
	for {
		jr, err = gc.JoinGroup(ctx, &pb.JoinGroupRequest{GroupId: "sg", SessionTimeoutMs: 1000, RebalanceTimeoutMs: 10000, MemberId: jr.GetMemberId(),
			ProtocolType: "consumer", ClientId: "zombie", Protocols: []*pb.GroupProtocol{{Name: "range", Metadata: meta}}})
		if err != nil {
			t.Fatal(err)
		}
		if jr.ErrorCode != pb.ErrorCode_REBALANCE_IN_PROGRESS {
			break
		}
	}
	if jr.ErrorCode != pb.ErrorCode_NONE || jr.Leader == jr.MemberId {
		t.Fatalf("zombie join %v", jr)
	}
	sr, err := gc.SyncGroup(ctx, &pb.SyncGroupRequest{GroupId: "sg", GenerationId: jr.GenerationId, MemberId: jr.MemberId})
	if err != nil || sr.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("zombie sync %v %v", sr, err)
	}
	mine, _ := decodeAssignment(sr.Assignment)
	if len(mine) != 3 {
		t.Fatalf("zombie got %v", mine)
	}
	wait.Eventually(t, 10*time.Second, "the consumer to give up three partitions", func() bool { return len(c.Assignment()) == 3 })
	start := time.Now()
	wait.Eventually(t, 10*time.Second, "the silent member's partitions to come back", func() bool { return len(c.Assignment()) == 6 })
	if waited := time.Since(start); waited < 500*time.Millisecond {
		t.Fatalf("partitions came back after %v, before the 1s session could expire", waited)
	}
	hb, err := gc.Heartbeat(ctx, &pb.HeartbeatRequest{GroupId: "sg", GenerationId: jr.GenerationId, MemberId: jr.MemberId})
	if err != nil || hb.ErrorCode != pb.ErrorCode_UNKNOWN_MEMBER_ID {
		t.Fatalf("expired member's heartbeat: %v %v", hb, err)
	}
}

// TestGroupRemovedMemberRejoins: when the coordinator forgets a member
// (here: a LeaveGroup sent on its behalf), its heartbeat gets
// UNKNOWN_MEMBER_ID, its partitions are reported lost, and it rejoins with
// a new member id.
func TestGroupRemovedMemberRejoins(t *testing.T) {
	n := devGroupNode(t)
	adm, _ := NewAdmin(Bootstrap(n.Addr()))
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := adm.CreateTopic(ctx, TopicSpec{Name: "removed", Partitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lost, assigned int
	c, err := NewConsumer(groupOpts(n.Addr(), "rg", "removed",
		OnPartitionsLost(func(tps []TopicPartition) { mu.Lock(); lost += len(tps); mu.Unlock() }),
		OnPartitionsAssigned(func(tps []TopicPartition) { mu.Lock(); assigned += len(tps); mu.Unlock() }))...)
	if err != nil {
		t.Fatal(err)
	}
	pollLoop(t, c)
	wait.Eventually(t, 10*time.Second, "the assignment", func() bool { return len(c.Assignment()) == 2 })
	before := c.GroupMetadata()
	lr, err := groupsClient(t, n.Addr()).LeaveGroup(ctx, &pb.LeaveGroupRequest{GroupId: "rg", MemberId: before.MemberID})
	if err != nil || lr.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("leave on its behalf: %v %v", lr, err)
	}
	wait.Eventually(t, 10*time.Second, "a new membership", func() bool {
		gm := c.GroupMetadata()
		return gm.MemberID != "" && gm.MemberID != before.MemberID && gm.GenerationID > before.GenerationID && len(c.Assignment()) == 2
	})
	mu.Lock()
	defer mu.Unlock()
	if lost != 2 || assigned != 4 {
		t.Fatalf("lost %d, assigned %d; want 2 lost and 2+2 assigned", lost, assigned)
	}
}

// TestCommittedRetriesUntilStable: coordinator discovery and OffsetFetch
// retry COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
// NOT_COORDINATOR and UNSTABLE_OFFSET_COMMIT until a stable answer.
func TestCommittedRetriesUntilStable(t *testing.T) {
	// FindCoordinator answers COORDINATOR_NOT_AVAILABLE first; OffsetFetch
	// answers COORDINATOR_LOAD_IN_PROGRESS, then UNSTABLE_OFFSET_COMMIT
	// for partition 1 twice, then NOT_COORDINATOR once, then the offsets.
	b := fakebroker.Start(t, fakebroker.Topic{Name: "t", Partitions: 2})
	b.Intercept("FindCoordinator", func(_ context.Context, n int, req any) (any, error) {
		r := req.(*pb.FindCoordinatorRequest)
		co := &pb.Coordinator{Key: r.Keys[0], NodeId: fakebroker.NodeID, Address: b.Addr()}
		if r.KeyType != pb.CoordinatorType_GROUP {
			co.ErrorCode = pb.ErrorCode_INVALID_REQUEST
		} else if n == 1 {
			co.ErrorCode, co.NodeId, co.Address = pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, -1, ""
		}
		return &pb.FindCoordinatorResponse{Coordinators: []*pb.Coordinator{co}}, nil
	})
	var stableSet atomic.Bool
	b.Intercept("OffsetFetch", func(_ context.Context, n int, req any) (any, error) {
		r := req.(*pb.OffsetFetchRequest)
		stableSet.Store(r.RequireStable)
		switch n {
		case 1:
			return &pb.OffsetFetchResponse{ErrorCode: pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS}, nil
		case 4:
			return &pb.OffsetFetchResponse{ErrorCode: pb.ErrorCode_NOT_COORDINATOR}, nil
		}
		resp := &pb.OffsetFetchResponse{}
		for _, p := range r.Partitions {
			out := &pb.OffsetFetchPartition{Topic: p.Topic, Partition: p.Partition, Offset: 42}
			if n < 4 && p.Partition == 1 {
				out.ErrorCode, out.Offset = pb.ErrorCode_UNSTABLE_OFFSET_COMMIT, -1
			}
			resp.Partitions = append(resp.Partitions, out)
		}
		return resp, nil
	})
	c, err := NewConsumer(Bootstrap(b.Addr()), GroupID("g"), RetryBackoff(time.Millisecond, 5*time.Millisecond), Logger(testutil.Logger()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := c.Committed(ctx, []TopicPartition{{"t", 0}, {"t", 1}})
	if err != nil {
		t.Fatal(err)
	}
	if got[TopicPartition{"t", 0}] != 42 || got[TopicPartition{"t", 1}] != 42 {
		t.Fatalf("committed %v", got)
	}
	fetches, finds := b.Calls("OffsetFetch"), b.Calls("FindCoordinator")
	if fetches != 5 || finds != 3 || !stableSet.Load() {
		t.Fatalf("%d fetches (want 5), %d FindCoordinator (want 3), require_stable %v", fetches, finds, stableSet.Load())
	}
}

// TestSessionRefusedGenerationRejoinsAtOnce: when a transaction's offset
// commit learns that the group no longer knows the member (here a
// LeaveGroup sent on its behalf; in the simulation its session expired
// while the cluster was down), the session aborts, its consumer drops the
// partitions as lost and rejoins as a new member before it reads again,
// without waiting for a heartbeat (ten seconds apart here). It used to keep
// its partitions, hand the same records to transaction after transaction
// that could only abort, as fast as the broker answered, until the next
// heartbeat: under the simulation's virtual time, for ever.
func TestSessionRefusedGenerationRejoinsAtOnce(t *testing.T) {
	n := devGroupNode(t)
	adm, _ := NewAdmin(Bootstrap(n.Addr()))
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, topic := range []string{"rin", "rout"} {
		if err := adm.CreateTopic(ctx, TopicSpec{Name: topic, Partitions: 1, ReplicationFactor: 1}); err != nil {
			t.Fatal(err)
		}
	}
	p, _ := NewProducer(Bootstrap(n.Addr()))
	if err := p.ProduceSync(ctx, &Record{Topic: "rin", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p.Close(ctx)
	var mu sync.Mutex
	lost := 0
	s, err := NewTransactSession(ctx, groupOpts(n.Addr(), "rsg", "rin", TransactionalID("rs-1"),
		HeartbeatInterval(10*time.Second), SessionTimeout(30*time.Second),
		OnPartitionsLost(func(tps []TopicPartition) { mu.Lock(); lost += len(tps); mu.Unlock() }))...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	var recs []*Record
	wait.Eventually(t, 20*time.Second, "the record", func() bool {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		defer pcancel()
		recs, _ = s.Poll(pctx)
		return len(recs) == 1
	})
	before := s.Consumer().GroupMetadata()
	lr, err := groupsClient(t, n.Addr()).LeaveGroup(ctx, &pb.LeaveGroupRequest{GroupId: "rsg", MemberId: before.MemberID})
	if err != nil || lr.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("leave on its behalf: %v %v", lr, err)
	}
	if err := s.Begin(); err != nil {
		t.Fatal(err)
	}
	s.Produce(ctx, &Record{Topic: "rout", Value: []byte("y")}, nil)
	committed, err := s.End(ctx, TryCommit)
	if committed || err != nil {
		t.Fatalf("End with a generation the group forgot: committed=%v err=%v; want an abort", committed, err)
	}
	// The next Poll drops the partition as lost and rejoins: any record
	// it returns is read under the new membership.
	pctx, pcancel := context.WithTimeout(ctx, time.Second)
	again, _ := s.Poll(pctx)
	pcancel()
	gm := s.Consumer().GroupMetadata()
	mu.Lock()
	l := lost
	mu.Unlock()
	if l != 1 || (len(again) > 0 && gm.MemberID == before.MemberID) {
		t.Fatalf("after the refused commit: %d partitions lost, Poll returned %d records as member %q (forgotten: %q); want 1 lost and nothing read under the forgotten id",
			l, len(again), gm.MemberID, before.MemberID)
	}
	wait.Eventually(t, 20*time.Second, "the record again under the new membership", func() bool {
		if len(again) > 0 {
			return true
		}
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		defer pcancel()
		again, _ = s.Poll(pctx)
		return len(again) > 0
	})
	if gm := s.Consumer().GroupMetadata(); gm.MemberID == before.MemberID || string(again[0].Value) != "x" {
		t.Fatalf("read %q as member %q after the forgotten %q", again[0].Value, gm.MemberID, before.MemberID)
	}
	if err := s.Begin(); err != nil {
		t.Fatal(err)
	}
	s.Produce(ctx, &Record{Topic: "rout", Value: []byte("y")}, nil)
	if ok, err := s.End(ctx, TryCommit); !ok || err != nil {
		t.Fatalf("the transaction under the new membership: committed=%v err=%v", ok, err)
	}
}
