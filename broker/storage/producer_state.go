package storage

import (
	"math"
	"sort"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/planted"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// NumBatchesToRetain is how many of a producer's most recent batches a
// partition remembers for duplicate detection (Kafka's
// NUM_BATCHES_TO_RETAIN). A batch re-sent after this many newer ones is no
// longer recognised and is refused as OUT_OF_ORDER_SEQUENCE_NUMBER.
const NumBatchesToRetain = 5

// NoCoordinatorEpoch is the coordinator epoch of a producer no marker has
// reached yet.
const NoCoordinatorEpoch = int32(-1)

// BatchMetadata describes one retained batch of a producer.
type BatchMetadata struct {
	FirstSeq     int32
	LastSeq      int32
	FirstOffset  int64
	LastOffset   int64
	MaxTimestamp int64
}

// ProducerEntry is a copy of one producer's state in a partition.
// Batches holds the retained batches at the current epoch, oldest first.
// CoordinatorEpoch is -1 until a marker arrives; CurrentTxnFirstOffset is
// -1 when no transaction is open.
type ProducerEntry struct {
	ProducerID            int64
	Epoch                 int16
	Batches               []BatchMetadata
	CoordinatorEpoch      int32
	CurrentTxnFirstOffset int64
	LastTimestamp         int64
}

// LastSequence is the last sequence appended at the current epoch, or -1
// when no batch has been appended since the epoch started.
func (e *ProducerEntry) LastSequence() int32 {
	if len(e.Batches) == 0 {
		return record.NoSequence
	}
	return e.Batches[len(e.Batches)-1].LastSeq
}

// LastOffset is the last offset of the newest retained batch, or -1.
func (e *ProducerEntry) LastOffset() int64 {
	if len(e.Batches) == 0 {
		return -1
	}
	return e.Batches[len(e.Batches)-1].LastOffset
}

// OngoingTxn is an open transaction in a partition: its producer and the
// offset of its first batch (which holds back the last stable offset).
type OngoingTxn struct {
	ProducerID       int64
	Epoch            int16
	CoordinatorEpoch int32
	FirstOffset      int64
	LastTimestamp    int64
}

// CompletedTxn is a transaction a COMMIT or ABORT marker ended:
// FirstOffset is its first batch, LastOffset the marker's own offset.
type CompletedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
	Aborted     bool
}

// producerState is the mutable per-producer record. batches[:n] are the
// retained batches, oldest first.
type producerState struct {
	epoch         int16
	batches       [NumBatchesToRetain]BatchMetadata
	n             int
	coordEpoch    int32
	txnFirst      int64
	lastTimestamp int64
}

func newProducerState(epoch int16) *producerState {
	return &producerState{epoch: epoch, coordEpoch: NoCoordinatorEpoch, txnFirst: -1, lastTimestamp: -1}
}

func (s *producerState) lastSeq() int32 {
	if s.n == 0 {
		return record.NoSequence
	}
	return s.batches[s.n-1].LastSeq
}

// setEpoch moves to epoch, forgetting the retained batches when it changes
// (the first batch of a new epoch starts at sequence 0).
func (s *producerState) setEpoch(epoch int16) {
	if s.epoch != epoch {
		s.epoch = epoch
		s.n = 0
		s.batches = [NumBatchesToRetain]BatchMetadata{}
	}
}

func (s *producerState) addBatch(b BatchMetadata) {
	if s.n == NumBatchesToRetain {
		copy(s.batches[:], s.batches[1:])
		s.n--
	}
	s.batches[s.n] = b
	s.n++
}

func (s *producerState) entry(pid int64) ProducerEntry {
	e := ProducerEntry{
		ProducerID:            pid,
		Epoch:                 s.epoch,
		CoordinatorEpoch:      s.coordEpoch,
		CurrentTxnFirstOffset: s.txnFirst,
		LastTimestamp:         s.lastTimestamp,
	}
	if s.n > 0 {
		e.Batches = append([]BatchMetadata(nil), s.batches[:s.n]...)
	}
	return e
}

// ongoingRef is one element of the ongoing-transaction index.
type ongoingRef struct {
	firstOffset int64
	pid         int64
}

