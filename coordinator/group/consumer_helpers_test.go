package group

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/wait"
)

// testImage is a settable metadata image for consumer group tests.
type testImage struct {
	mu sync.Mutex
	im *metadata.Image
}

func (ti *testImage) get() *metadata.Image {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	return ti.im
}

// setTopics replaces the image's topics (name → partitions); each topic's
// id is derived from its name and generation so a re-created topic gets a
// new one.
func (ti *testImage) setTopics(topics map[string]int) {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	next := &metadata.Image{Offset: 1, Topics: map[string]*metadata.Topic{}}
	if ti.im != nil {
		next.Offset = ti.im.Offset + 1
	}
	for name, n := range topics {
		t := &metadata.Topic{Name: name, ID: topicIDFor(name)}
		if old := ti.im; old != nil && old.Topics[name] != nil {
			t.ID = old.Topics[name].ID
		}
		for p := 0; p < n; p++ {
			t.Partitions = append(t.Partitions, &metadata.Partition{Topic: name, Partition: int32(p)})
		}
		next.Topics[name] = t
	}
	ti.im = next
}

// recreate gives a topic a new id (deleted and created again).
func (ti *testImage) recreate(name string, n int) {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	next := &metadata.Image{Offset: ti.im.Offset + 1, Topics: map[string]*metadata.Topic{}}
	for k, v := range ti.im.Topics {
		next.Topics[k] = v
	}
	t := &metadata.Topic{Name: name, ID: topicIDFor(fmt.Sprintf("%s#%d", name, next.Offset))}
	for p := 0; p < n; p++ {
		t.Partitions = append(t.Partitions, &metadata.Partition{Topic: name, Partition: int32(p)})
	}
	next.Topics[name] = t
	ti.im = next
}

func topicIDFor(name string) string { return "id-" + name }

func (ti *testImage) id(name string) string { return ti.get().Topics[name].ID }

// cgHarness is a harness with the consumer protocol on and a test image.
type cgHarness struct {
	*harness
	img *testImage
}

func newCGHarness(t *testing.T, mutate ...func(*Config)) *cgHarness {
	img := &testImage{}
	img.setTopics(map[string]int{"t": 6})
	all := append([]func(*Config){func(c *Config) {
		c.ConsumerProtocol = true
		c.Image = img.get
	}}, mutate...)
	return &cgHarness{harness: newHarness(t, all...), img: img}
}

// hb sends one heartbeat.
func (h *cgHarness) hb(req *pb.ConsumerGroupHeartbeatRequest) *pb.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	if req.ClientId == "" {
		req.ClientId = "client"
	}
	if req.Version == 0 {
		req.Version = 1
	}
	r, err := h.c.ConsumerGroupHeartbeat(context.Background(), req, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func subNames(ts ...string) *pb.TopicNames { return &pb.TopicNames{Names: ts} }

func none() *pb.OwnedPartitions { return &pb.OwnedPartitions{} }

// joinCG is a member's first heartbeat, subscribed to topics.
func (h *cgHarness) joinCG(group, member string, topics ...string) *pb.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	return h.hb(&pb.ConsumerGroupHeartbeatRequest{GroupId: group, MemberId: member, MemberEpoch: 0, RebalanceTimeoutMs: 30_000,
		SubscribedTopicNames: subNames(topics...), TopicPartitions: none()})
}

// owned lists partitions as a heartbeat reports them (topic name → partitions).
func (h *cgHarness) owned(parts map[string][]int32) *pb.OwnedPartitions {
	o := &pb.OwnedPartitions{}
	for name, ps := range parts {
		o.Topics = append(o.Topics, &pb.TopicPartitions{TopicId: h.img.id(name), Partitions: ps})
	}
	return o
}

// beat is a regular heartbeat reporting what the member owns.
func (h *cgHarness) beat(group, member string, epoch int32, owned *pb.OwnedPartitions) *pb.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	return h.hb(&pb.ConsumerGroupHeartbeatRequest{GroupId: group, MemberId: member, MemberEpoch: epoch, RebalanceTimeoutMs: -1, TopicPartitions: owned})
}

// cgroup is the group's consumer half (a copy of nothing: read under the lock).
func (h *cgHarness) cgroup(id string, f func(cg *consumerGroup)) {
	h.t.Helper()
	s := h.c.shards[h.c.partitionOf(id)]
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[id]
	if g == nil || g.cg == nil {
		f(nil)
		return
	}
	f(g.cg)
}

// settle waits for the coordinator's background fencing to finish.
func (h *cgHarness) settle() {
	h.t.Helper()
	wait.Eventually(h.t, 5*time.Second, "background group changes to finish", func() bool {
		busy := false
		for _, s := range h.c.shards {
			s.mu.Lock()
			busy = busy || len(s.fencing) > 0 || len(s.lanes) > 0
			s.mu.Unlock()
		}
		return !busy
	})
}

// sweepNow advances the clock, sweeps and waits for the fencing it starts.
func (h *cgHarness) sweepNow(d time.Duration) {
	h.t.Helper()
	h.advance(d)
	h.settle()
}

// assignedOf renders a response's assignment by topic name.
func (h *cgHarness) assignedOf(r *pb.ConsumerGroupHeartbeatResponse) map[string][]int32 {
	if r.Assignment == nil {
		return nil
	}
	byID := map[string]string{}
	for name, t := range h.img.get().Topics {
		byID[t.ID] = name
	}
	out := map[string][]int32{}
	for _, tp := range r.Assignment.Topics {
		ps := append([]int32(nil), tp.Partitions...)
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		out[byID[tp.TopicId]] = ps
	}
	return out
}
