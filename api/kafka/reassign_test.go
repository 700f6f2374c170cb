package kafka_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/metadata"
	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/wait"
)

// TestReassign: a four-node cluster (three controllers, four brokers).
// Reassignments go through franz-go's kadm against the Kafka listeners:
// one shown in progress and cancelled, a data partition moved off its
// leader with acked records read back from the new leader, and a
// __transaction_state partition moved between two committed transactions.
func TestReassign(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 4, Roles: func(id int32) (bool, bool) { return true, id <= 3 }})
	adm := kadmClient(t, c)
	t.Run("kadm list and cancel", func(t *testing.T) { testReassignListCancel(t, c, adm) })
	t.Run("move data partition", func(t *testing.T) { testReassignData(t, c, adm) })
	t.Run("move transaction state partition", func(t *testing.T) { testReassignTxnState(t, c, adm) })
	t.Run("move consumer offsets partition", func(t *testing.T) { testReassignOffsets(t, c, adm) })
}

func lookup[R any](m map[string]map[int32]R, topic string, p int32) (R, bool) {
	r, ok := m[topic][p]
	return r, ok
}

func kadmClient(t *testing.T, c *testcluster.Cluster) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// othersThan is every broker of the cluster but id, in id order.
func othersThan(c *testcluster.Cluster, id int32) []int32 {
	var out []int32
	for _, m := range c.Members() {
		if m.ID != id {
			out = append(out, m.ID)
		}
	}
	return out
}

func alter(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, p int32, target []int32) {
	t.Helper()
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, p, target)
	resp, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := lookup(resp, topic, p)
	if !ok || r.Err != nil {
		t.Fatalf("AlterPartitionAssignments %s-%d -> %v: %v (found %v)", topic, p, target, r.Err, ok)
	}
}

// waitMoved waits until every running broker's image has topic-p on
// exactly target with no reassignment in progress and a leader.
func waitMoved(t *testing.T, c *testcluster.Cluster, topic string, p int32, target []int32) *metadata.Partition {
	t.Helper()
	c.Eventually(60*time.Second, fmt.Sprintf("%s-%d moved to %v", topic, p, target), func() bool {
		for _, m := range c.Running() {
			if m.Node.Repl == nil {
				continue
			}
			ip := m.Node.Repl.Image().Partition(topic, p)
			if ip == nil || ip.Reassigning() || fmt.Sprint(ip.Replicas) != fmt.Sprint(target) || ip.Leader < 0 {
				return false
			}
		}
		return true
	})
	return c.Partition(topic, p)
}

