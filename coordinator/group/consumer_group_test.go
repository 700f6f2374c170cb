package group

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

func strp(s string) *string { return &s }

// TestConsumerGroupHeartbeatRefusals: malformed heartbeats answer
// INVALID_REQUEST with Kafka's messages, and the other refusals their
// codes, before anything changes.
func TestConsumerGroupHeartbeatRefusals(t *testing.T) {
	h := newCGHarness(t, func(c *Config) { c.ConsumerMaxSize = 2 })
	join := func(mut func(r *pb.ConsumerGroupHeartbeatRequest)) *pb.ConsumerGroupHeartbeatRequest {
		r := &pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: "m", MemberEpoch: 0, RebalanceTimeoutMs: 1000,
			SubscribedTopicNames: subNames("t"), TopicPartitions: none()}
		if mut != nil {
			mut(r)
		}
		return r
	}
	cases := []struct {
		name string
		req  *pb.ConsumerGroupHeartbeatRequest
		code pb.ErrorCode
		msg  string
	}{
		{"no member id at v1", join(func(r *pb.ConsumerGroupHeartbeatRequest) { r.MemberId = " " }), pb.ErrorCode_INVALID_REQUEST, "MemberId can't be empty."},
		{"no group id", join(func(r *pb.ConsumerGroupHeartbeatRequest) { r.GroupId = "" }), pb.ErrorCode_INVALID_REQUEST, "GroupId can't be empty."},
		{"blank instance id", join(func(r *pb.ConsumerGroupHeartbeatRequest) { r.InstanceId = strp(" ") }), pb.ErrorCode_INVALID_REQUEST, "InstanceId can't be empty."},
		{"blank rack", join(func(r *pb.ConsumerGroupHeartbeatRequest) { r.RackId = strp("") }), pb.ErrorCode_INVALID_REQUEST, "RackId can't be empty."},
		{"join without a rebalance timeout", join(func(r *pb.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMs = -1 }), pb.ErrorCode_INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."},
		{"join owning partitions", join(func(r *pb.ConsumerGroupHeartbeatRequest) {
			r.TopicPartitions = &pb.OwnedPartitions{Topics: []*pb.TopicPartitions{{TopicId: "x", Partitions: []int32{0}}}}
		}),
			pb.ErrorCode_INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."},
		{"join with null owned partitions", join(func(r *pb.ConsumerGroupHeartbeatRequest) { r.TopicPartitions = nil }), pb.ErrorCode_INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."},
		{"join subscribed to nothing", join(func(r *pb.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil }), pb.ErrorCode_INVALID_REQUEST,
			"Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."},
		{"static leave without instance id", &pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: "m", MemberEpoch: -2}, pb.ErrorCode_INVALID_REQUEST, "InstanceId can't be null."},
		{"epoch below -2", &pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: "m", MemberEpoch: -3}, pb.ErrorCode_INVALID_REQUEST, "MemberEpoch is invalid."},
		{"unknown assignor", join(func(r *pb.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = strp("sticky") }), pb.ErrorCode_UNSUPPORTED_ASSIGNOR,
			"ServerAssignor sticky is not supported. Supported assignors: uniform, range."},
		{"bad regex", join(func(r *pb.ConsumerGroupHeartbeatRequest) {
			r.SubscribedTopicNames, r.SubscribedTopicRegex = nil, strp("orders-(")
		}),
			pb.ErrorCode_INVALID_REGULAR_EXPRESSION, "SubscribedTopicRegex `orders-(` is not a valid regular expression"},
		{"not UTF-8", join(func(r *pb.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = subNames("\xff") }), pb.ErrorCode_INVALID_REQUEST, "not valid UTF-8"},
		{"heartbeat to no group", &pb.ConsumerGroupHeartbeatRequest{GroupId: "none", MemberId: "m", MemberEpoch: 3, RebalanceTimeoutMs: -1},
			pb.ErrorCode_GROUP_ID_NOT_FOUND, "Consumer group none not found."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.hb(tc.req)
			if r.ErrorCode != tc.code || !strings.Contains(r.ErrorMessage, tc.msg) {
				t.Fatalf("got %v %q, want %v %q", r.ErrorCode, r.ErrorMessage, tc.code, tc.msg)
			}
		})
	}
	// Version 0 lets a joining member leave its id to the coordinator,
	// not a leaving one: a static leave names its member too.
	r0, err := h.c.ConsumerGroupHeartbeat(context.Background(), &pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberEpoch: staticLeaveEpoch, InstanceId: strp("pod")}, nil)
	if err != nil || r0.ErrorCode != pb.ErrorCode_INVALID_REQUEST || r0.ErrorMessage != "MemberId can't be empty." {
		t.Fatalf("v0 static leave with no member id: %v %v, want INVALID_REQUEST MemberId can't be empty.", r0, err)
	}
	h.cgroup("g", func(cg *consumerGroup) {
		if cg != nil {
			t.Fatalf("refused joins created the group: %+v", cg)
		}
	})

	// The group fills up; members in it are still let in.
	wantCode(t, "m1", h.joinCG("g", "m1", "t").ErrorCode, pb.ErrorCode_NONE)
	wantCode(t, "m2", h.joinCG("g", "m2", "t").ErrorCode, pb.ErrorCode_NONE)
	r := h.joinCG("g", "m3", "t")
	if r.ErrorCode != pb.ErrorCode_GROUP_MAX_SIZE_REACHED || r.ErrorMessage != "The consumer group has reached its maximum capacity of 2 members." {
		t.Fatalf("third member: %v %q", r.ErrorCode, r.ErrorMessage)
	}
	wantCode(t, "m1 rejoins", h.joinCG("g", "m1", "t").ErrorCode, pb.ErrorCode_NONE)
	// In a full group even an unknown member's heartbeat is refused for
	// the size first, as Kafka checks it before the member.
	wantCode(t, "unknown member, full group", h.beat("g", "ghost", 1, none()).ErrorCode, pb.ErrorCode_GROUP_MAX_SIZE_REACHED)
	h.joinCG("g2", "m1", "t")
	wantCode(t, "unknown member", h.beat("g2", "ghost", 1, none()).ErrorCode, pb.ErrorCode_UNKNOWN_MEMBER_ID)
	wantCode(t, "epoch from the future", h.beat("g", "m2", 99, none()).ErrorCode, pb.ErrorCode_FENCED_MEMBER_EPOCH)

	// Disabled protocol.
	off := newCGHarness(t, func(c *Config) { c.ConsumerProtocol = false })
	wantCode(t, "protocol off", off.joinCG("g", "m1", "t").ErrorCode, pb.ErrorCode_UNSUPPORTED_VERSION)
}

