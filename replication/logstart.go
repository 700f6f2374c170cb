package replication

import (
	"sync"

	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// The leader's view of its followers' log start
// offsets, for DeleteRecords' low watermark (Kafka's
// Partition.lowWatermarkIfLeader).

// followerLogStarts holds the log start offset each follower gave in its
// last fetch, per partition, under the leader epoch it fetched at (an
// entry of another epoch is from an earlier leadership and not used).
type followerLogStarts struct {
	mu sync.Mutex
	m  map[storage.PartitionKey]map[int32]epochStart
}

type epochStart struct {
	epoch int32
	start int64
}

func (f *followerLogStarts) note(key storage.PartitionKey, epoch, id int32, start int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[storage.PartitionKey]map[int32]epochStart{}
	}
	byID := f.m[key]
	if byID == nil {
		byID = map[int32]epochStart{}
		f.m[key] = byID
	}
	byID[id] = epochStart{epoch, start}
}

// forget drops a partition's entries (its leadership ended or the
// partition is gone).
func (f *followerLogStarts) forget(key storage.PartitionKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, key)
}

// retain keeps only the entries of replicas (a reassignment removed the
// others).
func (f *followerLogStarts) retain(key storage.PartitionKey, replicas []int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id := range f.m[key] {
		if !has(replicas, id) {
			delete(f.m[key], id)
		}
	}
	if len(f.m[key]) == 0 {
		delete(f.m, key)
	}
}

// size is the number of partitions with entries (tests).
func (f *followerLogStarts) size() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.m)
}

func (f *followerLogStarts) get(key storage.PartitionKey, epoch, id int32) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.m[key][id]
	if !ok || e.epoch != epoch {
		return 0, false
	}
	return e.start, true
}

// LowWatermark is, for a partition this node leads, the smallest log start
// offset among its replicas on live brokers: this leader's and what each
// follower reported in its last fetch at the current leader epoch (-1 for
// a live follower that has not fetched yet). DeleteRecords is complete
// once it reaches the offset asked. NOT_LEADER_OR_FOLLOWER elsewhere.
func (m *Manager) LowWatermark(topic string, partition int32) (int64, error) {
	key := storage.PartitionKey{Topic: topic, Partition: partition}
	p := m.parts.Get(key)
	if p == nil {
		return -1, errs.New(pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, "%s has no replica on broker %d", key, m.cfg.NodeID)
	}
	l := p.Leadership()
	if l.Role != broker.RoleLeader {
		return -1, errs.New(pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, "broker %d is not the leader of %s (leader %d)", m.cfg.NodeID, key, l.Leader)
	}
	low := p.Log.LogStartOffset()
	img := m.Image()
	np := img.Partition(topic, partition)
	if np == nil {
		return low, nil
	}
	for _, r := range np.Replicas {
		if r == m.cfg.NodeID || !img.IsLive(r) {
			continue
		}
		s, ok := m.followerStarts.get(key, l.LeaderEpoch, r)
		if !ok {
			s = -1
		}
		low = min(low, s)
	}
	return low, nil
}
