package replication

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/wire"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Fetch serves consumers (replica_id -1: up to the HW, or the LSO under
// read_committed, with the aborted transactions of the range) and followers
// (up to the log end; the fetch offset is the follower's log end and moves
// the HW). It long-polls up to max_wait_ms until min_bytes are there.
func (m *Manager) Fetch(ctx context.Context, req *pb.FetchRequest) *pb.FetchResponse {
	return m.FetchInto(ctx, req, nil)
}

// FetchInto is Fetch with the records read into buffers from alloc (see
// storage.ReadInto; nil allocates them): each partition's Records is the start
// of the buffer its read filled, and shared with nothing, so the caller
// may recycle it once done with the response. (The reads of a long poll's
// earlier rounds are dropped.)
//
// A request with a session (KIP-227, see session.go) fetches every
// partition of the session and answers only what changed.
func (m *Manager) FetchInto(ctx context.Context, req *pb.FetchRequest, alloc storage.Alloc) *pb.FetchResponse {
	img := m.Image()
	if req.ReplicaId >= 0 {
		// Who is asking comes first: a fetch in the name of a broker that
		// is not registered at that epoch gets nothing, not even a
		// session.
		if err := m.checkReplica(img, req); err != nil {
			code, msg := errs.Split(err)
			return &pb.FetchResponse{ErrorCode: code, ErrorMessage: msg}
		}
	}
	sess, added, err := m.sessions.begin(req, img)
	if err != nil {
		code, msg := errs.Split(err)
		return &pb.FetchResponse{ErrorCode: code, ErrorMessage: msg}
	}
	if sess == nil {
		return m.fetch(ctx, req, alloc)
	}
	defer sess.release()
	resp := m.fetch(ctx, &pb.FetchRequest{ReplicaId: req.ReplicaId, ReplicaEpoch: req.ReplicaEpoch, MaxWaitMs: req.MaxWaitMs,
		MinBytes: req.MinBytes, MaxBytes: req.MaxBytes, IsolationLevel: req.IsolationLevel, Partitions: sess.partitions()}, alloc)
	sess.trim(resp, added)
	return resp
}

// checkReplica refuses a follower's fetch unless replica_id is another
// broker registered at replica_epoch in img: STALE_BROKER_EPOCH (the
// follower backs off and fetches again once the metadata agree).
func (m *Manager) checkReplica(img *metadata.Image, req *pb.FetchRequest) error {
	if req.ReplicaId == m.cfg.NodeID {
		return errs.New(pb.ErrorCode_STALE_BROKER_EPOCH, "fetch with replica_id %d: that is this broker; a broker does not follow itself", req.ReplicaId)
	}
	b := img.Brokers[req.ReplicaId]
	if b == nil {
		return errs.New(pb.ErrorCode_STALE_BROKER_EPOCH, "fetch from broker %d: no such broker is registered", req.ReplicaId)
	}
	if b.Epoch != req.ReplicaEpoch {
		return errs.New(pb.ErrorCode_STALE_BROKER_EPOCH, "fetch from broker %d with epoch %d does not match its registration (epoch %d)", req.ReplicaId, req.ReplicaEpoch, b.Epoch)
	}
	return nil
}

func (m *Manager) fetch(ctx context.Context, req *pb.FetchRequest, alloc storage.Alloc) *pb.FetchResponse {
	follower := req.ReplicaId >= 0
	maxBytes := m.fetchMaxBytes(req)
	deadline := time.Now().Add(time.Duration(req.MaxWaitMs) * time.Millisecond)
	var wake chan struct{}
	var watched []*broker.Partition
	defer func() {
		for _, p := range watched {
			p.Unwatch(wake)
		}
	}()
	first := true
	for {
		resp := &pb.FetchResponse{}
		total := 0
		for _, fp := range req.Partitions {
			r := m.fetchPartition(fp, req, follower, first, maxBytes-total, total == 0, alloc)
			total += len(r.Records)
			resp.Partitions = append(resp.Partitions, r)
		}
		first = false
		fitMessage(resp)
		if total >= int(req.MinBytes) || req.MaxWaitMs <= 0 || !time.Now().Before(deadline) || hasError(resp) {
			return resp
		}
		if wake == nil {
			wake = make(chan struct{}, 1)
			for _, fp := range req.Partitions {
				if p := m.parts.Get(storage.PartitionKey{Topic: fp.Topic, Partition: fp.Partition}); p != nil {
					p.Watch(wake)
					watched = append(watched, p)
				}
			}
			// Look again before parking: the HW may have moved between the
			// read above and the Watch, and that wake-up was missed (it
			// cost a whole max wait: the 100 ms tail of end-to-end latency).
			continue
		}
		t := time.NewTimer(time.Until(deadline))
		m.fetchWaiting.Add(1)
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			m.fetchWaiting.Add(-1)
			return resp
		}
		t.Stop()
		m.fetchWaiting.Add(-1)
	}
}