// ProducerStateManager is one partition's producer-state map: per producer
// id the epoch, the last NumBatchesToRetain batches, the coordinator epoch,
// the open transaction's first offset and the last timestamp; plus the
// index of open transactions and the list of completed transactions whose
// marker the high watermark has not passed yet, which together give the
// first unstable offset; and each producer's pending transaction
// verification (verification.go).
//
// It is pure and synchronous: no goroutines, no I/O (except the snapshot
// file functions), time and the high watermark passed in. It is not safe
// for concurrent use: the owning Log serialises writers, and the read-only
// methods (CheckData, CheckVerifiedData, CheckCoordinatorData,
// CheckMarker, FirstUnstableOffset, FirstUndecidedOffset, Producers, Get,
// Len, OngoingTxns, UnreplicatedTxns, Verification, hasReplicatedTxns,
// MapEndOffset, WriteSnapshot) never modify it, so they may run together
// under a read lock.
type ProducerStateManager struct {
	producers map[int64]*producerState
	// ongoing holds the open transactions sorted by (firstOffset, pid).
	ongoing []ongoingRef
	// unreplicated holds the transactions a marker completed whose marker
	// offset (LastOffset) is not below the high watermark the owner last
	// reported (OnHighWatermarkUpdated), sorted by (FirstOffset,
	// ProducerID). They still hold back the first unstable offset: until
	// the ISR has the marker, a leader change can lose it and leave the
	// transaction open again. Snapshots do not keep them (as in Kafka).
	unreplicated []CompletedTxn
	mapEndOff    int64
	// verifications holds each producer's pending transaction
	// verification (verification.go); no part of snapshots.
	verifications map[int64]*verification
	// verifyOrder lists verifications in the order they were made, for
	// evicting the oldest at the bound (verification.go); an entry whose
	// verification has since gone or been replaced is skipped then.
	verifyOrder verifyQueue
}

// NewProducerStateManager returns an empty map whose state is built up to
// offset 0.
func NewProducerStateManager() *ProducerStateManager {
	return &ProducerStateManager{producers: make(map[int64]*producerState)}
}

// CheckData validates a data batch a client sent to the leader, without
// changing anything. It returns (dup, nil) when the batch repeats one of
// the producer's retained batches (same epoch, first and last sequence):
// the caller appends nothing and answers NONE with dup's offsets. It
// returns (nil, nil) when the batch may be appended, and otherwise:
//
//   - INVALID_PRODUCER_EPOCH: the batch's epoch is older than the stored one;
//   - OUT_OF_ORDER_SEQUENCE_NUMBER: a newer epoch not starting at 0, or at
//     the same epoch a baseSequence other than lastSeq+1 (wrapping from
//     MaxInt32 to 0; lastSeq is -1 when the epoch has no batch yet);
//   - INVALID_TXN_STATE: a non-transactional batch from a producer with an
//     open transaction in this partition.
//
// A producer id the partition has no state for is accepted at any
// sequence, as Kafka accepts it when there is no current producer epoch
// (KIP-360): its state may have been removed by retention (the log start
// moved past its batches) or by producer.id.expiration.ms while the
// producer went on, and refusing it would fail a healthy producer. Its
// batch starts the producer's state, so the next one must follow it.
//
// Batches without a producer id are never checked. CheckData does not
// check transaction verification: CheckVerifiedData does.
func (m *ProducerStateManager) CheckData(h *record.Header) (*BatchMetadata, error) {
	return m.checkData(h, leaderCheck{})
}

// CheckVerifiedData is CheckData for a leader that verifies transactions
// with their coordinator (every client produce): after the duplicate
// check, a transactional batch that does not continue an open transaction
// must present guard, the producer's current verification, and a batch
// above a pending verification's lowest sequence is refused
// (checkVerified).
func (m *ProducerStateManager) CheckVerifiedData(h *record.Header, guard *VerificationGuard) (*BatchMetadata, error) {
	return m.checkData(h, leaderCheck{origin: OriginClient, guard: guard})
}

