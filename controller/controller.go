package controller

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/config"
	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/internal/syncx"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Config tunes the active controller.
type Config struct {
	NodeID int32
	// SessionTimeout is broker.session.timeout.ms: a broker silent this long is fenced.
	SessionTimeout time.Duration
	// UnreachableSessionTimeout is broker.unreachable.session.timeout.ms
	// (Strand's own): a broker silent this long that also does not answer
	// Probe is fenced without waiting for SessionTimeout. 0 turns the early
	// fence off. See liveness.go.
	UnreachableSessionTimeout time.Duration
	// Probe asks a broker's node directly whether it is there (gossip's
	// ping); nil: brokers are fenced only at SessionTimeout or by Suspect.
	Probe func(id int32) bool
	// LeaderImbalanceInterval is leader.imbalance.check.interval.seconds.
	LeaderImbalanceInterval time.Duration
	// AutoLeaderRebalance is auto.leader.rebalance.enable.
	AutoLeaderRebalance bool
	// LeaderImbalancePercentage is leader.imbalance.per.broker.percentage:
	// a broker's preferred partitions move back to it only when more than
	// this percentage of them are led by others (ImbalanceChanges).
	LeaderImbalancePercentage int
	// UncleanCheckInterval is unclean.leader.election.interval.ms.
	UncleanCheckInterval time.Duration
	// DefaultPartitions / DefaultReplicationFactor: num.partitions, default.replication.factor.
	DefaultPartitions        int32
	DefaultReplicationFactor int32
	// MaxBrokerPartitions is max.broker.partitions (KIP-578): the most
	// partition replicas a topic creation may leave on one broker; 0 is no
	// limit. A node lowers it to what its file descriptors can serve
	// (node/fdlimit.go) and assumes its peers have the same limit.
	MaxBrokerPartitions int
	Logger              *slog.Logger
}

// DefaultConfig is Kafka's defaults.
func DefaultConfig(nodeID int32) Config {
	c := Config{
		NodeID:                    nodeID,
		SessionTimeout:            9 * time.Second,
		UnreachableSessionTimeout: 1750 * time.Millisecond,
		LeaderImbalanceInterval:   300 * time.Second,
		AutoLeaderRebalance:       true,
		UncleanCheckInterval:      300 * time.Second,
		DefaultPartitions:         1,
		DefaultReplicationFactor:  1,
	}
	c.LeaderImbalancePercentage = 10 // leader.imbalance.per.broker.percentage, Kafka's default
	return c
}

// Controller makes the metadata decisions when this node is the active
// controller. Every write is serialised by one lock, decided on the latest
// applied image and committed through Raft before it answers; on other
// nodes the methods return NOT_CONTROLLER.
type Controller struct {
	cfg Config
	Q   *Quorum
	clk clock.Clock
	lg  *slog.Logger

	mu     syncx.Mutex         // held across Raft proposals: see internal/syncx
	leases map[int32]time.Time // last heartbeat per broker (active controller only)
	// heard holds the brokers whose current incarnation this controller
	// has heard from (a registration or a heartbeat) since it became
	// active, and whose session has not ended since (fenced when its lease
	// expired, by gossip, or at its own request). Only their sessions are
	// alive (sessionAliveLocked): a registration inherited from an earlier
	// controller proves nothing about the process behind it, so a node
	// that restarts after the whole cluster stopped is not kept waiting.
	heard map[int32]bool
	// shutdown holds, per broker, the broker epoch at which it asked for a
	// controlled shutdown. That incarnation is not unfenced again, whatever
	// heartbeat comes after (one sent before the shutdown began may reach
	// the controller after it): as in Kafka, only a new registration ends a
	// controlled shutdown. Without this a late heartbeat unfenced a broker
	// that was closing and made it leader again, and it recorded a leader
	// epoch it never wrote in.
	shutdown map[int32]int64
	// unreachable holds, per broker, when the last probe that went
	// unanswered began (liveness.go); an answered probe removes it.
	unreachable map[int32]time.Time
	probing     map[int32]bool // a probe of the broker is in flight
	// lastLeader is the node that led the quorum when this node last
	// followed: the broker whose heartbeats stopped with that leader's
	// death, if it died (becomeActiveLocked).
	lastLeader int32
	fetches    map[int32]fetchState // last heartbeat offsets (members.go)
	active     bool                 // leadership as last established (barrier done)
	lastPref   time.Time
	lastUncl   time.Time
	// refusedInc counts refused registrations by incarnation, so the
	// refusal is logged once per incarnation (RegisterBroker).
	refusedInc map[string]int

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New wraps a started quorum.
func New(cfg Config, q *Quorum, clk clock.Clock) *Controller {
	if clk == nil {
		clk = clock.Real
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.Default()
	}
	return &Controller{cfg: cfg, Q: q, clk: clk, lg: lg.With("component", "controller"), leases: map[int32]time.Time{}, heard: map[int32]bool{}, shutdown: map[int32]int64{},
		unreachable: map[int32]time.Time{}, probing: map[int32]bool{}, lastLeader: -1}
}

// Start runs the controller's loop: it notices gaining and losing Raft
// leadership and, while active, fences brokers whose lease expired and runs
// preferred and unclean elections.
func (c *Controller) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(2)
	go c.loop(ctx)
	go c.probeLoop(ctx)
}

