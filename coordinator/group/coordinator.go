// Package group is the group coordinator: consumer groups on
// __consumer_offsets (the classic join/sync/heartbeat protocol), committed
// offsets, and transactional offset commits that become visible with their
// transaction's COMMIT marker.
//
// A group belongs to partition PartitionFor(groupID, partitions) of
// __consumer_offsets and is served by that partition's leader. For every
// partition it leads the coordinator keeps a shard: the groups of that
// partition, rebuilt from the partition's log when leadership arrives
// (requests meanwhile answer COORDINATOR_LOAD_IN_PROGRESS) and dropped when
// it leaves (waiting calls answer NOT_COORDINATOR). Every change is
// appended to the partition with acks=all and waits for the ISR before
// memory changes, except the membership of a group left with no members,
// which (as in Kafka) changes first and is written after. The record
// formats are in keys.go.
package group

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/coordinator"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/replication"
)

// Config tunes the group coordinator (Kafka's names).
type Config struct {
	NodeID int32
	Topic  coordinator.InternalTopic
	// GroupMinSessionTimeout / GroupMaxSessionTimeout: group.min/max.session.timeout.ms.
	GroupMinSessionTimeout, GroupMaxSessionTimeout time.Duration
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms.
	InitialRebalanceDelay time.Duration
	// OffsetsRetention is offsets.retention.minutes (not enforced yet:
	// offsets are kept until overwritten).
	OffsetsRetention time.Duration
	// CommitTimeout is offsets.commit.timeout.ms: how long a write waits
	// for the ISR (0: 5 s).
	CommitTimeout time.Duration
	// TxnVerifyTimeout is how long the transaction coordinator is given
	// to add a TxnOffsetCommit's partition to the transaction, or say it
	// is there, retries included (0: 5 s, as a partition leader gives it
	// for a transactional produce). Past it the commit is answered
	// COORDINATOR_NOT_AVAILABLE, which the client retries.
	TxnVerifyTimeout time.Duration
	// SweepInterval is how often session and rebalance deadlines are
	// checked (0: 100 ms).
	SweepInterval time.Duration
	Logger        *slog.Logger

	// Consumer groups (KIP-848). ConsumerProtocol is whether
	// group.coordinator.rebalance.protocols includes "consumer": without
	// it ConsumerGroupHeartbeat answers UNSUPPORTED_VERSION (and the Kafka
	// listener does not list it), and no group converts.
	ConsumerProtocol bool
	// ConsumerHeartbeatInterval, ConsumerSessionTimeout:
	// group.consumer.heartbeat.interval.ms (5 s), group.consumer.session.timeout.ms (45 s).
	ConsumerHeartbeatInterval, ConsumerSessionTimeout time.Duration
	// ConsumerMaxSize is group.consumer.max.size (0: no limit).
	ConsumerMaxSize int
	// ConsumerAssignors is group.consumer.assignors: the server assignors
	// members may ask for, the first the default (nil: uniform, range).
	ConsumerAssignors []string
	// MigrationPolicy is group.consumer.migration.policy: which way a
	// group with members converts between the protocols (bidirectional,
	// upgrade, downgrade, disabled; empty: bidirectional).
	MigrationPolicy string
	// RegexRefreshInterval is how often, at most, a group's regular
	// expressions are resolved again when topics came or went (0: 10 s).
	RegexRefreshInterval time.Duration
	// Image is the metadata image subscriptions are resolved against
	// (nil: the replication manager's).
	Image func() *metadata.Image
}

// DefaultConfig is Kafka's defaults.
func DefaultConfig(nodeID int32) Config {
	return Config{NodeID: nodeID, Topic: coordinator.DefaultOffsetsTopic(), GroupMinSessionTimeout: 6 * time.Second,
		GroupMaxSessionTimeout: 30 * time.Minute, InitialRebalanceDelay: 3 * time.Second, OffsetsRetention: 7 * 24 * time.Hour,
		CommitTimeout: 5 * time.Second, SweepInterval: 100 * time.Millisecond,
		ConsumerProtocol: DefaultConsumerProtocol, ConsumerHeartbeatInterval: 5 * time.Second, ConsumerSessionTimeout: 45 * time.Second,
		ConsumerAssignors: DefaultAssignors, MigrationPolicy: MigrationBidirectional, RegexRefreshInterval: 10 * time.Second}
}

