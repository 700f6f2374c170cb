package replication

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/config"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Config tunes replication.
type Config struct {
	NodeID int32
	// ReplicaLagTimeMax is replica.lag.time.max.ms.
	ReplicaLagTimeMax time.Duration
	// FetchWaitMax is replica.fetch.wait.max.ms.
	FetchWaitMax time.Duration
	// FetchMaxBytes is replica.fetch.max.bytes (per partition).
	FetchMaxBytes int
	// FetchResponseMaxBytes is replica.fetch.response.max.bytes: what this
	// node asks of a leader as a follower, and the most it answers a
	// follower's fetch with as a leader.
	FetchResponseMaxBytes int
	// ConsumerFetchMaxBytes is fetch.max.bytes: the most a consumer's
	// fetch is answered with, whatever its max_bytes.
	ConsumerFetchMaxBytes int
	// FetchBackoff is replica.fetch.backoff.ms.
	FetchBackoff time.Duration
	// FetchSessionSlots is max.incremental.fetch.session.cache.slots: how
	// many fetch sessions this leader keeps (it keeps at most one per
	// follower); 0 turns sessions off, and followers fetch in full.
	FetchSessionSlots int
	Logger            *slog.Logger
}

// DefaultConfig is Kafka's defaults.
func DefaultConfig(nodeID int32) Config {
	return Config{
		NodeID:                nodeID,
		ReplicaLagTimeMax:     30 * time.Second,
		FetchWaitMax:          500 * time.Millisecond,
		FetchMaxBytes:         1 << 20,
		FetchResponseMaxBytes: 10 << 20,
		ConsumerFetchMaxBytes: 55 << 20,
		FetchBackoff:          time.Second,
		FetchSessionSlots:     1000,
	}
}

// ControllerClient is how replication reaches the active controller.
type ControllerClient interface {
	AlterPartition(ctx context.Context, req *pb.AlterPartitionRequest) (*pb.AlterPartitionResponse, error)
}

// Peers gives clients for other brokers' Consumer service.
type Peers interface {
	Consumer(addr string) (pb.ConsumerClient, error)
}