// Stop ends the loop and waits for it.
func (c *Controller) Stop() {
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
}

func (c *Controller) loop(ctx context.Context) {
	defer c.wg.Done()
	tick := c.clk.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
			c.tick(ctx)
		case <-c.Q.Raft.LeaderCh():
			c.tick(ctx)
		}
	}
}

func (c *Controller) tick(ctx context.Context) {
	leader := c.Q.IsLeader()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !leader {
		if c.active {
			c.lg.Info("no longer the active controller")
		}
		c.active = false
		if id := c.Q.LeaderID(); id >= 0 && id != c.cfg.NodeID {
			c.lastLeader = id
		}
		return
	}
	if !c.active {
		if err := c.becomeActiveLocked(ctx); err != nil {
			c.lg.Warn("becoming active controller", "err", err)
			return
		}
	}
	c.checkLeasesLocked(ctx)
	now := c.clk.Now()
	if c.cfg.AutoLeaderRebalance && now.Sub(c.lastPref) >= c.cfg.LeaderImbalanceInterval {
		c.lastPref = now
		if recs := ImbalanceChanges(c.Q.FSM.Image(), c.cfg.LeaderImbalancePercentage); len(recs) > 0 {
			if _, err := c.proposeLocked(ctx, recs...); err != nil {
				c.lg.Warn("preferred leader election", "err", err)
			}
		}
	}
	c.completeReassignmentsLocked(ctx)
	if now.Sub(c.lastUncl) >= c.cfg.UncleanCheckInterval {
		c.lastUncl = now
		c.uncleanLocked(ctx)
	}
}

func (c *Controller) uncleanLocked(ctx context.Context) {
	if recs := UncleanChanges(c.Q.FSM.Image()); len(recs) > 0 {
		c.lg.Warn("unclean leader election", "partitions", len(recs))
		if _, err := c.proposeLocked(ctx, recs...); err != nil {
			c.lg.Warn("unclean leader election", "err", err)
		}
	}
}

