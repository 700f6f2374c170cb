package kafka_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/wait"
)

// consumerCluster is a three-node cluster serving the consumer rebalance
// protocol (KIP-848) with short heartbeats and sessions.
func consumerCluster(t *testing.T) *testcluster.Cluster {
	return testcluster.New(t, testcluster.Options{Mutate: func(_ int32, cfg *node.Config) {
		cfg.GroupConfig.InitialRebalanceDelay = 100 * time.Millisecond
		cfg.GroupConfig.ConsumerProtocol = true
		cfg.GroupConfig.ConsumerHeartbeatInterval = 300 * time.Millisecond
		cfg.GroupConfig.ConsumerSessionTimeout = 6 * time.Second
	}})
}

// consumer848 is a franz-go consumer of the consumer protocol (it opts in
// with ServerSideBalancer; the balancer names the server's assignor).
func consumer848(t *testing.T, addrs []string, group, topic string, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(addrs...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ServerSideBalancer()}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// describe848 is the ConsumerGroupDescribe of one group.
func describe848(ctx context.Context, cl *kgo.Client, group string) (kmsg.ConsumerGroupDescribeResponseGroup, error) {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return kmsg.ConsumerGroupDescribeResponseGroup{}, err
	}
	if len(resp.Groups) != 1 {
		return kmsg.ConsumerGroupDescribeResponseGroup{}, fmt.Errorf("%d groups described", len(resp.Groups))
	}
	return resp.Groups[0], nil
}

// TestKafkaConsumerProtocolSplit: franz-go consumers of the consumer
// protocol share a topic's partitions (each partition with one member),
// read every record once, and the ApiVersions of such a node lists
// ConsumerGroupHeartbeat v0-1.
func TestKafkaConsumerProtocolSplit(t *testing.T) {
	c := consumerCluster(t)
	const topic, group, parts = "orders848", "g848", 6
	c.CreateTopic(topic, parts, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	addrs := c.KafkaAddrs()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	vs, err := kadm.NewClient(admCl).ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, bv := range vs {
		if v, ok := bv.KeyMaxVersion(int16(kmsg.ConsumerGroupHeartbeat)); !ok || v != 1 {
			t.Fatalf("broker %d lists ConsumerGroupHeartbeat up to %d (listed: %v), want 1", bv.NodeID, v, ok)
		}
	}

	prod, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produceEach(ctx, t, prod, topic, parts, 0, 20)

	var members []*kgo.Client
	for i := 0; i < 3; i++ {
		m := consumer848(t, addrs, group, topic)
		defer m.Close()
		members = append(members, m)
	}
	wait.Eventually(t, 60*time.Second, "three members to split six partitions", func() bool {
		d, err := describe848(ctx, admCl, group)
		if err != nil || d.ErrorCode != 0 || d.State != "Stable" || len(d.Members) != 3 {
			return false
		}
		seen := map[int32]bool{}
		for _, m := range d.Members {
			if len(m.Assignment.TopicPartitions) != 1 || len(m.Assignment.TopicPartitions[0].Partitions) != 2 {
				return false
			}
			for _, p := range m.Assignment.TopicPartitions[0].Partitions {
				if seen[p] {
					return false
				}
				seen[p] = true
			}
		}
		return len(seen) == parts
	})
	got := pollCommit(ctx, t, 20*parts, members...)
	seen := map[string]bool{}
	var mu sync.Mutex
	for _, g := range got {
		for _, v := range g {
			mu.Lock()
			if seen[v] {
				t.Errorf("record %s read twice", v)
			}
			seen[v] = true
			mu.Unlock()
		}
	}
}

// member is a franz-go consumer dialling through the cluster's fault
// network as endpoint, so a test can cut it off as a crash would
// (c.Net.Isolate(endpoint)); kip848 selects the consumer protocol.
type member struct {
	name string
	cl   *kgo.Client
}

func newMember(t *testing.T, c *testcluster.Cluster, endpoint, group, topic string, kip848 bool, extra ...kgo.Opt) *member {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(c.KafkaAddrs()...), kgo.ClientID(endpoint), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.HeartbeatInterval(300 * time.Millisecond), kgo.SessionTimeout(6 * time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.Dialer(func(ctx context.Context, _, host string) (net.Conn, error) { return c.Net.Dial(ctx, endpoint, host) })}
	if kip848 {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &member{name: endpoint, cl: cl}
}

// ledger records every record consumed, by its value, and whether its
// offset was committed: a record read again after its commit succeeded is
// a double delivery. (A commit can fail when the record's partition was
// revoked in between, before KIP-1251: franz-go refuses to commit a
// partition its latest assignment no longer has; such a record is read
// again by the partition's next owner, which is not a fault.)
type ledger struct {
	mu        sync.Mutex
	seen      map[string][]string
	committed map[string]bool
	again     []string
}

func newLedger() *ledger { return &ledger{seen: map[string][]string{}, committed: map[string]bool{}} }

func (l *ledger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}

// twice lists the records read again after their commit.
func (l *ledger) twice() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.again...)
}