// TxnAdder adds a partition of __consumer_offsets to a transaction (an
// AddPartitionsToTxn to the transaction coordinator), before a
// TxnOffsetCommit is written; for a producer below transaction version 2,
// which added it itself with AddOffsetsToTxn, it verifies it is there.
type TxnAdder interface {
	AddPartition(ctx context.Context, transactionalID string, pid int64, epoch int16, topic string, partition int32) error
	Verify(ctx context.Context, transactionalID string, pid int64, epoch int16, topic string, partition int32) error
}

// loadBufferSize is offsets.load.buffer.size: bytes read per step of a load.
const loadBufferSize = 5 << 20

type shardStatus int

const (
	loading shardStatus = iota
	active
	gone
)

// shard is the coordinator's state for one __consumer_offsets partition it
// leads. mu guards everything in it (every group of the partition);
// writeMu orders appends so the sequence numbers of transactional batches
// follow the log.
type shard struct {
	partition   int32
	p           *broker.Partition // nil in unit tests
	leaderEpoch int32
	cancel      context.CancelFunc

	writeMu sync.Mutex

	mu     sync.Mutex
	status shardStatus
	groups map[string]*group
	// pidGroups: the groups holding pending offsets of each producer id.
	pidGroups map[int64]map[string]bool
	// watches: TxnOffsetCommit writes in flight per producer id, told when
	// the producer's marker arrives before they finish.
	watches map[int64]*txnWatch
	// lanes: the groups with a change being written (lane.go), each
	// closed when the change is in memory.
	lanes map[string]chan struct{}
	// fencing: consumer group members the sweep is removing ("group\x00member").
	fencing map[string]bool
}

type txnWatch struct {
	writers   int
	settled   bool
	committed bool
}

func newShard(partition int32, p *broker.Partition, epoch int32) *shard {
	return &shard{partition: partition, p: p, leaderEpoch: epoch, groups: map[string]*group{},
		pidGroups: map[int64]map[string]bool{}, watches: map[int64]*txnWatch{}, lanes: map[string]chan struct{}{},
		fencing: map[string]bool{}}
}

func (s *shard) group(id string, now time.Time, create bool) *group {
	g := s.groups[id]
	if g == nil && create {
		g = newGroup(id, now)
		s.groups[id] = g
	}
	return g
}

// settle applies a COMMIT (committed) or ABORT marker of pid: its pending
// offsets in every group of the shard become committed, or are dropped.
func (s *shard) settle(pid int64, committed bool) {
	for gid := range s.pidGroups[pid] {
		g := s.groups[gid]
		if g == nil {
			continue
		}
		for p, byPID := range g.pending {
			e, ok := byPID[pid]
			if !ok {
				continue
			}
			if committed {
				g.applyCommitted(p, e)
			}
			delete(byPID, pid)
			if len(byPID) == 0 {
				delete(g.pending, p)
			}
		}
	}
	delete(s.pidGroups, pid)
}

func (s *shard) addPending(g *group, p tp, pid int64, e offsetEntry) {
	byPID := g.pending[p]
	if byPID == nil {
		byPID = map[int64]offsetEntry{}
		g.pending[p] = byPID
	}
	byPID[pid] = e
	if s.pidGroups[pid] == nil {
		s.pidGroups[pid] = map[string]bool{}
	}
	s.pidGroups[pid][g.id] = true
}

// txnProducer marks a transactional write.
type txnProducer struct {
	pid   int64
	epoch int16
	id    string // transactional.id
	// guard is the verification the write appends with
	// (startTxnVerification; txn_verify.go).
	guard *storage.VerificationGuard
}

// writer appends records to a shard's partition with acks=all and returns
// the offset of the first one once the ISR has them. recheck, when set,
// runs under the shard lock just before the append, after every earlier
// write of the shard is appended; its error refuses the write (nothing is
// appended): a request validated before its write checks again there,
// as nothing that changes the group can come in between. Before a
// transactional write, startTxnVerification makes its verification guard
// (reporting whether the transaction coordinator must be asked), and
// dropTxnVerification forgets it when the coordinator refused for good.
type writer interface {
	write(ctx context.Context, s *shard, recs []record.Record, txn *txnProducer, recheck func() error) (int64, error)
	startTxnVerification(s *shard, txn *txnProducer, epochBump bool) (bool, error)
	dropTxnVerification(s *shard, txn *txnProducer)
}

// Coordinator answers the group requests (request.Handler calls it) for the __consumer_offsets
// partitions this broker leads.
type Coordinator struct {
	cfg  Config
	repl *replication.Manager
	loc  *coordinator.Locator
	txn  TxnAdder
	clk  clock.Clock
	lg   *slog.Logger
	w    writer

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	started bool
	stopped bool
	shards  map[int32]*shard

	// names tracks when the image's topic names last changed (regular
	// expression subscriptions).
	names topicNames
}

