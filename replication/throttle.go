package replication

import (
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/internal/config"
	"github.com/strand-io/strand/metadata"
)

// The replication throttle (Kafka's ReplicationQuotaManager, KIP-73).
//
// Two quotas per broker, each a byte rate from a dynamic broker config:
// leader.replication.throttled.rate bounds what this broker, as a leader,
// sends to followers that are not in the ISR, for the partitions whose
// topic lists "<partition>:<this broker>" (or "*") in
// leader.replication.throttled.replicas; follower.replication.throttled.rate
// bounds what it fetches, as a follower not in the ISR, of the partitions
// listed for it in follower.replication.throttled.replicas. In-sync
// replicas are never throttled: on the leader, the maximal ISR (with an
// expansion in flight); on the follower, a replica whose last fetch had
// caught up with the leader's HW (leaderThrottled, followerThrottled).
//
// As in Kafka the rate is measured over windows (quota.window.num 11 ×
// quota.window.size.seconds 1) and a quota is checked before the bytes
// are sent: once the measured rate is above the bound, a leader answers a
// throttled partition with no records (the follower asks again) and a
// follower leaves the partition out of its next fetch. One fetch may thus
// overshoot by up to replica.fetch.max.bytes; the windowed rate brings it
// back. Unlike Kafka's Rate, the elapsed time is measured from the oldest
// retained window's start (at least one window), not padded to ten
// windows, so a fresh quota allows a burst of about one second's bytes,
// not ten.

const (
	quotaWindows    = 11          // quota.window.num
	quotaWindowSize = time.Second // quota.window.size.seconds
)

type quotaSample struct {
	start time.Time
	bytes int64
}

// quota is one windowed byte rate with a bound.
type quota struct {
	mu      sync.Mutex
	bound   int64 // bytes/s; <0: unthrottled
	samples [quotaWindows]quotaSample
	cur     int
	now     func() time.Time
	// throttled counts the bytes recorded under the throttle (what passed
	// while throttled partitions were being held to the rate).
	throttled atomic.Int64
}

func newQuota(now func() time.Time) *quota { return &quota{bound: -1, now: now} }

// setBound sets the rate; bytes/s, or <0 (or Long.MAX_VALUE) for none.
func (q *quota) setBound(b int64) {
	if b == math.MaxInt64 {
		b = -1
	}
	q.mu.Lock()
	q.bound = b
	q.mu.Unlock()
}

func (q *quota) limit() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bound
}

// rateLocked is the measured bytes/s over the retained windows.
func (q *quota) rateLocked(now time.Time) float64 {
	var total int64
	oldest := now
	for _, s := range q.samples {
		if s.start.IsZero() || now.Sub(s.start) >= quotaWindows*quotaWindowSize {
			continue
		}
		total += s.bytes
		if s.start.Before(oldest) {
			oldest = s.start
		}
	}
	elapsed := max(now.Sub(oldest), quotaWindowSize)
	return float64(total) / elapsed.Seconds()
}

// exceeded reports whether the measured rate is above the bound.
func (q *quota) exceeded() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.bound < 0 {
		return false
	}
	return q.rateLocked(q.now()) > float64(q.bound)
}

// record books n bytes sent or fetched for throttled partitions.
func (q *quota) record(n int) {
	if n <= 0 {
		return
	}
	q.throttled.Add(int64(n))
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	s := &q.samples[q.cur]
	if s.start.IsZero() || now.Sub(s.start) >= quotaWindowSize {
		q.cur = (q.cur + 1) % quotaWindows
		s = &q.samples[q.cur]
		s.start, s.bytes = now, 0
	}
	s.bytes += int64(n)
}

// throttledSet is, per topic, the partitions this broker throttles on one
// side.
type throttledSet map[string]topicThrottle

type topicThrottle struct {
	all   bool
	parts map[int32]bool
}

func (s throttledSet) has(key storage.PartitionKey) bool {
	t, ok := s[key.Topic]
	return ok && (t.all || t.parts[key.Partition])
}

// throttles is the replication throttle state of a Manager.
type throttles struct {
	leader, follower *quota
	leaderSet        atomic.Pointer[throttledSet]
	followerSet      atomic.Pointer[throttledSet]
}