// consume polls each live member in turn, committing what it read before
// letting a rebalance through, until the ledger holds want records.
func consume(ctx context.Context, t *testing.T, l *ledger, want int, members ...*member) {
	t.Helper()
	for l.count() < want {
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", l.count(), want, err)
		}
		for _, m := range members {
			pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			fs := m.cl.PollFetches(pctx)
			cancel()
			fs.EachError(func(topic string, p int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					t.Logf("%s: fetch %s/%d: %v", m.name, topic, p, err)
				}
			})
			recs := fs.Records()
			if len(recs) > 0 {
				l.mu.Lock()
				for _, r := range recs {
					v := string(r.Value)
					if l.committed[v] {
						l.again = append(l.again, fmt.Sprintf("%s by %s after %v", v, m.name, l.seen[v]))
					}
					l.seen[v] = append(l.seen[v], m.name)
				}
				l.mu.Unlock()
				err := m.cl.CommitRecords(ctx, recs...)
				switch {
				case err == nil:
					l.mu.Lock()
					for _, r := range recs {
						l.committed[string(r.Value)] = true
					}
					l.mu.Unlock()
				case errors.Is(err, kerr.RebalanceInProgress) || errors.Is(err, kerr.StaleMemberEpoch) || errors.Is(err, kerr.IllegalGeneration):
					t.Logf("%s: commit refused while its assignment moved: %v", m.name, err)
				default:
					t.Fatalf("%s: commit: %v", m.name, err)
				}
			}
			m.cl.AllowRebalance()
		}
	}
}

// describeGroup is the group as ConsumerGroupDescribe tells it: state,
// each member's type (0 classic, 1 consumer) and partitions of topic.
func describeGroup(ctx context.Context, cl *kgo.Client, group string) (string, map[string]int8, map[string][]int32, error) {
	d, err := describe848(ctx, cl, group)
	if err != nil {
		return "", nil, nil, err
	}
	if err := kerr.ErrorForCode(d.ErrorCode); err != nil {
		return "", nil, nil, err
	}
	types, parts := map[string]int8{}, map[string][]int32{}
	for _, m := range d.Members {
		types[m.MemberID] = m.MemberType
		for _, tp := range m.Assignment.TopicPartitions {
			parts[m.MemberID] = append(parts[m.MemberID], tp.Partitions...)
		}
	}
	return d.State, types, parts, nil
}

// disjointCover reports whether the members' partitions cover 0..n-1 once.
func disjointCover(parts map[string][]int32, n int) bool {
	seen := map[int32]bool{}
	for _, ps := range parts {
		for _, p := range ps {
			if seen[p] {
				return false
			}
			seen[p] = true
		}
	}
	return len(seen) == n
}

func groupType(ctx context.Context, adm *kadm.Client, group string) string {
	ls, err := adm.ListGroups(ctx)
	if err != nil {
		return ""
	}
	for _, g := range ls.Sorted() {
		if g.Group == group {
			return g.GroupType
		}
	}
	return ""
}