// CheckCoordinatorData is CheckVerifiedData for the group coordinator's
// own transactional offset writes (OriginCoordinator): the guard is
// checked, a pending verification's lowest sequence is not.
func (m *ProducerStateManager) CheckCoordinatorData(h *record.Header, guard *VerificationGuard) (*BatchMetadata, error) {
	return m.checkData(h, leaderCheck{origin: OriginCoordinator, guard: guard})
}

func (m *ProducerStateManager) checkData(h *record.Header, check leaderCheck) (*BatchMetadata, error) {
	if h.ProducerID < 0 {
		return nil, nil
	}
	s, ok := m.producers[h.ProducerID]
	if ok && h.ProducerEpoch == s.epoch {
		first, last := h.BaseSequence, h.LastSequence()
		for i := 0; i < s.n; i++ {
			if b := s.batches[i]; b.FirstSeq == first && b.LastSeq == last {
				return &b, nil
			}
		}
	}
	if check.origin != 0 {
		if err := m.checkVerified(h, check); err != nil {
			return nil, err
		}
	}
	if !ok {
		if planted.On(planted.UnknownProducerSequenceRefused) && h.BaseSequence != 0 {
			return nil, errs.New(pb.ErrorCode_UNKNOWN_PRODUCER_ID,
				"no state for producerId=%d (idle producers are forgotten after producer.id.expiration.ms) and baseSequence=%d is not 0",
				h.ProducerID, h.BaseSequence)
		} else {
			return nil, nil
		}
	}
	switch {
	case h.ProducerEpoch < s.epoch:
		return nil, errs.New(pb.ErrorCode_INVALID_PRODUCER_EPOCH,
			"producerId=%d: batch epoch %d is older than the current epoch %d",
			h.ProducerID, h.ProducerEpoch, s.epoch)
	case h.ProducerEpoch > s.epoch:
		if h.BaseSequence != 0 {
			return nil, errs.New(pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER,
				"producerId=%d: the first batch of new epoch %d (current %d) must have baseSequence=0, received %d",
				h.ProducerID, h.ProducerEpoch, s.epoch, h.BaseSequence)
		}
	default:
		if want := record.IncrementSequence(s.lastSeq(), 1); h.BaseSequence != want {
			return nil, errs.New(pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER,
				"producerId=%d epoch %d: expected sequence %d, received baseSequence=%d",
				h.ProducerID, h.ProducerEpoch, want, h.BaseSequence)
		}
	}
	if !h.IsTransactional() && s.txnFirst >= 0 {
		return nil, errs.New(pb.ErrorCode_INVALID_TXN_STATE,
			"producerId=%d has a transaction open since offset %d; a non-transactional batch cannot be appended inside it",
			h.ProducerID, s.txnFirst)
	}
	return nil, nil
}

// ApplyData records an appended data batch whose BaseOffset is its real
// offset, whatever its origin (leader append, follower replication,
// recovery replay); it validates nothing. An epoch change forgets the
// retained batches; the batch becomes the newest retained one (the oldest
// is dropped past NumBatchesToRetain); a transactional batch of a producer
// with no open transaction opens one at h.BaseOffset. Control batches and
// batches without a producer id change no producer; every batch moves
// MapEndOffset to at least h.NextOffset().
func (m *ProducerStateManager) ApplyData(h *record.Header) {
	m.advanceMapEnd(h.NextOffset())
	if h.ProducerID < 0 || h.IsControl() {
		return
	}
	s, ok := m.producers[h.ProducerID]
	if !ok {
		s = newProducerState(h.ProducerEpoch)
		m.producers[h.ProducerID] = s
	}
	s.setEpoch(h.ProducerEpoch)
	s.addBatch(BatchMetadata{
		FirstSeq:     h.BaseSequence,
		LastSeq:      h.LastSequence(),
		FirstOffset:  h.BaseOffset,
		LastOffset:   h.LastOffset(),
		MaxTimestamp: h.MaxTimestamp,
	})
	s.lastTimestamp = h.MaxTimestamp
	if h.IsTransactional() {
		m.clearVerification(h.ProducerID, false, h.ProducerEpoch, 0)
		if s.txnFirst < 0 {
			s.txnFirst = h.BaseOffset
			m.addOngoing(h.ProducerID, h.BaseOffset)
		}
	}
}