func testReassignListCancel(t *testing.T, c *testcluster.Cluster, adm *kadm.Client) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.CreateTopic("reassign-list", 1, 2, nil)
	p := c.Partition("reassign-list", 0)
	var spare int32 = -1
	for _, m := range c.Members() {
		if !p.IsReplica(m.ID) && m.ID != c.ActiveController() && m.ID != 4 {
			spare = m.ID
		}
	}
	if spare < 0 { // broker 4 holds no controller; use it
		spare = 4
	}
	if p.IsReplica(spare) {
		t.Fatalf("no spare broker for %v", p.Replicas)
	}
	// The spare broker is stopped (registered, fenced): it cannot catch
	// up, so the reassignment stays in progress.
	c.Stop(spare)
	defer func() {
		c.Start(spare)
		c.WaitReady(30 * time.Second)
	}()
	target := []int32{p.Replicas[0], spare}
	alter(t, ctx, adm, "reassign-list", 0, target)
	var listed kadm.ListPartitionReassignmentsResponses
	var listErr error
	_ = wait.Until(60*time.Second, "reassign-list-0 to be listed", func() bool {
		if listed, listErr = adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"reassign-list": {0: {}}}); listErr != nil {
			return true
		}
		_, ok := lookup(listed, "reassign-list", 0)
		return ok
	})
	if listErr != nil {
		t.Fatal(listErr)
	}
	r, ok := lookup(listed, "reassign-list", 0)
	if !ok {
		t.Fatalf("ListPartitionReassignments does not list reassign-list-0: %v", listed)
	}
	removed := p.Replicas[1]
	if fmt.Sprint(r.Replicas) != fmt.Sprint([]int32{p.Replicas[0], spare, removed}) || fmt.Sprint(r.AddingReplicas) != fmt.Sprint([]int32{spare}) ||
		fmt.Sprint(r.RemovingReplicas) != fmt.Sprint([]int32{removed}) {
		t.Fatalf("listed %+v, want replicas [%d %d %d] adding [%d] removing [%d]", r, p.Replicas[0], spare, removed, spare, removed)
	}
	// All reassignments (null topics; kadm never sends that, so kmsg).
	kreq := kmsg.NewPtrListPartitionReassignmentsRequest()
	kresp, err := kreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, kt := range kresp.Topics {
		for _, kp := range kt.Partitions {
			found = found || (kt.Topic == "reassign-list" && kp.Partition == 0)
		}
	}
	if !found || kresp.ErrorCode != 0 {
		t.Fatalf("listing all reassignments misses reassign-list-0: %+v", kresp)
	}
	// Validation: unknown partition, duplicate broker, unregistered broker.
	var bad kadm.AlterPartitionAssignmentsReq
	bad.Assign("reassign-list", 7, []int32{1})
	bad.Assign("no-such-topic", 0, []int32{1})
	resp, err := adm.AlterPartitionAssignments(ctx, bad)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range []struct {
		topic string
		p     int32
	}{{"reassign-list", 7}, {"no-such-topic", 0}} {
		if r, _ := lookup(resp, tp.topic, tp.p); !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			t.Fatalf("%s-%d: %v, want UNKNOWN_TOPIC_OR_PARTITION", tp.topic, tp.p, r.Err)
		}
	}
	for _, target := range [][]int32{{1, 1}, {1, 99}} {
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign("reassign-list", 0, target)
		resp, err := adm.AlterPartitionAssignments(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := lookup(resp, "reassign-list", 0); !errors.Is(r.Err, kerr.InvalidReplicaAssignment) {
			t.Fatalf("target %v: %v, want INVALID_REPLICA_ASSIGNMENT", target, r.Err)
		}
	}
	// Cancel (a nil replica list): back to the original replicas.
	var cancelReq kadm.AlterPartitionAssignmentsReq
	cancelReq.Assign("reassign-list", 0, nil)
	resp, err = adm.AlterPartitionAssignments(ctx, cancelReq)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := lookup(resp, "reassign-list", 0); r.Err != nil {
		t.Fatalf("cancel: %v", r.Err)
	}
	after, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"reassign-list": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := lookup(after, "reassign-list", 0); ok {
		t.Fatalf("reassign-list-0 still listed after the cancel: %v", after)
	}
	np := c.Partition("reassign-list", 0)
	got := append([]int32(nil), np.Replicas...)
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	want := append([]int32(nil), p.Replicas...)
	sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the cancel replicas are %v, want the original %v", np.Replicas, p.Replicas)
	}
	resp, err = adm.AlterPartitionAssignments(ctx, cancelReq)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := lookup(resp, "reassign-list", 0); !errors.Is(r.Err, kerr.NoReassignmentInProgress) {
		t.Fatalf("second cancel: %v, want NO_REASSIGNMENT_IN_PROGRESS", r.Err)
	}
}

func testReassignData(t *testing.T, c *testcluster.Cluster, adm *kadm.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const topic = "reassign-data"
	c.CreateTopic(topic, 1, 3, nil)
	before := c.Partition(topic, 0)
	oldLeader := before.Leader
	target := othersThan(c, oldLeader) // the leader leaves; one broker joins
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var mu sync.Mutex
	acked := map[string]int64{}
	produce := func(i int) error {
		r, err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i)), Partition: 0}).First()
		if err != nil {
			return err
		}
		mu.Lock()
		acked[string(r.Value)] = r.Offset
		mu.Unlock()
		return nil
	}
	for i := 0; i < 300; i++ {
		if err := produce(i); err != nil {
			t.Fatal(err)
		}
	}
	// Keep producing while the partition moves.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var prodErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 300; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := produce(i); err != nil {
				prodErr = err
				return
			}
		}
	}()
	alter(t, ctx, adm, topic, 0, target)
	after := waitMoved(t, c, topic, 0, target)
	close(stop)
	wg.Wait()
	if prodErr != nil {
		t.Fatalf("produce during the reassignment: %v", prodErr)
	}
	if after.Leader == oldLeader || after.Leader != target[0] || after.LeaderEpoch <= before.LeaderEpoch {
		t.Fatalf("after the move: leader %d epoch %d (before: %d epoch %d), want %d with a new epoch", after.Leader, after.LeaderEpoch, oldLeader, before.LeaderEpoch, target[0])
	}
	c.Eventually(30*time.Second, "the removed replica's log deleted", func() bool { return c.Log(oldLeader, topic, 0) == nil })
	// A few more after the move, so the read spans both leaders' records.
	for i := 100000; i < 100010; i++ {
		if err := produce(i); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	t.Logf("%s-0 moved from %v (leader %d) to %v (leader %d); %d records acked", topic, before.Replicas, oldLeader, after.Replicas, after.Leader, n)
	// Every acked record is on the new leader at its offset.
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[string]int64{}
	for len(got) < n && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = r.Offset })
	}
	for v, off := range acked {
		if g, ok := got[v]; !ok || g != off {
			t.Fatalf("acked record %s at offset %d: read back at %d (found %v)", v, off, g, ok)
		}
	}
	// Each replica of the target holds the whole log.
	end := c.Log(after.Leader, topic, 0).LogEndOffset()
	c.Eventually(30*time.Second, "every new replica caught up", func() bool {
		for _, id := range target {
			if l := c.Log(id, topic, 0); l == nil || l.LogEndOffset() < end {
				return false
			}
		}
		return true
	})
}

