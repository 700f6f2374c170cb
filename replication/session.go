package replication

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Fetch sessions (KIP-227). A follower's fetch names every partition it
// follows from this leader; most of them are idle most of the time (the 50
// partitions of __transaction_state ride along with every fetch of a busy
// topic). A session lets both sides leave out what has not changed: the
// request names only partitions whose fetch position moved, the response
// only partitions with records or with changed offsets, epoch or error.
//
// The leader still serves every partition of the session on every fetch,
// with the position it remembers: that keeps each follower's caught-up
// time (and so its ISR membership) moving for idle partitions, exactly as
// full fetches did.
//
// Epochs on the wire are Kafka's plus one (see FetchRequest): 0 means no
// session, 1 opens one, -1 closes one.
const (
	sessionNone  int32 = 0
	sessionOpen  int32 = 1
	sessionClose int32 = -1
)

// nextSessionEpoch is the epoch after e; it wraps to 2, past the reserved
// values, as both sides count it.
func nextSessionEpoch(e int32) int32 {
	if e++; e <= sessionOpen {
		return sessionOpen + 1
	}
	return e
}

// sessionEvictAfter is how long a session must go unused before a new
// one may take its slot (Kafka's minimum eviction time of incremental
// fetch sessions, 120 s).
const sessionEvictAfter = 2 * time.Minute

// sessionPartitionsSlack is how many partitions a session may hold beyond
// the partitions of this leader's metadata image (a follower's image may
// be ahead of the leader's by a few new topics).
const sessionPartitionsSlack = 1000

// fetchSession is a leader's memory of one follower's fetch.
type fetchSession struct {
	id      int32
	replica int32
	// brokerEpoch is the follower's registration when it opened the
	// session; a session outlives no registration.
	brokerEpoch int64
	created     time.Time
	lastUsed    atomic.Int64 // Unix ns of the last request that used it

	mu    sync.Mutex // held for a whole request: one request at a time
	epoch int32      // the epoch the next request must carry
	parts map[storage.PartitionKey]*sessionPart
	keys  []storage.PartitionKey // serving order: the order partitions joined
	size  atomic.Int32           // len(keys), for stats without waiting on mu
}

// sessionPart is one partition of a session: the follower's last word on
// it, and what the follower was last told.
type sessionPart struct {
	req                   *pb.FetchPartition
	told                  bool
	hw, lso, logStart     int64
	leaderID, leaderEpoch int32
}

// sessionCache holds a leader's sessions: one per follower, since a
// follower runs one fetcher per leader; a new session from a follower
// evicts its old one, so the cache never holds more than one session per
// broker. Only a registered broker at its current epoch gets one (the
// caller checks before begin), and a session holds at most the partitions
// of the metadata image (plus sessionPartitionsSlack).
//
// When every slot is taken, a new session evicts, as Kafka's
// FetchSessionCache does, the least recently used session if it has been
// unused for sessionEvictAfter, else the smallest session older than
// sessionEvictAfter if it holds fewer partitions than the new one (every
// session here is a follower's: Kafka's "privileged" ones); failing that
// it is declined and the follower fetches in full. Sessions of brokers no
// longer registered at the epoch they opened with are dropped whenever a
// session opens.
type sessionCache struct {
	slots     int // at most this many sessions; 0: none
	now       func() time.Time
	mu        sync.Mutex
	next      int32
	byID      map[int32]*fetchSession
	byReplica map[int32]*fetchSession
	evictions int64 // sessions evicted for a new one (tests)
}

func newSessionCache(slots int) *sessionCache {
	return &sessionCache{slots: slots, now: time.Now, next: rand.Int32N(1 << 30), byID: map[int32]*fetchSession{}, byReplica: map[int32]*fetchSession{}}
}

// len is the number of open sessions (tests, metrics).
func (c *sessionCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byID)
}

// stats counts sessions and the partitions they hold.
func (c *sessionCache) stats() (sessions, partitions int) {
	c.mu.Lock()
	all := make([]*fetchSession, 0, len(c.byID))
	for _, s := range c.byID {
		all = append(all, s)
	}
	c.mu.Unlock()
	for _, s := range all {
		partitions += int(s.size.Load())
	}
	return len(all), partitions
}

func (c *sessionCache) dropLocked(s *fetchSession) {
	if c.byID[s.id] == s {
		delete(c.byID, s.id)
	}
	if c.byReplica[s.replica] == s {
		delete(c.byReplica, s.replica)
	}
}