// maxFetchRecords is the most record bytes a fetch answer carries: a
// gRPC message (wire.MaxMessageSize) less room for everything else in it.
const maxFetchRecords = wire.MaxMessageSize - 4<<20

// fetchMaxBytes is the most record bytes req is answered with: its
// max_bytes, capped by fetch.max.bytes for a consumer and by
// replica.fetch.response.max.bytes for a follower, and by what one gRPC
// message carries (a larger answer could not be sent at all, and its
// reader would never get past it). The first batch of the first partition
// with records is answered whole even if larger (KIP-74), so a reader
// always progresses; it is at most max.message.bytes, as the log took it.
func (m *Manager) fetchMaxBytes(req *pb.FetchRequest) int {
	limit := m.cfg.ConsumerFetchMaxBytes
	if req.ReplicaId >= 0 {
		limit = m.cfg.FetchResponseMaxBytes
	}
	if limit <= 0 || limit > maxFetchRecords {
		limit = maxFetchRecords
	}
	if n := int(req.MaxBytes); n > 0 && n < limit {
		return n
	}
	return limit
}

// fitMessage drops records from the last partitions of resp, keeping the
// first partition's, until resp fits in a gRPC message (a fetch naming
// very many partitions spends much of the message on their entries). A
// partition whose records are dropped is answered as if it had none yet;
// its reader fetches them next time.
func fitMessage(resp *pb.FetchResponse) {
	if proto.Size(resp) <= wire.MaxMessageSize {
		return
	}
	for i := len(resp.Partitions) - 1; i > 0 && proto.Size(resp) > wire.MaxMessageSize; i-- {
		if p := resp.Partitions[i]; len(p.Records) > 0 {
			p.Records, p.AbortedTransactions = nil, nil
		}
	}
}

func hasError(r *pb.FetchResponse) bool {
	for _, p := range r.Partitions {
		if p.ErrorCode != pb.ErrorCode_NONE {
			return true
		}
	}
	return false
}