// becomeActiveLocked waits until every entry of earlier terms is applied,
// gives every broker a fresh lease, and writes the bootstrap records
// (and the internal topics' switch to compaction, InternalTopicUpgrades).
func (c *Controller) becomeActiveLocked(ctx context.Context) error {
	if err := c.Q.Raft.Barrier(10 * time.Second).Error(); err != nil {
		return err
	}
	now := c.clk.Now()
	img := c.Q.FSM.Image()
	c.leases = map[int32]time.Time{}
	c.heard = map[int32]bool{}
	c.unreachable = map[int32]time.Time{}
	for id := range img.Brokers {
		c.leases[id] = now
	}
	c.inheritLeaderLeaseLocked(now)
	var boot []*pb.MetadataRecord
	if img.ClusterID == "" {
		boot = append(boot, &pb.MetadataRecord{Record: &pb.MetadataRecord_Cluster{Cluster: &pb.ClusterRecord{ClusterId: newID()}}})
	}
	if img.ClusterID == "" {
		// A new cluster starts with Strand's formats at this binary's
		// level; a cluster made by an older binary keeps its level until
		// an operator finalizes a higher one, once every broker runs a
		// binary that supports it.
		if _, ok := img.Features[metadata.FeatureStrandVersion]; !ok {
			boot = append(boot, &pb.MetadataRecord{Record: &pb.MetadataRecord_FeatureLevel{FeatureLevel: &pb.FeatureLevelRecord{Name: metadata.FeatureStrandVersion, Level: metadata.StrandVersionMax}}})
		}
	}
	if _, ok := img.Features[metadata.FeatureTransactionVersion]; !ok {
		boot = append(boot, &pb.MetadataRecord{Record: &pb.MetadataRecord_FeatureLevel{FeatureLevel: &pb.FeatureLevelRecord{Name: metadata.FeatureTransactionVersion, Level: metadata.TransactionVersionDefault}}})
	}
	boot = append(boot, InternalTopicUpgrades(img)...)
	if len(boot) > 0 {
		if _, err := c.Q.Propose(ctx, boot...); err != nil {
			return err
		}
	}
	c.active = true
	c.lastPref, c.lastUncl = now, now
	c.lg.Info("active controller", "metadataOffset", c.Q.FSM.Image().Offset, "brokers", len(img.Brokers))
	return nil
}

func (c *Controller) checkLeasesLocked(ctx context.Context) {
	img := c.Q.FSM.Image()
	now := c.clk.Now()
	for _, b := range img.SortedBrokers() {
		if b.Fenced {
			continue
		}
		last, ok := c.leases[b.ID]
		if !ok {
			c.leases[b.ID] = now
			continue
		}
		if now.Sub(last) < c.cfg.SessionTimeout {
			continue
		}
		c.lg.Warn("broker session expired; fencing", "broker", b.ID, "epoch", b.Epoch, "silentFor", now.Sub(last).Round(time.Millisecond))
		recs := append([]*pb.MetadataRecord{{Record: &pb.MetadataRecord_FenceBroker{FenceBroker: &pb.FenceBrokerRecord{NodeId: b.ID, BrokerEpoch: b.Epoch}}}},
			FenceChanges(img, b.ID)...)
		if _, err := c.proposeLocked(ctx, recs...); err != nil {
			c.lg.Warn("fence broker", "broker", b.ID, "err", err)
			return
		}
		delete(c.heard, b.ID)
		img = c.Q.FSM.Image()
	}
}

// sessionAliveLocked reports whether broker id holds a live session: this
// controller heard its current incarnation, the session did not end, and
// its lease (broker.session.timeout.ms) has not run out.
func (c *Controller) sessionAliveLocked(id int32) bool {
	return c.heard[id] && c.clk.Now().Sub(c.leases[id]) < c.cfg.SessionTimeout
}

// proposeLocked commits records; c.mu is held.
func (c *Controller) proposeLocked(ctx context.Context, recs ...*pb.MetadataRecord) (int64, error) {
	off, err := c.Q.Propose(ctx, recs...)
	if errors.Is(err, errNotController) {
		c.active = false
		return 0, c.notController()
	}
	return off, err
}

// NotControllerError carries where the active controller is.
func (c *Controller) notController() error {
	return errs.New(pb.ErrorCode_NOT_CONTROLLER, "node %d is not the active controller (active: %d)", c.cfg.NodeID, c.Q.LeaderID())
}

// lockActive takes the lock if this node is the active controller.
func (c *Controller) lockActive() error {
	c.mu.Lock()
	if !c.active || !c.Q.IsLeader() {
		c.mu.Unlock()
		return c.notController()
	}
	return nil
}