// TestKafkaConsumerProtocolGroups runs franz-go consumers of the consumer
// protocol on one cluster: a crashed member's partitions move to the
// others with nothing read twice; a mixed group (classic members and
// consumer-protocol ones) converts to a consumer group and back to a
// classic one as its last consumer-protocol member leaves, every record
// read once throughout; ListGroups tells the types and DescribeGroups v6
// refuses a consumer group as Kafka does.
func TestKafkaConsumerProtocolGroups(t *testing.T) {
	c := consumerCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const parts = 6

	t.Run("crashed member", func(t *testing.T) {
		const topic, group = "crash-in", "crash"
		c.CreateTopic(topic, parts, 3, nil)
		produceEach(ctx, t, prod, topic, parts, 0, 10)
		ms := []*member{newMember(t, c, "crash-a", group, topic, true), newMember(t, c, "crash-b", group, topic, true), newMember(t, c, "crash-c", group, topic, true)}
		l := newLedger()
		consume(ctx, t, l, 10*parts, ms...)
		wait.Eventually(t, 30*time.Second, "three members to hold two partitions each", func() bool {
			st, _, ps, err := describeGroup(ctx, admCl, group)
			return err == nil && st == "Stable" && len(ps) == 3 && disjointCover(ps, parts)
		})
		c.Net.Isolate("crash-c")
		wait.Eventually(t, 40*time.Second, "the crashed member's partitions to move to the other two", func() bool {
			st, _, ps, err := describeGroup(ctx, admCl, group)
			return err == nil && st == "Stable" && len(ps) == 2 && disjointCover(ps, parts)
		})
		produceEach(ctx, t, prod, topic, parts, 10, 10)
		consume(ctx, t, l, 20*parts, ms[:2]...)
		if tw := l.twice(); len(tw) > 0 {
			t.Fatalf("records read again after their offsets were committed: %v", tw)
		}
	})

	t.Run("mixed group converts both ways", func(t *testing.T) {
		const topic, group = "mixed-in", "mixed"
		c.CreateTopic(topic, parts, 3, nil)
		produceEach(ctx, t, prod, topic, parts, 0, 10)
		classic := []*member{newMember(t, c, "mixed-c1", group, topic, false), newMember(t, c, "mixed-c2", group, topic, false)}
		l := newLedger()
		consume(ctx, t, l, 10*parts, classic...)
		if typ := groupType(ctx, adm, group); typ != "classic" {
			t.Fatalf("the classic members' group is listed as %q", typ)
		}

		// A consumer-protocol member joins: the group becomes a consumer
		// group keeping its classic members, and the three share the topic.
		k := newMember(t, c, "mixed-848", group, topic, true)
		all := append(append([]*member(nil), classic...), k)
		produceEach(ctx, t, prod, topic, parts, 10, 10)
		deadline := time.Now().Add(60 * time.Second)
		for {
			consume(ctx, t, l, l.count()+1, all...)
			st, types, ps, err := describeGroup(ctx, admCl, group)
			if err == nil && st == "Stable" && len(ps) == 3 && disjointCover(ps, parts) {
				n := map[int8]int{}
				for _, ty := range types {
					n[ty]++
				}
				if n[0] == 2 && n[1] == 1 {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("the mixed group did not settle as a consumer group of two classic members and one consumer one: %v %v %v %v", st, types, ps, err)
			}
		}
		if typ := groupType(ctx, adm, group); typ != "consumer" {
			t.Fatalf("the mixed group is listed as %q, want consumer", typ)
		}
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Groups = []string{group}
		if resp, err := dg.RequestWith(ctx, admCl); err != nil || resp.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code {
			t.Fatalf("DescribeGroups of the consumer group: %v %v, want GROUP_ID_NOT_FOUND", resp, err)
		}
		consume(ctx, t, l, 20*parts, all...)

		// The consumer-protocol member leaves: a classic group again.
		k.cl.Close()
		wait.Eventually(t, 30*time.Second, "the group to be a classic group again", func() bool { return groupType(ctx, adm, group) == "classic" })
		produceEach(ctx, t, prod, topic, parts, 20, 10)
		consume(ctx, t, l, 30*parts, classic...)
		wait.Eventually(t, 30*time.Second, "the classic members to hold every partition", func() bool {
			state, as, err := assignment(ctx, adm, group, topic)
			if err != nil || state != "Stable" {
				return false
			}
			return disjointCover(as, parts)
		})
		if tw := l.twice(); len(tw) > 0 {
			t.Fatalf("records read again after their offsets were committed: %v", tw)
		}
	})

	t.Run("transactional consume-transform-produce", func(t *testing.T) {
		const in, out, group = "eos848-in", "eos848-out", "eos848"
		c.CreateTopic(in, 4, 3, nil)
		c.CreateTopic(out, 4, 3, nil)
		const n = 400
		for i := 0; i < n; i++ {
			prod.Produce(ctx, &kgo.Record{Topic: in, Partition: int32(i % 4), Value: []byte(fmt.Sprintf("in-%d", i))}, nil)
		}
		if err := prod.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		session := func(name string) *kgo.GroupTransactSession {
			s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.ClientID(name), kgo.TransactionalID(name),
				kgo.ConsumerGroup(group), kgo.ConsumeTopics(in), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(), kgo.DefaultProduceTopic(out),
				kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(10*time.Second), kgo.FetchMaxWait(200*time.Millisecond),
				kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ServerSideBalancer(),
				kgo.Dialer(func(ctx context.Context, _, host string) (net.Conn, error) { return c.Net.Dial(ctx, name, host) }))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			return s
		}
		var mu sync.Mutex
		committed := 0
		// run transforms until stop closes; crash, once closed, makes the
		// session stop in the middle of a transaction (its records
		// produced, its offsets not committed) and cuts it off.
		run := func(s *kgo.GroupTransactSession, name string, stop, crash <-chan struct{}) {
			for {
				select {
				case <-stop:
					return
				default:
				}
				pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				fs := s.PollFetches(pctx)
				cancel()
				if ctx.Err() != nil {
					return
				}
				if fs.NumRecords() == 0 {
					continue
				}
				if err := s.Begin(); err != nil {
					return
				}
				fs.EachRecord(func(r *kgo.Record) {
					s.Produce(ctx, &kgo.Record{Value: []byte("out-" + string(r.Value)), Partition: r.Partition}, nil)
				})
				select {
				case <-crash:
					_ = s.Client().Flush(ctx)
					c.Net.Isolate(name)
					t.Logf("%s crashed in a transaction of %d records", name, fs.NumRecords())
					return
				default:
				}
				ectx, ecancel := context.WithTimeout(ctx, 20*time.Second)
				ok, err := s.End(ectx, kgo.TryCommit)
				ecancel()
				if err == nil && ok {
					mu.Lock()
					committed += fs.NumRecords()
					mu.Unlock()
				}
			}
		}
		a, b := session("eos848-a"), session("eos848-b")
		stopA, stopB, crashB := make(chan struct{}), make(chan struct{}), make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); run(a, "eos848-a", stopA, nil) }()
		go func() { defer wg.Done(); run(b, "eos848-b", stopB, crashB) }()
		close(crashB) // b crashes in its first transaction
		lastLog := time.Now()
		wait.Eventually(t, 90*time.Second, "the input's offsets committed to its end", func() bool {
			offs, err := adm.FetchOffsets(ctx, group)
			if err != nil {
				return false
			}
			if time.Since(lastLog) > 2*time.Second {
				lastLog = time.Now()
				mu.Lock()
				t.Logf("transformed %d; the group's offsets: %v", committed, offs)
				mu.Unlock()
			}
			total := int64(0)
			for p := int32(0); p < 4; p++ {
				if o, ok := offs.Lookup(in, p); ok {
					total += o.At
				}
			}
			return total == n
		})
		close(stopA)
		close(stopB)
		wg.Wait()
		rctx, rcancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer rcancel()
		got := readCommitted(t, rctx, c, out, 4)
		seen := map[string]int{}
		for _, vs := range got {
			for _, v := range vs {
				seen[v]++
			}
		}
		var missing, dup []string
		for i := 0; i < n; i++ {
			v := fmt.Sprintf("out-in-%d", i)
			switch seen[v] {
			case 0:
				missing = append(missing, v)
			case 1:
			default:
				dup = append(dup, v)
			}
		}
		if len(missing) > 0 || len(dup) > 0 || len(seen) != n {
			t.Fatalf("read_committed output: %d distinct, missing %v, duplicated %v", len(seen), strings.Join(missing, ","), strings.Join(dup, ","))
		}
	})
}