// TestConsumerGroupLeaveAndSessionExpiry: a member that leaves, and one
// whose session runs out, is removed and its partitions go to the others;
// a member that does not revoke within its rebalance timeout is fenced.
func TestConsumerGroupLeaveAndSessionExpiry(t *testing.T) {
	h := newCGHarness(t)
	h.joinCG("g", "m1", "t")
	h.joinCG("g", "m2", "t")
	h.joinCG("g", "m3", "t")
	settleAll(h, "g", "m1", "m2", "m3")
	// m3 leaves.
	lr := h.hb(&pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: "m3", MemberEpoch: -1})
	if lr.ErrorCode != pb.ErrorCode_NONE || lr.MemberEpoch != -1 || lr.MemberId != "m3" {
		t.Fatalf("leave answered %v", lr)
	}
	own := settleAll(h, "g", "m1", "m2")
	if len(own["m1"])+len(own["m2"]) != 6 {
		t.Fatalf("after the leave: %v, want all six partitions between m1 and m2", own)
	}
	// m2 stops heartbeating: after the session timeout m1 has everything.
	for i := 0; i < 10; i++ {
		h.beat("g", "m1", epochOf(h, "g", "m1"), h.owned(map[string][]int32{"t": own["m1"]}))
		h.sweepNow(5 * time.Second)
	}
	h.cgroup("g", func(cg *consumerGroup) {
		if cg.members["m2"] != nil {
			t.Fatal("m2's session did not expire")
		}
	})
	own = settleAll(h, "g", "m1")
	if len(own["m1"]) != 6 {
		t.Fatalf("m1 has %v after m2 expired, want all six", own["m1"])
	}

	// Revocation timeout: m4 joins, m1 must give up three, never does.
	h.joinCG("g", "m4", "t")
	r := h.beat("g", "m1", epochOf(h, "g", "m1"), h.owned(map[string][]int32{"t": own["m1"]}))
	if len(h.assignedOf(r)["t"]) != 3 {
		t.Fatalf("m1 was not asked to revoke: %v", h.assignedOf(r))
	}
	h.sweepNow(20 * time.Second)
	h.beat("g", "m4", epochOf(h, "g", "m4"), none())
	h.sweepNow(11 * time.Second) // past the 30 s rebalance timeout
	h.cgroup("g", func(cg *consumerGroup) {
		if cg.members["m1"] != nil {
			t.Fatal("m1 kept its partitions past its rebalance timeout")
		}
	})
	wantCode(t, "fenced member's heartbeat", h.beat("g", "m1", 2, none()).ErrorCode, pb.ErrorCode_UNKNOWN_MEMBER_ID)
}

