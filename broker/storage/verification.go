package storage

import (
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/planted"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// A transactional batch must never reach a partition's log unless the
// producer's transaction coordinator knows the partition is in an open
// transaction: a batch it does not know of opens a transaction no marker
// will ever end, and the last stable offset stays behind it for good. So
// before the first transactional batch of a producer's transaction the
// leader asks the coordinator (transaction version 1: is the partition in
// the transaction, KIP-890 part 1; version 2: add it, part 2), and that
// answer must still hold when the batch is appended. Between the two the
// transaction can end (the producer aborts, the coordinator aborts it on
// transaction.timeout.ms, a new instance fences it) and its marker reach
// the partition first; the late batch would then open a new transaction.
//
// As Kafka's producer state manager does (VerificationStateEntry), the
// leader keeps one verification per producer: a guard, made before the
// coordinator is asked and handed with the append, which every marker for
// the producer clears (and a verification at a newer epoch replaces). The
// append of a transactional batch that does not continue a transaction
// already open here at its epoch must present the producer's current
// guard, or it is refused INVALID_TXN_STATE; the first transactional
// batch appended clears it too, after which the open transaction itself
// vouches for the next batches until its marker.
//
// The group coordinator's transactional offset writes (TxnOffsetCommit to
// a __consumer_offsets partition) run the same race and are guarded the
// same way (AppendCoordinatorDeferred), except that, as in Kafka, their
// verification starts at no sequence and their append does not check a
// pending verification's lowest sequence: the coordinator numbers its
// own batches.

// maxVerifications bounds the verifications one partition keeps: each
// lives until an append or a marker uses it, or producer.id.expiration.ms,
// and producer ids a coordinator never knew would otherwise pile up. At
// the bound the oldest goes (its batch, if still on its way, is refused
// INVALID_TXN_STATE and its producer aborts), found in O(1) amortized
// by the order verifications were made (verifyQueue).
const maxVerifications = 10000

// VerificationGuard is one verification of a producer's transaction on a
// partition (Kafka's VerificationGuard): StartVerification makes it, the
// append presents it, and it is good for that append as long as it is
// still the producer's current one. Only its identity matters.
type VerificationGuard struct {
	pid   int64
	epoch int16
}

// verification is a producer's pending verification (Kafka's
// VerificationStateEntry): its guard, the epoch it was made at, the
// lowest base sequence seen while it waited (a batch above it cannot be
// appended first: see StartVerification), whether the producer bumps its
// epoch at every end (transaction version 2), and when it was made.
type verification struct {
	guard     *VerificationGuard
	epoch     int16
	lowestSeq int32
	epochBump bool
	createdMs int64
}

// VerificationEntry is a copy of a producer's pending verification.
type VerificationEntry struct {
	Guard          *VerificationGuard
	Epoch          int16
	LowestSequence int32
	EpochBump      bool
	CreatedMs      int64
}

// StartVerification returns the guard a transactional batch of pid at
// epoch, base sequence seq, must present when appended, or nil when none
// is needed because pid has its transaction open here at that epoch (the
// batch continues it; no coordinator need be asked). It makes the
// producer's verification if there is none, and replaces it by a new one
// at a newer epoch (an older epoch's verification in flight is then no
// longer good). At the same epoch it keeps the guard and lowers the
// lowest sequence to seq: while the verification waits, a batch above
// that sequence is refused OUT_OF_ORDER_SEQUENCE_NUMBER, so a later batch
// of a producer whose first one is being retried cannot land first and
// leave the first one refused forever (the partition accepts any sequence
// from a producer it has no state for). An epoch older than the pending
// verification's gets a guard no verification holds (good for no append,
// and dropping it drops nothing). epochBump says the producer is on
// transaction version 2 (see clearVerification). nowMs stamps a new
// verification for RemoveExpired.
func (m *ProducerStateManager) StartVerification(pid int64, seq int32, epoch int16, epochBump bool, nowMs int64) *VerificationGuard {
	if s, ok := m.producers[pid]; ok && s.txnFirst >= 0 && s.epoch == epoch {
		return nil
	}
	if m.verifications == nil {
		m.verifications = map[int64]*verification{}
	}
	v := m.verifications[pid]
	if v != nil && epoch < v.epoch {
		// A request from an epoch older than the pending verification's
		// (a fenced producer's, late): it must neither append with the
		// newer epoch's guard nor, when its coordinator refuses it, drop
		// that guard (DropVerification goes by identity). It gets a
		// guard of its own that no verification holds, so the newer one
		// is left as it is and an append with it is refused.
		return &VerificationGuard{pid: pid, epoch: epoch}
	}
	switch {
	case v == nil || epoch > v.epoch:
		if v == nil && len(m.verifications) >= maxVerifications {
			m.evictOldestVerification()
		}
		v = &verification{guard: &VerificationGuard{pid: pid, epoch: epoch}, epoch: epoch, lowestSeq: seq, createdMs: nowMs}
		m.verifications[pid] = v
		m.verifyOrder.push(pid, v, m.verifications)
	case epoch == v.epoch && seq < v.lowestSeq:
		v.lowestSeq = seq
	}
	v.epochBump = epochBump
	return v.guard
}

// evictOldestVerification forgets the verification made first among
// those still pending, in O(1) amortized: the queue's entries of
// verifications already gone or replaced are passed over (each once).
func (m *ProducerStateManager) evictOldestVerification() {
	for {
		pid, v, ok := m.verifyOrder.pop()
		if !ok {
			return
		}
		if m.verifications[pid] == v {
			delete(m.verifications, pid)
			return
		}
	}
}

// verifyQueue is the verifications of a partition in the order they were
// made. Entries are not removed when their verification goes (cleared,
// dropped, replaced, expired): pop passes over them, and push compacts
// the queue once dead entries outnumber the live verifications, so it
// holds at most about twice as many entries as there are verifications.
type verifyQueue struct {
	refs []verifyRef
	head int
}

type verifyRef struct {
	pid int64
	v   *verification
}

// push appends a verification just made (pending: the partition's
// verifications, with it), first compacting the queue if dead entries
// outnumber the pending verifications.
func (q *verifyQueue) push(pid int64, v *verification, pending map[int64]*verification) {
	if len(q.refs)-q.head >= 2*len(pending)+16 {
		out := q.refs[:0]
		for _, r := range q.refs[q.head:] {
			if pending[r.pid] == r.v {
				out = append(out, r)
			}
		}
		clear(q.refs[len(out):])
		q.refs, q.head = out, 0
	}
	q.refs = append(q.refs, verifyRef{pid: pid, v: v})
}

func (q *verifyQueue) pop() (int64, *verification, bool) {
	if q.head == len(q.refs) {
		return 0, nil, false
	}
	r := q.refs[q.head]
	q.refs[q.head] = verifyRef{}
	q.head++
	if q.head == len(q.refs) {
		q.refs, q.head = q.refs[:0], 0
	}
	return r.pid, r.v, true
}

// DropVerification forgets pid's verification if guard is still its
// current one: the coordinator refused the batch for good (no such
// producer, fenced), so nothing will append with it, and a producer id
// nobody knows must not hold a place until it expires.
func (m *ProducerStateManager) DropVerification(pid int64, guard *VerificationGuard) {
	if v, ok := m.verifications[pid]; ok && guard != nil && v.guard == guard {
		delete(m.verifications, pid)
	}
}

// Verification returns a copy of pid's pending verification.
func (m *ProducerStateManager) Verification(pid int64) (VerificationEntry, bool) {
	v, ok := m.verifications[pid]
	if !ok {
		return VerificationEntry{}, false
	}
	return VerificationEntry{Guard: v.guard, Epoch: v.epoch, LowestSequence: v.lowestSeq, EpochBump: v.epochBump, CreatedMs: v.createdMs}, true
}

// clearVerification forgets pid's verification when a transactional batch
// of pid is applied at epoch (a data batch: the transaction is open here
// now; a marker: the transaction it verified has ended), or when a marker
// finds nothing to write. One marker keeps it, as in Kafka: under
// transaction version 2 the marker that ends the previous transaction
// carries the epoch the next one runs at, and the next transaction's
// first batch may have been verified before that marker arrived. That
// holds only for a marker that bumped the epoch, so markerTxnVersion, the
// version the marker was written under, must be 2 as well: a marker at
// the producer's own epoch (version 1, or an operator's abort of a
// hanging transaction) ends the transaction at that epoch, which a
// verification at that epoch may belong to, and clears it whatever
// version the verification was made under. markerTxnVersion 0 (a stored
// marker applied as such: replication, recovery) leaves the
// verification's version to decide, as Kafka does.
func (m *ProducerStateManager) clearVerification(pid int64, control bool, epoch int16, markerTxnVersion int32) {
	v, ok := m.verifications[pid]
	if !ok {
		return
	}
	if control && v.epochBump && epoch == v.epoch && (markerTxnVersion == 0 || markerTxnVersion >= 2) {
		return
	}
	delete(m.verifications, pid)
}

// adoptVerifications carries old's pending verifications over to m (a log
// rebuilding its producer state: they are no part of snapshots, and a
// batch being verified must still find its guard).
func (m *ProducerStateManager) adoptVerifications(old *ProducerStateManager) {
	if old != nil && len(old.verifications) > 0 {
		m.verifications, m.verifyOrder = old.verifications, old.verifyOrder
	}
}

// checkVerified is the part of a leader's check of a client's batch that
// transaction verification adds (Kafka's analyzeAndValidateProducerState
// and ProducerAppendInfo.checkSequence), for a batch that is no duplicate:
//
//   - a transactional batch that does not continue the producer's
//     transaction open here at its epoch needs the producer's current
//     guard: from an epoch older than the partition's it is
//     INVALID_PRODUCER_EPOCH, without the guard (none was made, or a
//     marker or a newer epoch's verification cleared it since)
//     INVALID_TXN_STATE;
//   - while a verification is pending, a client's batch above its lowest
//     sequence is OUT_OF_ORDER_SEQUENCE_NUMBER (not the group
//     coordinator's: OriginCoordinator).
func (m *ProducerStateManager) checkVerified(h *record.Header, check leaderCheck) error {
	guard := check.guard
	s, known := m.producers[h.ProducerID]
	if h.IsTransactional() && !(known && s.txnFirst >= 0 && s.epoch == h.ProducerEpoch) {
		if known && h.ProducerEpoch < s.epoch {
			return errs.New(pb.ErrorCode_INVALID_PRODUCER_EPOCH,
				"producerId=%d: batch epoch %d is older than the current epoch %d", h.ProducerID, h.ProducerEpoch, s.epoch)
		}
		v := m.verifications[h.ProducerID]
		if (v == nil || guard == nil || v.guard != guard) && !planted.On(planted.TxnVerificationUnguarded) {
			return errs.New(pb.ErrorCode_INVALID_TXN_STATE,
				"producerId=%d epoch %d: the batch is not part of an ongoing transaction (its transaction ended, or was never verified with the coordinator, before it reached the partition)",
				h.ProducerID, h.ProducerEpoch)
		}
	}
	if v := m.verifications[h.ProducerID]; v != nil && check.origin == OriginClient && h.BaseSequence > v.lowestSeq {
		return errs.New(pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER,
			"producerId=%d: baseSequence=%d is above %d, the lowest sequence still being verified with the coordinator",
			h.ProducerID, h.BaseSequence, v.lowestSeq)
	}
	return nil
}

// removeExpiredVerifications forgets verifications made at or before
// cutoff (Kafka's removeExpiredProducers does the same with
// producer.id.expiration.ms): a verification nobody appended with.
func (m *ProducerStateManager) removeExpiredVerifications(nowMs, expirationMs int64) {
	for pid, v := range m.verifications {
		if nowMs-v.createdMs >= expirationMs {
			delete(m.verifications, pid)
		}
	}
}

// StartTxnVerification is the leader's first step before asking the
// coordinator about a transactional batch of pid at epoch and base
// sequence seq (Kafka's maybeStartTransactionVerification): it returns
// the guard to append with, or nil when pid's transaction is open here at
// epoch (nothing to ask). A batch from an epoch older than the one this
// partition has for pid is refused INVALID_PRODUCER_EPOCH at once: a
// zombie needs no coordinator to be told. epochBump: the producer is on
// transaction version 2.
func (l *Log) StartTxnVerification(pid int64, seq int32, epoch int16, epochBump bool) (*VerificationGuard, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, ok := l.psm.producers[pid]; ok && epoch < s.epoch {
		return nil, errs.New(pb.ErrorCode_INVALID_PRODUCER_EPOCH,
			"producerId=%d: batch epoch %d is older than the epoch %d this partition has seen", pid, epoch, s.epoch)
	}
	return l.psm.StartVerification(pid, seq, epoch, epochBump, l.clk.Now().UnixMilli()), nil
}

// DropTxnVerification forgets pid's verification if guard is still its
// current one (ProducerStateManager.DropVerification).
func (l *Log) DropTxnVerification(pid int64, guard *VerificationGuard) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.psm.DropVerification(pid, guard)
}

// TxnVerification returns a copy of pid's pending verification (tests,
// tools).
func (l *Log) TxnVerification(pid int64) (VerificationEntry, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.psm.Verification(pid)
}
