package kafka

import (
	"context"
	"encoding/base64"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

func init() {
	// Fetch 4 is the first with isolation levels and v2 batches; 7 adds
	// sessions (KIP-227); 13 names topics by id (KIP-516); 15 moves a
	// follower's id into ReplicaState (KIP-903); 16 answers where a
	// partition's leader went (KIP-951); 17 adds a follower's directory
	// id (KIP-853). Kafka 4.0 serves up to 17.
	register(kmsg.Fetch, 4, 17, handleFetch)
	register(kmsg.ListOffsets, 1, 7, handleListOffsets)
	register(kmsg.OffsetForLeaderEpoch, 0, 4, handleOffsetForLeaderEpoch)
}

// image is the node's metadata image (nil on a node with no partitions).
func (c *Conn) image() *metadata.Image {
	if c.H.Repl == nil {
		return nil
	}
	return c.H.Repl.Image()
}

// topicName is the name of the topic with that id in img ("" when no
// topic has it).
func topicName(img *metadata.Image, id [16]byte) string {
	if img == nil || id == ([16]byte{}) {
		return ""
	}
	if t := img.TopicByID(topicIDString(id)); t != nil {
		return t.Name
	}
	return ""
}

// topicIDString is a wire topic id as Strand writes ids (the zero id
// too: no topic has it).
func topicIDString(id [16]byte) string {
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// fetchAsk is one partition a Fetch request names: its key (by name, or
// by id from v13), and what the request layer is asked for it (from v13
// the name the id has now, "" when no topic has it, and the id, checked
// where the partition is read).
type fetchAsk struct {
	key partKey
	fp  *pb.FetchPartition
}

func fetchAsks(req *kmsg.FetchRequest, img *metadata.Image) []fetchAsk {
	var out []fetchAsk
	for _, t := range req.Topics {
		name, id, key := t.Topic, "", partKey{topic: t.Topic}
		if req.Version >= 13 {
			name, id, key = topicName(img, t.TopicID), topicIDString(t.TopicID), partKey{id: t.TopicID}
		}
		for _, p := range t.Partitions {
			key.partition = p.Partition
			fp := &pb.FetchPartition{Topic: name, TopicId: id, Partition: p.Partition, FetchOffset: p.FetchOffset,
				PartitionMaxBytes: p.PartitionMaxBytes, LogStartOffset: p.LogStartOffset, CurrentLeaderEpoch: -1}
			if req.Version >= 9 {
				fp.CurrentLeaderEpoch = p.CurrentLeaderEpoch
			}
			out = append(out, fetchAsk{key, fp})
		}
	}
	return out
}

// unknownTopicID splits off the partitions named by an id no topic has:
// answered UNKNOWN_TOPIC_ID without a read or an authorization question
// (an id tells nothing of a topic's name), as Kafka answers them.
func unknownTopicID(fps []*pb.FetchPartition) (known []*pb.FetchPartition, unknown []*pb.FetchPartitionResponse) {
	for _, fp := range fps {
		if fp.TopicId != "" && fp.Topic == "" {
			unknown = append(unknown, &pb.FetchPartitionResponse{TopicId: fp.TopicId, Partition: fp.Partition, ErrorCode: pb.ErrorCode_UNKNOWN_TOPIC_ID,
				ErrorMessage: "no topic has id " + fp.TopicId, HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1, CurrentLeaderId: -1, CurrentLeaderEpoch: -1})
			continue
		}
		known = append(known, fp)
	}
	return known, unknown
}

// handleFetch serves consumers (a replica id >= 0 is refused: followers
// fetch over gRPC on the inter-broker listener). With a session
// (KIP-227) the request names only the partitions that changed, and the
// answer carries only partitions with records, an error, or a watermark
// that moved; partitions that joined are answered in any case. From v13
// topics are named by id, in the request, the answer and the session
// (KafkaApis.handleFetchRequest and FetchSession's contexts): an id no
// topic has is answered UNKNOWN_TOPIC_ID, and the id is checked against
// the partition's where it is read (INCONSISTENT_TOPIC_ID), so a consumer
// of a topic deleted and created again under its name is told, not fed
// the new topic's records. A session keeps the way its first request
// named topics: a later request the other way is refused
// FETCH_SESSION_TOPIC_ID_ERROR.
func handleFetch(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.FetchRequest)
	resp := kmsg.NewPtrFetchResponse()
	useIDs := req.Version >= 13
	if req.ReplicaID >= 0 || req.ReplicaState.ID >= 0 {
		resp.ErrorCode = code(pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED)
		for _, t := range req.Topics {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
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
	sessions := c.srv.sessions
	switch {
	case req.Version < 7 || (req.SessionID == 0 && req.SessionEpoch == sessionFinal):
		// A full fetch without a session.
	case req.SessionEpoch == sessionFinal:
		sessions.drop(req.SessionID) // closes it; this fetch is a full one
	case req.SessionID == 0 && req.SessionEpoch == sessionInitial:
		sess = sessions.open(now, useIDs)
	case req.SessionID == 0 || req.SessionEpoch < 0:
		resp.ErrorCode = code(pb.ErrorCode_INVALID_FETCH_SESSION_EPOCH)
		return resp, nil
	default:
		if req.SessionEpoch == sessionInitial {
			// A new session in place of the one named.
			sessions.drop(req.SessionID)
			sess = sessions.open(now, useIDs)
			break
		}
		sess = sessions.get(req.SessionID)
		if sess == nil {
			resp.ErrorCode = code(pb.ErrorCode_FETCH_SESSION_ID_NOT_FOUND)
			return resp, nil
		}
	}
	img := c.image()
	asks := fetchAsks(req, img)
	if sess == nil {
		for _, a := range asks {
			preq.Partitions = append(preq.Partitions, a.fp)
		}
		var unknown []*pb.FetchPartitionResponse
		preq.Partitions, unknown = unknownTopicID(preq.Partitions)
		presp, err := c.H.Fetch(ctx, preq)
		if err != nil {
			return nil, err
		}
		presp.Partitions = append(presp.Partitions, unknown...)
		return fetchResponse(req, presp, nil, nil, img), nil
	}

	// The session is locked while it is read and updated, not through the
	// fetch's wait (up to MaxWaitMs): another request naming it (a retry
	// at the epoch this one took) is answered at once, as in Kafka, where
	// the session is updated before the fetch waits and after it.
	sess.mu.Lock()
	if req.SessionID != 0 && req.SessionEpoch != sessionInitial {
		if req.SessionEpoch != sess.epoch {
			sess.mu.Unlock()
			resp.ErrorCode = code(pb.ErrorCode_INVALID_FETCH_SESSION_EPOCH)
			return resp, nil
		}
		if sess.usesIDs != useIDs {
			sess.mu.Unlock()
			// Kafka's FetchSessionCache: a session's partitions are keyed
			// by name or by id, never both.
			resp.ErrorCode = code(pb.ErrorCode_FETCH_SESSION_TOPIC_ID_ERROR)
			return resp, nil
		}
	}
	sess.touch(now)
	sess.epoch = nextEpoch(max(req.SessionEpoch, 0))
	forgot := false
	for _, f := range req.ForgottenTopics {
		k := partKey{topic: f.Topic}
		if useIDs {
			k = partKey{id: f.TopicID}
		}
		for _, p := range f.Partitions {
			k.partition = p
			if _, ok := sess.parts[k]; ok {
				delete(sess.parts, k)
				forgot = true
			}
		}
	}
	joined := map[partKey]bool{}
	for _, a := range asks {
		sp := sess.parts[a.key]
		if sp == nil {
			sp = &sessionPart{name: a.fp.Topic}
			sess.parts[a.key] = sp
			joined[a.key] = true
		}
		sp.req = a.fp
	}
	// The session's order changes only when a partition joins or is
	// forgotten: an incremental fetch that only moves offsets (most of
	// them) keeps it, without a pass over every partition of the session.
	if forgot || len(joined) > 0 {
		order := make([]partKey, 0, len(sess.parts))
		seen := make(map[partKey]bool, len(sess.parts))
		keys := append([]partKey(nil), sess.order...)
		for _, a := range asks {
			keys = append(keys, a.key)
		}
		for _, k := range keys {
			if sess.parts[k] != nil && !seen[k] {
				seen[k] = true
				order = append(order, k)
			}
		}
		sess.order = order
	}
	preq.Partitions = make([]*pb.FetchPartition, 0, len(sess.order))
	for _, k := range sess.order {
		sp := sess.parts[k]
		if sess.usesIDs && sp.name == "" {
			sp.name = topicName(img, k.id)
		}
		fp := sp.req
		preq.Partitions = append(preq.Partitions, &pb.FetchPartition{Topic: sp.name, TopicId: fp.TopicId, Partition: fp.Partition, FetchOffset: fp.FetchOffset,
			CurrentLeaderEpoch: fp.CurrentLeaderEpoch, PartitionMaxBytes: fp.PartitionMaxBytes, LogStartOffset: fp.LogStartOffset})
	}
	sess.mu.Unlock()
	var unknown []*pb.FetchPartitionResponse
	preq.Partitions, unknown = unknownTopicID(preq.Partitions)
	if f := fetchWaitHook.Load(); f != nil {
		(*f)(sess.id)
	}
	presp, err := c.H.Fetch(ctx, preq)
	if err != nil {
		return nil, err
	}
	presp.Partitions = append(presp.Partitions, unknown...)
	sess.mu.Lock()
	resp = fetchResponse(req, presp, sess, joined, img)
	sess.mu.Unlock()
	resp.SessionID = sess.id
	return resp, nil
}

// fetchWaitHook, when set, runs when a fetch of a session is about to
// read (and wait for) its partitions. Tests hold the fetch there.
var fetchWaitHook atomic.Pointer[func(sessionID int32)]

// SetFetchWaitHookForTesting makes f run when a fetch of a session is
// about to read its partitions, on the fetch's goroutine, until restore
// is called.
func SetFetchWaitHookForTesting(f func(sessionID int32)) (restore func()) {
	fetchWaitHook.Store(&f)
	return func() { fetchWaitHook.Store(nil) }
}

// fetchResponse translates the request layer's answer, grouped by topic
// in the order the partitions were fetched. With a session, a partition
// already known to the client with nothing new is left out. From v13 a
// topic is answered by the id it was asked by, and never by a name; from
// v16 a partition whose leader is elsewhere says which broker leads it
// and where that broker's Kafka listener is (KIP-951).
func fetchResponse(req *kmsg.FetchRequest, presp *pb.FetchResponse, sess *consumerSession, joined map[partKey]bool, img *metadata.Image) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.ErrorCode = code(presp.ErrorCode)
	useIDs := req.Version >= 13
	type topicKey struct {
		name string
		id   [16]byte
	}
	idx := map[topicKey]int{}
	var leaders []int32
	for _, pp := range presp.Partitions {
		tk := topicKey{name: pp.Topic}
		if useIDs {
			tk = topicKey{id: topicID(pp.TopicId)}
		}
		k := partKey{topic: tk.name, id: tk.id, partition: pp.Partition}
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
		i, ok := idx[tk]
		if !ok {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = tk.name, tk.id
			resp.Topics = append(resp.Topics, rt)
			i = len(resp.Topics) - 1
			idx[tk] = i
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
		if req.Version >= 16 && (pp.ErrorCode == pb.ErrorCode_NOT_LEADER_OR_FOLLOWER || pp.ErrorCode == pb.ErrorCode_FENCED_LEADER_EPOCH) {
			if id, epoch := currentLeader(img, pp.Topic, pp.Partition, pp.CurrentLeaderId, pp.CurrentLeaderEpoch); id >= 0 {
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = id, epoch
				leaders = append(leaders, id)
			}
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	for _, b := range leaderEndpoints(img, leaders) {
		resp.Brokers = append(resp.Brokers, kmsg.FetchResponseBroker{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack})
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
			rp.Partition, rp.ErrorCode = pp.Partition, answerCode(kmsg.ListOffsets, req.Version, pp.ErrorCode)
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