// LeaderID is the active controller's node id (-1 unknown).
func (c *Controller) LeaderID() int32 { return c.Q.LeaderID() }

// IsActive reports whether this node is serving as the active controller.
func (c *Controller) IsActive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active && c.Q.IsLeader()
}

// RegisterBroker records a broker incarnation (fenced) and returns its
// epoch. A repeated registration of the same incarnation at the same
// addresses returns the same epoch. A registration that would replace the
// current one (another incarnation, or other addresses) is refused with
// DUPLICATE_BROKER_REGISTRATION while the current one's session is alive
// (as Kafka refuses it): otherwise anyone who can reach the controller could
// point a live broker's id at an address of their own. Once that session
// has ended (the lease expired, gossip reported the node dead, or it shut
// down cleanly), the new incarnation replaces the old one, which is first
// fenced in the same batch: its partitions move and it leaves every ISR
// until it has caught up again (a restarted broker may have lost unflushed
// data).
func (c *Controller) RegisterBroker(ctx context.Context, req *pb.RegisterBrokerRequest) (int64, error) {
	if err := c.lockActive(); err != nil {
		return 0, err
	}
	defer c.mu.Unlock()
	img := c.Q.FSM.Image()
	if req.IncarnationId == "" || req.Address == "" {
		return 0, errs.New(pb.ErrorCode_INVALID_REGISTRATION, "registration of broker %d needs an incarnation id and an address", req.NodeId)
	}
	if req.ClusterId != "" && img.ClusterID != "" && req.ClusterId != img.ClusterID {
		return 0, errs.New(pb.ErrorCode_INCONSISTENT_CLUSTER_ID, "broker %d belongs to cluster %s, this is %s", req.NodeId, req.ClusterId, img.ClusterID)
	}
	cur := img.Brokers[req.NodeId]
	if cur != nil && cur.IncarnationID == req.IncarnationId && cur.Address == req.Address && cur.ExternalAddress == req.ExternalAddress &&
		cur.InterBrokerAddress == req.InterBrokerAddress && cur.KafkaAddress == req.KafkaAddress {
		c.leases[req.NodeId] = c.clk.Now()
		c.heard[req.NodeId] = true
		return cur.Epoch, nil
	}
	if cur != nil && c.sessionAliveLocked(req.NodeId) {
		return 0, errs.New(pb.ErrorCode_DUPLICATE_BROKER_REGISTRATION,
			"broker %d is registered by incarnation %s (broker epoch %d), whose session is alive (heard %v ago; broker.session.timeout.ms is %v): incarnation %s at %s is refused until that session expires",
			req.NodeId, cur.IncarnationID, cur.Epoch, c.clk.Now().Sub(c.leases[req.NodeId]).Round(time.Millisecond), c.cfg.SessionTimeout, req.IncarnationId, req.InterBrokerAddress)
	}
	// A binary that cannot read what the cluster writes is kept out, as
	// Kafka's controller refuses a broker that does not support a
	// finalized feature level.
	if miss := metadata.UnsupportedFinalized(img.Features, metadata.FeatureRanges(req.SupportedFeatures)); miss != "" {
		err := errs.New(pb.ErrorCode_UNSUPPORTED_VERSION, "broker %d cannot register: its binary does not support the %s; run a binary that does", req.NodeId, miss)
		// Said once per incarnation: a binary from before the feature
		// may not log why its registration keeps failing.
		if c.refusedInc[req.IncarnationId] == 0 {
			if c.refusedInc == nil || len(c.refusedInc) > 1000 {
				c.refusedInc = map[string]int{}
			}
			c.lg.Warn("refused a broker registration", "broker", req.NodeId, "incarnation", req.IncarnationId, "err", err)
		}
		c.refusedInc[req.IncarnationId]++
		return 0, err
	}
	var recs []*pb.MetadataRecord
	if cur != nil {
		recs = append(recs, FenceChanges(img, req.NodeId)...)
	}
	recs = append(recs, &pb.MetadataRecord{Record: &pb.MetadataRecord_RegisterBroker{RegisterBroker: &pb.RegisterBrokerRecord{
		NodeId: req.NodeId, IncarnationId: req.IncarnationId, Address: req.Address, ExternalAddress: req.ExternalAddress,
		InterBrokerAddress: req.InterBrokerAddress, KafkaAddress: req.KafkaAddress, Rack: req.Rack, Fenced: true,
		SupportedFeatures: req.SupportedFeatures,
	}}})
	off, err := c.proposeLocked(ctx, recs...)
	if err != nil {
		return 0, err
	}
	c.leases[req.NodeId] = c.clk.Now()
	c.heard[req.NodeId] = true
	c.lg.Info("registered broker", "broker", req.NodeId, "epoch", off, "address", req.Address, "interBrokerAddress", req.InterBrokerAddress, "replaced", cur != nil)
	return off, nil
}

