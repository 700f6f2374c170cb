package kafka_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/wait"
)

// groupCluster is a three-node cluster whose group coordinators start a
// new group's first rebalance after 100 ms instead of 3 s.
func groupCluster(t *testing.T) *testcluster.Cluster {
	return testcluster.New(t, testcluster.Options{Mutate: func(_ int32, cfg *node.Config) {
		cfg.GroupConfig.InitialRebalanceDelay = 100 * time.Millisecond
	}})
}

// produceEach writes n records to every partition of topic, values
// "<partition>-<first+i>".
func produceEach(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, partitions int32, first, n int) {
	t.Helper()
	for p := int32(0); p < partitions; p++ {
		for i := first; i < first+n; i++ {
			r := &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("%d-%d", p, i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce to %s/%d: %v", topic, p, err)
			}
		}
	}
}

// groupMember is a kgo consumer-group member that commits what it polled
// explicitly (autocommit off).
func groupMember(t *testing.T, addrs []string, group, topic string, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(addrs...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.HeartbeatInterval(300 * time.Millisecond), kgo.SessionTimeout(10 * time.Second), kgo.FetchMaxWait(200 * time.Millisecond)}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// pollCommit polls each member in turn, committing what it got, until
// want records were consumed in all; it returns them by member.
func pollCommit(ctx context.Context, t *testing.T, want int, members ...*kgo.Client) [][]string {
	t.Helper()
	got := make([][]string, len(members))
	total := 0
	for total < want {
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", total, want, err)
		}
		for i, m := range members {
			pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			fs := m.PollFetches(pctx)
			cancel()
			fs.EachError(func(topic string, p int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("member %d: fetch %s/%d: %v", i, topic, p, err)
				}
			})
			recs := fs.Records()
			for _, r := range recs {
				got[i] = append(got[i], string(r.Value))
			}
			total += len(recs)
			if len(recs) > 0 {
				if err := m.CommitRecords(ctx, recs...); err != nil {
					t.Fatalf("member %d: commit: %v", i, err)
				}
			}
		}
	}
	if total != want {
		t.Fatalf("consumed %d records, want %d: %v", total, want, got)
	}
	return got
}

// assignment is each member's partitions of a described group, and the
// group's state.
func assignment(ctx context.Context, adm *kadm.Client, group, topic string) (string, map[string][]int32, error) {
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return "", nil, err
	}
	d := ds[group]
	if d.Err != nil {
		return "", nil, d.Err
	}
	out := map[string][]int32{}
	for _, m := range d.Members {
		a, ok := m.Assigned.AsConsumer()
		if !ok {
			return d.State, nil, fmt.Errorf("member %s: assignment is not a consumer assignment", m.MemberID)
		}
		var ps []int32
		for _, at := range a.Topics {
			if at.Topic == topic {
				ps = append(ps, at.Partitions...)
			}
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		out[m.MemberID] = ps
	}
	return d.State, out, nil
}

// TestKafkaConsumerGroup: two franz-go consumers in one group split a
// topic's partitions, commit what they read, and the offsets read back;
// when one leaves the other takes every partition and resumes from the
// committed offsets (nothing read twice). The administrator's view
// follows: DescribeGroups shows the members and their assignments,
// ListGroups the group, DeleteGroups refuses it while it has members and
// removes it, with its offsets, once empty. The members speak the
// newest versions (LeaveGroup's batches, OffsetFetch's groups, JoinGroup
// v9), and then Kafka 1.0's (JoinGroup v2, OffsetCommit v3, OffsetFetch
// v3, LeaveGroup v1: what kafka-python 2.0 and older librdkafka send).
func TestKafkaConsumerGroup(t *testing.T) {
	t.Run("newest", func(t *testing.T) { testConsumerGroup(t) })
	t.Run("kafka-1.0", func(t *testing.T) { testConsumerGroup(t, kgo.MaxVersions(kversion.V1_0_0())) })
}