// epochOf is a member's epoch in the coordinator.
func epochOf(h *cgHarness, group, member string) int32 {
	var e int32 = -100
	h.cgroup(group, func(cg *consumerGroup) {
		if m := cg.members[member]; m != nil {
			e = m.epoch
		}
	})
	return e
}

// settleAll heartbeats the members as well-behaved clients (reporting what
// they were last given) until none changes; it returns what each owns
// (topic "t").
func settleAll(h *cgHarness, group string, members ...string) map[string][]int32 {
	h.t.Helper()
	owned := map[string][]int32{}
	for round := 0; round < 20; round++ {
		changed := false
		for _, m := range members {
			r := h.beat(group, m, epochOf(h, group, m), h.owned(map[string][]int32{"t": owned[m]}))
			if r.ErrorCode != pb.ErrorCode_NONE {
				h.t.Fatalf("%s: %v %s", m, r.ErrorCode, r.ErrorMessage)
			}
			if r.Assignment != nil {
				got := h.assignedOf(r)["t"]
				if !equalInts(got, owned[m]) {
					owned[m], changed = got, true
				}
			}
		}
		if !changed {
			var st string
			h.cgroup(group, func(cg *consumerGroup) { st = cg.state() })
			if st == cgStable {
				return owned
			}
		}
	}
	h.t.Fatalf("group %s did not settle: %v", group, owned)
	return nil
}

func equalInts(a, b []int32) bool {
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

// TestConsumerGroupStaticMember: a static member that leaves for now
// (-2) keeps its partitions; its restart (a new member id, same instance
// id) within the session gets them back without moving the others; a
// second process with the instance id while the first is active is
// refused UNRELEASED_INSTANCE_ID, and the replaced member id is fenced.
func TestConsumerGroupStaticMember(t *testing.T) {
	h := newCGHarness(t)
	static := func(member string, epoch int32) *pb.ConsumerGroupHeartbeatRequest {
		return &pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: member, MemberEpoch: epoch, InstanceId: strp("pod-1"),
			RebalanceTimeoutMs: 30_000, SubscribedTopicNames: subNames("t"), TopicPartitions: none()}
	}
	wantCode(t, "static join", h.hb(static("a1", 0)).ErrorCode, pb.ErrorCode_NONE)
	h.joinCG("g", "m2", "t")
	own := settleAll(h, "g", "a1", "m2")
	groupEpoch := func() (e int32) {
		h.cgroup("g", func(cg *consumerGroup) { e = cg.epoch })
		return e
	}
	before := groupEpoch()

	wantCode(t, "a second process with the instance id", h.hb(static("b1", 0)).ErrorCode, pb.ErrorCode_UNRELEASED_INSTANCE_ID)

	leave := static("a1", -2)
	leave.SubscribedTopicNames, leave.TopicPartitions = nil, nil
	lr := h.hb(leave)
	if lr.ErrorCode != pb.ErrorCode_NONE || lr.MemberEpoch != -2 {
		t.Fatalf("static leave: %v", lr)
	}
	r := h.hb(static("a2", 0))
	if r.ErrorCode != pb.ErrorCode_NONE || !equalInts(h.assignedOf(r)["t"], own["a1"]) {
		t.Fatalf("restart got %v %v, want the partitions a1 had (%v)", r.ErrorCode, h.assignedOf(r), own["a1"])
	}
	if groupEpoch() != before {
		t.Fatalf("the restart moved the group epoch from %d to %d", before, groupEpoch())
	}
	wantCode(t, "the replaced member id", h.hb(&pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: "a1", MemberEpoch: r.MemberEpoch,
		InstanceId: strp("pod-1"), RebalanceTimeoutMs: -1}).ErrorCode, pb.ErrorCode_FENCED_INSTANCE_ID)
	// m2 was not disturbed.
	r2 := h.beat("g", "m2", epochOf(h, "g", "m2"), h.owned(map[string][]int32{"t": own["m2"]}))
	if r2.ErrorCode != pb.ErrorCode_NONE || (r2.Assignment != nil && !equalInts(h.assignedOf(r2)["t"], own["m2"])) {
		t.Fatalf("m2 after the restart: %v %v", r2.ErrorCode, h.assignedOf(r2))
	}

	// A static member away longer than its session is removed.
	lr = h.hb(&pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: "a2", MemberEpoch: -2, InstanceId: strp("pod-1")})
	wantCode(t, "static leave again", lr.ErrorCode, pb.ErrorCode_NONE)
	for i := 0; i < 10; i++ {
		h.beat("g", "m2", epochOf(h, "g", "m2"), h.owned(map[string][]int32{"t": own["m2"]}))
		h.sweepNow(5 * time.Second)
	}
	h.cgroup("g", func(cg *consumerGroup) {
		if cg.members["a2"] != nil || cg.static["pod-1"] != "" {
			t.Fatal("the static member away past its session is still in the group")
		}
	})
}

