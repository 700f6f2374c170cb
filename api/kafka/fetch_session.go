package kafka

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Fetch session epochs (KIP-227).
const (
	sessionInitial = 0  // open a session (with session id 0)
	sessionFinal   = -1 // no session, or close the one named
)

// partKey names a partition of a fetch: by topic name below Fetch v13, by
// topic id from v13 (KIP-516), the other left zero. A session keeps the
// one its first request used.
type partKey struct {
	topic     string
	id        [16]byte
	partition int32
}

// consumerSession is a consumer's fetch session: the partitions it
// fetches with their positions, and what it was last told of each, so
// an incremental answer carries only what changed.
type consumerSession struct {
	id      int32
	mu      sync.Mutex // one request of a session at a time
	epoch   int32      // the epoch the next request must carry
	usesIDs bool       // opened at Fetch v13+: partitions are keyed by topic id
	parts   map[partKey]*sessionPart
	order   []partKey
	// lastUsed is when a request last used the session (unix ns): its
	// request writes it under mu, the cache reads it under the cache's
	// lock to pick a session to evict, so it is atomic.
	lastUsed atomic.Int64
}

// touch records that a request used the session at now.
func (s *consumerSession) touch(now time.Time) { s.lastUsed.Store(now.UnixNano()) }

// sessionPart is one partition of a session. A partition named by topic
// id keeps the name the id had when it joined (Kafka's CachedPartition):
// if the topic is deleted and created again under that name, the session
// reads the new topic's partition, whose id does not match, and is
// answered INCONSISTENT_TOPIC_ID. An id no topic had when it joined is
// looked up again on every fetch (UNKNOWN_TOPIC_ID until it resolves).
type sessionPart struct {
	req               *pb.FetchPartition
	name              string
	told              bool
	hw, lso, logStart int64
}

// sessionCache holds the listener's consumer fetch sessions, at most
// slots of them (max.incremental.fetch.session.cache.slots): a new
// session evicts the least recently used one unused for a minute, and is
// declined (session id 0: the client fetches in full) when none is.
type sessionCache struct {
	slots int
	mu    sync.Mutex
	byID  map[int32]*consumerSession
}

const sessionEvictAfter = time.Minute

func newSessionCache(slots int) *sessionCache {
	return &sessionCache{slots: slots, byID: map[int32]*consumerSession{}}
}

// open makes a session, or returns nil when the cache is full.
func (c *sessionCache) open(now time.Time, usesIDs bool) *consumerSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.slots <= 0 {
		return nil
	}
	if len(c.byID) >= c.slots {
		var oldest *consumerSession
		var oldestUsed int64
		for _, s := range c.byID {
			if used := s.lastUsed.Load(); oldest == nil || used < oldestUsed {
				oldest, oldestUsed = s, used
			}
		}
		if oldest == nil || now.Sub(time.Unix(0, oldestUsed)) < sessionEvictAfter {
			return nil
		}
		delete(c.byID, oldest.id)
	}
	s := &consumerSession{epoch: 1, usesIDs: usesIDs, parts: map[partKey]*sessionPart{}}
	s.touch(now)
	for {
		s.id = rand.Int32N(math.MaxInt32-1) + 1
		if c.byID[s.id] == nil {
			break
		}
	}
	c.byID[s.id] = s
	return s
}

func (c *sessionCache) get(id int32) *consumerSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byID[id]
}

func (c *sessionCache) drop(id int32) {
	c.mu.Lock()
	delete(c.byID, id)
	c.mu.Unlock()
}

func (c *sessionCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byID)
}

func nextEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}
