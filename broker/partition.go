// Package broker holds a node's partitions: their logs, the high watermark
// and last stable offset, and the waits built on them (the produce
// purgatory for acks=all, fetch long polls). Who leads and who is in the
// ISR is decided elsewhere (replication/, from controller metadata); this
// package only keeps what it is told and enforces it on appends.
package broker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/planted"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// Role is a replica's part in its partition.
type Role int

const (
	// RoleNone: not serving (offline partition, or metadata not applied yet).
	RoleNone Role = iota
	RoleLeader
	RoleFollower
)

func (r Role) String() string {
	switch r {
	case RoleLeader:
		return "leader"
	case RoleFollower:
		return "follower"
	}
	return "none"
}

// Leadership is a partition's state as the latest metadata says.
type Leadership struct {
	Role           Role
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
	// MaximalISR is the ISR plus members of an AlterPartition in flight: the
	// high watermark waits for all of them (KIP-497 style safety).
	MaximalISR []int32
}

// Partition is one local replica.
type Partition struct {
	Key storage.PartitionKey
	Log *storage.Log

	// topicID is the id of the topic this log belongs to ("" until
	// metadata names it for a log created before ids were recorded); a
	// read or append that names another id was meant for another topic of
	// the same name (see TopicID).
	topicID atomic.Pointer[string]

	// leaderMu is held for reading by appends and for writing by role
	// changes, so no append runs under a stale leader epoch.
	leaderMu sync.RWMutex
	lead     Leadership
	minISR   int

	mu       sync.Mutex
	hw       int64
	watchers map[chan struct{}]struct{}
	hwWait   chan struct{} // closed and replaced whenever hw or leadership changes
}

// NewPartition wraps an open log; hw is the checkpointed high watermark.
func NewPartition(key storage.PartitionKey, l *storage.Log, hw int64) *Partition {
	if leo := l.LogEndOffset(); hw > leo {
		hw = leo
	}
	if ls := l.LogStartOffset(); hw < ls {
		hw = ls
	}
	// Recovery replayed markers as completed but unreplicated transactions;
	// those below the checkpointed HW are replicated.
	l.OnHighWatermarkUpdated(hw)
	return &Partition{Key: key, Log: l, hw: hw, minISR: 1, lead: Leadership{Leader: -1, LeaderEpoch: -1}, watchers: map[chan struct{}]struct{}{}, hwWait: make(chan struct{})}
}

// TopicID is the id of the topic this log belongs to ("" when not known
// yet). It never changes once set: a topic deleted and created again
// under the same name gets a new Partition (and log).
func (p *Partition) TopicID() string {
	if id := p.topicID.Load(); id != nil {
		return *id
	}
	return ""
}

func (p *Partition) setTopicID(id string) { p.topicID.Store(&id) }

// CheckTopicID is Kafka's topic id check where a partition is read or
// written: a request that names a topic id ("" names none) and finds a
// log of another topic of that name (deleted and created again since the
// client, or the front door, looked the id up) is refused with code
// rather than served the other topic's records. A log whose id is not
// known yet passes, as in Kafka.
func (p *Partition) CheckTopicID(id string, code pb.ErrorCode) error {
	have := p.TopicID()
	if id == "" || have == "" || id == have {
		return nil
	}
	return errs.New(code, "%s belongs to topic id %s, not %s: the topic was deleted and created again under its name", p.Key, have, id)
}

// Leadership returns the current leadership state.
func (p *Partition) Leadership() Leadership {
	p.leaderMu.RLock()
	defer p.leaderMu.RUnlock()
	return p.lead
}

// MinISR is min.insync.replicas for the partition.
func (p *Partition) MinISR() int {
	p.leaderMu.RLock()
	defer p.leaderMu.RUnlock()
	return p.minISR
}

// SetMinISR sets min.insync.replicas.
func (p *Partition) SetMinISR(n int) {
	p.leaderMu.Lock()
	p.minISR = n
	p.leaderMu.Unlock()
}

// SetLeadership installs new leadership state. fn, if not nil, runs under the
// exclusive lock (no append in progress): followers truncate there.
func (p *Partition) SetLeadership(l Leadership, fn func() error) error {
	p.leaderMu.Lock()
	defer p.leaderMu.Unlock()
	if fn != nil {
		if err := fn(); err != nil {
			return err
		}
	}
	p.lead = l
	p.wake()
	return nil
}