func testConsumerGroup(t *testing.T, memberOpts ...kgo.Opt) {
	c := groupCluster(t)
	const topic, group, parts = "orders", "billing", 4
	c.CreateTopic(topic, parts, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	addrs := c.KafkaAddrs()

	prod, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	adminCl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer adminCl.Close()
	adm := kadm.NewClient(adminCl)

	produceEach(ctx, t, prod, topic, parts, 0, 10)

	a := groupMember(t, addrs, group, topic, memberOpts...)
	defer a.Close()
	b := groupMember(t, addrs, group, topic, memberOpts...)
	defer b.Close()

	// Both members hold partitions, no partition twice, every one held.
	wait.Eventually(t, 60*time.Second, "the two members to split the 4 partitions", func() bool {
		state, as, err := assignment(ctx, adm, group, topic)
		if err != nil || state != "Stable" || len(as) != 2 {
			return false
		}
		seen := map[int32]bool{}
		for _, ps := range as {
			if len(ps) == 0 {
				return false
			}
			for _, p := range ps {
				if seen[p] {
					return false
				}
				seen[p] = true
			}
		}
		return len(seen) == parts
	})
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	d := ds[group]
	if d.ProtocolType != "consumer" || d.Protocol == "" || len(d.Members) != 2 {
		t.Fatalf("described group: protocol type %q, protocol %q, %d members; want consumer, a protocol, 2", d.ProtocolType, d.Protocol, len(d.Members))
	}
	for _, m := range d.Members {
		if m.ClientHost != "/127.0.0.1" || m.ClientID == "" {
			t.Fatalf("member %s described with client host %q, client id %q; want /127.0.0.1 and the client's id", m.MemberID, m.ClientHost, m.ClientID)
		}
	}

	got := pollCommit(ctx, t, 10*parts, a, b)
	if len(got[0]) == 0 || len(got[1]) == 0 {
		t.Fatalf("one member read nothing: %d and %d records", len(got[0]), len(got[1]))
	}

	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < parts; p++ {
		o, ok := offs.Lookup(topic, p)
		if !ok || o.Err != nil || o.At != 10 {
			t.Fatalf("committed offset of %s/%d: %+v (found %v), want 10", topic, p, o, ok)
		}
	}

	ls, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lg, ok := ls[group]; !ok || lg.ProtocolType != "consumer" || lg.State != "Stable" {
		t.Fatalf("ListGroups: %+v (listed %v), want %s consumer Stable", lg, ok, group)
	}

	if _, err := adm.DeleteGroup(ctx, group); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Fatalf("DeleteGroup of a group with members: %v, want NON_EMPTY_GROUP", err)
	}

	// One member leaves: the other takes every partition.
	a.Close()
	wait.Eventually(t, 60*time.Second, "the remaining member to hold all 4 partitions", func() bool {
		state, as, err := assignment(ctx, adm, group, topic)
		if err != nil || state != "Stable" || len(as) != 1 {
			return false
		}
		for _, ps := range as {
			return len(ps) == parts
		}
		return false
	})

	// It resumes from the committed offsets: the new records only.
	produceEach(ctx, t, prod, topic, parts, 10, 5)
	rest := pollCommit(ctx, t, 5*parts, b)
	for _, v := range rest[0] {
		var p, i int
		if _, err := fmt.Sscanf(v, "%d-%d", &p, &i); err != nil || i < 10 {
			t.Fatalf("after the rebalance the member read %q again (committed offsets were 10)", v)
		}
	}

	b.Close()
	wait.Eventually(t, 30*time.Second, "the group to be Empty", func() bool {
		ds, err := adm.DescribeGroups(ctx, group)
		return err == nil && ds[group].Err == nil && ds[group].State == "Empty"
	})
	if _, err := adm.DeleteGroup(ctx, group); err != nil {
		t.Fatalf("DeleteGroup of the empty group: %v", err)
	}
	ds, err = adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(ds[group].Err, kerr.GroupIDNotFound) {
		t.Fatalf("DescribeGroups after the delete: %v (state %q), want GROUP_ID_NOT_FOUND", ds[group].Err, ds[group].State)
	}
	offs, err = adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < parts; p++ {
		if o, ok := offs.Lookup(topic, p); ok && o.At >= 0 {
			t.Fatalf("offset of %s/%d still committed after the delete: %+v", topic, p, o)
		}
	}
	ls, err = adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ls[group]; ok {
		t.Fatalf("ListGroups still lists %s after the delete", group)
	}
	if _, err := adm.DeleteGroup(ctx, group); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("second DeleteGroup: %v, want GROUP_ID_NOT_FOUND", err)
	}
}