// TestConsumerGroupRegexSubscription: a regular expression resolves to
// the topics that match it whole, a topic created later joins the
// subscription at the next refresh, and topics the member may not describe
// are left out.
func TestConsumerGroupRegexSubscription(t *testing.T) {
	h := newCGHarness(t)
	h.img.setTopics(map[string]int{"orders-eu": 2, "orders-us": 2, "xorders-eu": 2, "secret-orders-x": 2})
	allow := func(topic string) bool { return !strings.HasPrefix(topic, "secret") }
	join := &pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: "m", MemberEpoch: 0, RebalanceTimeoutMs: 30_000,
		SubscribedTopicRegex: strp(".*orders-.*"), TopicPartitions: none(), ClientId: "c", Version: 1}
	r, err := h.c.ConsumerGroupHeartbeat(context.Background(), join, allow)
	if err != nil || r.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("join: %v %v", err, r)
	}
	got := h.assignedOf(r)
	if len(got) != 3 || len(got["orders-eu"]) != 2 || len(got["orders-us"]) != 2 || len(got["xorders-eu"]) != 2 {
		t.Fatalf("regex resolved to %v, want orders-eu, orders-us and xorders-eu (not the secret topic)", got)
	}
	// A topic created later: not before the refresh interval, then yes.
	h.img.setTopics(map[string]int{"orders-eu": 2, "orders-us": 2, "xorders-eu": 2, "secret-orders-x": 2, "orders-asia": 3})
	beat := func() *pb.ConsumerGroupHeartbeatResponse {
		owned := &pb.OwnedPartitions{}
		for name, ps := range got {
			owned.Topics = append(owned.Topics, &pb.TopicPartitions{TopicId: h.img.id(name), Partitions: ps})
		}
		r, err := h.c.ConsumerGroupHeartbeat(context.Background(), &pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: "m",
			MemberEpoch: epochOf(h, "g", "m"), RebalanceTimeoutMs: -1, TopicPartitions: owned, ClientId: "c", Version: 1}, allow)
		if err != nil || r.ErrorCode != pb.ErrorCode_NONE {
			t.Fatalf("heartbeat: %v %v", err, r)
		}
		if r.Assignment != nil {
			got = h.assignedOf(r)
		}
		return r
	}
	h.clk.Advance(time.Second)
	beat()
	if _, ok := got["orders-asia"]; ok {
		t.Fatal("the new topic joined before the refresh interval")
	}
	h.clk.Advance(10 * time.Second)
	beat()
	beat()
	if len(got["orders-asia"]) != 3 {
		t.Fatalf("after the refresh the member has %v, want orders-asia's three partitions too", got)
	}
}