func newThrottles(now func() time.Time) *throttles {
	t := &throttles{leader: newQuota(now), follower: newQuota(now)}
	empty := throttledSet{}
	t.leaderSet.Store(&empty)
	t.followerSet.Store(&empty)
	return t
}

// applyThrottles re-reads the throttle configs from img: the rates from
// this broker's dynamic configs (its own over the cluster-wide ones), the
// throttled replicas from the topic configs.
func (m *Manager) applyThrottles(img *metadata.Image, d *metadata.Delta) {
	if d.Snapshot || d.BrokerConfigs {
		for _, q := range []struct {
			name string
			q    *quota
		}{{config.LeaderThrottledRate, m.throttle.leader}, {config.FollowerThrottledRate, m.throttle.follower}} {
			bound := int64(-1)
			if v, _, ok := img.BrokerConfig(m.cfg.NodeID, q.name); ok {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
					bound = n
				}
			}
			q.q.setBound(bound)
		}
	}
	if d.Snapshot || len(d.TopicConfigs) > 0 || len(d.DeletedTopics) > 0 {
		leader, follower := throttledSet{}, throttledSet{}
		for name, t := range img.Topics {
			for _, side := range []struct {
				key string
				set throttledSet
			}{{config.LeaderThrottledReplicas, leader}, {config.FollowerThrottledReplicas, follower}} {
				v, ok := t.Configs[side.key]
				if !ok {
					continue
				}
				all, parts, err := config.ParseThrottledReplicas(v, m.cfg.NodeID)
				if err != nil || !all && len(parts) == 0 {
					continue
				}
				side.set[name] = topicThrottle{all: all, parts: parts}
			}
		}
		m.throttle.leaderSet.Store(&leader)
		m.throttle.followerSet.Store(&follower)
	}
}

// leaderThrottled: a follower's fetch of key is held to the leader quota
// (the partition is throttled here and the follower is not in sync). In
// sync means in the maximal ISR, the committed ISR plus the members of an
// expansion in flight: the HW waits for those too (LeaderState.HighWatermark),
// so throttling one would hold the HW, and acks=all, to the throttled rate.
func (m *Manager) leaderThrottled(key storage.PartitionKey, l broker.Leadership, follower int32) bool {
	return m.throttle.leaderSet.Load().has(key) && !has(l.ISR, follower) && !has(l.MaximalISR, follower)
}

// followerThrottled: this node's fetch of st is held to the follower quota:
// the partition is throttled here and this replica is not in sync. In sync
// is Kafka's follower rule (ReplicaFetcherThread.shouldFollowerThrottle):
// its last fetch answer found it caught up with the leader's HW (its log
// end at or past the HW the answer carried). This broker's metadata may
// not show an ISR expansion yet: a follower just added, judged by it
// alone, would be left out of its fetches while the quota is exceeded,
// stalling acks=all until the leader dropped it again. Membership of the
// ISR in this broker's metadata still exempts it too.
func (m *Manager) followerThrottled(st *fetchState) bool {
	key := st.p.Key
	if !m.throttle.followerSet.Load().has(key) {
		return false
	}
	if st.caughtUp {
		return false
	}
	p := m.Image().Partition(key.Topic, key.Partition)
	return p == nil || !p.InISR(m.cfg.NodeID)
}

// ReplicationThrottle reports the quotas in force (bytes/s, -1 for none)
// and the bytes each side moved under them.
func (m *Manager) ReplicationThrottle() (leaderRate, followerRate, leaderBytes, followerBytes int64) {
	return m.throttle.leader.limit(), m.throttle.follower.limit(), m.throttle.leader.throttled.Load(), m.throttle.follower.throttled.Load()
}

// applyBrokerConfigs hands this broker's dynamic configs (its own over the
// cluster-wide ones) to the partition table; it reports whether the log
// defaults changed.
func (m *Manager) applyBrokerConfigs(img *metadata.Image) bool {
	vals := make(map[string]string, len(img.BrokerConfigs)+len(img.BrokerConfigsByID[m.cfg.NodeID]))
	for k, v := range img.BrokerConfigs {
		vals[k] = v
	}
	for k, v := range img.BrokerConfigsByID[m.cfg.NodeID] {
		vals[k] = v
	}
	return m.parts.SetDynamic(vals)
}