// HeartbeatResult is what a broker learns from a heartbeat.
type HeartbeatResult struct {
	Fenced, CaughtUp bool
}

// BrokerHeartbeat renews a broker's lease and unfences it once it has
// applied the metadata log up to its own registration. want_fence asks for
// a controlled shutdown: the broker is fenced and its partitions move.
func (c *Controller) BrokerHeartbeat(ctx context.Context, req *pb.BrokerHeartbeatRequest) (HeartbeatResult, error) {
	if err := c.lockActive(); err != nil {
		return HeartbeatResult{}, err
	}
	defer c.mu.Unlock()
	img := c.Q.FSM.Image()
	cur := img.Brokers[req.NodeId]
	if cur == nil {
		return HeartbeatResult{}, errs.New(pb.ErrorCode_BROKER_ID_NOT_REGISTERED, "broker %d is not registered", req.NodeId)
	}
	if cur.Epoch != req.BrokerEpoch {
		return HeartbeatResult{}, errs.New(pb.ErrorCode_STALE_BROKER_EPOCH, "broker %d heartbeat with epoch %d, registered epoch is %d", req.NodeId, req.BrokerEpoch, cur.Epoch)
	}
	if req.WantShutdown {
		c.shutdown[req.NodeId] = cur.Epoch
	}
	shuttingDown := c.shutdown[req.NodeId] == cur.Epoch
	if planted.On(planted.ShutdownUndoneByHeartbeat) {
		shuttingDown = req.WantShutdown // only while this heartbeat asks
	}
	c.leases[req.NodeId] = c.clk.Now()
	c.heard[req.NodeId] = !req.WantFence && !shuttingDown // a controlled shutdown ends the session
	c.noteFetch(req.NodeId, req.CurrentMetadataOffset)
	caughtUp := req.CurrentMetadataOffset >= cur.Epoch
	switch {
	case cur.Fenced && caughtUp && !req.WantFence && !shuttingDown:
		recs := []*pb.MetadataRecord{{Record: &pb.MetadataRecord_UnfenceBroker{UnfenceBroker: &pb.UnfenceBrokerRecord{NodeId: cur.ID, BrokerEpoch: cur.Epoch}}}}
		recs = append(recs, UnfenceChanges(img, cur.ID)...)
		if _, err := c.proposeLocked(ctx, recs...); err != nil {
			return HeartbeatResult{Fenced: true, CaughtUp: caughtUp}, err
		}
		c.lg.Info("unfenced broker", "broker", cur.ID, "epoch", cur.Epoch)
		c.uncleanLocked(ctx)
		return HeartbeatResult{Fenced: false, CaughtUp: true}, nil
	case !cur.Fenced && (req.WantFence || shuttingDown):
		recs := append([]*pb.MetadataRecord{{Record: &pb.MetadataRecord_FenceBroker{FenceBroker: &pb.FenceBrokerRecord{NodeId: cur.ID, BrokerEpoch: cur.Epoch}}}},
			FenceChanges(img, cur.ID)...)
		if _, err := c.proposeLocked(ctx, recs...); err != nil {
			return HeartbeatResult{Fenced: false, CaughtUp: caughtUp}, err
		}
		c.lg.Info("fenced broker on its request", "broker", cur.ID)
		return HeartbeatResult{Fenced: true, CaughtUp: caughtUp}, nil
	}
	if cur.Features == nil && len(req.SupportedFeatures) > 0 {
		// Registered through a controller of an older binary, which
		// dropped the broker's features: record them now, under the
		// same epoch and fencing, so UpdateFeatures can tell what it
		// supports. A failure is retried at the next heartbeat.
		if _, err := c.proposeLocked(ctx, &pb.MetadataRecord{Record: &pb.MetadataRecord_RegisterBroker{RegisterBroker: &pb.RegisterBrokerRecord{
			NodeId: cur.ID, IncarnationId: cur.IncarnationID, BrokerEpoch: cur.Epoch, Address: cur.Address, ExternalAddress: cur.ExternalAddress,
			InterBrokerAddress: cur.InterBrokerAddress, KafkaAddress: cur.KafkaAddress, Rack: cur.Rack, Fenced: cur.Fenced,
			SupportedFeatures: req.SupportedFeatures,
		}}}); err != nil {
			c.lg.Warn("recording a broker's supported features failed", "broker", cur.ID, "err", err)
		} else {
			c.lg.Info("recorded the supported features of a broker registered through an older controller", "broker", cur.ID, "epoch", cur.Epoch)
		}
	}
	return HeartbeatResult{Fenced: cur.Fenced, CaughtUp: caughtUp}, nil
}

