package replication

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// newTestPartition is a replica of key on a fresh log in a temporary
// directory, abandoned at the test's end.
func newTestPartition(t *testing.T, key storage.PartitionKey, clk clock.Clock) *broker.Partition {
	t.Helper()
	cfg := storage.DefaultConfig()
	cfg.Files = storage.NewFileCache(4)
	l, err := storage.Open(filepath.Join(t.TempDir(), storage.DirName(key.Topic, key.Partition)), key, cfg, 0, clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Abandon)
	return broker.NewPartition(key, l, 0)
}

// TestLeaderThrottleSparesMaximalISR: a follower an ISR expansion in
// flight adds is in the maximal ISR, which the HW waits for; the leader
// must not hold it to the leader quota (it would hold the HW, and acks=all,
// to the throttled rate). A replica outside the maximal ISR is throttled.
func TestLeaderThrottleSparesMaximalISR(t *testing.T) {
	key := storage.PartitionKey{Topic: "orders", Partition: 0}
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	p := newTestPartition(t, key, clk)
	m := New(DefaultConfig(1), nil, nil, nil, func() int64 { return 1 }, clk)
	t.Cleanup(m.cancel)
	m.throttle.leaderSet.Store(&throttledSet{key.Topic: {all: true}})

	np := &metadata.Partition{Topic: key.Topic, Partition: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 1}
	m.becomeLeader(p, np)
	le := m.leader(key)
	le.mu.Lock()
	le.st.Pending = []int32{1, 2} // an expansion adding 2 in flight
	p.UpdateISR(le.st.ISR, le.st.MaximalISR(), le.st.PartitionEpoch)
	le.mu.Unlock()

	l := p.Leadership()
	if m.leaderThrottled(key, l, 2) {
		t.Errorf("follower 2, in the maximal ISR %v (ISR %v), is throttled by the leader", l.MaximalISR, l.ISR)
	}
	if !m.leaderThrottled(key, l, 3) {
		t.Errorf("follower 3, outside the maximal ISR %v, is not throttled", l.MaximalISR)
	}
	if m.leaderThrottled(storage.PartitionKey{Topic: "free", Partition: 0}, l, 3) {
		t.Error("a partition no topic config throttles is throttled")
	}
}

// fetchRecorder answers every Fetch with the next HW in hws and records
// the partitions each request named.
type fetchRecorder struct {
	pb.ConsumerClient
	hws   []int64
	named [][]string
}

func (f *fetchRecorder) Fetch(_ context.Context, req *pb.FetchRequest, _ ...grpc.CallOption) (*pb.FetchResponse, error) {
	var names []string
	resp := &pb.FetchResponse{}
	for _, fp := range req.Partitions {
		names = append(names, storage.PartitionKey{Topic: fp.Topic, Partition: fp.Partition}.String())
		hw := f.hws[0]
		f.hws = f.hws[1:]
		resp.Partitions = append(resp.Partitions, &pb.FetchPartitionResponse{Topic: fp.Topic, Partition: fp.Partition,
			HighWatermark: hw, LastStableOffset: hw, LogStartOffset: 0, LogEndOffset: hw})
	}
	f.named = append(f.named, names)
	return resp, nil
}

// TestFollowerThrottleCaughtUpWithLeaderHW is Kafka's follower rule: a
// follower whose last fetch had caught up with the leader's HW is in sync
// and keeps fetching a throttled partition while the follower quota is
// exceeded, whatever its own (possibly stale) metadata says of the ISR;
// one behind the leader's HW is left out of its fetches.
func TestFollowerThrottleCaughtUpWithLeaderHW(t *testing.T) {
	key := storage.PartitionKey{Topic: "orders", Partition: 0}
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	p := newTestPartition(t, key, clk) // log end 0
	m := New(DefaultConfig(2), nil, nil, nil, func() int64 { return 1 }, clk)
	t.Cleanup(m.cancel)
	// This broker's metadata has not heard of the partition at all: it
	// cannot tell this replica is in the ISR.
	m.throttle.followerSet.Store(&throttledSet{key.Topic: {all: true}})

	// It follows broker 1 at epoch 3 (a fetcher applies what the leader
	// answers only to a replica that still follows it).
	if err := p.SetLeadership(broker.Leadership{Role: broker.RoleFollower, Leader: 1, LeaderEpoch: 3, Replicas: []int32{1, 2}}, nil); err != nil {
		t.Fatal(err)
	}
	f := newFetcher(m, 1)
	st := &fetchState{p: p, leaderEpoch: 3, leaderHW: -1}
	f.parts[key] = st
	// Leader HW 0 = our log end: caught up. Then HW 5: behind.
	c := &fetchRecorder{hws: []int64{0, 5}}

	if !f.fetch(c, []*fetchState{st}) { // quota not exceeded: fetched
		t.Fatal("first fetch failed")
	}
	m.throttle.follower.setBound(1)
	m.throttle.follower.record(1 << 20)
	if !m.throttle.follower.exceeded() {
		t.Fatal("the follower quota is not exceeded")
	}
	if !f.fetch(c, []*fetchState{st}) {
		t.Fatal("second fetch failed")
	}
	if len(c.named) != 2 || len(c.named[1]) != 1 {
		t.Fatalf("fetches named %v: a replica caught up with the leader's HW was left out under the exceeded quota", c.named)
	}
	// Now behind the leader's HW (5 > log end 0): throttled, left out.
	f.fetch(c, []*fetchState{st})
	if len(c.named) != 2 {
		t.Fatalf("fetches named %v: a replica behind the leader's HW fetched under the exceeded quota", c.named)
	}
}
