package sim

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/coordinator/txn"
	"github.com/strand-io/strand/metadata"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testcluster"
)

// sampleEvery is how often the monitor looks at every node (virtual).
const sampleEvery = 50 * time.Millisecond

// maxViolations bounds what one run reports.
const maxViolations = 20

// The invariants the monitor checks on every sample, on every running
// node's replicas (internal topics included):
//
//   - one leader per epoch: no two nodes are leader of a partition at the
//     same leader epoch;
//   - a leader's high watermark never moves back while it leads at an
//     epoch;
//   - no acknowledged record lost: a leader's log end is never below the
//     highest high watermark any earlier leader of the partition
//     published (everything below a HW is on every ISR member, and only
//     an ISR member may be elected, so a new leader has it all);
//   - HW ≤ log end, and log start ≤ LSO ≤ HW, on every leader;
//   - a leader's last stable offset never moves back at an epoch (a
//     read_committed reader never sees the end of what it may read
//     retreat);
//   - a leader's epoch cache says its epoch starts no later than where
//     the leader began it (its log end when it became leader, which
//     followers must reach to join the ISR): a batch of an older epoch
//     appended past that start (a stale fetcher's, a producer's at the
//     old epoch) moves the epoch's start in the cache, which then answers
//     OffsetForLeaderEpoch with another end than the leader began at;
//   - no transaction complete before its markers are in the ISR: while a
//     leader still holds a marker it wrote at its epoch above its HW, the
//     coordinator of that producer does not have the transaction
//     CompleteCommit or CompleteAbort (checkMarkersBeforeComplete).
type monitor struct {
	c  *testcluster.Cluster
	tr *trace

	mu    sync.Mutex
	found []string
	// img: the freshest metadata image seen (image).
	img *metadata.Image

	// leaderOf: the node that led a partition at an epoch.
	leaderOf map[epochKey]int32
	// lastHW and lastLSO: a leader's last HW and LSO at an epoch, per
	// node incarnation.
	lastHW, lastLSO map[leadKey]int64
	// maxHW: the highest HW a leader of the partition published, and the
	// epoch it led at.
	maxHW map[partKey]hwMark
	// role: what each node last was for each partition (for the trace).
	role map[nodePart]string
	// shutDown: nodes whose controlled shutdown the controller confirmed
	// (graceful stop) and that have not started again, with the
	// registration epoch they shut down at; set by the simulator when the
	// stop returns, and by sample as soon as a stopping node's
	// confirmation is seen.
	shutDown map[int32]int64
	// fencedSeen: the broker epoch at which a shut-down node was seen
	// fenced in the metadata, and the metadata offset that showed it.
	fencedSeen map[int32]fenceSeen
	// stopping: nodes in a graceful stop, with the broker epoch they stop
	// at and whether the controller has confirmed their controlled
	// shutdown yet. A confirmed node counts as shut down from the moment
	// of the confirmation, not once its stop has closed everything
	// (which takes a while): a heartbeat the controller handles just
	// after the confirmation is what must not unfence it.
	stopping map[int32]stopWatch
}

type stopWatch struct {
	epoch     int64
	confirmed func() bool
}

// stopStarted: node id begins a graceful stop at broker epoch ep;
// confirmed reports whether the controller confirmed its shutdown.
func (m *monitor) stopStarted(id int32, ep int64, confirmed func() bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopping[id] = stopWatch{ep, confirmed}
}

// stopEnded: node id's graceful stop returned (the simulator then calls
// stopped when its shutdown was confirmed).
func (m *monitor) stopEnded(id int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.stopping, id)
}

// stopped records that node id finished a controlled shutdown at broker
// epoch ep (0: it started again).
func (m *monitor) stopped(id int32, ep int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ep == 0 {
		delete(m.shutDown, id)
	} else {
		m.shutDown[id] = ep
	}
}

type partKey struct {
	topic string
	p     int32
}
type epochKey struct {
	partKey
	epoch int32
}
type leadKey struct {
	n *node.Node
	epochKey
}
type nodePart struct {
	id int32
	partKey
}
type fenceSeen struct {
	epoch, offset int64
}