// TestKafkaOffsetsOutsideAGroup: offsets committed by an administrator
// (no members, generation -1) read back; OffsetDelete removes them;
// partitions of a topic that does not exist answer
// UNKNOWN_TOPIC_OR_PARTITION, and a group that does not exist
// GROUP_ID_NOT_FOUND, as Kafka answers them.
func TestKafkaOffsetsOutsideAGroup(t *testing.T) {
	c := groupCluster(t)
	c.CreateTopic("events", 2, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "events", Partition: 0, At: 7, LeaderEpoch: -1, Metadata: "m0"})
	os.Add(kadm.Offset{Topic: "events", Partition: 1, At: 9, LeaderEpoch: -1})
	os.Add(kadm.Offset{Topic: "nosuch", Partition: 0, At: 1, LeaderEpoch: -1})
	res, err := adm.CommitOffsets(ctx, "solo", os)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := res.Lookup("events", 0); r.Err != nil {
		t.Fatalf("commit events/0: %v", r.Err)
	}
	if r, _ := res.Lookup("nosuch", 0); !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("commit nosuch/0: %v, want UNKNOWN_TOPIC_OR_PARTITION", r.Err)
	}

	got, err := adm.FetchOffsets(ctx, "solo")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := got.Lookup("events", 0); !ok || o.At != 7 || o.Metadata != "m0" {
		t.Fatalf("events/0 reads back %+v (found %v), want 7 with metadata m0", o, ok)
	}
	if o, ok := got.Lookup("events", 1); !ok || o.At != 9 {
		t.Fatalf("events/1 reads back %+v (found %v), want 9", o, ok)
	}
	if _, ok := got.Lookup("nosuch", 0); ok {
		t.Fatal("the refused commit of nosuch/0 reads back")
	}

	ls, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lg, ok := ls["solo"]; !ok || lg.State != "Empty" {
		t.Fatalf("ListGroups: %+v (listed %v), want solo Empty", lg, ok)
	}

	del, err := adm.DeleteOffsets(ctx, "solo", kadm.TopicsSet{"events": {0: {}}, "nosuch": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := del.Lookup("events", 0); !ok || e != nil {
		t.Fatalf("delete events/0: %v (answered %v)", e, ok)
	}
	if e, _ := del.Lookup("nosuch", 0); !errors.Is(e, kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete nosuch/0: %v, want UNKNOWN_TOPIC_OR_PARTITION", e)
	}
	got, err = adm.FetchOffsets(ctx, "solo")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := got.Lookup("events", 0); ok && o.At >= 0 {
		t.Fatalf("events/0 still committed after OffsetDelete: %+v", o)
	}
	if o, ok := got.Lookup("events", 1); !ok || o.At != 9 {
		t.Fatalf("events/1 after deleting events/0: %+v (found %v), want 9", o, ok)
	}

	if _, err := adm.DeleteOffsets(ctx, "nobody", kadm.TopicsSet{"events": {0: {}}}); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("OffsetDelete of a group that does not exist: %v, want GROUP_ID_NOT_FOUND", err)
	}
	ds, err := adm.DescribeGroups(ctx, "nobody")
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(ds["nobody"].Err, kerr.GroupIDNotFound) {
		t.Fatalf("DescribeGroups of a group that does not exist: %v, want GROUP_ID_NOT_FOUND", ds["nobody"].Err)
	}
}

// TestKafkaRemoveStaticMembers: an administrator removes static members
// by their group.instance.id in one batched LeaveGroup (v3+); each is
// answered on its own (an instance the group does not know:
// UNKNOWN_MEMBER_ID) and the group is left empty.
func TestKafkaRemoveStaticMembers(t *testing.T) {
	c := groupCluster(t)
	const topic, group = "clicks", "static"
	c.CreateTopic(topic, 2, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addrs := c.KafkaAddrs()
	adminCl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer adminCl.Close()
	adm := kadm.NewClient(adminCl)
	a := groupMember(t, addrs, group, topic, kgo.InstanceID("pod-a"))
	defer a.Close()
	b := groupMember(t, addrs, group, topic, kgo.InstanceID("pod-b"))
	defer b.Close()
	wait.Eventually(t, 60*time.Second, "both static members in the group", func() bool {
		ds, err := adm.DescribeGroups(ctx, group)
		if err != nil || ds[group].State != "Stable" || len(ds[group].Members) != 2 {
			return false
		}
		for _, m := range ds[group].Members {
			if m.InstanceID == nil {
				return false
			}
		}
		return true
	})
	// The processes stop; static members do not leave on their own (their
	// sessions would keep them for session.timeout.ms).
	a.Close()
	b.Close()
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil || len(ds[group].Members) != 2 {
		t.Fatalf("after the static members' clients closed: %v, %d members; want them kept", err, len(ds[group].Members))
	}
	res, err := adm.LeaveGroup(ctx, kadm.LeaveGroup(group).InstanceIDs("pod-a", "pod-b", "pod-x"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"pod-a", "pod-b"} {
		if r, ok := res[id]; !ok || r.Err != nil {
			t.Fatalf("remove %s: %+v (answered %v)", id, r, ok)
		}
	}
	if r := res["pod-x"]; !errors.Is(r.Err, kerr.UnknownMemberID) {
		t.Fatalf("remove pod-x, never a member: %v, want UNKNOWN_MEMBER_ID", r.Err)
	}
	ds, err = adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if d := ds[group]; len(d.Members) != 0 || d.State != "Empty" {
		t.Fatalf("after removing both: state %s, %d members; want Empty, none", d.State, len(d.Members))
	}
}
