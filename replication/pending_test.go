package replication

import (
	"reflect"
	"testing"
	"time"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/metadata"
)

// TestSameLeadershipKeepsPendingExpansion: a metadata change under the
// same leader epoch (here a reassignment adding replica 3) arrives while
// an AlterPartition adding replica 2 is in flight. The expansion may still
// be committed, so the HW must keep waiting for replica 2: its Pending
// entry stays. An entry that is no longer a replica, or that the new ISR
// already holds, is dropped.
func TestSameLeadershipKeepsPendingExpansion(t *testing.T) {
	key := storage.PartitionKey{Topic: "orders", Partition: 0}
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	p := newTestPartition(t, key, clk)
	m := New(DefaultConfig(1), nil, nil, nil, func() int64 { return 1 }, clk)
	t.Cleanup(m.cancel)

	np := &metadata.Partition{Topic: key.Topic, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 1}
	m.becomeLeader(p, np)
	le := m.leader(key)
	le.mu.Lock()
	le.st.Pending = []int32{1, 2} // an expansion adding 2 in flight
	p.UpdateISR(le.st.ISR, le.st.MaximalISR(), le.st.PartitionEpoch)
	le.mu.Unlock()

	// A reassignment adds 3 under the same leader epoch; 2 is not in the ISR yet.
	np = np.Clone()
	np.Replicas, np.PartitionEpoch, np.AddingReplicas = []int32{1, 2, 3}, 2, []int32{3}
	m.becomeLeader(p, np)
	le.mu.Lock()
	maximal := le.st.MaximalISR()
	le.mu.Unlock()
	if want := []int32{1, 2}; !reflect.DeepEqual(maximal, want) {
		t.Fatalf("maximal ISR %v after a same-epoch change with an expansion of 2 in flight, want %v", maximal, want)
	}
	if got := p.Leadership().MaximalISR; !reflect.DeepEqual(got, []int32{1, 2}) {
		t.Fatalf("partition's maximal ISR %v, want [1 2]", got)
	}

	// 2 leaves the replica set: its pending entry goes with it.
	np = np.Clone()
	np.Replicas, np.PartitionEpoch, np.AddingReplicas = []int32{1, 3}, 3, nil
	m.becomeLeader(p, np)
	le.mu.Lock()
	maximal, pending := le.st.MaximalISR(), le.st.Pending
	le.mu.Unlock()
	if !reflect.DeepEqual(maximal, []int32{1}) || pending != nil {
		t.Fatalf("maximal ISR %v pending %v after 2 left the replicas, want [1] and none", maximal, pending)
	}

	// An expansion the new ISR already holds is applied: nothing stays pending.
	le.mu.Lock()
	le.st.Pending = []int32{1, 3}
	le.mu.Unlock()
	np = np.Clone()
	np.ISR, np.PartitionEpoch = []int32{1, 3}, 4
	m.becomeLeader(p, np)
	le.mu.Lock()
	pending = le.st.Pending
	le.mu.Unlock()
	if pending != nil {
		t.Fatalf("pending %v once the ISR holds the expansion, want none", pending)
	}
}

// TestFollowerLogStartsPruned: the followers' log starts a leader keeps
// for DeleteRecords lose a replica a reassignment removed, and all of a
// partition's once its leadership ends (a deleted partition or a new
// leader).
func TestFollowerLogStartsPruned(t *testing.T) {
	key := storage.PartitionKey{Topic: "orders", Partition: 0}
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	p := newTestPartition(t, key, clk)
	m := New(DefaultConfig(1), nil, nil, nil, func() int64 { return 1 }, clk)
	t.Cleanup(m.cancel)

	np := &metadata.Partition{Topic: key.Topic, Partition: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 1}
	m.becomeLeader(p, np)
	m.followerStarts.note(key, 3, 2, 10)
	m.followerStarts.note(key, 3, 3, 12)

	np = np.Clone()
	np.Replicas, np.ISR, np.PartitionEpoch = []int32{1, 2}, []int32{1, 2}, 2
	m.becomeLeader(p, np)
	if _, ok := m.followerStarts.get(key, 3, 3); ok {
		t.Fatal("replica 3's log start kept after a reassignment removed it")
	}
	if s, ok := m.followerStarts.get(key, 3, 2); !ok || s != 10 {
		t.Fatalf("replica 2's log start %d, %v; want 10 kept", s, ok)
	}

	m.dropLeader(key)
	if n := m.followerStarts.size(); n != 0 {
		t.Fatalf("%d partitions with follower log starts after the leadership ended, want 0", n)
	}
}