// begin resolves req's session. It returns nil for a sessionless fetch;
// otherwise the session, locked (the caller unlocks it with end), with
// req's changes applied, and the set of partitions that joined with this
// request (always answered in full). The caller has checked that req
// comes from a registered broker at its current epoch; img is the
// metadata image that check used.
func (c *sessionCache) begin(req *pb.FetchRequest, img *metadata.Image) (*fetchSession, map[storage.PartitionKey]bool, error) {
	switch {
	case req.SessionEpoch == sessionNone:
		return nil, nil, nil
	case req.ReplicaId < 0:
		return nil, nil, errs.New(pb.ErrorCode_INVALID_REQUEST, "fetch sessions are for followers; a consumer fetches with session_epoch 0")
	case req.SessionEpoch == sessionClose:
		c.mu.Lock()
		if s := c.byID[req.SessionId]; s != nil && s.replica == req.ReplicaId {
			c.dropLocked(s)
		}
		c.mu.Unlock()
		return nil, nil, nil
	case req.SessionEpoch < sessionClose:
		return nil, nil, errs.New(pb.ErrorCode_INVALID_FETCH_SESSION_EPOCH, "fetch session epoch %d is not valid", req.SessionEpoch)
	case req.SessionEpoch == sessionOpen:
		if c.slots <= 0 || len(req.Partitions) > maxSessionPartitions(img) {
			// Declined: a full fetch, answered with session id 0.
			c.mu.Lock()
			if old := c.byReplica[req.ReplicaId]; old != nil {
				c.dropLocked(old)
			}
			c.mu.Unlock()
			return nil, nil, nil
		}
		now := c.now()
		s := &fetchSession{replica: req.ReplicaId, created: now, epoch: nextSessionEpoch(sessionOpen), parts: map[storage.PartitionKey]*sessionPart{}}
		if b := img.Brokers[req.ReplicaId]; b != nil {
			s.brokerEpoch = b.Epoch
		}
		s.lastUsed.Store(now.UnixNano())
		added := map[storage.PartitionKey]bool{}
		for _, fp := range req.Partitions {
			k := storage.PartitionKey{Topic: fp.Topic, Partition: fp.Partition}
			if _, dup := s.parts[k]; !dup {
				s.keys = append(s.keys, k)
			}
			s.parts[k] = &sessionPart{req: fp}
			added[k] = true
		}
		c.mu.Lock()
		if old := c.byReplica[req.ReplicaId]; old != nil {
			c.dropLocked(old)
		}
		c.dropUnregisteredLocked(img)
		if len(c.byID) >= c.slots && !c.evictLocked(now, len(s.keys)) {
			c.mu.Unlock()
			return nil, nil, nil // declined: a full fetch, answered with session id 0
		}
		for {
			c.next++
			if c.next <= 0 {
				c.next = 1
			}
			if c.byID[c.next] == nil {
				break
			}
		}
		s.id = c.next
		s.size.Store(int32(len(s.keys)))
		c.byID[s.id] = s
		c.byReplica[s.replica] = s
		s.mu.Lock()
		c.mu.Unlock()
		return s, added, nil
	}
	c.mu.Lock()
	s := c.byID[req.SessionId]
	c.mu.Unlock()
	if s == nil || s.replica != req.ReplicaId {
		return nil, nil, errs.New(pb.ErrorCode_FETCH_SESSION_ID_NOT_FOUND, "fetch session %d of broker %d is not open here", req.SessionId, req.ReplicaId)
	}
	s.mu.Lock()
	if s.epoch != req.SessionEpoch {
		want := s.epoch
		s.mu.Unlock()
		return nil, nil, errs.New(pb.ErrorCode_INVALID_FETCH_SESSION_EPOCH, "fetch session %d expects epoch %d, not %d", req.SessionId, want, req.SessionEpoch)
	}
	s.epoch = nextSessionEpoch(s.epoch)
	s.lastUsed.Store(c.now().UnixNano())
	if len(req.Forgotten) > 0 {
		for _, tp := range req.Forgotten {
			delete(s.parts, storage.PartitionKey{Topic: tp.Topic, Partition: tp.Partition})
		}
		kept := s.keys[:0]
		for _, k := range s.keys {
			if s.parts[k] != nil {
				kept = append(kept, k)
			}
		}
		s.keys = kept
	}
	var added map[storage.PartitionKey]bool
	for _, fp := range req.Partitions {
		k := storage.PartitionKey{Topic: fp.Topic, Partition: fp.Partition}
		if sp := s.parts[k]; sp != nil {
			sp.req = fp
			continue
		}
		if len(s.keys) >= sessionPartitionsSlack && len(s.keys) >= maxSessionPartitions(img) {
			// More partitions than there are: drop the session (the
			// follower opens a new one, which is declined).
			s.mu.Unlock()
			c.mu.Lock()
			c.dropLocked(s)
			c.mu.Unlock()
			return nil, nil, errs.New(pb.ErrorCode_FETCH_SESSION_ID_NOT_FOUND, "fetch session %d of broker %d would hold more partitions than the %d of the metadata; closed", req.SessionId, req.ReplicaId, maxSessionPartitions(img)-sessionPartitionsSlack)
		}
		s.parts[k] = &sessionPart{req: fp}
		s.keys = append(s.keys, k)
		if added == nil {
			added = map[storage.PartitionKey]bool{}
		}
		added[k] = true
	}
	s.size.Store(int32(len(s.keys)))
	return s, added, nil
}