// Manager applies metadata to the local replicas and runs what follows
// from it: leader state for partitions this node leads, fetchers for those
// it follows, and the AlterPartition sender.
type Manager struct {
	cfg   Config
	clk   clock.Clock
	lg    *slog.Logger
	parts *broker.Manager
	ctrl  ControllerClient
	peers Peers
	// BrokerEpoch returns this broker's current registration epoch.
	brokerEpoch func() int64

	img atomic.Pointer[metadata.Image]

	mu        sync.Mutex
	leaders   map[storage.PartitionKey]*leaderEntry
	fetchers  map[int32]*fetcher
	sessions  *sessionCache                  // fetch sessions of the followers fetching from here
	follows   map[storage.PartitionKey]int32 // partition -> leader being followed
	alterQ    chan struct{}
	listeners map[string][]LeaderListener

	// followerStarts: the followers' log start offsets (logstart.go).
	followerStarts followerLogStarts

	isrShrinks, isrExpands atomic.Int64
	// This node's replica fetches as a follower: requests, partitions they
	// named, partitions their answers carried (fetch sessions shrink both).
	fetchRequests, fetchNamed, fetchAnswered atomic.Int64
	// fetchWaiting: fetches parked in a long poll (the fetch purgatory).
	fetchWaiting atomic.Int64

	// Partitions whose log fsynced (flush.messages=1), for hwLoop to
	// re-evaluate their HW. A log calls OnFlush callbacks wherever its
	// flush ran, possibly under the partition's leaderMu (markers,
	// follower appends), so the callback only queues: advancing the HW
	// takes leaderEntry.mu, which ISR changes hold while they take
	// leaderMu for writing.
	flushedMu sync.Mutex
	flushed   map[storage.PartitionKey]struct{}
	flushQ    chan struct{}

	// holds are the test-only follower-fetch holds (hold.go).
	holds holds

	// throttle is the replication throttle (throttle.go).
	throttle *throttles

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// LeaderListener hears when this node starts and stops leading partitions
// of a topic (the coordinators load and drop their internal partitions).
// Calls come from the metadata goroutine, in order; they must not block.
type LeaderListener interface {
	BecameLeader(p *broker.Partition, leaderEpoch int32)
	StoppedLeading(partition int32)
}

// AddLeaderListener registers l for topic's partitions.
func (m *Manager) AddLeaderListener(topic string, l LeaderListener) {
	m.mu.Lock()
	m.listeners[topic] = append(m.listeners[topic], l)
	m.mu.Unlock()
}

func (m *Manager) notifyLeader(p *broker.Partition, epoch int32) {
	m.mu.Lock()
	ls := m.listeners[p.Key.Topic]
	m.mu.Unlock()
	for _, l := range ls {
		l.BecameLeader(p, epoch)
	}
}

func (m *Manager) notifyStopped(key storage.PartitionKey) {
	m.mu.Lock()
	ls := m.listeners[key.Topic]
	m.mu.Unlock()
	for _, l := range ls {
		l.StoppedLeading(key.Partition)
	}
}

type leaderEntry struct {
	mu sync.Mutex
	p  *broker.Partition
	st *LeaderState
	// lastProposed and lastRefusal are the last ISR change proposed and
	// the last refusal, so a change refused again and again is logged
	// once (isr.go); both are cleared when a change is committed.
	lastProposed []int32
	lastRefusal  string
}

// New returns a manager; Start runs its goroutines.
func New(cfg Config, parts *broker.Manager, ctrl ControllerClient, peers Peers, brokerEpoch func() int64, clk clock.Clock) *Manager {
	if clk == nil {
		clk = clock.Real
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{sessions: newSessionCache(cfg.FetchSessionSlots), cfg: cfg, clk: clk, lg: lg.With("component", "replication"), parts: parts, ctrl: ctrl, peers: peers, brokerEpoch: brokerEpoch,
		leaders: map[storage.PartitionKey]*leaderEntry{}, fetchers: map[int32]*fetcher{}, follows: map[storage.PartitionKey]int32{},
		alterQ: make(chan struct{}, 1), listeners: map[string][]LeaderListener{}, ctx: ctx, cancel: cancel,
		flushed: map[storage.PartitionKey]struct{}{}, flushQ: make(chan struct{}, 1)}
	m.throttle = newThrottles(clk.Now)
	m.img.Store(metadata.EmptyImage())
	return m
}

// Start runs the ISR maintenance loop and the HW loop for fsyncs.
func (m *Manager) Start() {
	m.wg.Add(2)
	go m.isrLoop()
	go m.hwLoop()
}

// logFlushed queues key for hwLoop (a log's OnFlush callback: it must not
// block).
func (m *Manager) logFlushed(key storage.PartitionKey) {
	m.flushedMu.Lock()
	m.flushed[key] = struct{}{}
	m.flushedMu.Unlock()
	select {
	case m.flushQ <- struct{}{}:
	default:
	}
}

// hwLoop re-evaluates the HW of partitions whose log fsynced: under
// flush.messages=1 a leader's own offsets count only once on disk.
func (m *Manager) hwLoop() {
	defer m.wg.Done()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-m.flushQ:
		}
		m.flushedMu.Lock()
		keys := m.flushed
		m.flushed = map[storage.PartitionKey]struct{}{}
		m.flushedMu.Unlock()
		for key := range keys {
			m.OnLeaderAppend(key)
		}
	}
}

// Stop stops fetchers and loops and waits for them.
func (m *Manager) Stop() {
	m.cancel()
	m.mu.Lock()
	fs := make([]*fetcher, 0, len(m.fetchers))
	for _, f := range m.fetchers {
		fs = append(fs, f)
	}
	m.fetchers = map[int32]*fetcher{}
	m.mu.Unlock()
	for _, f := range fs {
		f.stop()
	}
	m.wg.Wait()
}

// ISRChanges counts the ISR shrinks and expansions this node's leaders
// committed (IsrShrinksPerSec / IsrExpandsPerSec).
func (m *Manager) ISRChanges() (shrinks, expands int64) {
	return m.isrShrinks.Load(), m.isrExpands.Load()
}

// FetchStats is this node's follower fetching: requests sent, partitions
// they named, partitions their answers carried.
func (m *Manager) FetchStats() (requests, named, answered int64) {
	return m.fetchRequests.Load(), m.fetchNamed.Load(), m.fetchAnswered.Load()
}

// FetchPurgatory is the number of fetches (consumers' and followers')
// parked in a long poll, waiting for data or max_wait_ms (PurgatorySize,
// Fetch).
func (m *Manager) FetchPurgatory() int64 { return m.fetchWaiting.Load() }

