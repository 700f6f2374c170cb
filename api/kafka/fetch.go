package kafka

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

func init() {
	// Fetch 4 is the first with isolation levels and v2 batches; 7 adds
	// sessions (KIP-227); 13 names topics by id.
	register(kmsg.Fetch, 4, 12, handleFetch)
	register(kmsg.ListOffsets, 1, 7, handleListOffsets)
	register(kmsg.OffsetForLeaderEpoch, 0, 4, handleOffsetForLeaderEpoch)
}

// Fetch session epochs (KIP-227).
const (
	sessionInitial = 0  // open a session (with session id 0)
	sessionFinal   = -1 // no session, or close the one named
)

type partKey struct {
	topic     string
	partition int32
}

// consumerSession is a consumer's fetch session: the partitions it
// fetches with their positions, and what it was last told of each, so
// an incremental answer carries only what changed.
type consumerSession struct {
	id       int32
	mu       sync.Mutex // one request of a session at a time
	epoch    int32      // the epoch the next request must carry
	parts    map[partKey]*sessionPart
	order    []partKey
	lastUsed time.Time
}

type sessionPart struct {
	req               *pb.FetchPartition
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
func (c *sessionCache) open(now time.Time) *consumerSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.slots <= 0 {
		return nil
	}
	if len(c.byID) >= c.slots {
		var oldest *consumerSession
		for _, s := range c.byID {
			if oldest == nil || s.lastUsed.Before(oldest.lastUsed) {
				oldest = s
			}
		}
		if oldest == nil || now.Sub(oldest.lastUsed) < sessionEvictAfter {
			return nil
		}
		delete(c.byID, oldest.id)
	}
	s := &consumerSession{epoch: 1, parts: map[partKey]*sessionPart{}, lastUsed: now}
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

func fetchPartition(t string, p kmsg.FetchRequestTopicPartition, version int16) *pb.FetchPartition {
	fp := &pb.FetchPartition{Topic: t, Partition: p.Partition, FetchOffset: p.FetchOffset, PartitionMaxBytes: p.PartitionMaxBytes, LogStartOffset: p.LogStartOffset, CurrentLeaderEpoch: -1}
	if version >= 9 {
		fp.CurrentLeaderEpoch = p.CurrentLeaderEpoch
	}
	return fp
}

// handleFetch serves consumers (a replica id >= 0 is refused: followers
// fetch over gRPC on the inter-broker listener). With a session
// (KIP-227) the request names only the partitions that changed, and the
// answer carries only partitions with records, an error, or a watermark
// that moved; partitions that joined are answered in any case.
func handleFetch(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.FetchRequest)
	resp := kmsg.NewPtrFetchResponse()
	if req.ReplicaID >= 0 || req.ReplicaState.ID >= 0 {
		resp.ErrorCode = code(pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED)
		for _, t := range req.Topics {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code(pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	preq := &pb.FetchRequest{ReplicaId: -1, MaxWaitMs: req.MaxWaitMillis, MinBytes: req.MinBytes, MaxBytes: req.MaxBytes,
		IsolationLevel: pb.IsolationLevel(req.IsolationLevel)}
	now := time.Now()
	var sess *consumerSession
	joined := map[partKey]bool{}
	sessions := c.srv.sessions
	switch {
	case req.Version < 7 || (req.SessionID == 0 && req.SessionEpoch == sessionFinal):
		// A full fetch without a session.
	case req.SessionEpoch == sessionFinal:
		sessions.drop(req.SessionID) // closes it; this fetch is a full one
	case req.SessionID == 0 && req.SessionEpoch == sessionInitial:
		sess = sessions.open(now)
	case req.SessionID == 0 || req.SessionEpoch < 0:
		resp.ErrorCode = code(pb.ErrorCode_INVALID_FETCH_SESSION_EPOCH)
		return resp, nil
	default:
		if req.SessionEpoch == sessionInitial {
			// A new session in place of the one named.
			sessions.drop(req.SessionID)
			sess = sessions.open(now)
			break
		}
		sess = sessions.get(req.SessionID)
		if sess == nil {
			resp.ErrorCode = code(pb.ErrorCode_FETCH_SESSION_ID_NOT_FOUND)
			return resp, nil
		}
	}
	if sess == nil {
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				preq.Partitions = append(preq.Partitions, fetchPartition(t.Topic, p, req.Version))
			}
		}
		presp, err := c.H.Fetch(ctx, preq)
		if err != nil {
			return nil, err
		}
		return fetchResponse(req, presp, nil, nil), nil
	}

	sess.mu.Lock()
	defer sess.mu.Unlock()
	if req.SessionID != 0 && req.SessionEpoch != sessionInitial {
		if req.SessionEpoch != sess.epoch {
			resp.ErrorCode = code(pb.ErrorCode_INVALID_FETCH_SESSION_EPOCH)
			return resp, nil
		}
	}
	sess.lastUsed = now
	sess.epoch = nextEpoch(max(req.SessionEpoch, 0))
	forgot := false
	for _, f := range req.ForgottenTopics {
		for _, p := range f.Partitions {
			k := partKey{f.Topic, p}
			if _, ok := sess.parts[k]; ok {
				delete(sess.parts, k)
				forgot = true
			}
		}
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			k := partKey{t.Topic, p.Partition}
			sp := sess.parts[k]
			if sp == nil {
				sp = &sessionPart{}
				sess.parts[k] = sp
				joined[k] = true
			}
			sp.req = fetchPartition(t.Topic, p, req.Version)
		}
	}
	// The session's order changes only when a partition joins or is
	// forgotten: an incremental fetch that only moves offsets (most of
	// them) keeps it, without a pass over every partition of the session.
	if forgot || len(joined) > 0 {
		order := make([]partKey, 0, len(sess.parts))
		seen := make(map[partKey]bool, len(sess.parts))
		for _, k := range append(append([]partKey(nil), sess.order...), sortedJoined(req)...) {
			if sess.parts[k] != nil && !seen[k] {
				seen[k] = true
				order = append(order, k)
			}
		}
		sess.order = order
	}
	preq.Partitions = make([]*pb.FetchPartition, 0, len(sess.order))
	for _, k := range sess.order {
		fp := sess.parts[k].req
		preq.Partitions = append(preq.Partitions, &pb.FetchPartition{Topic: fp.Topic, Partition: fp.Partition, FetchOffset: fp.FetchOffset,
			CurrentLeaderEpoch: fp.CurrentLeaderEpoch, PartitionMaxBytes: fp.PartitionMaxBytes, LogStartOffset: fp.LogStartOffset})
	}
	presp, err := c.H.Fetch(ctx, preq)
	if err != nil {
		return nil, err
	}
	resp = fetchResponse(req, presp, sess, joined)
	resp.SessionID = sess.id
	return resp, nil
}