// New returns a coordinator; Start registers it for leadership changes.
func New(cfg Config, repl *replication.Manager, loc *coordinator.Locator, txn TxnAdder, clk clock.Clock) *Coordinator {
	if clk == nil {
		clk = clock.Real
	}
	if cfg.Topic.Name == "" {
		cfg.Topic = coordinator.DefaultOffsetsTopic()
	}
	if cfg.Topic.Partitions <= 0 {
		cfg.Topic.Partitions = 50
	}
	if cfg.CommitTimeout <= 0 {
		cfg.CommitTimeout = 5 * time.Second
	}
	if cfg.TxnVerifyTimeout <= 0 {
		cfg.TxnVerifyTimeout = 5 * time.Second
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = 100 * time.Millisecond
	}
	if cfg.ConsumerHeartbeatInterval <= 0 {
		cfg.ConsumerHeartbeatInterval = 5 * time.Second
	}
	if cfg.ConsumerSessionTimeout <= 0 {
		cfg.ConsumerSessionTimeout = 45 * time.Second
	}
	if len(cfg.ConsumerAssignors) == 0 {
		cfg.ConsumerAssignors = DefaultAssignors
	}
	if cfg.MigrationPolicy == "" {
		cfg.MigrationPolicy = MigrationBidirectional
	}
	if cfg.RegexRefreshInterval <= 0 {
		cfg.RegexRefreshInterval = 10 * time.Second
	}
	if cfg.Image == nil && repl != nil {
		cfg.Image = repl.Image
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{cfg: cfg, repl: repl, loc: loc, txn: txn, clk: clk, lg: lg.With("component", "group-coordinator"),
		ctx: ctx, cancel: cancel, shards: map[int32]*shard{}}
	c.w = logWriter{c}
	return c
}

// Start registers for leadership of __consumer_offsets partitions, loads
// those this broker already leads, and starts the session and rebalance
// timer sweep.
func (c *Coordinator) Start() {
	c.mu.Lock()
	if c.started || c.stopped {
		c.mu.Unlock()
		return
	}
	c.started = true
	c.mu.Unlock()
	c.goBackground(c.sweepLoop)
	if c.repl == nil {
		return
	}
	c.repl.AddLeaderListener(c.cfg.Topic.Name, c)
	for _, p := range c.repl.Partitions().All() {
		if l := p.Leadership(); p.Key.Topic == c.cfg.Topic.Name && l.Role == broker.RoleLeader {
			c.BecameLeader(p, l.LeaderEpoch)
		}
	}
}

// Stop stops background work and drops every shard: waiting calls answer
// NOT_COORDINATOR. It waits for the coordinator's goroutines.
func (c *Coordinator) Stop() {
	c.mu.Lock()
	c.stopped = true
	c.cancel()
	shards := c.shards
	c.shards = map[int32]*shard{}
	c.mu.Unlock()
	for _, s := range shards {
		c.drop(s, "the group coordinator is shutting down")
	}
	c.wg.Wait()
}

// BecameLeader starts loading a partition's groups in the background
// (replication.LeaderListener; it does not block).
func (c *Coordinator) BecameLeader(p *broker.Partition, leaderEpoch int32) {
	if p.Key.Topic != c.cfg.Topic.Name {
		return
	}
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	old := c.shards[p.Key.Partition]
	if old != nil && old.p == p && old.leaderEpoch == leaderEpoch {
		c.mu.Unlock()
		return // already loading or loaded for this leadership
	}
	s := newShard(p.Key.Partition, p, leaderEpoch)
	ctx, cancel := context.WithCancel(c.ctx)
	s.cancel = cancel
	c.shards[p.Key.Partition] = s
	c.wg.Add(1)
	c.mu.Unlock()
	if old != nil {
		c.drop(old, "leadership of the partition was taken over by a newer epoch")
	}
	go c.load(ctx, s)
}

// StoppedLeading drops a partition's groups (replication.LeaderListener).
func (c *Coordinator) StoppedLeading(partition int32) {
	c.mu.Lock()
	s := c.shards[partition]
	delete(c.shards, partition)
	c.mu.Unlock()
	if s != nil {
		c.drop(s, fmt.Sprintf("this broker no longer leads %s-%d", c.cfg.Topic.Name, partition))
	}
}

// drop ends a shard: the load stops, groups go Dead and every waiting call
// answers NOT_COORDINATOR.
func (c *Coordinator) drop(s *shard, why string) {
	if s.cancel != nil {
		s.cancel()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = gone
	for _, g := range s.groups {
		for _, m := range g.members {
			m.answerJoin(&pb.JoinGroupResponse{ErrorCode: pb.ErrorCode_NOT_COORDINATOR, ErrorMessage: why, MemberId: m.id, GenerationId: -1})
			m.answerSync(&pb.SyncGroupResponse{ErrorCode: pb.ErrorCode_NOT_COORDINATOR, ErrorMessage: why})
		}
		c.setState(g, Dead, c.clk.Now())
	}
}

// setState moves g to a new state if the transition table allows it; an
// illegal transition is a bug, logged and refused.
func (c *Coordinator) setState(g *group, to State, now time.Time) bool {
	if !CanTransition(g.state, to) {
		c.lg.Error("illegal group state transition refused", "group", g.id, "from", g.state, "to", to)
		return false
	}
	g.state, g.stateSince = to, now
	return true
}

// OnTxnMarker is called once a COMMIT or ABORT marker for pid is durable on
// partition of __consumer_offsets, before WriteTxnMarkers answers: the
// producer's pending offsets there become committed (COMMIT) or vanish
// (ABORT). During a load the marker is applied when the load reads it.
func (c *Coordinator) OnTxnMarker(partition int32, pid int64, committed bool) {
	c.mu.Lock()
	s := c.shards[partition]
	c.mu.Unlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status != active {
		return
	}
	if w := s.watches[pid]; w != nil {
		w.settled, w.committed = true, committed
	}
	s.settle(pid, committed)
}

// partitionOf is the __consumer_offsets partition of a group: by the
// topic's partition count in this broker's metadata, as the locator maps
// it, never by the configured count alone.
func (c *Coordinator) partitionOf(groupID string) int32 {
	var img *metadata.Image
	if c.repl != nil {
		img = c.repl.Image()
	}
	return c.cfg.Topic.PartitionOf(img, groupID)
}

// lockShard returns the group's shard, locked and serving, or the error
// the client should see (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// INVALID_GROUP_ID).
func (c *Coordinator) lockShard(groupID string) (*shard, error) {
	if groupID == "" {
		return nil, errs.New(pb.ErrorCode_INVALID_GROUP_ID, "the group id is empty")
	}
	part := c.partitionOf(groupID)
	c.mu.Lock()
	s := c.shards[part]
	c.mu.Unlock()
	if s == nil {
		return nil, errs.New(pb.ErrorCode_NOT_COORDINATOR, "broker %d does not lead %s-%d, the partition of group %q", c.cfg.NodeID, c.cfg.Topic.Name, part, groupID)
	}
	s.mu.Lock()
	switch s.status {
	case loading:
		s.mu.Unlock()
		return nil, errs.New(pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS, "broker %d is still loading %s-%d, the partition of group %q", c.cfg.NodeID, c.cfg.Topic.Name, part, groupID)
	case gone:
		s.mu.Unlock()
		return nil, errs.New(pb.ErrorCode_NOT_COORDINATOR, "broker %d stopped leading %s-%d, the partition of group %q", c.cfg.NodeID, c.cfg.Topic.Name, part, groupID)
	}
	return s, nil
}

// goBackground runs f in a goroutine that Stop waits for; after Stop it
// does nothing and returns false.
func (c *Coordinator) goBackground(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

// sweepLoop checks session and rebalance deadlines every SweepInterval.
func (c *Coordinator) sweepLoop() {
	t := c.clk.NewTicker(c.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C():
			c.sweep()
		}
	}
}

// sweep runs the deadlines of every active shard at the clock's now.
func (c *Coordinator) sweep() {
	c.mu.Lock()
	shards := make([]*shard, 0, len(c.shards))
	for _, s := range c.shards {
		shards = append(shards, s)
	}
	c.mu.Unlock()
	now := c.clk.Now()
	for _, s := range shards {
		s.mu.Lock()
		if s.status == active {
			for _, g := range s.groups {
				if g.cg != nil {
					c.expireConsumer(s, g, now)
					continue
				}
				c.expire(s, g, now)
			}
		}
		s.mu.Unlock()
	}
}

// logWriter is the production writer: an acks=all append to the leader's
// log, waiting for the ISR up to CommitTimeout. A transactional write
// appends with its verification guard (txn_verify.go).
type logWriter struct{ c *Coordinator }

func (w logWriter) write(ctx context.Context, s *shard, recs []record.Record, txn *txnProducer, recheck func() error) (int64, error) {
	c := w.c
	now := c.clk.Now().UnixMilli()
	for i := range recs {
		recs[i].Timestamp = now
	}
	opts := record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, PartitionLeaderEpoch: -1}
	s.writeMu.Lock()
	if recheck != nil {
		s.mu.Lock()
		if err := recheck(); err != nil {
			s.mu.Unlock()
			s.writeMu.Unlock()
			return -1, err
		}
	}
	if txn != nil {
		opts.ProducerID, opts.ProducerEpoch, opts.Transactional = txn.pid, txn.epoch, true
		opts.BaseSequence = nextSequence(s.p, txn.pid, txn.epoch)
	}
	batch, err := record.Build(opts, recs)
	if err != nil {
		if recheck != nil {
			s.mu.Unlock()
		}
		s.writeMu.Unlock()
		return -1, errs.New(pb.ErrorCode_INVALID_COMMIT_OFFSET_SIZE, "cannot build the batch for %s-%d: %v", c.cfg.Topic.Name, s.partition, err)
	}
	// Fenced by the leadership the shard was loaded at: a shard dropped
	// for a newer leadership of the partition writes nothing more.
	a := c.repl.AppendLeaderCoordinator(c.cfg.Topic.Name, s.partition, batch, -1, guardOf(txn), s.leaderEpoch)
	if recheck != nil {
		s.mu.Unlock()
	}
	s.writeMu.Unlock()
	if a.Err != nil {
		return -1, c.writeError(s, a.Err)
	}
	wctx, cancel := context.WithTimeout(ctx, c.cfg.CommitTimeout)
	defer cancel()
	if err := a.Wait(wctx); err != nil {
		return -1, appendedError{c.writeError(s, err)}
	}
	return a.Result.FirstOffset, nil
}

// appendedError is a write that reached the leader's log but not, in
// time, its ISR: the records are there, and either the ISR takes them or
// the leader loses the partition (and its groups with it).
type appendedError struct{ error }

func (e appendedError) Unwrap() error { return e.error }

// wasAppended reports whether a failed write's records are in the log.
func wasAppended(err error) bool {
	_, ok := err.(appendedError)
	return ok
}

// nextSequence is the base sequence for the coordinator's next batch of a
// producer on the partition: 0 at a new epoch, else after the last one.
func nextSequence(p *broker.Partition, pid int64, epoch int16) int32 {
	for _, e := range p.Log.Producers() {
		if e.ProducerID == pid {
			if e.Epoch != epoch {
				return 0
			}
			return record.IncrementSequence(e.LastSequence(), 1)
		}
	}
	return 0
}

// writeError maps an append failure to what a group client should do
// (Kafka's mapping): rediscover the coordinator, retry, or give up.
func (c *Coordinator) writeError(s *shard, err error) error {
	code, msg := errs.Split(err)
	where := fmt.Sprintf("writing to %s-%d", c.cfg.Topic.Name, s.partition)
	switch code {
	case pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, pb.ErrorCode_KAFKA_STORAGE_ERROR, pb.ErrorCode_FENCED_LEADER_EPOCH:
		return errs.New(pb.ErrorCode_NOT_COORDINATOR, "%s: %s", where, msg)
	case pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, pb.ErrorCode_NOT_ENOUGH_REPLICAS, pb.ErrorCode_NOT_ENOUGH_REPLICAS_AFTER_APPEND,
		pb.ErrorCode_REQUEST_TIMED_OUT:
		return errs.New(pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, "%s: %s (%s)", where, msg, code)
	case pb.ErrorCode_MESSAGE_TOO_LARGE, pb.ErrorCode_RECORD_LIST_TOO_LARGE:
		return errs.New(pb.ErrorCode_INVALID_COMMIT_OFFSET_SIZE, "%s: %s", where, msg)
	}
	return errs.New(code, "%s: %s", where, msg)
}

// CommittedOffset is a group's committed offset of one partition.
type CommittedOffset struct {
	Group     string
	Topic     string
	Partition int32
	Offset    int64
}

// CommittedOffsets lists the committed offsets of every group this
// coordinator serves (the groups of the __consumer_offsets partitions it
// leads and has loaded), for consumer-lag metrics. Pending transactional
// offsets are not committed yet and are left out.
func (c *Coordinator) CommittedOffsets() []CommittedOffset {
	c.mu.Lock()
	shards := make([]*shard, 0, len(c.shards))
	for _, s := range c.shards {
		shards = append(shards, s)
	}
	c.mu.Unlock()
	var out []CommittedOffset
	for _, s := range shards {
		s.mu.Lock()
		if s.status == active {
			for _, g := range s.groups {
				for p, e := range g.offsets {
					out = append(out, CommittedOffset{Group: g.id, Topic: p.topic, Partition: p.partition, Offset: e.offset})
				}
			}
		}
		s.mu.Unlock()
	}
	return out
}