// TestKafkaConsumerProtocolCoordinatorFailover: the broker coordinating a
// consumer group dies while its members consume; the new coordinator
// loads the group (epochs, assignments) from __consumer_offsets and the
// members carry on: every record read, none read again after its commit.
func TestKafkaConsumerProtocolCoordinatorFailover(t *testing.T) {
	c := consumerCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic, group, parts = "fo-in", "fo", 6
	c.CreateTopic(topic, parts, 3, nil)
	admCl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produceEach(ctx, t, prod, topic, parts, 0, 10)
	ms := []*member{newMember(t, c, "fo-a", group, topic, true), newMember(t, c, "fo-b", group, topic, true)}
	l := newLedger()
	consume(ctx, t, l, 10*parts, ms...)
	wait.Eventually(t, 30*time.Second, "the two members to split the partitions", func() bool {
		st, _, ps, err := describeGroup(ctx, admCl, group)
		return err == nil && st == "Stable" && len(ps) == 2 && disjointCover(ps, parts)
	})
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = group
	fr, err := fc.RequestWith(ctx, admCl)
	if err != nil || fr.ErrorCode != 0 {
		t.Fatalf("FindCoordinator: %v %v", fr, err)
	}
	before, _ := describe848(ctx, admCl, group)
	c.Kill(fr.NodeID)
	t.Logf("killed the coordinator, broker %d", fr.NodeID)
	// Asked of the coordinator FindCoordinator names: franz-go's sharded
	// ConsumerGroupDescribe may pick the dead broker to find it, which
	// Metadata still lists as fenced.
	describeNow := func() (kmsg.ConsumerGroupDescribeResponseGroup, error) {
		fr, err := fc.RequestWith(ctx, admCl)
		if err != nil || fr.ErrorCode != 0 {
			return kmsg.ConsumerGroupDescribeResponseGroup{}, fmt.Errorf("FindCoordinator: %v %v", fr, err)
		}
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{group}
		resp, err := admCl.Broker(int(fr.NodeID)).Request(ctx, req)
		if err != nil {
			return kmsg.ConsumerGroupDescribeResponseGroup{}, err
		}
		return resp.(*kmsg.ConsumerGroupDescribeResponse).Groups[0], nil
	}
	wait.Eventually(t, 60*time.Second, "another broker to coordinate the group, as it was", func() bool {
		d, err := describeNow()
		return err == nil && d.ErrorCode == 0 && d.Epoch >= before.Epoch && len(d.Members) == 2
	})
	produceEach(ctx, t, prod, topic, parts, 10, 10)
	consume(ctx, t, l, 20*parts, ms...)
	if tw := l.twice(); len(tw) > 0 {
		t.Fatalf("records read again after their offsets were committed: %v", tw)
	}
	wait.Eventually(t, 30*time.Second, "the two members to hold every partition", func() bool {
		d, err := describeNow()
		if err != nil || d.ErrorCode != 0 || len(d.Members) != 2 {
			return false
		}
		ps := map[string][]int32{}
		for _, m := range d.Members {
			for _, tp := range m.Assignment.TopicPartitions {
				ps[m.MemberID] = append(ps[m.MemberID], tp.Partitions...)
			}
		}
		return disjointCover(ps, parts)
	})
}