// sortedJoined lists the request's partitions in the order it names them.
func sortedJoined(req *kmsg.FetchRequest) []partKey {
	var out []partKey
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			out = append(out, partKey{t.Topic, p.Partition})
		}
	}
	return out
}

func nextEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// fetchResponse translates the request layer's answer, grouped by topic
// in the order the partitions were fetched. With a session, a partition
// already known to the client with nothing new is left out.
func fetchResponse(req *kmsg.FetchRequest, presp *pb.FetchResponse, sess *consumerSession, joined map[partKey]bool) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.ErrorCode = code(presp.ErrorCode)
	idx := map[string]int{}
	for _, pp := range presp.Partitions {
		k := partKey{pp.Topic, pp.Partition}
		if sess != nil {
			sp := sess.parts[k]
			if sp != nil {
				changed := !sp.told || joined[k] || len(pp.Records) > 0 || pp.ErrorCode != pb.ErrorCode_NONE ||
					sp.hw != pp.HighWatermark || sp.lso != pp.LastStableOffset || sp.logStart != pp.LogStartOffset
				sp.told, sp.hw, sp.lso, sp.logStart = true, pp.HighWatermark, pp.LastStableOffset, pp.LogStartOffset
				if !changed {
					continue
				}
			}
		}
		i, ok := idx[pp.Topic]
		if !ok {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = pp.Topic
			resp.Topics = append(resp.Topics, rt)
			i = len(resp.Topics) - 1
			idx[pp.Topic] = i
		}
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition, rp.ErrorCode = pp.Partition, code(pp.ErrorCode)
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = pp.HighWatermark, pp.LastStableOffset, pp.LogStartOffset
		rp.RecordBatches = pp.Records
		if rp.RecordBatches == nil {
			// An empty record set, not a null one: librdkafka (kcat,
			// confluent-kafka) treats null as a broken answer.
			rp.RecordBatches = []byte{}
		}
		if req.IsolationLevel == 1 {
			rp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			for _, a := range pp.AbortedTransactions {
				rp.AbortedTransactions = append(rp.AbortedTransactions, kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: a.ProducerId, FirstOffset: a.FirstOffset})
			}
		}
		if (pp.ErrorCode == pb.ErrorCode_NOT_LEADER_OR_FOLLOWER || pp.ErrorCode == pb.ErrorCode_FENCED_LEADER_EPOCH) && pp.CurrentLeaderId >= 0 {
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = pp.CurrentLeaderId, pp.CurrentLeaderEpoch
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp
}