// BecomeLeader installs l, this replica's leadership at a new leader
// epoch, and records the epoch's start at the log's end, under one
// exclusive hold of the lock. Every append, as leader or as follower,
// holds the lock for reading and stamps or checks the epoch of the role it
// finds, so no batch of an older epoch lands past the new epoch's start (a
// follower's fetcher may have read one before it was removed, a leader's
// producer may be mid-request). It returns that start offset, and the
// error of recording it (l is installed either way; the caller reports it).
func (p *Partition) BecomeLeader(l Leadership) (int64, error) {
	if planted.On(planted.EpochBeforeRoleChange) {
		// The epoch's start first, the role in a second hold of the lock:
		// an append of the old epoch may land in between.
		err := p.Log.AssignEpoch(l.LeaderEpoch)
		start := p.Log.LogEndOffset()
		_ = p.SetLeadership(l, nil)
		return start, err
	}
	p.leaderMu.Lock()
	defer p.leaderMu.Unlock()
	err := p.Log.AssignEpoch(l.LeaderEpoch)
	start := p.Log.LogEndOffset()
	p.lead = l
	p.wake()
	return start, err
}

// StartLeaderEpoch records epoch's start at the log's end ahead of
// BecomeLeader (which then finds it recorded), for a replica that does
// not lead yet. Under the exclusive lock it also ends a follower role of
// an older epoch (the role is none until BecomeLeader), so that no batch
// of that epoch is appended past the start, as BecomeLeader ensures.
func (p *Partition) StartLeaderEpoch(epoch int32) error {
	if planted.On(planted.EpochBeforeRoleChange) {
		// The epoch's start only: the old follower role goes on appending.
		return p.Log.AssignEpoch(epoch)
	}
	p.leaderMu.Lock()
	defer p.leaderMu.Unlock()
	if p.lead.Role == RoleFollower && p.lead.LeaderEpoch < epoch {
		p.lead.Role = RoleNone
		p.wake()
	}
	return p.Log.AssignEpoch(epoch)
}

// UpdateISR changes the ISR of a leader without a role change.
func (p *Partition) UpdateISR(isr, maximal []int32, partitionEpoch int32) {
	p.leaderMu.Lock()
	p.lead.ISR = append([]int32(nil), isr...)
	p.lead.MaximalISR = append([]int32(nil), maximal...)
	if partitionEpoch > p.lead.PartitionEpoch {
		p.lead.PartitionEpoch = partitionEpoch
	}
	p.leaderMu.Unlock()
	p.wake()
}

// HighWatermark is the offset below which every record is on every ISR member.
func (p *Partition) HighWatermark() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hw
}

// LastStableOffset is min(HW, first unstable offset): the first offset of
// the oldest transaction that is open or whose marker the HW has not passed
// yet (Kafka's unreplicated transactions), so a read_committed reader never
// passes a transaction whose outcome a leader change could still lose.
//
// The first unstable offset is clamped to the log start (Kafka's
// maybeIncrementFirstUnstableOffset): DeleteRecords may move the log start
// past the first offset of a transaction still open, and an LSO below the
// log start would make ListOffsets(LATEST, read_committed) answer less than
// EARLIEST, a fetch carry an LSO below its log start, and lag go negative.
// So the LSO is min(HW, max(first unstable, log start)).
func (p *Partition) LastStableOffset() int64 {
	hw := p.HighWatermark()
	if fu, ok := p.Log.FirstUnstableOffset(); ok && fu < hw {
		return min(hw, max(fu, p.Log.LogStartOffset()))
	}
	return hw
}