type hwMark struct {
	hw    int64
	epoch int32
	by    int32
}

func newMonitor(c *testcluster.Cluster, tr *trace) *monitor {
	return &monitor{c: c, tr: tr, leaderOf: map[epochKey]int32{}, lastHW: map[leadKey]int64{}, lastLSO: map[leadKey]int64{},
		maxHW: map[partKey]hwMark{}, role: map[nodePart]string{}, shutDown: map[int32]int64{}, fencedSeen: map[int32]fenceSeen{},
		stopping: map[int32]stopWatch{}}
}

func (m *monitor) run(ctx context.Context) {
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.tr.tick()
		m.sample()
	}
}

func (m *monitor) violate(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := fmt.Sprintf(format, args...)
	// A state that stays wrong is seen by every sample: say it once.
	if len(m.found) < maxViolations && !slices.Contains(m.found, v) {
		m.found = append(m.found, v)
		m.tr.add(0, "VIOLATION %s", v)
	}
}

func (m *monitor) violations() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.found...)
}

func (m *monitor) sample() {
	// A broker whose controlled shutdown completed stays fenced until it
	// registers again (a new broker epoch): nothing it sent before the
	// shutdown, a heartbeat say, may unfence it and make it a leader.
	m.mu.Lock()
	for id, w := range m.stopping {
		if _, ok := m.shutDown[id]; !ok && w.confirmed() {
			m.shutDown[id] = w.epoch
		}
	}
	down := make(map[int32]int64, len(m.shutDown))
	for id, ep := range m.shutDown {
		down[id] = ep
	}
	m.mu.Unlock()
	if len(down) > 0 {
		// The running nodes' metadata may not have the fence yet when
		// the shutdown returns, and once the node that had it stops, the
		// freshest image left may be older: the violation is an unfence
		// at the same broker epoch in metadata past the offset that
		// showed the fence.
		img := m.c.Image()
		for id, ep := range down {
			b := img.Brokers[id]
			if b == nil || b.Epoch != ep {
				continue
			}
			if b.Fenced {
				m.mu.Lock()
				if f := m.fencedSeen[id]; f.epoch != ep || f.offset > img.Offset {
					m.fencedSeen[id] = fenceSeen{ep, img.Offset}
				}
				m.mu.Unlock()
				continue
			}
			m.mu.Lock()
			f := m.fencedSeen[id]
			m.mu.Unlock()
			if f.epoch == ep && img.Offset > f.offset {
				m.violate("broker %d's controlled shutdown at broker epoch %d was confirmed and the broker fenced, and the metadata (offset %d) has it unfenced again at that epoch", id, ep, img.Offset)
			}
		}
	}
	for _, mem := range m.c.Members() {
		n := m.c.NodeOf(mem.ID)
		if n == nil || n.Parts == nil {
			continue
		}
		for _, p := range sortedParts(n) {
			m.check(mem.ID, n, p)
		}
	}
	m.checkMarkersBeforeComplete()
}