// MarkerVerdict is what a marker does to a partition, as CheckMarker and
// CheckLegacyMarker find it.
type MarkerVerdict int

const (
	// MarkerEnds: the marker ends the producer's open transaction; the
	// caller appends it.
	MarkerEnds MarkerVerdict = iota
	// MarkerRepeat: the marker repeats one this partition already applied
	// (a coordinator re-sending after a failover, or after the first
	// attempt's answer was lost); the caller appends nothing and answers
	// success once the ISR has the log end.
	MarkerRepeat
	// MarkerNothingToEnd: the producer has no open transaction here (no
	// state at all, or none open at a newer epoch), so the marker has
	// nothing to end; the caller appends nothing and answers as for a
	// repeat. A coordinator sends one when a batch of the transaction
	// never reached this partition (its append failed after the partition
	// joined the transaction); a marker never creates or moves producer
	// state on its own, so one that did not come from the producer's
	// coordinator cannot fence the producer out.
	MarkerNothingToEnd
)

func (v MarkerVerdict) String() string {
	switch v {
	case MarkerEnds:
		return "ends the open transaction"
	case MarkerRepeat:
		return "repeats the last marker"
	case MarkerNothingToEnd:
		return "nothing to end"
	}
	return "MarkerVerdict(?)"
}

// CheckMarker validates a COMMIT/ABORT marker the coordinator asks the
// leader to write (transaction version 2: markerEpoch = data epoch + 1),
// without changing anything:
//
//   - a producer with no state here: MarkerNothingToEnd;
//   - markerEpoch older than the stored epoch: INVALID_PRODUCER_EPOCH;
//   - coordinatorEpoch older than the stored coordinator epoch:
//     TRANSACTION_COORDINATOR_FENCED;
//   - no open transaction: MarkerRepeat at the stored epoch (the marker
//     this partition applied last), MarkerNothingToEnd at a newer one;
//   - an open transaction: MarkerEnds at exactly its epoch + 1, and
//     INVALID_PRODUCER_EPOCH otherwise (the same epoch is a version 1
//     marker; more than one above skips the epoch its coordinator bumped
//     to, which only a marker from elsewhere does).
func (m *ProducerStateManager) CheckMarker(pid int64, markerEpoch int16, coordinatorEpoch int32) (MarkerVerdict, error) {
	s, ok := m.producers[pid]
	if !ok {
		return MarkerNothingToEnd, nil
	}
	if err := checkMarkerFencing(pid, s, markerEpoch, coordinatorEpoch); err != nil {
		return 0, err
	}
	switch {
	case s.txnFirst < 0 && markerEpoch == s.epoch:
		return MarkerRepeat, nil
	case s.txnFirst < 0:
		return MarkerNothingToEnd, nil
	case markerEpoch == s.epoch:
		return 0, errs.New(pb.ErrorCode_INVALID_PRODUCER_EPOCH,
			"producerId=%d: marker epoch %d equals the epoch of the transaction open since offset %d; a transaction version 2 marker must carry the bumped epoch",
			pid, markerEpoch, s.txnFirst)
	case int32(markerEpoch) != int32(s.epoch)+1:
		return 0, errs.New(pb.ErrorCode_INVALID_PRODUCER_EPOCH,
			"producerId=%d: marker epoch %d is not the epoch %d of the transaction open since offset %d plus one, as a transaction version 2 coordinator bumps it",
			pid, markerEpoch, s.epoch, s.txnFirst)
	}
	return MarkerEnds, nil
}

// checkMarkerFencing refuses a marker from an older producer epoch or an
// older coordinator (both marker rules share it).
func checkMarkerFencing(pid int64, s *producerState, markerEpoch int16, coordinatorEpoch int32) error {
	if markerEpoch < s.epoch {
		return errs.New(pb.ErrorCode_INVALID_PRODUCER_EPOCH,
			"producerId=%d: marker epoch %d is older than the current epoch %d", pid, markerEpoch, s.epoch)
	}
	if coordinatorEpoch < s.coordEpoch {
		return errs.New(pb.ErrorCode_TRANSACTION_COORDINATOR_FENCED,
			"producerId=%d: marker from coordinator epoch %d, but coordinator epoch %d already wrote here",
			pid, coordinatorEpoch, s.coordEpoch)
	}
	return nil
}