// AlterPartition applies a leader's ISR change, compare-and-set on the
// partition epoch. Members added must be live; the leader must stay in.
func (c *Controller) AlterPartition(ctx context.Context, req *pb.AlterPartitionRequest) ([]*pb.AlterPartitionResult, error) {
	if err := c.lockActive(); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	img := c.Q.FSM.Image()
	if b := img.Brokers[req.BrokerId]; b == nil || b.Epoch != req.BrokerEpoch {
		return nil, errs.New(pb.ErrorCode_STALE_BROKER_EPOCH, "AlterPartition from broker %d epoch %d does not match its registration", req.BrokerId, req.BrokerEpoch)
	}
	results := make([]*pb.AlterPartitionResult, len(req.Partitions))
	var recs []*pb.MetadataRecord
	var idx []int
	for i, it := range req.Partitions {
		res := &pb.AlterPartitionResult{Topic: it.Topic, Partition: it.Partition}
		results[i] = res
		p := img.Partition(it.Topic, it.Partition)
		if err := validateAlter(img, req.BrokerId, p, it); err != nil {
			res.ErrorCode, res.ErrorMessage = errs.Split(err)
			if p != nil {
				fillResult(res, p)
			}
			continue
		}
		if sameSet(p.ISR, it.NewIsr) {
			fillResult(res, p)
			continue
		}
		reason := "isr-shrink"
		if len(it.NewIsr) > len(p.ISR) {
			reason = "isr-expand"
		}
		recs = append(recs, changeRecord(p, p.Leader, it.NewIsr, reason))
		idx = append(idx, i)
	}
	if len(recs) > 0 {
		if _, err := c.proposeLocked(ctx, recs...); err != nil {
			return nil, err
		}
		img = c.Q.FSM.Image()
		for _, i := range idx {
			it := req.Partitions[i]
			fillResult(results[i], img.Partition(it.Topic, it.Partition))
		}
		// An expansion may complete a reassignment (reassign.go).
		c.completeReassignmentsLocked(ctx)
	}
	return results, nil
}

func fillResult(res *pb.AlterPartitionResult, p *metadata.Partition) {
	res.LeaderId, res.LeaderEpoch, res.Isr, res.PartitionEpoch = p.Leader, p.LeaderEpoch, append([]int32(nil), p.ISR...), p.PartitionEpoch
}

