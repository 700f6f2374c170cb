package replication

import (
	"fmt"
	"sync"
	"time"

	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/broker/storage"
)

// A follower-fetch hold is a test-only fault: while a partition is held,
// this leader serves its followers no record of it appended after the hold
// began. The followers go on fetching (so they stay in the ISR for
// replica.lag.time.max.ms after they last caught up), but they cannot get
// past the hold point, so the high watermark cannot either: whatever is
// appended meanwhile (records, transaction markers) sits on the leader
// alone. Drills use it to make a window in which a leader loss loses a
// marker the leader already appended.
//
// A hold always ends by itself (MaxFollowerFetchHold at most), and with
// the leader: it is in memory only.

// MaxFollowerFetchHold bounds one hold.
const MaxFollowerFetchHold = 30 * time.Second

// FetchHold describes a hold in force.
type FetchHold struct {
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"` // followers get nothing at or after this offset
	Until     time.Time `json:"until"`
}

type holds struct {
	mu sync.Mutex
	m  map[storage.PartitionKey]FetchHold
}

// limit returns the offset follower reads of key must stop at, if a hold
// is in force (it forgets an expired one).
func (h *holds) limit(key storage.PartitionKey, now time.Time) (int64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.m) == 0 {
		return 0, false
	}
	fh, ok := h.m[key]
	if !ok {
		return 0, false
	}
	if !now.Before(fh.Until) {
		delete(h.m, key)
		return 0, false
	}
	return fh.Offset, true
}

// HoldFollowerFetch holds the follower fetches of a partition this node
// leads for d (at most MaxFollowerFetchHold): followers are served nothing
// appended from now on. A hold already in force keeps its offset and gets
// the new end. Tests and the drills' testing endpoint only.
func (m *Manager) HoldFollowerFetch(topic string, partition int32, d time.Duration) (FetchHold, error) {
	if d <= 0 || d > MaxFollowerFetchHold {
		return FetchHold{}, fmt.Errorf("hold duration %s is not in (0, %s]", d, MaxFollowerFetchHold)
	}
	key := storage.PartitionKey{Topic: topic, Partition: partition}
	p := m.parts.Get(key)
	if p == nil {
		return FetchHold{}, fmt.Errorf("%s has no replica on broker %d", key, m.cfg.NodeID)
	}
	if l := p.Leadership(); l.Role != broker.RoleLeader {
		return FetchHold{}, fmt.Errorf("broker %d is not the leader of %s (leader %d)", m.cfg.NodeID, key, l.Leader)
	}
	now := m.clk.Now()
	m.holds.mu.Lock()
	defer m.holds.mu.Unlock()
	if m.holds.m == nil {
		m.holds.m = map[storage.PartitionKey]FetchHold{}
	}
	fh, ok := m.holds.m[key]
	if !ok || !now.Before(fh.Until) {
		fh = FetchHold{Topic: topic, Partition: partition, Offset: p.Log.LogEndOffset()}
	}
	fh.Until = now.Add(d)
	m.holds.m[key] = fh
	m.lg.Warn("testing fault: follower fetches held", "partition", key.String(), "offset", fh.Offset, "for", d)
	return fh, nil
}

// ReleaseFollowerFetch ends a hold; it reports whether one was in force.
func (m *Manager) ReleaseFollowerFetch(topic string, partition int32) bool {
	key := storage.PartitionKey{Topic: topic, Partition: partition}
	m.holds.mu.Lock()
	fh, ok := m.holds.m[key]
	delete(m.holds.m, key)
	m.holds.mu.Unlock()
	ok = ok && m.clk.Now().Before(fh.Until)
	if ok {
		m.lg.Warn("testing fault: follower fetches released", "partition", key.String())
	}
	return ok
}
