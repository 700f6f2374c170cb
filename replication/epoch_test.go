package replication_test

// Real cluster on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet
// (one test edits a segment file on the real disk; SimDisk could hold it).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strand-io/strand/client"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/testcluster"
)

func produceValues(t *testing.T, c *testcluster.Cluster, topic string, from, to int) *ackLog {
	t.Helper()
	p, err := client.NewProducer(c.ClientOpts(client.WithPartitioner(client.ManualPartitioner{}), client.RequestTimeout(2*time.Second), client.DeliveryTimeout(time.Minute))...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	acks := newAckLog()
	for i := from; i < to; i++ {
		p.Produce(ctx, &client.Record{Topic: topic, Value: []byte(strconv.Itoa(i))}, acks.promise)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close(ctx)
	if len(acks.errs) > 0 {
		t.Fatalf("produce: %v", acks.errs[0])
	}
	return acks
}

func merge(a, b *ackLog) *ackLog {
	for p, m := range b.acked {
		if a.acked[p] == nil {
			a.acked[p] = map[int]int64{}
		}
		for v, o := range m {
			a.acked[p][v] = o
		}
	}
	return a
}

// TestStoppedFollowerRejoins: a stopped follower drops out of the ISR,
// restarts, truncates by leader epoch, catches up and rejoins.
func TestStoppedFollowerRejoins(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	c.CreateTopic("f", 1, 3, map[string]string{"min.insync.replicas": "2"})
	acks := produceValues(t, c, "f", 0, 500)
	part := c.Partition("f", 0)
	follower := part.Replicas[1]
	c.Kill(follower)
	c.Eventually(20*time.Second, "follower out of the ISR", func() bool {
		return !c.Partition("f", 0).InISR(follower)
	})
	acks = merge(acks, produceValues(t, c, "f", 500, 1500))
	c.Start(follower)
	c.WaitReady(20 * time.Second)
	c.Eventually(30*time.Second, "follower back in the ISR", func() bool {
		return c.Partition("f", 0).InISR(follower)
	})
	l := c.Log(follower, "f", 0)
	leader := c.Log(c.Partition("f", 0).Leader, "f", 0)
	if l.LogEndOffset() != leader.LogEndOffset() {
		t.Fatalf("follower at %d, leader at %d", l.LogEndOffset(), leader.LogEndOffset())
	}
	if got, want := fmt.Sprint(l.Epochs()), fmt.Sprint(leader.Epochs()); got != want {
		t.Fatalf("epoch histories differ: follower %s, leader %s", got, want)
	}
	sameLogs(t, c, "f", 0)
	checkExactlyOnce(t, acks, readAll(t, c, "f", 1))
}

// TestDivergentSuffixIsTruncated: a leader that is isolated keeps a suffix
// nobody acknowledged; after the partition heals it truncates it by leader
// epoch and follows the new leader, and every replica ends identical
// (KIP-101's shouldNotAllowDivergentLogs, and the zombie leader R5/R6).
func TestDivergentSuffixIsTruncated(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	c.CreateTopic("d", 1, 3, map[string]string{"min.insync.replicas": "2"})
	acks := produceValues(t, c, "d", 0, 200)
	old := c.Partition("d", 0).Leader
	// Write straight to the old leader after cutting it off: the append
	// lands in its log but can never reach the HW.
	c.Isolate(old)
	conn, err := grpc.NewClient("passthrough:///"+c.Member(old).Cfg.Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := pb.NewProducerClient(conn).Produce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	batch, _ := record.Build(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []record.Record{{Value: []byte("zombie")}, {Value: []byte("zombie2")}})
	if err := st.Send(&pb.ProduceRequest{CorrelationId: 1, Acks: -1, TimeoutMs: 1000, Partitions: []*pb.PartitionRecords{{Topic: "d", Partition: 0, Records: batch}}}); err != nil {
		t.Fatal(err)
	}
	resp, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Partitions[0].ErrorCode; code == pb.ErrorCode_NONE {
		t.Fatal("an isolated leader acknowledged an acks=all write")
	}
	zombieEnd := c.Log(old, "d", 0).LogEndOffset()
	c.Eventually(20*time.Second, "a new leader", func() bool {
		p := c.Partition("d", 0)
		return p.Leader >= 0 && p.Leader != old
	})
	acks = merge(acks, produceValues(t, c, "d", 200, 300))
	c.Heal(old)
	c.Eventually(30*time.Second, "old leader back in the ISR", func() bool { return c.Partition("d", 0).InISR(old) })
	if c.Log(old, "d", 0).LogEndOffset() == zombieEnd && c.Log(c.Partition("d", 0).Leader, "d", 0).LogEndOffset() != zombieEnd {
		t.Fatal("old leader kept its unacknowledged suffix")
	}
	sameLogs(t, c, "d", 0)
	for _, r := range readAll(t, c, "d", 1)[0] {
		if string(r.Value) == "zombie" || string(r.Value) == "zombie2" {
			t.Fatalf("the zombie leader's unacknowledged write survived at offset %d", r.Offset)
		}
	}
	checkExactlyOnce(t, acks, readAll(t, c, "d", 1))
}

// TestKIP101FollowerRestartThenLeaderDies is KIP-101 scenario 1: the
// follower restarts right after a write is acknowledged (before it learns
// the new HW), then the leader dies. Truncating to its HW would lose the
// acknowledged write; truncating by leader epoch keeps it.
func TestKIP101FollowerRestartThenLeaderDies(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	c.CreateTopic("k1", 1, 2, map[string]string{"min.insync.replicas": "1"})
	acks := produceValues(t, c, "k1", 0, 1)
	acks = merge(acks, produceValues(t, c, "k1", 1, 2)) // m2
	p := c.Partition("k1", 0)
	leader, follower := p.Leader, p.Replicas[0]
	if follower == leader {
		follower = p.Replicas[1]
	}
	c.Kill(follower)
	c.Start(follower)
	c.WaitReady(20 * time.Second)
	if l := c.Log(follower, "k1", 0); l.LogEndOffset() < 2 {
		t.Fatalf("restarted follower truncated to %d before fetching", l.LogEndOffset())
	}
	c.Eventually(30*time.Second, "follower back in the ISR", func() bool { return c.Partition("k1", 0).InISR(follower) })
	c.Kill(leader)
	c.Eventually(30*time.Second, "follower elected", func() bool { return c.Partition("k1", 0).Leader == follower })
	acks = merge(acks, produceValues(t, c, "k1", 2, 3))
	checkExactlyOnce(t, acks, readAll(t, c, "k1", 1))
	c.Start(leader)
	c.WaitReady(20 * time.Second)
	sameLogs(t, c, "k1", 0)
}

// lostTailSetup writes m1 and m2 to a two-replica partition, stops both
// replicas (B first) and cuts m2 from B's segment (page cache lost on B). It returns
// A (which still has m2) and B.
func lostTailSetup(t *testing.T, c *testcluster.Cluster, topic string) (a, b int32) {
	t.Helper()
	produceValues(t, c, topic, 0, 1) // m1
	p := c.Partition(topic, 0)
	a, b = p.Replicas[0], p.Replicas[1]
	produceValues(t, c, topic, 1, 2) // m2, acknowledged by both
	c.Eventually(10*time.Second, "m2 on B", func() bool { return c.Log(b, topic, 0).LogEndOffset() == 2 })
	// B goes first and is fenced before A dies, so the ISR ends as {A}:
	// the replica that kept m2 is the last one known in sync. (The other
	// order leaves {B}, and B, restarted with its tail lost, would be
	// elected from it; Kafka closes that gap with KIP-966's unclean-shutdown
	// rule, which Strand does not have yet.)
	c.Kill(b)
	c.Eventually(30*time.Second, "B fenced out of the ISR", func() bool { return !c.Partition(topic, 0).InISR(b) })
	c.Kill(a)
	seg := filepath.Join(c.Member(b).Dir, topic+"-0", "00000000000000000000.log")
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := record.ParseHeader(data)
	if err != nil || h.LastOffset() != 0 || len(data) <= h.Size() {
		t.Fatalf("segment does not start with m1 followed by m2: %v", err)
	}
	if err := os.Truncate(seg, int64(h.Size())); err != nil {
		t.Fatal(err)
	}
	return a, b
}

func values(recs []*client.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, fmt.Sprintf("%d:%s", r.Offset, r.Value))
	}
	return out
}

// TestKIP101LostTailWaitsForIntactReplica is KIP-101 scenario 2 under
// Strand's clean election: both replicas stop after m2 is acknowledged (B
// first, so the ISR ends as {A}) and m2 is cut from B's log. B starts
// first. A restarted broker does not rejoin the ISR until it has caught
// up, so B is not elected from its damaged log: the partition waits for A,
// A leads with m2, B truncates to A's log by epoch and catches up. Nothing acknowledged is lost and both
// logs end identical.
func TestKIP101LostTailWaitsForIntactReplica(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	c.CreateTopic("k2", 1, 2, map[string]string{"min.insync.replicas": "1"})
	a, b := lostTailSetup(t, c, "k2")
	c.Start(b)
	c.WaitReady(30 * time.Second)
	// A's session ends (A is fenced) while B is live: B must still not
	// lead. A topic created afterwards is a barrier: the controller writes
	// in order, so any election the fence caused shows by the time it does.
	c.Eventually(30*time.Second, "A fenced", func() bool {
		ba := c.Image().Brokers[a]
		return ba == nil || ba.Fenced
	})
	c.CreateTopic("k2-barrier", 1, 1, nil)
	if l := c.Partition("k2", 0).Leader; l == b {
		t.Fatal("B was elected from a log that lost an acknowledged record")
	}
	c.Start(a)
	c.WaitReady(30 * time.Second)
	c.Eventually(30*time.Second, "A leads, B back in the ISR", func() bool {
		p := c.Partition("k2", 0)
		return p.Leader == a && p.InISR(b)
	})
	sameLogs(t, c, "k2", 0)
	if got := fmt.Sprint(values(readAll(t, c, "k2", 1)[0])); got != "[0:0 1:1]" {
		t.Fatalf("log is %s, want m1 and m2", got)
	}
}

// TestKIP101LostTailUncleanElection is the same with
// unclean.leader.election.enable=true (KIP-101 as Kafka runs it): B is
// elected from its short log and takes m3 at m2's offset; when A returns it
// truncates its m2 by leader epoch, so both logs end identical and no
// offset holds two values (m2 is the loss the unclean election accepted).
func TestKIP101LostTailUncleanElection(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	c.CreateTopic("k3", 1, 2, map[string]string{"min.insync.replicas": "1", "unclean.leader.election.enable": "true"})
	a, b := lostTailSetup(t, c, "k3")
	c.Start(b)
	c.Eventually(30*time.Second, "B elected", func() bool { return c.Partition("k3", 0).Leader == b })
	produceValues(t, c, "k3", 2, 3) // m3
	c.Start(a)
	c.WaitReady(30 * time.Second)
	c.Eventually(30*time.Second, "A back in the ISR", func() bool { return c.Partition("k3", 0).InISR(a) })
	sameLogs(t, c, "k3", 0)
	if got := fmt.Sprint(values(readAll(t, c, "k3", 1)[0])); got != "[0:0 1:2]" {
		t.Fatalf("log is %s, want m1 then m3", got)
	}
}