// SetHighWatermark moves the HW (it never passes the log end). Leaders only
// move it forward; followers take the leader's HW capped at their log end.
//
// The log's producer state hears hw first, on every call: completed
// transactions whose marker is below it stop holding back the last stable
// offset. Doing that before the HW is published means whoever reads a HW
// finds the last stable offset already released up to it (a read_committed
// long poll woken by the HW, a marker writer waiting for it). Releasing
// before publishing is safe: hw says the ISR has those markers, and the LSO
// never passes the published HW anyway. A call that leaves the HW where it
// was still lets a state rebuilt after a truncation forget what it
// replayed below the HW.
func (p *Partition) SetHighWatermark(hw int64, allowBackwards bool) bool {
	if leo := p.Log.LogEndOffset(); hw > leo {
		hw = leo
	}
	// Without p.mu: the log's lock can be held across an fsync. Racing
	// calls may reach the log out of order; the producer state only
	// forgets below the HW it hears, so a lower value heard late changes
	// nothing.
	released := p.Log.OnHighWatermarkUpdated(hw)
	p.mu.Lock()
	changed := hw > p.hw || (allowBackwards && hw != p.hw)
	if changed {
		p.hw = hw
	}
	p.mu.Unlock()
	if changed || released {
		p.wake()
	}
	return changed
}

// Watch registers ch to receive a non-blocking send whenever the log grows,
// the HW moves or leadership changes (fetch long polls).
func (p *Partition) Watch(ch chan struct{}) {
	p.mu.Lock()
	p.watchers[ch] = struct{}{}
	p.mu.Unlock()
}

// Unwatch removes ch.
func (p *Partition) Unwatch(ch chan struct{}) {
	p.mu.Lock()
	delete(p.watchers, ch)
	p.mu.Unlock()
}

// Wake tells watchers and waiters that something changed.
func (p *Partition) Wake() { p.wake() }

func (p *Partition) wake() {
	p.mu.Lock()
	close(p.hwWait)
	p.hwWait = make(chan struct{})
	p.notifyWatchersLocked()
	p.mu.Unlock()
}

// appended tells fetch watchers that the log grew. It leaves the HW
// waiters asleep: an append moves neither the HW nor the leadership, and
// waking every acks=all request in flight on each append cost a goroutine
// round trip apiece for nothing.
func (p *Partition) appended() {
	p.mu.Lock()
	p.notifyWatchersLocked()
	p.mu.Unlock()
}

