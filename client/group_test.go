package client_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/coordinator"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// groupNode is a dev server tuned for group tests: no initial rebalance
// delay, short sessions allowed, few __consumer_offsets partitions.
func groupNode(t *testing.T) *node.Node {
	return testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) {
		cfg.GroupConfig.InitialRebalanceDelay = 0
		cfg.GroupConfig.GroupMinSessionTimeout = 500 * time.Millisecond
		cfg.OffsetsTopic.Partitions = 5
	})
}

func createTopic(t *testing.T, opts []client.Opt, name string, partitions, rf int32) {
	t.Helper()
	adm, err := client.NewAdmin(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := adm.CreateTopic(ctx, client.TopicSpec{Name: name, Partitions: partitions, ReplicationFactor: rf}); err != nil {
		t.Fatal(err)
	}
}

// produce writes values from..to-1 spread over the topic's partitions.
func produce(t *testing.T, opts []client.Opt, topic string, from, to int) {
	t.Helper()
	p, err := client.NewProducer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*client.Record
	for i := from; i < to; i++ {
		recs = append(recs, &client.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i))})
	}
	if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// owners tracks partition ownership through the rebalance callbacks and
// records any moment a partition had two owners.
type owners struct {
	mu         sync.Mutex
	owner      map[client.TopicPartition]string
	violations []string
}

func (o *owners) opts(name string) []client.Opt {
	release := func(tps []client.TopicPartition) {
		o.mu.Lock()
		defer o.mu.Unlock()
		for _, tp := range tps {
			if o.owner[tp] == name {
				delete(o.owner, tp)
			}
		}
	}
	return []client.Opt{
		client.OnPartitionsAssigned(func(tps []client.TopicPartition) {
			o.mu.Lock()
			defer o.mu.Unlock()
			for _, tp := range tps {
				if cur, ok := o.owner[tp]; ok && cur != name {
					o.violations = append(o.violations, fmt.Sprintf("%v assigned to %s while %s owns it", tp, name, cur))
				}
				o.owner[tp] = name
			}
		}),
		client.OnPartitionsRevoked(release),
		client.OnPartitionsLost(release),
	}
}

// seen collects consumed values.
type seen struct {
	mu sync.Mutex
	v  map[int]int
}

func (s *seen) count(from, to int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for i := from; i < to; i++ {
		if s.v[i] > 0 {
			n++
		}
	}
	return n
}

// member is a running group consumer: a Poll loop in a goroutine.
type member struct {
	c    *client.Consumer
	stop context.CancelFunc
	done chan error
}

func startMember(t *testing.T, opts []client.Opt, into *seen) *member {
	t.Helper()
	c, err := client.NewConsumer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{c: c, stop: cancel, done: make(chan error, 1)}
	go func() {
		for ctx.Err() == nil {
			recs, err := c.Poll(ctx)
			if err != nil && ctx.Err() == nil {
				m.done <- err
				return
			}
			into.mu.Lock()
			for _, r := range recs {
				v, _ := strconv.Atoi(string(r.Value))
				into.v[v]++
			}
			into.mu.Unlock()
		}
		m.done <- nil
	}()
	t.Cleanup(func() { m.close(t) })
	return m
}