func validateAlter(img *metadata.Image, broker int32, p *metadata.Partition, it *pb.AlterPartitionItem) error {
	switch {
	case p == nil:
		return errs.New(pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "%s-%d does not exist", it.Topic, it.Partition)
	case p.Leader != broker:
		return errs.New(pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, "broker %d is not the leader of %s-%d (leader %d)", broker, it.Topic, it.Partition, p.Leader)
	case it.LeaderEpoch != p.LeaderEpoch:
		return errs.New(pb.ErrorCode_FENCED_LEADER_EPOCH, "%s-%d: leader epoch %d, current %d", it.Topic, it.Partition, it.LeaderEpoch, p.LeaderEpoch)
	case it.PartitionEpoch != p.PartitionEpoch:
		return errs.New(pb.ErrorCode_INVALID_UPDATE_VERSION, "%s-%d: partition epoch %d, current %d", it.Topic, it.Partition, it.PartitionEpoch, p.PartitionEpoch)
	case !contains(it.NewIsr, broker):
		return errs.New(pb.ErrorCode_INVALID_REQUEST, "%s-%d: the new ISR %v leaves out the leader", it.Topic, it.Partition, it.NewIsr)
	}
	for _, r := range it.NewIsr {
		if !p.IsReplica(r) {
			return errs.New(pb.ErrorCode_INVALID_REQUEST, "%s-%d: %d is not a replica", it.Topic, it.Partition, r)
		}
		if !p.InISR(r) && !img.IsLive(r) {
			return errs.New(pb.ErrorCode_INELIGIBLE_REPLICA, "%s-%d: broker %d is fenced and cannot join the ISR", it.Topic, it.Partition, r)
		}
	}
	return nil
}

// AllocateProducerIds commits the next block of ProducerIDBlockSize ids.
func (c *Controller) AllocateProducerIds(ctx context.Context, req *pb.AllocateProducerIdsRequest) (int64, int32, error) {
	if err := c.lockActive(); err != nil {
		return 0, 0, err
	}
	defer c.mu.Unlock()
	img := c.Q.FSM.Image()
	if b := img.Brokers[req.BrokerId]; b == nil || b.Epoch != req.BrokerEpoch {
		return 0, 0, errs.New(pb.ErrorCode_STALE_BROKER_EPOCH, "AllocateProducerIds from broker %d epoch %d does not match its registration", req.BrokerId, req.BrokerEpoch)
	}
	start := img.NextProducerID
	if _, err := c.proposeLocked(ctx, &pb.MetadataRecord{Record: &pb.MetadataRecord_ProducerIds{ProducerIds: &pb.ProducerIdsRecord{
		BrokerId: req.BrokerId, BrokerEpoch: req.BrokerEpoch, NextProducerId: start + metadata.ProducerIDBlockSize,
	}}}); err != nil {
		return 0, 0, err
	}
	return start, metadata.ProducerIDBlockSize, nil
}

// IncrementalAlterConfigs sets or deletes topic configs.
func (c *Controller) IncrementalAlterConfigs(ctx context.Context, req *pb.IncrementalAlterConfigsRequest) error {
	if err := c.lockActive(); err != nil {
		return err
	}
	defer c.mu.Unlock()
	r := req.GetResource()
	if r.GetType() == "broker" {
		return c.alterBrokerConfigsLocked(ctx, req)
	}
	if r.GetType() != "topic" {
		return errs.New(pb.ErrorCode_INVALID_REQUEST, "only topic and broker configs can be altered, not %q", r.GetType())
	}
	topic := c.Q.FSM.Image().Topic(r.Name)
	if topic == nil {
		return errs.New(pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "topic '%s' does not exist", r.Name)
	}
	var recs []*pb.MetadataRecord
	for k, v := range req.Set {
		if err := config.ValidateTopic(k, v); err != nil {
			return errs.New(pb.ErrorCode_INVALID_CONFIG, "%v", err)
		}
		recs = append(recs, &pb.MetadataRecord{Record: &pb.MetadataRecord_Config{Config: &pb.ConfigRecord{ResourceType: "topic", ResourceName: r.Name, Name: k, Value: config.Normalize(k, v)}}})
	}
	if err := config.ValidateTopicSet(config.Merged(topic.Configs, req.Set, req.Delete)); err != nil {
		return errs.New(pb.ErrorCode_INVALID_CONFIG, "%v", err)
	}
	for _, k := range req.Delete {
		recs = append(recs, &pb.MetadataRecord{Record: &pb.MetadataRecord_Config{Config: &pb.ConfigRecord{ResourceType: "topic", ResourceName: r.Name, Name: k, Delete: true}}})
	}
	if len(recs) == 0 {
		return nil
	}
	_, err := c.proposeLocked(ctx, recs...)
	if err == nil && req.Set[config.UncleanLeaderElection] == "true" {
		c.uncleanLocked(ctx)
	}
	return err
}