// handleListOffsets: earliest (-2), latest (-1: the HW, or the LSO under
// read_committed), max timestamp (-3), or the first offset at or after a
// timestamp.
func handleListOffsets(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.ListOffsetsRequest)
	preq := &pb.ListOffsetsRequest{IsolationLevel: pb.IsolationLevel(req.IsolationLevel)}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			epoch := int32(-1)
			if req.Version >= 4 {
				epoch = p.CurrentLeaderEpoch
			}
			preq.Partitions = append(preq.Partitions, &pb.ListOffsetsPartition{Topic: t.Topic, Partition: p.Partition, Timestamp: p.Timestamp, CurrentLeaderEpoch: epoch})
		}
	}
	presp, err := c.H.ListOffsets(ctx, preq)
	if err != nil {
		return nil, err
	}
	resp := kmsg.NewPtrListOffsetsResponse()
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for range t.Partitions {
			pp := presp.Partitions[i]
			i++
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.ErrorCode = pp.Partition, code(pp.ErrorCode)
			rp.Timestamp, rp.Offset, rp.LeaderEpoch = pp.Timestamp, pp.Offset, pp.LeaderEpoch
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// handleOffsetForLeaderEpoch: a consumer's check for truncation after a
// leader change (KIP-320). Followers ask over gRPC; a replica id here is
// refused.
func handleOffsetForLeaderEpoch(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.OffsetForLeaderEpochRequest)
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	follower := req.Version >= 3 && req.ReplicaID >= 0
	preq := &pb.OffsetForLeaderEpochRequest{ReplicaId: -1}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			cur := int32(-1)
			if req.Version >= 2 {
				cur = p.CurrentLeaderEpoch
			}
			preq.Partitions = append(preq.Partitions, &pb.OffsetForLeaderEpochPartition{Topic: t.Topic, Partition: p.Partition, CurrentLeaderEpoch: cur, LeaderEpoch: p.LeaderEpoch})
		}
	}
	var presp *pb.OffsetForLeaderEpochResponse
	if !follower {
		var err error
		if presp, err = c.H.OffsetForLeaderEpoch(ctx, preq); err != nil {
			return nil, err
		}
	}
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition = p.Partition
			if follower {
				rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = code(pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED), -1, -1
			} else {
				pp := presp.Partitions[i]
				rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = code(pp.ErrorCode), pp.LeaderEpoch, pp.EndOffset
			}
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