// FetchSessions is the fetch sessions this node keeps as a leader
// (NumIncrementalFetchSessions) and the partitions they hold
// (NumIncrementalFetchPartitionsCached).
func (m *Manager) FetchSessions() (sessions, partitions int) {
	return m.sessions.stats()
}

// Image is the metadata image last applied.
func (m *Manager) Image() *metadata.Image { return m.img.Load() }

// NodeID is this broker's id.
func (m *Manager) NodeID() int32 { return m.cfg.NodeID }

// Partitions is the local partition table.
func (m *Manager) Partitions() *broker.Manager { return m.parts }

// Apply brings the local replicas in line with a new image. It is called
// in metadata order from one goroutine.
func (m *Manager) Apply(img *metadata.Image, d *metadata.Delta) {
	// The image is published once every replica follows it, so a reader
	// that sees a partition in Image() sees its leadership applied here.
	defer m.img.Store(img)
	self := m.cfg.NodeID
	for _, t := range d.DeletedTopics {
		if t == nil {
			continue
		}
		for _, p := range t.Partitions {
			if p != nil {
				m.removePartition(storage.PartitionKey{Topic: p.Topic, Partition: p.Partition})
			}
		}
	}
	if d.Snapshot {
		// Local logs the new image does not place here: a replica the
		// previous image placed here was moved away or its topic deleted
		// (deleted, as a delta would); any other (found on disk at start,
		// of a topic the cluster does not know or does not place here) is
		// a stray log, set aside for the operator as Kafka does.
		prev := m.img.Load()
		for _, p := range m.parts.All() {
			if ip := img.Partition(p.Key.Topic, p.Key.Partition); ip == nil || !ip.IsReplica(self) {
				if placedHere(prev, p, self) {
					m.removePartition(p.Key)
				} else {
					m.lg.Warn("local log of a partition the cluster does not place here; setting it aside as stray", "partition", p.Key.String(), "logTopicId", p.TopicID())
					m.strayPartition(p.Key)
				}
			}
		}
	}
	// A local log of an older topic of the same name (deleted and created
	// again while this broker was away, so no delta deleted it) is not
	// the new topic's replica: it is set aside as stray before the new
	// one is created.
	for _, ch := range d.Partitions {
		key := storage.PartitionKey{Topic: ch.New.Topic, Partition: ch.New.Partition}
		if p, t := m.parts.Get(key), img.Topic(key.Topic); p != nil && t != nil && broker.Stray(p, t.ID) {
			m.lg.Warn("local log belongs to an older topic of the same name; setting it aside as stray", "partition", key.String(), "logTopicId", p.TopicID(), "topicId", t.ID)
			m.strayPartition(key)
		}
	}
	m.applyThrottles(img, d)
	if (d.BrokerConfigs || d.Snapshot) && m.applyBrokerConfigs(img) {
		// New broker log defaults: every open log takes them (its
		// topic's own configs still win).
		for _, p := range m.parts.All() {
			if t := img.Topic(p.Key.Topic); t != nil {
				lc, minISR := m.parts.LogConfig(t.Configs)
				p.Log.SetConfig(lc)
				p.SetMinISR(minISR)
			}
		}
	}
	for _, name := range d.TopicConfigs {
		t := img.Topic(name)
		if t == nil {
			continue
		}
		for _, ip := range t.Partitions {
			if p := m.parts.Get(storage.PartitionKey{Topic: ip.Topic, Partition: ip.Partition}); p != nil {
				lc, minISR := m.parts.LogConfig(t.Configs)
				p.Log.SetConfig(lc)
				p.SetMinISR(minISR)
			}
		}
	}
	m.prepare(img, d)
	for _, ch := range d.Partitions {
		np := ch.New
		key := storage.PartitionKey{Topic: np.Topic, Partition: np.Partition}
		if !np.IsReplica(self) {
			m.removePartition(key)
			continue
		}
		t := img.Topic(np.Topic)
		p, err := m.parts.GetOrCreateTopic(key, t.ID, t.Configs)
		if err != nil {
			m.lg.Error("open partition", "partition", key.String(), "err", err)
			continue
		}
		switch {
		case np.Leader == self:
			m.becomeLeader(p, np)
		case np.Leader == metadata.NoLeader:
			m.becomeOffline(p, np)
		default:
			m.becomeFollower(p, np)
		}
	}
	// Broker addresses may have changed: fetchers look them up per request.
}