// CheckLegacyMarker is CheckMarker for markers of transaction versions
// before 2, which carry the producer's epoch unbumped (a fence's abort
// carries the bumped one): with a transaction open, an epoch at or above
// the stored one ends it; with none, there is nothing to end (a repeat at
// the stored epoch).
func (m *ProducerStateManager) CheckLegacyMarker(pid int64, markerEpoch int16, coordinatorEpoch int32) (MarkerVerdict, error) {
	s, ok := m.producers[pid]
	if !ok {
		return MarkerNothingToEnd, nil
	}
	if err := checkMarkerFencing(pid, s, markerEpoch, coordinatorEpoch); err != nil {
		return 0, err
	}
	switch {
	case s.txnFirst < 0 && markerEpoch == s.epoch:
		return MarkerRepeat, nil
	case s.txnFirst < 0:
		return MarkerNothingToEnd, nil
	}
	return MarkerEnds, nil
}

// txnOpen reports whether pid has a transaction open here.
func (m *ProducerStateManager) txnOpen(pid int64) bool {
	s, ok := m.producers[pid]
	return ok && s.txnFirst >= 0
}

// ApplyMarker records a marker written at markerOffset, whatever its
// origin; it validates nothing. The producer (created if unknown) moves to
// markerEpoch, forgetting its retained batches when the epoch changes so
// the next transaction at that epoch starts at sequence 0, and takes
// coordinatorEpoch and timestamp. If a transaction was open it is ended and
// returned (Aborted for an ABORT marker, LastOffset = markerOffset), and it
// joins the unreplicated transactions until OnHighWatermarkUpdated reports
// a high watermark above markerOffset; otherwise ApplyMarker returns nil.
// MapEndOffset moves to at least markerOffset+1.
func (m *ProducerStateManager) ApplyMarker(pid int64, markerEpoch int16, coordinatorEpoch int32, typ record.ControlType, markerOffset int64, timestamp int64) *CompletedTxn {
	return m.applyMarker(pid, markerEpoch, coordinatorEpoch, typ, markerOffset, timestamp, 0)
}

// applyMarker is ApplyMarker for a marker written here under transaction
// version txnVersion (0: not known), which decides whether it ends a
// pending verification at its epoch (clearVerification).
func (m *ProducerStateManager) applyMarker(pid int64, markerEpoch int16, coordinatorEpoch int32, typ record.ControlType, markerOffset int64, timestamp int64, txnVersion int32) *CompletedTxn {
	m.advanceMapEnd(markerOffset + 1)
	m.clearVerification(pid, true, markerEpoch, txnVersion)
	s, ok := m.producers[pid]
	if !ok {
		s = newProducerState(markerEpoch)
		m.producers[pid] = s
	}
	s.setEpoch(markerEpoch)
	s.coordEpoch = coordinatorEpoch
	s.lastTimestamp = timestamp
	if s.txnFirst < 0 {
		return nil
	}
	done := &CompletedTxn{ProducerID: pid, FirstOffset: s.txnFirst, LastOffset: markerOffset, Aborted: typ == record.ControlAbort}
	m.removeOngoing(pid, s.txnFirst)
	s.txnFirst = -1
	m.addUnreplicated(*done)
	return done
}

// FirstUnstableOffset is the first offset a read_committed reader must not
// pass: the smallest first offset among the open transactions and the
// completed transactions whose marker the high watermark has not passed
// (as last reported to OnHighWatermarkUpdated), and false when there is
// none. It costs O(1).
func (m *ProducerStateManager) FirstUnstableOffset() (int64, bool) {
	fu, ok := m.FirstUndecidedOffset()
	if planted.On(planted.LSOPassesUnreplicatedMarker) {
		return fu, ok
	} else if len(m.unreplicated) > 0 && (!ok || m.unreplicated[0].FirstOffset < fu) {
		return m.unreplicated[0].FirstOffset, true
	}
	return fu, ok
}