// TestConsumerGroupTopicChanges: partitions added to a subscribed topic,
// and a topic deleted, bump the group epoch and reach the members.
func TestConsumerGroupTopicChanges(t *testing.T) {
	h := newCGHarness(t)
	h.img.setTopics(map[string]int{"t": 2, "u": 2})
	r := h.hb(&pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: "m", RebalanceTimeoutMs: 30_000, SubscribedTopicNames: subNames("t", "u"), TopicPartitions: none()})
	wantCode(t, "join", r.ErrorCode, pb.ErrorCode_NONE)
	h.img.setTopics(map[string]int{"t": 4, "u": 2})
	r = h.beat("g", "m", r.MemberEpoch, h.owned(h.assignedOf(r)))
	if len(h.assignedOf(r)["t"]) != 4 || r.MemberEpoch != 2 {
		t.Fatalf("after t grew: epoch %d, %v", r.MemberEpoch, h.assignedOf(r))
	}
	prev := h.assignedOf(r)
	h.img.setTopics(map[string]int{"t": 4})
	owned := &pb.OwnedPartitions{Topics: []*pb.TopicPartitions{{TopicId: topicIDFor("t"), Partitions: prev["t"]}, {TopicId: topicIDFor("u"), Partitions: prev["u"]}}}
	r = h.beat("g", "m", r.MemberEpoch, owned)
	if r.Assignment == nil || len(r.Assignment.Topics) != 1 {
		t.Fatalf("after u was deleted the member still has %v", r.Assignment)
	}
}

// TestConsumerGroupFailoverMidReconciliation: a coordinator that takes
// over the group's partition while a member is revoking (another waiting
// for its partitions) loads the group from the log with its epochs and
// states, and the reconciliation goes on from there.
func TestConsumerGroupFailoverMidReconciliation(t *testing.T) {
	h := newCGHarness(t)
	r1 := h.joinCG("g", "m1", "t")
	r2 := h.joinCG("g", "m2", "t")
	all := h.assignedOf(r1)["t"]
	r1 = h.beat("g", "m1", r1.MemberEpoch, h.owned(map[string][]int32{"t": all}))
	keep := h.assignedOf(r1)["t"]
	if len(keep) != 3 {
		t.Fatalf("m1 is not revoking: %v", keep)
	}
	var before string
	h.cgroup("g", func(cg *consumerGroup) { before = describeCG(cg) })

	h2 := h.failover()
	var after string
	h2.cgroup("g", func(cg *consumerGroup) { after = describeCG(cg) })
	if before != after {
		t.Fatalf("the reloaded group differs:\nbefore %s\nafter  %s", before, after)
	}
	// m1 still owes its revocation; m2 still waits.
	r2 = h2.beat("g", "m2", r2.MemberEpoch, none())
	if len(h2.assignedOf(r2)["t"]) != 0 {
		t.Fatalf("m2 got partitions m1 still holds: %v", h2.assignedOf(r2))
	}
	r1 = h2.beat("g", "m1", r1.MemberEpoch, h2.owned(map[string][]int32{"t": keep}))
	if r1.ErrorCode != pb.ErrorCode_NONE || r1.MemberEpoch != r2.MemberEpoch {
		t.Fatalf("m1 after revoking on the new coordinator: %v", r1)
	}
	r2 = h2.beat("g", "m2", r2.MemberEpoch, none())
	if got := h2.assignedOf(r2)["t"]; len(got) != 3 {
		t.Fatalf("m2 after m1 revoked: %v", got)
	}
}

