package replication

import (
	"context"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// fetchState is a followed partition inside a fetcher.
type fetchState struct {
	p           *broker.Partition
	leaderEpoch int32
	truncate    bool      // ask OffsetForLeaderEpoch before the next fetch
	delayUntil  time.Time // back off after an error
	// leaderHW is the leader's HW as last heard, when it was above what
	// this log could take then (its end or durable end): a session does
	// not repeat an unchanged HW, so it is applied again as the log grows.
	leaderHW int64
	// caughtUp: the last good fetch answer found this log's end at or past
	// the leader's HW it carried (Kafka's isReplicaInSync, lag <= 0); such
	// a replica is not throttled (followerThrottled).
	caughtUp bool
}

// position is what a follower tells a leader about one partition; a
// session leaves out partitions whose position the leader already has.
type position struct {
	fetchOffset, logStart int64
	leaderEpoch, maxBytes int32
	// topicID is the replica's topic: the leader reads only a log of the
	// same topic (not an older or newer one of the same name).
	topicID string
}

// fetcher replicates every partition led by one source broker: one Fetch
// request for all of them at a time, truncation by leader epoch first for
// partitions that just started following.
type fetcher struct {
	m      *Manager
	source int32

	mu    sync.Mutex
	parts map[storage.PartitionKey]*fetchState
	kick  chan struct{}
	// inflight ends the Fetch waiting at the leader, so that a partition
	// added meanwhile is fetched now rather than after the leader's
	// replica.fetch.wait.max.ms: a new leader's HW, and the transaction
	// coordinator it hosts, wait for this replica's first fetch.
	inflight context.CancelFunc

	// The fetch session with the leader (KIP-227), run goroutine only:
	// sessID 0 means the next fetch is a full one that opens a session.
	sessID, sessEpoch int32
	told              map[storage.PartitionKey]position // what the session holds

	// codec decodes this fetcher's Fetch responses into a buffer it
	// reuses (fetchcodec.go): a response's Records are valid until the
	// next fetch.
	codec *fetchCodec

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

func newFetcher(m *Manager, source int32) *fetcher {
	ctx, cancel := context.WithCancel(m.ctx)
	return &fetcher{m: m, source: source, parts: map[storage.PartitionKey]*fetchState{}, kick: make(chan struct{}, 1), codec: newFetchCodec(), ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

func (f *fetcher) start() { go f.run() }

func (f *fetcher) stop() {
	f.cancel()
	<-f.done
}

func (f *fetcher) add(p *broker.Partition, epoch int32) {
	f.mu.Lock()
	f.parts[p.Key] = &fetchState{p: p, leaderEpoch: epoch, truncate: true, leaderHW: -1}
	if f.inflight != nil {
		f.inflight()
		f.inflight = nil
	}
	f.mu.Unlock()
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

func (f *fetcher) remove(key storage.PartitionKey) {
	f.mu.Lock()
	delete(f.parts, key)
	f.mu.Unlock()
}

func (f *fetcher) empty() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.parts) == 0
}

func (f *fetcher) snapshot(now time.Time) (trunc, fetch []*fetchState, soonest time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, st := range f.parts {
		if now.Before(st.delayUntil) {
			if soonest.IsZero() || st.delayUntil.Before(soonest) {
				soonest = st.delayUntil
			}
			continue
		}
		if st.truncate {
			trunc = append(trunc, st)
		} else {
			fetch = append(fetch, st)
		}
	}
	sort.Slice(fetch, func(i, j int) bool {
		a, b := fetch[i].p.Key, fetch[j].p.Key
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	return
}

func (f *fetcher) current(st *fetchState) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.parts[st.p.Key] == st
}

func (f *fetcher) delay(st *fetchState, d time.Duration) {
	f.mu.Lock()
	st.delayUntil = time.Now().Add(d)
	f.mu.Unlock()
}

func (f *fetcher) run() {
	defer close(f.done)
	m := f.m
	for f.ctx.Err() == nil {
		trunc, fetch, soonest := f.snapshot(time.Now())
		if len(trunc) == 0 && len(fetch) == 0 {
			wait := time.Second
			if !soonest.IsZero() {
				wait = time.Until(soonest)
			}
			t := time.NewTimer(wait)
			select {
			case <-f.ctx.Done():
				t.Stop()
				return
			case <-f.kick:
			case <-t.C:
			}
			t.Stop()
			continue
		}
		client, err := f.client()
		if err != nil {
			f.sleep(m.cfg.FetchBackoff)
			continue
		}
		if len(trunc) > 0 {
			f.truncate(client, trunc)
		}
		if len(fetch) > 0 {
			if !f.fetch(client, fetch) {
				f.sleep(m.cfg.FetchBackoff / 4)
			}
		}
	}
}

// metadataRetry is how soon a follower asks again when it and the leader
// disagree on who leads at which epoch. Right after an election one of
// them has the new metadata a few milliseconds before the other, and
// waiting out half of replica.fetch.backoff.ms (500 ms) then would hold
// the new leader's HW, and every acks=all write and transaction
// coordinator write behind it, for that long.
const metadataRetry = 50 * time.Millisecond

// metadataLag reports a refusal that metadata arriving on one side ends.
func metadataLag(code pb.ErrorCode) bool {
	switch code {
	case pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, pb.ErrorCode_UNKNOWN_LEADER_EPOCH, pb.ErrorCode_FENCED_LEADER_EPOCH:
		return true
	}
	return false
}

func (f *fetcher) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-f.ctx.Done():
	case <-t.C:
	case <-f.kick:
	}
}

func (f *fetcher) client() (pb.ConsumerClient, error) {
	b := f.m.Image().Brokers[f.source]
	if b == nil {
		return nil, errs.New(pb.ErrorCode_BROKER_NOT_AVAILABLE, "broker %d is not registered", f.source)
	}
	return f.m.peers.Consumer(b.PeerAddress()) // its inter-broker listener
}

// truncate finds, per partition, where this log and the leader's agree
// (KIP-101 with KIP-279's repeated rounds) and cuts the rest.
func (f *fetcher) truncate(client pb.ConsumerClient, sts []*fetchState) {
	for _, st := range sts {
		done, err := f.truncateOne(client, st)
		if err != nil {
			d := f.m.cfg.FetchBackoff / 2
			if metadataLag(errs.CodeOf(err)) {
				d = min(d, metadataRetry)
			} else {
				f.m.lg.Warn("truncation by leader epoch failed; will retry", "partition", st.p.Key.String(), "leader", f.source, "err", err)
			}
			f.delay(st, d)
			continue
		}
		if done {
			f.mu.Lock()
			st.truncate = false
			f.mu.Unlock()
		}
	}
}

func (f *fetcher) truncateOne(client pb.ConsumerClient, st *fetchState) (bool, error) {
	l := st.p.Log
	for round := 0; round < 16; round++ {
		if !f.current(st) {
			return false, nil
		}
		ours := l.LatestEpoch()
		if ours < 0 {
			return true, nil // nothing written under any epoch yet
		}
		ctx, cancel := context.WithTimeout(f.ctx, 10*time.Second)
		resp, err := client.OffsetForLeaderEpoch(ctx, &pb.OffsetForLeaderEpochRequest{ReplicaId: f.m.cfg.NodeID, Partitions: []*pb.OffsetForLeaderEpochPartition{{
			Topic: st.p.Key.Topic, Partition: st.p.Key.Partition, CurrentLeaderEpoch: st.leaderEpoch, LeaderEpoch: ours,
		}}})
		cancel()
		if err != nil {
			return false, err
		}
		if len(resp.Partitions) != 1 {
			return false, errs.New(pb.ErrorCode_UNKNOWN_SERVER_ERROR, "OffsetForLeaderEpoch answered %d partitions", len(resp.Partitions))
		}
		r := resp.Partitions[0]
		if err := errs.FromCode(r.ErrorCode, r.ErrorMessage); err != nil {
			return false, err
		}
		done := false
		err = st.p.AsFollower(st.leaderEpoch, func() error {
			leo := l.LogEndOffset()
			var target int64
			switch {
			case r.LeaderEpoch < 0:
				// The leader has no epoch this old: our whole log is unknown to it.
				target = l.LogStartOffset()
			case r.LeaderEpoch == ours:
				target = min(r.EndOffset, leo)
			default:
				_, ourEnd := l.EndOffsetForEpoch(r.LeaderEpoch)
				if ourEnd < 0 {
					ourEnd = l.LogStartOffset()
				}
				target = min(ourEnd, r.EndOffset)
			}
			if target < leo {
				hw := st.p.HighWatermark()
				f.m.lg.Info("truncating to the leader's log", "partition", st.p.Key.String(), "from", leo, "to", target, "ourEpoch", ours, "leaderEpoch", r.LeaderEpoch, "hw", hw)
				if err := l.TruncateTo(target); err != nil {
					return err
				}
				if hw > target {
					st.p.SetHighWatermark(target, true)
				}
			}
			done = r.LeaderEpoch == ours || r.LeaderEpoch < 0 || target >= l.LogEndOffset() && l.LatestEpoch() == ours
			return nil
		})
		if errs.CodeOf(err) == pb.ErrorCode_NOT_LEADER_OR_FOLLOWER {
			return false, nil // this replica's role changed while the leader answered
		}
		if err != nil || done {
			return done, err
		}
	}
	return true, nil
}

// fetch sends one Fetch for every partition and appends what comes back.
// It reports whether the round made progress without errors.
func (f *fetcher) fetch(client pb.ConsumerClient, sts []*fetchState) bool {
	m := f.m
	// The replication throttle (throttle.go): while the follower quota is
	// exceeded, throttled partitions this node is not in sync for are left
	// out of the fetch (a session forgets them until they are back).
	var throttled map[storage.PartitionKey]bool
	if len(*m.throttle.followerSet.Load()) > 0 {
		exceeded := m.throttle.follower.exceeded()
		kept := sts[:0:0]
		for _, st := range sts {
			if !m.followerThrottled(st) {
				kept = append(kept, st)
				continue
			}
			if exceeded {
				continue
			}
			if throttled == nil {
				throttled = map[storage.PartitionKey]bool{}
			}
			throttled[st.p.Key] = true
			kept = append(kept, st)
		}
		if len(kept) == 0 {
			f.sleep(quotaWindowSize / 10)
			return true
		}
		sts = kept
	}
	req := &pb.FetchRequest{ReplicaId: m.cfg.NodeID, ReplicaEpoch: m.brokerEpoch(), MaxWaitMs: int32(m.cfg.FetchWaitMax / time.Millisecond), MinBytes: 1, MaxBytes: int32(m.cfg.FetchResponseMaxBytes)}
	if f.sessID == 0 {
		req.SessionEpoch = sessionOpen
	} else {
		req.SessionId, req.SessionEpoch = f.sessID, f.sessEpoch
	}
	byKey := make(map[storage.PartitionKey]*fetchState, len(sts))
	now := make(map[storage.PartitionKey]position, len(sts))
	for _, st := range sts {
		pos := position{fetchOffset: st.p.Log.LogEndOffset(), logStart: st.p.Log.LogStartOffset(), leaderEpoch: st.leaderEpoch, maxBytes: int32(m.cfg.FetchMaxBytes), topicID: st.p.TopicID()}
		byKey[st.p.Key] = st
		now[st.p.Key] = pos
		if old, ok := f.told[st.p.Key]; ok && req.SessionId != 0 && old == pos {
			continue // the session has it
		}
		req.Partitions = append(req.Partitions, &pb.FetchPartition{Topic: st.p.Key.Topic, Partition: st.p.Key.Partition,
			FetchOffset: pos.fetchOffset, CurrentLeaderEpoch: pos.leaderEpoch, PartitionMaxBytes: pos.maxBytes, LogStartOffset: pos.logStart, TopicId: pos.topicID})
	}
	if req.SessionId != 0 {
		for k := range f.told {
			if _, ok := now[k]; !ok {
				req.Forgotten = append(req.Forgotten, &pb.TopicPartition{Topic: k.Topic, Partition: k.Partition})
			}
		}
	}
	ctx, cancel := context.WithTimeout(f.ctx, m.cfg.FetchWaitMax+10*time.Second)
	f.mu.Lock()
	f.inflight = cancel
	f.mu.Unlock()
	resp, err := client.Fetch(ctx, req, grpc.ForceCodecV2(f.codec))
	f.mu.Lock()
	f.inflight = nil
	f.mu.Unlock()
	cancel()
	m.fetchRequests.Add(1)
	m.fetchNamed.Add(int64(len(req.Partitions)))
	if err == nil {
		m.fetchAnswered.Add(int64(len(resp.Partitions)))
	}
	if err != nil {
		// The leader may or may not have taken this request's epoch and
		// changes: start over with a full fetch.
		f.sessID, f.told = 0, nil
		if f.ctx.Err() == nil {
			m.lg.Debug("replica fetch failed", "leader", f.source, "err", err)
		}
		return false
	}
	if resp.ErrorCode == pb.ErrorCode_STALE_BROKER_EPOCH {
		// The leader does not know this broker at its epoch yet (its
		// metadata lag ours): back off and fetch in full.
		m.lg.Debug("leader refused the fetch", "leader", f.source, "code", resp.ErrorCode.String(), "msg", resp.ErrorMessage)
		f.sessID, f.told = 0, nil
		return false
	}
	if resp.ErrorCode != pb.ErrorCode_NONE {
		// FETCH_SESSION_ID_NOT_FOUND (the leader restarted or evicted it)
		// or INVALID_FETCH_SESSION_EPOCH: open a new session right away.
		m.lg.Debug("fetch session lost; opening a new one", "leader", f.source, "session", f.sessID, "code", resp.ErrorCode.String(), "msg", resp.ErrorMessage)
		f.sessID, f.told = 0, nil
		return true
	}
	switch {
	case resp.SessionId == 0: // no session (declined, or sessions are off)
		f.sessID, f.told = 0, nil
	case f.sessID == 0:
		f.sessID, f.sessEpoch, f.told = resp.SessionId, nextSessionEpoch(sessionOpen), now
	default:
		f.sessEpoch, f.told = nextSessionEpoch(f.sessEpoch), now
	}
	ok := true
	for _, r := range resp.Partitions {
		key := storage.PartitionKey{Topic: r.Topic, Partition: r.Partition}
		st := byKey[key]
		if st == nil || !f.current(st) {
			continue
		}
		if throttled[key] {
			m.throttle.follower.record(len(r.Records))
		}
		if !f.handle(st, r) {
			ok = false
		}
	}
	// A session does not repeat a HW this log could not take yet.
	for _, st := range sts {
		if st.leaderHW < 0 || !f.current(st) {
			continue
		}
		_ = st.p.AsFollower(st.leaderEpoch, func() error {
			hw := st.leaderHW
			if end := st.p.Log.DurableEnd(); hw > end {
				hw = end
			} else {
				st.leaderHW = -1
			}
			st.p.SetHighWatermark(hw, false)
			return nil
		})
	}
	return ok
}

func (f *fetcher) handle(st *fetchState, r *pb.FetchPartitionResponse) bool {
	m := f.m
	p := st.p
	if r.ErrorCode != pb.ErrorCode_NONE {
		st.leaderHW = -1 // the next good answer brings the HW again
	}
	switch r.ErrorCode {
	case pb.ErrorCode_NONE:
	case pb.ErrorCode_OFFSET_OUT_OF_RANGE:
		restarted := false
		_ = p.AsFollower(st.leaderEpoch, func() error {
			leo := p.Log.LogEndOffset()
			if r.LogStartOffset <= leo {
				return nil
			}
			restarted = true
			m.lg.Info("fell behind the leader's log start; restarting the log", "partition", p.Key.String(), "logEnd", leo, "leaderLogStart", r.LogStartOffset)
			if err := p.Log.TruncateFullyAndStartAt(r.LogStartOffset); err != nil {
				m.lg.Error("truncate fully", "partition", p.Key.String(), "err", err)
			}
			p.SetHighWatermark(r.LogStartOffset, true)
			return nil
		})
		if !restarted {
			f.mu.Lock()
			st.truncate = true
			f.mu.Unlock()
		}
		return false
	case pb.ErrorCode_STALE_BROKER_EPOCH, pb.ErrorCode_UNKNOWN_LEADER_EPOCH, pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, pb.ErrorCode_FENCED_LEADER_EPOCH, pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION,
		pb.ErrorCode_INCONSISTENT_TOPIC_ID: // the leader's log is of an older or newer topic of the name
		// Metadata will bring the truth; retry a little later.
		d := m.cfg.FetchBackoff / 2
		if metadataLag(r.ErrorCode) {
			d = min(d, metadataRetry)
		}
		f.delay(st, d)
		return false
	default:
		m.lg.Warn("replica fetch error", "partition", p.Key.String(), "leader", f.source, "code", r.ErrorCode.String(), "msg", r.ErrorMessage)
		f.delay(st, m.cfg.FetchBackoff)
		return false
	}
	if len(r.Records) > 0 {
		if _, err := p.AppendAsFollower(r.Records, st.leaderEpoch); err != nil {
			if errs.CodeOf(err) == pb.ErrorCode_KAFKA_STORAGE_ERROR {
				// The log failed (an fsync did) and takes no writes until
				// the node restarts; its fetch offset stops, so the leader
				// drops this replica from the ISR. Nothing to truncate.
				m.lg.Error("replica log failed; not replicating it until restart", "partition", p.Key.String(), "err", err)
				f.delay(st, m.cfg.FetchBackoff*10)
				return false
			}
			m.lg.Warn("append replicated batches", "partition", p.Key.String(), "err", err)
			f.mu.Lock()
			st.truncate = true
			f.mu.Unlock()
			return false
		}
	}
	// The leader's HW and log start, while this replica still follows it.
	_ = p.AsFollower(st.leaderEpoch, func() error {
		hw := r.HighWatermark
		if hw >= 0 {
			st.caughtUp = p.Log.LogEndOffset() >= hw
		}
		st.leaderHW = -1
		if leo := p.Log.DurableEnd(); hw > leo {
			hw = leo
			st.leaderHW = r.HighWatermark
		}
		if hw >= 0 {
			p.SetHighWatermark(hw, true)
		}
		f.followLogStart(p, r.LogStartOffset)
		return nil
	})
	return true
}

// followLogStart moves this replica's log start offset up to the leader's
// (DeleteRecords or retention on the leader), never past this replica's
// high watermark, as Kafka's follower does: the records the leader no
// longer serves go here too, and a takeover keeps the start.
func (f *fetcher) followLogStart(p *broker.Partition, leaderStart int64) {
	target := min(leaderStart, p.HighWatermark())
	if target <= p.Log.LogStartOffset() {
		return
	}
	if _, err := p.Log.AdvanceLogStart(target); err != nil {
		f.m.lg.Warn("follow the leader's log start offset", "partition", p.Key.String(), "offset", target, "err", err)
	}
}