// FirstUndecidedOffset is the smallest first offset among the open
// transactions, and false when none is open; unlike FirstUnstableOffset it
// ignores whether completed transactions' markers are replicated (the
// .txnindex's last stable offsets use it). It costs O(1).
func (m *ProducerStateManager) FirstUndecidedOffset() (int64, bool) {
	if len(m.ongoing) == 0 {
		return -1, false
	}
	return m.ongoing[0].firstOffset, true
}

// OnHighWatermarkUpdated forgets the unreplicated transactions whose marker
// is below hw: every ISR member has it, so they no longer hold back the
// first unstable offset. The owner calls it whenever the high watermark may
// have moved (and with the log start offset when that moves: a marker below
// the log start is below the high watermark too). It never adds anything
// back, so a call with an older, lower value is harmless.
func (m *ProducerStateManager) OnHighWatermarkUpdated(hw int64) {
	if !m.hasReplicatedTxns(hw) {
		return
	}
	kept := m.unreplicated[:0]
	for _, c := range m.unreplicated {
		if c.LastOffset >= hw {
			kept = append(kept, c)
		}
	}
	clear(m.unreplicated[len(kept):])
	m.unreplicated = kept
}

// hasReplicatedTxns reports whether OnHighWatermarkUpdated(hw) would
// forget anything (so a caller can skip taking a write lock).
func (m *ProducerStateManager) hasReplicatedTxns(hw int64) bool {
	for _, c := range m.unreplicated {
		if c.LastOffset < hw {
			return true
		}
	}
	return false
}

// UnreplicatedTxns lists the completed transactions that still hold back
// the first unstable offset because their marker is at or above the high
// watermark last reported, sorted by first offset.
func (m *ProducerStateManager) UnreplicatedTxns() []CompletedTxn {
	return append([]CompletedTxn(nil), m.unreplicated...)
}

// keepUnreplicatedBelow copies into m the unreplicated transactions of old
// whose marker is below end and that m does not have yet. A log rebuilding
// its state after a truncation to end uses it: the rebuilt state replays
// only from its snapshot, which does not hold unreplicated transactions,
// while those whose marker is still in the log must go on holding back the
// first unstable offset. Those at or above end went with their marker.
func (m *ProducerStateManager) keepUnreplicatedBelow(old *ProducerStateManager, end int64) {
	for _, c := range old.unreplicated {
		if c.LastOffset < end {
			m.addUnreplicated(c)
		}
	}
}

// addUnreplicated inserts c in order, unless it is there already.
func (m *ProducerStateManager) addUnreplicated(c CompletedTxn) {
	i := sort.Search(len(m.unreplicated), func(i int) bool {
		u := m.unreplicated[i]
		return u.FirstOffset > c.FirstOffset || (u.FirstOffset == c.FirstOffset && u.ProducerID >= c.ProducerID)
	})
	if i < len(m.unreplicated) && m.unreplicated[i].FirstOffset == c.FirstOffset && m.unreplicated[i].ProducerID == c.ProducerID {
		return
	}
	m.unreplicated = append(m.unreplicated, CompletedTxn{})
	copy(m.unreplicated[i+1:], m.unreplicated[i:])
	m.unreplicated[i] = c
}

// MapEndOffset is the offset up to which the state is built: the offset
// after the last batch applied (or as set by SetMapEndOffset / loaded from
// a snapshot).
func (m *ProducerStateManager) MapEndOffset() int64 { return m.mapEndOff }

// SetMapEndOffset declares the state built up to off (after a truncation,
// a reset or a replay that ended there). It changes no producer.
func (m *ProducerStateManager) SetMapEndOffset(off int64) { m.mapEndOff = off }

func (m *ProducerStateManager) advanceMapEnd(off int64) {
	if off > m.mapEndOff {
		m.mapEndOff = off
	}
}