// describeCG renders a consumer group's durable state.
func describeCG(cg *consumerGroup) string {
	var b strings.Builder
	b.WriteString(cg.state())
	b.WriteString(" epoch " + itoa(cg.epoch) + " target " + itoa(cg.assignmentEpoch) + "\n")
	for _, id := range cg.sortedMemberIDs() {
		m := cg.members[id]
		b.WriteString(id + " " + m.instanceID + " " + strings.Join(m.names, ",") + " " + m.regex + " epoch " + itoa(m.epoch) + "/" + itoa(m.prevEpoch) +
			" " + m.state.String() + " " + m.assigned.String() + " " + m.revoking.String() + " target " + cg.target[id].String() + "\n")
	}
	for _, t := range sortedKeys(cg.subscription) {
		b.WriteString("sub " + t + " " + cg.subscription[t].id + " " + itoa(cg.subscription[t].partitions) + "\n")
	}
	for _, re := range sortedKeys(cg.regexes) {
		b.WriteString("regex " + re + " " + strings.Join(cg.regexes[re].topics, ",") + "\n")
	}
	return b.String()
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// failover builds a new coordinator over the same log (the fake writer's
// batches), as one taking over every partition would, and stops this one.
func (h *cgHarness) failover() *cgHarness {
	h.t.Helper()
	n := &cgHarness{harness: &harness{t: h.t, clk: h.clk, w: h.w, txn: h.txn}, img: h.img}
	n.c = New(h.c.cfg, nil, nil, h.txn, h.clk)
	n.c.w = h.w
	batches := h.w.all()
	for p := int32(0); p < h.c.cfg.Topic.Partitions; p++ {
		s := newShard(p, nil, 1)
		for _, b := range batches {
			hd, err := record.ParseHeader(b)
			if err != nil {
				h.t.Fatal(err)
			}
			n.c.applyBatch(s, hd, b)
		}
		for id := range s.groups {
			if n.c.partitionOf(id) != p {
				delete(s.groups, id)
			}
		}
		n.c.startSessions(s, h.clk.Now())
		s.status = active
		n.c.shards[p] = s
	}
	h.c.Stop()
	h.t.Cleanup(n.c.Stop)
	return n
}

// TestConsumerGroupRegexChange: a member dropping its regular expression
// (its topic names unchanged) changes its subscription: the group epoch
// moves and the member loses what only the expression gave it, and the
// expression's resolution, used by nobody now, is deleted. A static
// member replacing another with a different expression deletes the
// replaced member's one (nobody else uses it), live and after a reload.
func TestConsumerGroupRegexChange(t *testing.T) {
	t.Run("dropped", func(t *testing.T) {
		h := newCGHarness(t)
		h.img.setTopics(map[string]int{"t": 2, "u": 2})
		r := h.hb(&pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: "m", RebalanceTimeoutMs: 30_000,
			SubscribedTopicNames: subNames("u"), SubscribedTopicRegex: strp("t"), TopicPartitions: none()})
		wantCode(t, "join", r.ErrorCode, pb.ErrorCode_NONE)
		if a := h.assignedOf(r); len(a["t"]) != 2 || len(a["u"]) != 2 {
			t.Fatalf("joined with %v, want t and u", a)
		}
		epoch := r.MemberEpoch
		r = h.hb(&pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: "m", MemberEpoch: epoch, RebalanceTimeoutMs: -1,
			SubscribedTopicRegex: strp(""), TopicPartitions: h.owned(h.assignedOf(r))})
		wantCode(t, "drop the expression", r.ErrorCode, pb.ErrorCode_NONE)
		h.cgroup("g", func(cg *consumerGroup) {
			if cg.epoch <= epoch {
				t.Errorf("group epoch %d after the expression was dropped, want past %d", cg.epoch, epoch)
			}
			if len(cg.regexes) != 0 {
				t.Errorf("resolutions kept: %v", cg.regexes)
			}
		})
		if a := h.assignedOf(r); len(a["t"]) != 0 {
			t.Fatalf("still assigned %v after dropping the expression", a)
		}
	})
	t.Run("static member replaced", func(t *testing.T) {
		h := newCGHarness(t)
		h.img.setTopics(map[string]int{"t": 2, "u": 2})
		join := func(member, re string) *pb.ConsumerGroupHeartbeatResponse {
			return h.hb(&pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: member, InstanceId: strp("pod"), RebalanceTimeoutMs: 30_000,
				SubscribedTopicRegex: strp(re), TopicPartitions: none()})
		}
		wantCode(t, "join", join("a1", "t").ErrorCode, pb.ErrorCode_NONE)
		wantCode(t, "static leave", h.hb(&pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: "a1", MemberEpoch: staticLeaveEpoch, InstanceId: strp("pod")}).ErrorCode, pb.ErrorCode_NONE)
		wantCode(t, "replacement", join("a2", "u").ErrorCode, pb.ErrorCode_NONE)
		check := func(h *cgHarness, when string) {
			h.cgroup("g", func(cg *consumerGroup) {
				if _, ok := cg.regexes["t"]; ok || cg.regexes["u"] == nil || len(cg.regexes) != 1 {
					t.Errorf("%s: resolutions %v, want only u's", when, cg.regexes)
				}
			})
		}
		check(h, "live")
		check(h.failover(), "reloaded")
	})
}