// Suspect lets gossip report a node as failed: once its lease is more
// than two heartbeat intervals stale it is fenced at once instead of
// waiting for the whole session timeout. Gossip often notices a kill -9
// before two heartbeats are missed, so Suspect waits until they would
// have been and looks again; a broker that heartbeated meanwhile is alive
// and left alone.
func (c *Controller) Suspect(ctx context.Context, id int32, heartbeatInterval time.Duration) {
	for attempt := 0; attempt < 2; attempt++ {
		if err := c.lockActive(); err != nil {
			return
		}
		img := c.Q.FSM.Image()
		b := img.Brokers[id]
		if b == nil || b.Fenced {
			c.mu.Unlock()
			return
		}
		age := c.clk.Now().Sub(c.leases[id])
		if age < 2*heartbeatInterval {
			c.mu.Unlock()
			if attempt > 0 {
				return
			}
			t := c.clk.NewTimer(2*heartbeatInterval - age + heartbeatInterval/4)
			select {
			case <-t.C():
			case <-ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		c.lg.Warn("gossip reports broker failed and its lease is stale; fencing early", "broker", id, "silentFor", age.Round(time.Millisecond))
		recs := append([]*pb.MetadataRecord{{Record: &pb.MetadataRecord_FenceBroker{FenceBroker: &pb.FenceBrokerRecord{NodeId: b.ID, BrokerEpoch: b.Epoch}}}}, FenceChanges(img, b.ID)...)
		if _, err := c.proposeLocked(ctx, recs...); err != nil {
			c.lg.Warn("fence broker", "broker", id, "err", err)
		} else {
			delete(c.heard, id)
		}
		c.mu.Unlock()
		return
	}
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

var _ = raft.Leader

// InternalTopicUpgrades are the config records that switch the internal
// topics of a cluster created before log compaction to
// cleanup.policy=compact: they were created with cleanup.policy unset
// (delete) and retention.ms=-1, so they grew forever. Every newly active
// controller looks, so the switch happens on the first election after the
// upgrade and is a no-op afterwards; a policy that already includes
// compact (compact, or compact,delete set by an operator) is left alone.
// Without compact the cleaner would never shrink them, and delete alone
// would lose committed offsets and transaction states.
func InternalTopicUpgrades(img *metadata.Image) []*pb.MetadataRecord {
	var out []*pb.MetadataRecord
	for _, name := range []string{metadata.InternalTransactionTopic, metadata.InternalOffsetsTopic} {
		t := img.Topic(name)
		if t == nil || hasPolicy(t.Configs[config.CleanupPolicy], "compact") {
			continue
		}
		out = append(out, &pb.MetadataRecord{Record: &pb.MetadataRecord_Config{Config: &pb.ConfigRecord{
			ResourceType: "topic", ResourceName: name, Name: config.CleanupPolicy, Value: "compact"}}})
	}
	return out
}

// hasPolicy reports whether a cleanup.policy list names policy.
func hasPolicy(list, policy string) bool {
	for _, p := range strings.Split(list, ",") {
		if strings.TrimSpace(p) == policy {
			return true
		}
	}
	return false
}