func testReassignTxnState(t *testing.T, c *testcluster.Cluster, adm *kadm.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const topic = "reassign-txn-data"
	c.CreateTopic(topic, 1, 3, nil)
	cl := txnProducer(t, ctx, c, "reassign-txn", topic, false)
	txn(t, ctx, cl, true, []int32{0}, "a1", "a2", "a3")
	// The transaction's state partition: the one partition of
	// __transaction_state with records.
	st := c.Image().Topic(metadata.InternalTransactionTopic)
	if st == nil {
		t.Fatal("no __transaction_state topic after a transaction")
	}
	var part *metadata.Partition
	for _, p := range st.Partitions {
		if l := c.Log(p.Leader, p.Topic, p.Partition); l != nil && l.LogEndOffset() > 0 {
			if part != nil {
				t.Fatalf("two __transaction_state partitions hold records: %d and %d", part.Partition, p.Partition)
			}
			part = p
		}
	}
	if part == nil {
		t.Fatal("no __transaction_state partition holds the transaction")
	}
	target := othersThan(c, part.Leader)
	alter(t, ctx, adm, part.Topic, part.Partition, target)
	after := waitMoved(t, c, part.Topic, part.Partition, target)
	t.Logf("%s-%d moved from %v (leader %d) to %v (leader %d)", part.Topic, part.Partition, part.Replicas, part.Leader, after.Replicas, after.Leader)
	if after.Leader == part.Leader {
		t.Fatalf("the coordinator's partition kept leader %d", after.Leader)
	}
	// The same producer commits again through the coordinator on the new leader.
	txn(t, ctx, cl, true, []int32{0}, "b1", "b2")
	got := readCommitted(t, ctx, c, topic, 1)[0]
	if fmt.Sprint(got) != fmt.Sprint([]string{"a1", "a2", "a3", "b1", "b2"}) {
		t.Fatalf("read_committed after the move: %v", got)
	}
}

// testReassignOffsets: a group's committed offset survives its
// __consumer_offsets partition moving off its leader, and the group
// coordinator on the new leader takes the next commit.
func testReassignOffsets(t *testing.T, c *testcluster.Cluster, adm *kadm.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const topic, group = "reassign-offsets-data", "reassign-group"
	c.CreateTopic(topic, 1, 3, nil)
	commit := func(at int64) {
		t.Helper()
		var os kadm.Offsets
		os.AddOffset(topic, 0, at, -1)
		var resp kadm.OffsetResponses
		var err error
		// The coordinator may still be loading or moving.
		if wait.Until(120*time.Second, "the commit to be taken", func() bool {
			resp, err = adm.CommitOffsets(ctx, group, os)
			return err == nil && resp.Error() == nil
		}) == nil {
			return
		}
		t.Fatalf("commit %d: %v %v", at, err, resp.Error())
	}
	fetched := func() int64 {
		t.Helper()
		resp, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		o, ok := resp.Lookup(topic, 0)
		if !ok || o.Err != nil {
			t.Fatalf("fetch offsets: %v (found %v)", o.Err, ok)
		}
		return o.At
	}
	commit(5)
	st := c.Image().Topic(metadata.InternalOffsetsTopic)
	if st == nil {
		t.Fatal("no __consumer_offsets topic after a commit")
	}
	var part *metadata.Partition
	for _, p := range st.Partitions {
		if l := c.Log(p.Leader, p.Topic, p.Partition); l != nil && l.LogEndOffset() > 0 {
			if part != nil {
				t.Fatalf("two __consumer_offsets partitions hold records: %d and %d", part.Partition, p.Partition)
			}
			part = p
		}
	}
	if part == nil {
		t.Fatal("no __consumer_offsets partition holds the commit")
	}
	target := othersThan(c, part.Leader)
	alter(t, ctx, adm, part.Topic, part.Partition, target)
	after := waitMoved(t, c, part.Topic, part.Partition, target)
	t.Logf("%s-%d moved from %v (leader %d) to %v (leader %d)", part.Topic, part.Partition, part.Replicas, part.Leader, after.Replicas, after.Leader)
	var got int64
	c.Eventually(30*time.Second, "the committed offset from the new coordinator", func() bool {
		resp, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false
		}
		o, ok := resp.Lookup(topic, 0)
		got = o.At
		return ok && o.Err == nil
	})
	if got != 5 {
		t.Fatalf("committed offset after the move: %d, want 5", got)
	}
	commit(9)
	if got := fetched(); got != 9 {
		t.Fatalf("committed offset after a commit on the new leader: %d, want 9", got)
	}
}