// Clear forgets every producer, open transaction and unreplicated
// transaction and sets MapEndOffset to 0; the log then rebuilds state from
// a snapshot and a replay. Pending transaction verifications stay, as
// Kafka keeps them across a reload.
func (m *ProducerStateManager) Clear() {
	m.producers = make(map[int64]*producerState)
	m.ongoing = nil
	m.unreplicated = nil
	m.mapEndOff = 0
}

// RemoveExpired forgets the producers idle longer than expirationMs
// (producer.id.expiration.ms): last timestamp older than nowMs -
// expirationMs, and no open transaction. It returns how many went. It
// also forgets the transaction verifications made expirationMs or more
// ago that no append used. A negative expirationMs expires nothing.
func (m *ProducerStateManager) RemoveExpired(nowMs int64, expirationMs int64) int {
	if expirationMs < 0 {
		return 0
	}
	cutoff := nowMs - expirationMs
	if cutoff > nowMs { // overflowed
		cutoff = math.MinInt64
	}
	n := 0
	for pid, s := range m.producers {
		if s.txnFirst < 0 && s.lastTimestamp < cutoff {
			delete(m.producers, pid)
			n++
		}
	}
	m.removeExpiredVerifications(nowMs, expirationMs)
	return n
}

// Len is the number of producers with state.
func (m *ProducerStateManager) Len() int { return len(m.producers) }

// Get returns a copy of one producer's state.
func (m *ProducerStateManager) Get(pid int64) (ProducerEntry, bool) {
	s, ok := m.producers[pid]
	if !ok {
		return ProducerEntry{}, false
	}
	return s.entry(pid), true
}

// Producers returns a copy of every producer's state, sorted by producer id.
func (m *ProducerStateManager) Producers() []ProducerEntry {
	out := make([]ProducerEntry, 0, len(m.producers))
	for pid, s := range m.producers {
		out = append(out, s.entry(pid))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}

// OngoingTxns lists the open transactions sorted by first offset (oldest
// first; ties by producer id).
func (m *ProducerStateManager) OngoingTxns() []OngoingTxn {
	out := make([]OngoingTxn, 0, len(m.ongoing))
	for _, r := range m.ongoing {
		s := m.producers[r.pid]
		out = append(out, OngoingTxn{
			ProducerID:       r.pid,
			Epoch:            s.epoch,
			CoordinatorEpoch: s.coordEpoch,
			FirstOffset:      r.firstOffset,
			LastTimestamp:    s.lastTimestamp,
		})
	}
	return out
}

// ongoingIndex is where (firstOffset, pid) sits or would sit in m.ongoing.
func (m *ProducerStateManager) ongoingIndex(pid, firstOffset int64) int {
	return sort.Search(len(m.ongoing), func(i int) bool {
		r := m.ongoing[i]
		return r.firstOffset > firstOffset || (r.firstOffset == firstOffset && r.pid >= pid)
	})
}

func (m *ProducerStateManager) addOngoing(pid, firstOffset int64) {
	r := ongoingRef{firstOffset: firstOffset, pid: pid}
	// Transactions open in offset order, so this is almost always an append.
	if n := len(m.ongoing); n == 0 || m.ongoing[n-1].firstOffset < firstOffset {
		m.ongoing = append(m.ongoing, r)
		return
	}
	i := m.ongoingIndex(pid, firstOffset)
	m.ongoing = append(m.ongoing, ongoingRef{})
	copy(m.ongoing[i+1:], m.ongoing[i:])
	m.ongoing[i] = r
}

func (m *ProducerStateManager) removeOngoing(pid, firstOffset int64) {
	i := m.ongoingIndex(pid, firstOffset)
	if i < len(m.ongoing) && m.ongoing[i] == (ongoingRef{firstOffset: firstOffset, pid: pid}) {
		m.ongoing = append(m.ongoing[:i], m.ongoing[i+1:]...)
	}
}

// put installs a producer's state (snapshot loading), indexing its open
// transaction.
func (m *ProducerStateManager) put(pid int64, s *producerState) {
	m.producers[pid] = s
	if s.txnFirst >= 0 {
		m.addOngoing(pid, s.txnFirst)
	}
}