// prepareParallelism is how many partitions Apply prepares at once.
// Opening a new log and starting a leader epoch are mostly waiting for
// fsyncs (the directory, the first segment, the leader-epoch checkpoint);
// overlapping them lets the file system commit them together.
const prepareParallelism = 8

// prepare does, prepareParallelism partitions at a time, the slow part of
// what Apply then does one partition at a time and in order (for example:
// 10 000 partitions created, or a third of them failing over at once):
// it opens the logs of the partitions d makes this node a replica of and
// that it does not hold yet, and for each partition d makes this node
// the leader of, and that it does not lead yet, it stops following the
// old leader and records the new epoch's start in the log, as
// becomeLeader does first (which then finds both done). Such a partition
// takes no appends (produce is refused, its fetcher is gone and its
// follower role ended with the epoch's start) until becomeLeader makes it
// the leader. A partition d changes twice is left to Apply. A log that
// fails to open here fails, and is logged, again there; a failed epoch
// checkpoint is logged here (becomeLeader then finds the epoch in the
// cache and writes nothing).
func (m *Manager) prepare(img *metadata.Image, d *metadata.Delta) {
	type job struct {
		key     storage.PartitionKey
		topicID string
		configs map[string]string
		np      *metadata.Partition // nil: only open the log
	}
	seen := make(map[storage.PartitionKey]int, len(d.Partitions))
	var jobs []job
	for _, ch := range d.Partitions {
		np := ch.New
		key := storage.PartitionKey{Topic: np.Topic, Partition: np.Partition}
		if i, again := seen[key]; again {
			if i >= 0 {
				jobs[i].np = nil // changed twice: Apply alone
			}
			continue
		}
		seen[key] = -1
		if !np.IsReplica(m.cfg.NodeID) {
			continue
		}
		t := img.Topic(np.Topic)
		if t == nil {
			continue
		}
		p := m.parts.Get(key)
		lead := np.Leader == m.cfg.NodeID
		if lead && p != nil {
			// A partition this node leads already takes appends: its new
			// epoch starts in becomeLeader, in order, as before.
			lead = p.Leadership().Role != broker.RoleLeader
		}
		if p != nil && !lead {
			continue
		}
		if !lead {
			np = nil
		}
		seen[key] = len(jobs)
		jobs = append(jobs, job{key, t.ID, t.Configs, np})
	}
	if len(jobs) < 2 {
		return
	}
	next := make(chan job)
	var wg sync.WaitGroup
	for i := 0; i < min(prepareParallelism, len(jobs)); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				p, err := m.parts.GetOrCreateTopic(j.key, j.topicID, j.configs)
				if err != nil || j.np == nil {
					continue
				}
				m.unfollow(j.key)
				// becomeLeader finds the epoch already in the cache and
				// writes nothing, so a failed checkpoint write is reported
				// here.
				if err := p.StartLeaderEpoch(j.np.LeaderEpoch); err != nil {
					m.lg.Error("assign leader epoch", "partition", j.key.String(), "err", err)
				}
			}
		}()
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
}

func leadershipOf(np *metadata.Partition, role broker.Role, maximal []int32) broker.Leadership {
	return broker.Leadership{Role: role, Leader: np.Leader, LeaderEpoch: np.LeaderEpoch, PartitionEpoch: np.PartitionEpoch,
		Replicas: append([]int32(nil), np.Replicas...), ISR: append([]int32(nil), np.ISR...), MaximalISR: maximal}
}