// close stops the Poll loop, then closes the consumer (LeaveGroup).
func (m *member) close(t *testing.T) {
	if m.stop == nil {
		return
	}
	m.stop()
	m.stop = nil
	if err := <-m.done; err != nil {
		t.Errorf("poll loop: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.c.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
}

func loads(ms []*member) []int {
	var out []int
	for _, m := range ms {
		out = append(out, len(m.c.Assignment()))
	}
	sort.Ints(out)
	return out
}

// settled reports whether the members' assignments cover the partitions
// exactly once with the given loads.
func settled(ms []*member, want []int, partitions int) bool {
	if fmt.Sprint(loads(ms)) != fmt.Sprint(want) {
		return false
	}
	all := map[client.TopicPartition]bool{}
	for _, m := range ms {
		for _, tp := range m.c.Assignment() {
			if all[tp] {
				return false
			}
			all[tp] = true
		}
	}
	return len(all) == partitions
}

// TestGroupRebalance: three consumers split six partitions; a fourth joins
// and one leaves; every record is consumed and no partition ever has two
// owners (checked through the rebalance callbacks).
func TestGroupRebalance(t *testing.T) {
	n := groupNode(t)
	base := []client.Opt{client.Bootstrap(n.Addr()), client.Logger(testutil.Logger())}
	// "default" is both assignors, cooperative-sticky preferred: the eager
	// protocol (not every assignor is cooperative) with sticky assignments.
	for _, assignor := range []string{"range", "cooperative-sticky", "default"} {
		t.Run(assignor, func(t *testing.T) {
			topic := "rb-" + assignor
			strategy := client.Assignors(assignor)
			if assignor == "default" {
				strategy = client.Assignors("cooperative-sticky", "range")
			}
			createTopic(t, base, topic, 6, 1)
			own := &owners{owner: map[client.TopicPartition]string{}}
			got := &seen{v: map[int]int{}}
			mk := func(name string) *member {
				opts := append(append([]client.Opt{}, base...), client.GroupID("g-"+assignor), client.Topics(topic), strategy,
					client.HeartbeatInterval(100*time.Millisecond), client.SessionTimeout(3*time.Second), client.RebalanceTimeout(10*time.Second),
					client.AutoOffsetReset(client.ResetEarliest), client.AutoCommit(200*time.Millisecond), client.FetchMaxWait(100*time.Millisecond),
					client.ClientID(name))
				return startMember(t, append(opts, own.opts(name)...), got)
			}
			ms := []*member{mk("c1"), mk("c2"), mk("c3")}
			wait.Eventually(t, 20*time.Second, "three members with two partitions each", func() bool { return settled(ms, []int{2, 2, 2}, 6) })
			produce(t, base, topic, 0, 300)
			wait.Eventually(t, 20*time.Second, "300 records consumed", func() bool { return got.count(0, 300) == 300 })

			ms = append(ms, mk("c4"))
			wait.Eventually(t, 20*time.Second, "four members sharing six partitions", func() bool { return settled(ms, []int{1, 1, 2, 2}, 6) })
			produce(t, base, topic, 300, 600)
			ms[1].close(t)
			ms = append(ms[:1], ms[2:]...)
			wait.Eventually(t, 20*time.Second, "three members after one left", func() bool { return settled(ms, []int{2, 2, 2}, 6) })
			produce(t, base, topic, 600, 900)
			wait.Eventually(t, 20*time.Second, "900 records consumed", func() bool { return got.count(0, 900) == 900 })
			own.mu.Lock()
			defer own.mu.Unlock()
			for _, v := range own.violations {
				t.Error(v)
			}
			gm := ms[0].c.GroupMetadata()
			t.Logf("final generation %d", gm.GenerationID)
			if gm.GroupID != "g-"+assignor || gm.MemberID == "" || gm.GenerationID < 4 {
				t.Errorf("group metadata %+v", gm)
			}
		})
	}
}

// TestGroupCommittedOffsetsSurviveRestart: a new member of the group
// resumes where the previous one committed — by auto-commit on Close, then
// by CommitPolled.
func TestGroupCommittedOffsetsSurviveRestart(t *testing.T) {
	n := groupNode(t)
	base := []client.Opt{client.Bootstrap(n.Addr()), client.Logger(testutil.Logger())}
	createTopic(t, base, "resume", 2, 1)
	group := func(extra ...client.Opt) []client.Opt {
		return append(append([]client.Opt{}, base...), append([]client.Opt{client.GroupID("resumers"), client.Topics("resume"),
			client.HeartbeatInterval(100 * time.Millisecond), client.SessionTimeout(3 * time.Second), client.AutoOffsetReset(client.ResetEarliest),
			client.FetchMaxWait(100 * time.Millisecond)}, extra...)...)
	}
	readUntil := func(c *client.Consumer, want int) []int {
		t.Helper()
		var vals []int
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for len(vals) < want {
			recs, err := c.Poll(ctx)
			if err != nil {
				t.Fatalf("poll after %d of %d records: %v", len(vals), want, err)
			}
			for _, r := range recs {
				v, _ := strconv.Atoi(string(r.Value))
				vals = append(vals, v)
			}
		}
		return vals
	}
	produce(t, base, "resume", 0, 100)
	// First member: auto-commit only at Close (the interval is an hour).
	a, err := client.NewConsumer(group(client.AutoCommit(time.Hour))...)
	if err != nil {
		t.Fatal(err)
	}
	if got := readUntil(a, 100); len(got) != 100 {
		t.Fatalf("first member read %d", len(got))
	}
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	produce(t, base, "resume", 100, 150)
	// Second member: no auto-commit; it resumes at 100 and commits explicitly.
	b, err := client.NewConsumer(group(client.AutoCommit(0))...)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range readUntil(b, 50) {
		if v < 100 {
			t.Fatalf("second member re-read %d: the committed offsets were lost", v)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.CommitPolled(ctx); err != nil {
		t.Fatal(err)
	}
	committed, err := b.Committed(ctx, b.Assignment())
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	for _, off := range committed {
		total += off
	}
	if total != 150 {
		t.Fatalf("committed offsets %v sum to %d, want 150", committed, total)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	produce(t, base, "resume", 150, 160)
	c, err := client.NewConsumer(group()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	for _, v := range readUntil(c, 10) {
		if v < 150 {
			t.Fatalf("third member re-read %d after CommitPolled", v)
		}
	}
}

// TestGroupCoordinatorFailover kills the node coordinating a group: the
// group moves to the new leader of its __consumer_offsets partition, the
// member keeps its generation and partitions, and the offsets committed
// before are still there.
func TestGroupCoordinatorFailover(t *testing.T) {
	const offsetsPartitions = 5
	cl := testcluster.New(t, testcluster.Options{Mutate: func(id int32, cfg *node.Config) {
		cfg.GroupConfig.InitialRebalanceDelay = 0
		cfg.GroupConfig.GroupMinSessionTimeout = 500 * time.Millisecond
		cfg.OffsetsTopic.Partitions = offsetsPartitions
	}})
	cl.CreateTopic("fo", 3, 3, nil)
	opts := cl.ClientOpts()
	produce(t, opts, "fo", 0, 60)
	got := &seen{v: map[int]int{}}
	m := startMember(t, append(append([]client.Opt{}, opts...), client.GroupID("fog"), client.Topics("fo"), client.AutoCommit(0),
		client.HeartbeatInterval(100*time.Millisecond), client.SessionTimeout(15*time.Second), client.AutoOffsetReset(client.ResetEarliest),
		client.FetchMaxWait(100*time.Millisecond)), got)
	wait.Eventually(t, 30*time.Second, "60 records consumed", func() bool { return got.count(0, 60) == 60 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := m.c.CommitPolled(ctx); err != nil {
		t.Fatal(err)
	}
	before := m.c.GroupMetadata()
	tps := m.c.Assignment()
	committed, err := m.c.Committed(ctx, tps)
	if err != nil {
		t.Fatal(err)
	}
	part := coordinator.PartitionFor("fog", offsetsPartitions)
	old := cl.Partition("__consumer_offsets", part).Leader
	cl.Kill(old)
	cl.Eventually(30*time.Second, "a new leader of the group's partition", func() bool {
		p := cl.Partition("__consumer_offsets", part)
		return p != nil && p.Leader >= 0 && p.Leader != old
	})
	// A fresh client of the group reads the same committed offsets from the new coordinator.
	reader, err := client.NewConsumer(append(append([]client.Opt{}, opts...), client.GroupID("fog"), client.AutoCommit(0))...)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close(context.Background())
	after, err := reader.Committed(ctx, tps)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(after) != fmt.Sprint(committed) || len(after) != 3 {
		t.Fatalf("committed offsets after failover %v, before %v", after, committed)
	}
	// The member carries on in the same generation and keeps consuming.
	produce(t, opts, "fo", 60, 90)
	wait.Eventually(t, 30*time.Second, "records after the failover", func() bool { return got.count(60, 90) == 30 })
	if err := m.c.CommitPolled(ctx); err != nil {
		t.Fatalf("commit to the new coordinator: %v", err)
	}
	if gm := m.c.GroupMetadata(); gm.GenerationID != before.GenerationID || gm.MemberID != before.MemberID || len(m.c.Assignment()) != 3 {
		t.Fatalf("membership after failover %+v (before %+v), assignment %v", gm, before, m.c.Assignment())
	}
}