// checkMarkersBeforeComplete: a coordinator writes CompleteCommit or
// CompleteAbort only once every partition's leader answered that the
// marker is in the ISR (the leader's HW passed it). So a marker that a
// leader wrote at the epoch it still leads at, above its HW, belongs to a
// transaction its coordinator has not completed. The reads are ordered so
// that a transaction moving on between them is no violation: the markers
// above the HW first, then the coordinators' states, then the metadata,
// then each leader's HW and then its role again (the HW only grows while
// the leader leads at that epoch). Only a node that the metadata, read
// after the states, names leader at that epoch counts (a deposed leader
// that does not know it yet keeps a marker above a HW that no longer
// moves, while the new leader answered the coordinator), and only a
// coordinator leading its transaction log partition at the epoch of that
// metadata (a deposed one may still hold an older transaction's
// completion). The metadata is the freshest any node has had (m.image).
func (m *monitor) checkMarkersBeforeComplete() {
	type held struct {
		id    int32
		p     *broker.Partition
		epoch int32
		c     storage.CompletedTxn
	}
	var cands []held
	for _, mem := range m.c.Members() {
		n := m.c.NodeOf(mem.ID)
		if n == nil || n.Parts == nil || n.Repl == nil {
			continue
		}
		for _, p := range sortedParts(n) {
			l := p.Leadership()
			if l.Role != broker.RoleLeader {
				continue
			}
			epoch, start, ok := n.Repl.EpochStart(p.Key)
			if !ok || epoch != l.LeaderEpoch {
				continue
			}
			for _, c := range p.Log.UnreplicatedTxns() {
				if c.LastOffset >= start {
					cands = append(cands, held{mem.ID, p, epoch, c})
				}
			}
		}
	}
	if len(cands) == 0 {
		return
	}
	type loaded struct {
		id int32
		lp txn.LoadedPartition
	}
	var states []loaded
	for _, mem := range m.c.Members() {
		n := m.c.NodeOf(mem.ID)
		if n == nil || n.TxnCoord == nil {
			continue
		}
		for _, lp := range n.TxnCoord.Loaded() {
			states = append(states, loaded{mem.ID, lp})
		}
	}
	img := m.image()
	done := map[int64]txn.State{}
	for _, s := range states {
		tp := img.Partition(metadata.InternalTransactionTopic, s.lp.Partition)
		if tp == nil || tp.Leader != s.id || tp.LeaderEpoch != s.lp.CoordinatorEpoch {
			continue
		}
		for pid, st := range s.lp.States {
			if st == txn.CompleteCommit || st == txn.CompleteAbort {
				done[pid] = st
			}
		}
	}
	for _, h := range cands {
		st, ok := done[h.c.ProducerID]
		if !ok {
			continue
		}
		if tp := img.Partition(h.p.Key.Topic, h.p.Key.Partition); tp == nil || tp.Leader != h.id || tp.LeaderEpoch != h.epoch {
			continue
		}
		hw := h.p.HighWatermark()
		if l := h.p.Leadership(); l.Role != broker.RoleLeader || l.LeaderEpoch != h.epoch {
			continue
		}
		if hw <= h.c.LastOffset {
			m.violate("node %d %s: producer %d's marker at offset %d is not below the HW %d (leader epoch %d), and its coordinator has the transaction %s: it completed before the in-sync replicas had the marker",
				h.id, h.p.Key, h.c.ProducerID, h.c.LastOffset, hw, h.epoch, st)
		}
	}
}

// image is the freshest metadata any running node has, or the freshest
// the monitor saw before if that is newer (the node that had it may have
// stopped since): the metadata never goes back for the monitor.
func (m *monitor) image() *metadata.Image {
	img := m.c.Image()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.img != nil && m.img.Offset > img.Offset {
		return m.img
	}
	m.img = img
	return img
}

// sortedParts is n's replicas by topic and partition.
func sortedParts(n *node.Node) []*broker.Partition {
	parts := n.Parts.All()
	sort.Slice(parts, func(i, j int) bool {
		if parts[i].Key.Topic != parts[j].Key.Topic {
			return parts[i].Key.Topic < parts[j].Key.Topic
		}
		return parts[i].Key.Partition < parts[j].Key.Partition
	})
	return parts
}