// maxSessionPartitions is the most partitions a session may hold under
// img: every partition there is, and sessionPartitionsSlack more.
func maxSessionPartitions(img *metadata.Image) int {
	n := sessionPartitionsSlack
	for _, t := range img.Topics {
		n += len(t.Partitions)
	}
	return n
}

// dropUnregisteredLocked drops the sessions of brokers that img does not
// hold at the epoch they opened their session with.
func (c *sessionCache) dropUnregisteredLocked(img *metadata.Image) {
	for _, s := range c.byID {
		if b := img.Brokers[s.replica]; b == nil || b.Epoch != s.brokerEpoch {
			c.dropLocked(s)
		}
	}
}

// evictLocked frees a slot for a new session of size partitions (Kafka's
// rules, see sessionCache): the least recently used session if it is
// stale, else the smallest session old enough to be evicted, if smaller.
// It reports whether it freed one.
func (c *sessionCache) evictLocked(now time.Time, size int) bool {
	var lru, smallest *fetchSession
	for _, s := range c.byID {
		if lru == nil || s.lastUsed.Load() < lru.lastUsed.Load() {
			lru = s
		}
		if now.Sub(s.created) > sessionEvictAfter && (smallest == nil || s.size.Load() < smallest.size.Load()) {
			smallest = s
		}
	}
	switch {
	case lru != nil && now.Sub(time.Unix(0, lru.lastUsed.Load())) > sessionEvictAfter:
		c.dropLocked(lru)
	case smallest != nil && int(smallest.size.Load()) < size:
		c.dropLocked(smallest)
	default:
		return false
	}
	c.evictions++
	return true
}

// partitions is what the session fetches: every partition, at the
// position its follower last gave.
func (s *fetchSession) partitions() []*pb.FetchPartition {
	out := make([]*pb.FetchPartition, 0, len(s.keys))
	for _, k := range s.keys {
		out = append(out, s.parts[k].req)
	}
	return out
}

// trim keeps in resp only what the follower does not know yet and
// remembers what it was told. The caller holds the session (begin) and
// releases it after.
func (s *fetchSession) trim(resp *pb.FetchResponse, added map[storage.PartitionKey]bool) {
	kept := resp.Partitions[:0]
	for _, r := range resp.Partitions {
		k := storage.PartitionKey{Topic: r.Topic, Partition: r.Partition}
		sp := s.parts[k]
		if sp != nil && sp.told && !added[k] && len(r.Records) == 0 && r.ErrorCode == pb.ErrorCode_NONE &&
			r.HighWatermark == sp.hw && r.LastStableOffset == sp.lso && r.LogStartOffset == sp.logStart &&
			r.CurrentLeaderId == sp.leaderID && r.CurrentLeaderEpoch == sp.leaderEpoch {
			continue
		}
		switch {
		case sp == nil:
		case r.ErrorCode != pb.ErrorCode_NONE:
			// A follower takes nothing from an error answer (not even the
			// HW it may carry): answer this partition in full next time.
			sp.told = false
		default:
			sp.told = true
			sp.hw, sp.lso, sp.logStart = r.HighWatermark, r.LastStableOffset, r.LogStartOffset
			sp.leaderID, sp.leaderEpoch = r.CurrentLeaderId, r.CurrentLeaderEpoch
		}
		kept = append(kept, r)
	}
	for i := len(kept); i < len(resp.Partitions); i++ {
		resp.Partitions[i] = nil
	}
	resp.Partitions = kept
	resp.SessionId = s.id
}

// release unlocks a session that begin returned.
func (s *fetchSession) release() { s.mu.Unlock() }