func (p *Partition) notifyWatchersLocked() {
	for ch := range p.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// WaitForHW blocks until the HW passes offset (the produce purgatory for
// acks=all), the leadership epoch changes, or ctx ends. It returns
// NOT_LEADER_OR_FOLLOWER if this replica stops being the leader of epoch
// (the write's fate is then unknown to this broker), and REQUEST_TIMED_OUT
// on ctx expiry.
func (p *Partition) WaitForHW(ctx context.Context, offset int64, epoch int32) error {
	for {
		p.mu.Lock()
		hw, ch := p.hw, p.hwWait
		p.mu.Unlock()
		// The leadership is checked after the HW is read, and before the HW
		// is believed: once this replica has stopped leading epoch, its HW
		// is a follower's, and after a truncation the offset may hold
		// another record that HW covers. Epochs never come back, so a
		// leadership still at epoch here was so when hw was read.
		l := p.Leadership()
		if l.Role != RoleLeader || l.LeaderEpoch != epoch {
			return errs.New(pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, "%s: leadership moved (epoch %d -> %d, leader %d) before offset %d was acknowledged", p.Key, epoch, l.LeaderEpoch, l.Leader, offset)
		}
		if hw > offset {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return errs.New(pb.ErrorCode_REQUEST_TIMED_OUT, "%s: offset %d not replicated to the ISR %v before the request timed out (HW %d)", p.Key, offset, l.ISR, hw)
		}
	}
}

// AppendAsLeader appends client batches if this replica leads. It checks
// min.insync.replicas first for acks=all. It does not check transaction
// verification (AppendVerified, AppendCoordinator do).
func (p *Partition) AppendAsLeader(batches []byte, requiredAcks int32) (storage.AppendResult, int32, error) {
	return p.appendAsLeader(batches, requiredAcks, 0, nil, -1)
}

// AppendVerified is AppendAsLeader for a client's produce: a
// transactional batch must present guard, the verification
// StartTxnVerification made (storage.Log.AppendVerifiedDeferred).
func (p *Partition) AppendVerified(batches []byte, requiredAcks int32, guard *storage.VerificationGuard) (storage.AppendResult, int32, error) {
	return p.appendAsLeader(batches, requiredAcks, storage.OriginClient, guard, -1)
}

// AppendCoordinator is AppendVerified for the group coordinator's own
// writes (storage.Log.AppendCoordinatorDeferred): a transactional offset
// write must present guard; its sequences are not held to the
// verification's lowest one. leaderEpoch is the leadership the
// coordinator loaded the partition's state at: under another one (the
// partition was led again since, and a newer load owns it) the write is
// refused FENCED_LEADER_EPOCH; -1 does not check.
func (p *Partition) AppendCoordinator(batches []byte, requiredAcks int32, guard *storage.VerificationGuard, leaderEpoch int32) (storage.AppendResult, int32, error) {
	return p.appendAsLeader(batches, requiredAcks, storage.OriginCoordinator, guard, leaderEpoch)
}

func (p *Partition) appendAsLeader(batches []byte, requiredAcks int32, origin storage.AppendOrigin, guard *storage.VerificationGuard, leaderEpoch int32) (storage.AppendResult, int32, error) {
	p.leaderMu.RLock()
	defer p.leaderMu.RUnlock()
	l := p.lead
	if l.Role != RoleLeader {
		return storage.AppendResult{}, l.LeaderEpoch, p.notLeader(l)
	}
	if leaderEpoch >= 0 && leaderEpoch != l.LeaderEpoch {
		return storage.AppendResult{}, l.LeaderEpoch, errs.New(pb.ErrorCode_FENCED_LEADER_EPOCH,
			"%s: the write is for leader epoch %d, the partition is led at epoch %d", p.Key, leaderEpoch, l.LeaderEpoch)
	}
	if requiredAcks == -1 && len(l.ISR) < p.minISR {
		return storage.AppendResult{}, l.LeaderEpoch, errs.New(pb.ErrorCode_NOT_ENOUGH_REPLICAS,
			"%s: the ISR %v has %d replicas, fewer than min.insync.replicas=%d", p.Key, l.ISR, len(l.ISR), p.minISR)
	}
	var res storage.AppendResult
	var err error
	switch origin {
	case storage.OriginClient:
		res, err = p.Log.AppendVerifiedDeferred(batches, l.LeaderEpoch, guard)
	case storage.OriginCoordinator:
		res, err = p.Log.AppendCoordinatorDeferred(batches, l.LeaderEpoch, guard)
	default:
		res, err = p.Log.AppendAsLeaderDeferred(batches, l.LeaderEpoch)
	}
	if err == nil && !res.Duplicate {
		p.appended()
	}
	return res, l.LeaderEpoch, err
}

// StartTxnVerification starts the verification of a producer's
// transactional batch on this leader (storage.Log.StartTxnVerification),
// or answers NOT_LEADER_OR_FOLLOWER when this replica does not lead.
func (p *Partition) StartTxnVerification(pid int64, seq int32, epoch int16, epochBump bool) (*storage.VerificationGuard, error) {
	p.leaderMu.RLock()
	defer p.leaderMu.RUnlock()
	if l := p.lead; l.Role != RoleLeader {
		return nil, p.notLeader(l)
	}
	return p.Log.StartTxnVerification(pid, seq, epoch, epochBump)
}

// WaitDurable blocks until offset is fsynced on this leader (an append
// whose fsync the log deferred, AppendResult.FlushDeferred). It returns
// the fsync's KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER if leadership
// moves first, and REQUEST_TIMED_OUT at ctx's end.
func (p *Partition) WaitDurable(ctx context.Context, offset int64, epoch int32) error {
	for {
		p.mu.Lock()
		ch := p.hwWait // leadership changes close it
		p.mu.Unlock()
		if l := p.Leadership(); l.Role != RoleLeader || l.LeaderEpoch != epoch {
			return errs.New(pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, "%s: leadership moved (epoch %d -> %d, leader %d) before offset %d was on disk", p.Key, epoch, l.LeaderEpoch, l.Leader, offset)
		}
		done, err := p.Log.WaitDurable(ctx, offset, ch)
		switch {
		case done:
			// Still the same leadership: a truncation and new appends
			// could otherwise have moved the recovery point past offset.
			if l := p.Leadership(); l.Role != RoleLeader || l.LeaderEpoch != epoch {
				continue
			}
			return nil
		case err != nil && ctx.Err() != nil:
			return errs.New(pb.ErrorCode_REQUEST_TIMED_OUT, "%s: offset %d not fsynced before the request timed out", p.Key, offset)
		case err != nil:
			return err
		}
	}
}

// AppendMarker writes a transaction marker if this replica leads.
func (p *Partition) AppendMarker(pid int64, epoch int16, coordinatorEpoch int32, typ record.ControlType) (storage.MarkerResult, int32, error) {
	return p.AppendMarkerVersion(pid, epoch, coordinatorEpoch, typ, 2)
}

// AppendMarkerVersion writes a marker under a transaction version's epoch rule.
func (p *Partition) AppendMarkerVersion(pid int64, epoch int16, coordinatorEpoch int32, typ record.ControlType, txnVersion int32) (storage.MarkerResult, int32, error) {
	p.leaderMu.RLock()
	defer p.leaderMu.RUnlock()
	l := p.lead
	if l.Role != RoleLeader {
		return storage.MarkerResult{}, l.LeaderEpoch, p.notLeader(l)
	}
	res, err := p.Log.AppendMarkerVersion(pid, epoch, coordinatorEpoch, typ, l.LeaderEpoch, txnVersion)
	if err == nil && !res.AlreadyDone {
		p.appended()
	}
	return res, l.LeaderEpoch, err
}

// AbortHanging is the administrator's abort of a hanging transaction
// (storage.Log.AbortHanging) if this replica leads.
func (p *Partition) AbortHanging(pid int64, epoch int16, startOffset int64, minOpen time.Duration) (storage.MarkerResult, int32, error) {
	p.leaderMu.RLock()
	defer p.leaderMu.RUnlock()
	l := p.lead
	if l.Role != RoleLeader {
		return storage.MarkerResult{}, l.LeaderEpoch, p.notLeader(l)
	}
	res, err := p.Log.AbortHanging(pid, epoch, startOffset, minOpen, l.LeaderEpoch)
	if err == nil {
		p.appended()
	}
	return res, l.LeaderEpoch, err
}

// AppendAsFollower appends replicated batches if this replica follows.
func (p *Partition) AppendAsFollower(batches []byte, leaderEpoch int32) (storage.AppendResult, error) {
	p.leaderMu.RLock()
	defer p.leaderMu.RUnlock()
	l := p.lead
	if l.Role != RoleFollower || l.LeaderEpoch != leaderEpoch {
		return storage.AppendResult{}, errs.New(pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, "%s: no longer following epoch %d", p.Key, leaderEpoch)
	}
	res, err := p.Log.AppendAsFollower(batches)
	if err == nil {
		p.appended()
	}
	return res, err
}

// AsFollower runs fn, a follower's change to its log or high watermark
// other than an append (a truncation by leader epoch, a restart at the
// leader's log start, the leader's HW or log start followed), if this
// replica still follows leaderEpoch, holding the leadership lock for
// reading as an append does; otherwise it runs nothing and returns
// NOT_LEADER_OR_FOLLOWER. A fetcher removed while it waited for the
// leader's answer cannot then cut or move the log of the role that
// replaced it (Kafka's fetcher removal waits for such work instead).
func (p *Partition) AsFollower(leaderEpoch int32, fn func() error) error {
	if planted.On(planted.RemovedFetcherTruncates) {
		return fn() // whatever role this replica has taken since
	}
	p.leaderMu.RLock()
	defer p.leaderMu.RUnlock()
	if l := p.lead; l.Role != RoleFollower || l.LeaderEpoch != leaderEpoch {
		return errs.New(pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, "%s: no longer following epoch %d", p.Key, leaderEpoch)
	}
	return fn()
}

func (p *Partition) notLeader(l Leadership) error {
	return errs.New(pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, "%s: this broker is not the leader (leader %d, epoch %d)", p.Key, l.Leader, l.LeaderEpoch)
}

// CheckLeaderEpoch applies KIP-320 fencing to a fetch or ListOffsets that
// names the leader epoch it believes in (-1 skips the check).
func CheckLeaderEpoch(key storage.PartitionKey, current int32, requested int32) error {
	switch {
	case requested < 0 || requested == current:
		return nil
	case requested < current:
		return errs.New(pb.ErrorCode_FENCED_LEADER_EPOCH, "%s: epoch %d is older than the current leader epoch %d", key, requested, current)
	default:
		return errs.New(pb.ErrorCode_UNKNOWN_LEADER_EPOCH, "%s: epoch %d is newer than this broker's %d", key, requested, current)
	}
}