func (m *Manager) becomeLeader(p *broker.Partition, np *metadata.Partition) {
	m.unfollow(p.Key)
	cur := p.Leadership()
	m.mu.Lock()
	le := m.leaders[p.Key]
	if le == nil {
		le = &leaderEntry{p: p}
		m.leaders[p.Key] = le
	}
	m.mu.Unlock()
	notify := false
	defer func() {
		if notify { // after le.mu is released: listeners may append
			m.notifyLeader(p, np.LeaderEpoch)
		}
	}()
	le.mu.Lock()
	defer le.mu.Unlock()
	if cur.Role == broker.RoleLeader && cur.LeaderEpoch == np.LeaderEpoch && le.st != nil {
		// Same leadership: only the ISR (or partition epoch) moved.
		if np.PartitionEpoch >= le.st.PartitionEpoch {
			if !slices.Equal(le.st.Replicas, np.Replicas) {
				// A reassignment changed the replica set: the HW and the ISR
				// logic must know the new followers (and forget removed ones).
				le.st.SetReplicas(np.Replicas, m.clk.Now())
				m.followerStarts.retain(p.Key, np.Replicas)
				_ = p.SetLeadership(leadershipOf(np, broker.RoleLeader, le.st.MaximalISR()), nil)
			}
			le.st.ISR = append([]int32(nil), np.ISR...)
			le.st.PartitionEpoch = np.PartitionEpoch
			// An expansion in flight (a reassignment's new replica) may
			// still be committed: the HW keeps waiting for its members.
			le.st.KeepPending(np.ISR)
			p.UpdateISR(np.ISR, le.st.MaximalISR(), np.PartitionEpoch)
			m.advanceHWLocked(le)
		}
		return
	}
	key := p.Key
	p.Log.OnFlush(func() { m.logFlushed(key) })
	st := NewLeaderState(m.cfg.NodeID, np.Replicas, np.ISR, np.LeaderEpoch, np.PartitionEpoch, -1, m.clk.Now())
	// The epoch's start and the role change are one step (no append of
	// the old epoch in between): EpochStart is where the epoch cache says
	// the epoch starts.
	start, err := p.BecomeLeader(leadershipOf(np, broker.RoleLeader, st.MaximalISR()))
	if err != nil {
		m.lg.Error("assign leader epoch", "partition", p.Key.String(), "err", err)
	}
	st.EpochStart = start
	le.st = st
	m.lg.Info("became leader", "partition", p.Key.String(), "epoch", np.LeaderEpoch, "isr", np.ISR, "logEnd", p.Log.LogEndOffset(), "hw", p.HighWatermark())
	m.advanceHWLocked(le)
	notify = true
}

// EpochStart is where this replica, leading key, began its leader epoch:
// its log end when it became leader, which a follower must reach to join
// the ISR. ok is false when it does not lead key.
func (m *Manager) EpochStart(key storage.PartitionKey) (epoch int32, start int64, ok bool) {
	le := m.leader(key)
	if le == nil {
		return 0, 0, false
	}
	le.mu.Lock()
	defer le.mu.Unlock()
	if le.st == nil {
		return 0, 0, false
	}
	return le.st.LeaderEpoch, le.st.EpochStart, true
}

// HWLagging returns OFFSET_NOT_AVAILABLE while this replica leads key at
// epoch with its HW (hw, as the caller read it) below where it began the
// epoch, and nil otherwise. A new leader's HW may lag its log end then
// until its followers fetch again, so the latest offset it would answer
// may be below what the previous leader answered: a consumer would move
// back, or a reader that took it as its end would stop short of committed
// records. Kafka answers ListOffsets so until the HW catches up (KIP-207).
func (m *Manager) HWLagging(key storage.PartitionKey, epoch int32, hw int64) error {
	if e, start, ok := m.EpochStart(key); ok && e == epoch && start > hw {
		return errs.New(pb.ErrorCode_OFFSET_NOT_AVAILABLE, "%s: the high watermark %d of leader epoch %d is behind the offset %d where this leader began the epoch; retry once its followers have caught up", key, hw, epoch, start)
	}
	return nil
}

func (m *Manager) dropLeader(key storage.PartitionKey) {
	m.mu.Lock()
	_, was := m.leaders[key]
	delete(m.leaders, key)
	m.mu.Unlock()
	m.followerStarts.forget(key)
	if was {
		m.notifyStopped(key)
	}
}

func (m *Manager) becomeFollower(p *broker.Partition, np *metadata.Partition) {
	cur := p.Leadership()
	m.dropLeader(p.Key)
	if cur.Role == broker.RoleFollower && cur.LeaderEpoch == np.LeaderEpoch && cur.Leader == np.Leader {
		if !slices.Equal(cur.Replicas, np.Replicas) {
			_ = p.SetLeadership(leadershipOf(np, broker.RoleFollower, np.ISR), nil)
			return
		}
		p.UpdateISR(np.ISR, np.ISR, np.PartitionEpoch)
		return
	}
	if err := p.SetLeadership(leadershipOf(np, broker.RoleFollower, np.ISR), nil); err != nil {
		m.lg.Error("become follower", "partition", p.Key.String(), "err", err)
		return
	}
	m.lg.Info("became follower", "partition", p.Key.String(), "leader", np.Leader, "epoch", np.LeaderEpoch)
	m.follow(p, np.Leader, np.LeaderEpoch)
}