func (m *monitor) check(id int32, n *node.Node, p *broker.Partition) {
	pk := partKey{p.Key.Topic, p.Key.Partition}
	// Each value is read on its own while the node runs, so the order of
	// the reads matters: a bound is read after what it bounds, as it only
	// grows (on a leader) while the reads go on. Log start, then LSO, then
	// HW, then log end.
	l := p.Leadership()
	ls := p.Log.LogStartOffset()
	lso := p.LastStableOffset()
	hw := p.HighWatermark()
	leo := p.Log.LogEndOffset()
	// A follower's log end and HW may move back (a truncation cuts the
	// log, then the HW), so these bounds are checked on leaders, where
	// read_committed readers are served.
	if l.Role == broker.RoleLeader && hw > leo {
		m.violate("node %d %s: high watermark %d past the log end %d", id, p.Key, hw, leo)
	}
	if l.Role == broker.RoleLeader && (lso > hw || lso < ls) {
		m.violate("node %d %s: last stable offset %d outside [log start %d, HW %d]", id, p.Key, lso, ls, hw)
	}
	np := nodePart{id, pk}
	if r := fmt.Sprintf("%s at epoch %d (leader %d)", l.Role, l.LeaderEpoch, l.Leader); m.role[np] != r {
		m.role[np] = r
		m.tr.add(id, "%s: %s, HW %d, log [%d, %d)", p.Key, r, hw, ls, leo)
	}
	if l.Role != broker.RoleLeader || l.Leader != id {
		return
	}
	ek := epochKey{pk, l.LeaderEpoch}
	if prev, ok := m.leaderOf[ek]; ok && prev != id {
		m.violate("%s: nodes %d and %d both led at epoch %d", p.Key, prev, id, l.LeaderEpoch)
	} else if !ok {
		m.leaderOf[ek] = id
	}
	lk := leadKey{n, ek}
	if prev, ok := m.lastHW[lk]; ok && hw < prev {
		m.violate("node %d %s: leader's HW moved back from %d to %d at epoch %d", id, p.Key, prev, hw, l.LeaderEpoch)
	}
	m.lastHW[lk] = hw
	if prev, ok := m.lastLSO[lk]; ok && lso < prev {
		m.violate("node %d %s: leader's last stable offset moved back from %d to %d at epoch %d", id, p.Key, prev, lso, l.LeaderEpoch)
	}
	m.lastLSO[lk] = lso
	m.checkEpochStart(id, n, p, l)
	mark := m.maxHW[pk]
	if l.LeaderEpoch > mark.epoch && leo < mark.hw {
		m.violate("%s: node %d leads at epoch %d with its log ending at %d, below the HW %d node %d published at epoch %d: acknowledged records lost",
			p.Key, id, l.LeaderEpoch, leo, mark.hw, mark.by, mark.epoch)
	}
	if hw > mark.hw {
		m.maxHW[pk] = hwMark{hw: hw, epoch: l.LeaderEpoch, by: id}
	}
}

// checkEpochStart compares where leader id began its epoch with where its
// epoch cache says the epoch starts. A replica that led the epoch before
// (a restart at the same leadership) keeps the earlier start in its cache,
// so only a later start, or none, is a violation; a log start moved past
// the epoch's start moves the cache's start with it.
func (m *monitor) checkEpochStart(id int32, n *node.Node, p *broker.Partition, l broker.Leadership) {
	if n.Repl == nil || p.Log.Failed() != nil {
		return
	}
	epoch, start, ok := n.Repl.EpochStart(p.Key)
	if !ok || epoch != l.LeaderEpoch {
		return
	}
	ls := p.Log.LogStartOffset()
	entries := p.Log.Epochs()
	// Judge only if the leadership did not change meanwhile (a follower's
	// truncation drops entries, after its role changed).
	if l2 := p.Leadership(); l2.Role != broker.RoleLeader || l2.LeaderEpoch != epoch {
		return
	}
	cached := int64(-1)
	for _, e := range entries {
		if e.Epoch == epoch {
			cached = e.StartOffset
		}
	}
	switch {
	case cached < 0:
		m.violate("node %d %s: leads at epoch %d, begun at offset %d, but its epoch cache has no entry for the epoch (%v): its log was cut at or below the epoch's start while it led, or a batch of an older epoch was appended past the start",
			id, p.Key, epoch, start, entries)
	case cached > max(start, ls):
		m.violate("node %d %s: leads at epoch %d, begun at offset %d, but its epoch cache starts the epoch at %d: a batch of an older epoch was appended past the epoch's start",
			id, p.Key, epoch, start, cached)
	}
}