func (m *Manager) fetchPartition(fp *pb.FetchPartition, req *pb.FetchRequest, follower bool, first bool, budget int, minOne bool, alloc storage.Alloc) *pb.FetchPartitionResponse {
	out := &pb.FetchPartitionResponse{Topic: fp.Topic, TopicId: fp.TopicId, Partition: fp.Partition, HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1, CurrentLeaderId: -1, CurrentLeaderEpoch: -1}
	fail := func(err error) *pb.FetchPartitionResponse {
		out.ErrorCode, out.ErrorMessage = errs.Split(err)
		return out
	}
	key := storage.PartitionKey{Topic: fp.Topic, Partition: fp.Partition}
	p := m.parts.Get(key)
	if p == nil {
		if m.Image().Partition(fp.Topic, fp.Partition) == nil {
			return fail(errs.New(pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "%s is unknown", key))
		}
		return fail(errs.New(pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, "%s has no replica on broker %d", key, m.cfg.NodeID))
	}
	// The id the fetcher means against the log found under the name
	// (Kafka's ReplicaManager.readFromLog): the name may have been
	// deleted and created again since the id was looked up.
	if err := p.CheckTopicID(fp.TopicId, pb.ErrorCode_INCONSISTENT_TOPIC_ID); err != nil {
		return fail(err)
	}
	l := p.Leadership()
	out.CurrentLeaderId, out.CurrentLeaderEpoch = l.Leader, l.LeaderEpoch
	if l.Role != broker.RoleLeader {
		return fail(errs.New(pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, "broker %d is not the leader of %s (leader %d)", m.cfg.NodeID, key, l.Leader))
	}
	if err := broker.CheckLeaderEpoch(key, l.LeaderEpoch, fp.CurrentLeaderEpoch); err != nil {
		return fail(err)
	}
	logEnd := p.Log.LogEndOffset()
	out.LogStartOffset, out.LogEndOffset = p.Log.LogStartOffset(), logEnd
	if fp.FetchOffset < out.LogStartOffset || fp.FetchOffset > logEnd {
		out.HighWatermark, out.LastStableOffset = p.HighWatermark(), p.LastStableOffset()
		return fail(errs.New(pb.ErrorCode_OFFSET_OUT_OF_RANGE, "fetch offset %d of %s is outside [%d, %d]", fp.FetchOffset, key, out.LogStartOffset, logEnd))
	}
	if follower && first {
		m.onFollowerFetch(key, req.ReplicaId, fp.FetchOffset, logEnd)
		m.followerStarts.note(key, l.LeaderEpoch, req.ReplicaId, fp.LogStartOffset)
	}
	hw := p.HighWatermark()
	lso := p.LastStableOffset()
	out.HighWatermark, out.LastStableOffset = hw, lso
	upper := hw
	switch {
	case follower:
		upper = logEnd
		if limit, held := m.holds.limit(key, m.clk.Now()); held && limit < upper {
			// A testing fault (hold.go): nothing appended since the hold.
			upper = max(limit, fp.FetchOffset)
		}
	case req.IsolationLevel == pb.IsolationLevel_READ_COMMITTED:
		upper = lso
	}
	max := int(fp.PartitionMaxBytes)
	if max <= 0 || max > budget {
		max = budget
	}
	// The replication throttle (throttle.go): a throttled partition read
	// by an out-of-sync follower gets nothing while the leader quota is
	// exceeded; the follower asks again. A member of the maximal ISR (an
	// expansion in flight) counts as in sync: the HW waits for it.
	throttled := follower && m.leaderThrottled(key, l, req.ReplicaId)
	if throttled && m.throttle.leader.exceeded() {
		return out
	}
	res, err := p.Log.ReadInto(fp.FetchOffset, max, upper, minOne, alloc)
	if err != nil {
		return fail(err)
	}
	if throttled {
		m.throttle.leader.record(len(res.Records))
	}
	out.Records = res.Records
	if !follower && req.IsolationLevel == pb.IsolationLevel_READ_COMMITTED && len(res.Records) > 0 {
		for _, a := range p.Log.CollectAborted(res.FirstOffset, upper) {
			out.AbortedTransactions = append(out.AbortedTransactions, &pb.AbortedTransaction{ProducerId: a.ProducerID, FirstOffset: a.FirstOffset})
		}
	}
	return out
}

// onFollowerFetch updates the leader's view of a follower and moves the HW.
func (m *Manager) onFollowerFetch(key storage.PartitionKey, id int32, fetchOffset, leaderLEO int64) {
	le := m.leader(key)
	if le == nil {
		return
	}
	le.mu.Lock()
	defer le.mu.Unlock()
	if le.st == nil || !le.st.OnFetch(id, fetchOffset, leaderLEO, m.clk.Now()) {
		return
	}
	m.advanceHWLocked(le)
	if !has(le.st.ISR, id) && le.st.Pending == nil && fetchOffset >= le.p.HighWatermark() && fetchOffset >= le.st.EpochStart && m.isrEligible(id) {
		m.signalAlter()
	}
}

// OffsetForLeaderEpoch answers, for partitions this node leads, the end
// offset of the largest epoch at most the asked one.
func (m *Manager) OffsetForLeaderEpoch(req *pb.OffsetForLeaderEpochRequest) *pb.OffsetForLeaderEpochResponse {
	resp := &pb.OffsetForLeaderEpochResponse{}
	for _, it := range req.Partitions {
		out := &pb.OffsetForLeaderEpochPartitionResponse{Topic: it.Topic, Partition: it.Partition, LeaderEpoch: -1, EndOffset: -1}
		resp.Partitions = append(resp.Partitions, out)
		key := storage.PartitionKey{Topic: it.Topic, Partition: it.Partition}
		p := m.parts.Get(key)
		if p == nil {
			out.ErrorCode, out.ErrorMessage = pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, key.String()+" has no replica here"
			continue
		}
		l := p.Leadership()
		if l.Role != broker.RoleLeader {
			out.ErrorCode, out.ErrorMessage = errs.Split(errs.New(pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, "broker %d is not the leader of %s", m.cfg.NodeID, key))
			continue
		}
		if err := broker.CheckLeaderEpoch(key, l.LeaderEpoch, it.CurrentLeaderEpoch); err != nil {
			out.ErrorCode, out.ErrorMessage = errs.Split(err)
			continue
		}
		out.LeaderEpoch, out.EndOffset = p.Log.EndOffsetForEpoch(it.LeaderEpoch)
	}
	return resp
}