func (m *Manager) becomeOffline(p *broker.Partition, np *metadata.Partition) {
	m.dropLeader(p.Key)
	m.unfollow(p.Key)
	_ = p.SetLeadership(leadershipOf(np, broker.RoleNone, np.ISR), nil)
}

func (m *Manager) removePartition(key storage.PartitionKey) {
	m.dropLeader(key)
	m.unfollow(key)
	if m.parts.Get(key) != nil {
		if err := m.parts.Delete(key); err != nil {
			m.lg.Error("delete partition", "partition", key.String(), "err", err)
		} else {
			m.lg.Info("deleted partition", "partition", key.String())
		}
	}
}

// strayPartition stops serving a local log that is no replica of the
// cluster's (Kafka's stray logs) and renames its directory to a "-stray"
// name, kept for the operator; no restart loads it.
func (m *Manager) strayPartition(key storage.PartitionKey) {
	m.dropLeader(key)
	m.unfollow(key)
	if m.parts.Get(key) != nil {
		if dir, err := m.parts.MarkStray(key); err != nil {
			m.lg.Error("set aside stray log", "partition", key.String(), "err", err)
		} else {
			m.lg.Warn("stray log set aside; remove it once inspected", "partition", key.String(), "dir", dir)
		}
	}
}

// placedHere reports whether img placed p's partition on node self, as
// the topic p's log belongs to (a log of no recorded id: that topic).
func placedHere(img *metadata.Image, p *broker.Partition, self int32) bool {
	if img == nil {
		return false
	}
	t, ip := img.Topic(p.Key.Topic), img.Partition(p.Key.Topic, p.Key.Partition)
	return t != nil && ip != nil && ip.IsReplica(self) && (p.TopicID() == "" || p.TopicID() == t.ID)
}

func (m *Manager) follow(p *broker.Partition, leader int32, epoch int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx.Err() != nil {
		return
	}
	if old, ok := m.follows[p.Key]; ok && old != leader {
		if f := m.fetchers[old]; f != nil {
			f.remove(p.Key)
			if f.empty() {
				delete(m.fetchers, old)
				m.wg.Add(1)
				go func() { defer m.wg.Done(); f.stop() }()
			}
		}
	}
	m.follows[p.Key] = leader
	f := m.fetchers[leader]
	if f == nil {
		f = newFetcher(m, leader)
		m.fetchers[leader] = f
		f.start()
	}
	f.add(p, epoch)
}

func (m *Manager) unfollow(key storage.PartitionKey) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.follows[key]; ok {
		if f := m.fetchers[old]; f != nil {
			f.remove(key)
			if f.empty() {
				// A fetcher lives only while it has partitions to follow.
				delete(m.fetchers, old)
				m.wg.Add(1)
				go func() { defer m.wg.Done(); f.stop() }()
			}
		}
		delete(m.follows, key)
	}
}

// leader returns the leader entry of a partition this node leads.
func (m *Manager) leader(key storage.PartitionKey) *leaderEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leaders[key]
}

// advanceHWLocked recomputes the HW from the ISR's log ends (le.mu held).
func (m *Manager) advanceHWLocked(le *leaderEntry) {
	if le.st == nil {
		return
	}
	hw := le.st.HighWatermark(le.p.Log.DurableEnd())
	if hw >= 0 {
		le.p.SetHighWatermark(hw, false)
	}
}

// OnLeaderAppend is called after a leader append (and after a flush): with
// no follower in the ISR the HW moves at once.
func (m *Manager) OnLeaderAppend(key storage.PartitionKey) {
	le := m.leader(key)
	if le == nil {
		return
	}
	le.mu.Lock()
	m.advanceHWLocked(le)
	le.mu.Unlock()
}

// minISR reads a topic's min.insync.replicas from the image.
func minISR(img *metadata.Image, topic string, def int) int {
	if t := img.Topic(topic); t != nil {
		return int(config.Int(t.Configs, config.MinInsyncReplicas, int64(def)))
	}
	return def
}
