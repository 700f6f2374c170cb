package txn

import (
	"math"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/planted"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// This file is the transaction state machine as a pure function: Decide
// takes a transactional id's metadata (read, never changed) and one request,
// and says what to write to the transaction log, what to answer and what
// to do once the write is applied. It holds no lock, does no I/O and reads
// no clock (the request carries the time); Coordinator is the driver that
// appends, waits for replication, applies and sends markers.
//
// It follows Kafka 4.x's TransactionCoordinator and TransactionMetadata
// (transaction versions 1 and 2), with Strand's refinements where a
// producer deserves a more precise answer (each is named where it is made):
//
//   - Reason: a producer whose transaction the coordinator aborted, by a
//     fence or a timeout, is told so (PRODUCER_FENCED, TRANSACTION_TIMED_OUT)
//     rather than being treated as an EndTxn retry. (The Kafka listener
//     answers TRANSACTION_TIMED_OUT in Kafka's codes: api/kafka.)
//   - A timeout abort at an exhausted epoch records the next producer id
//     at once: under version 2 the timed-out producer carries on after
//     its abort, and must never be handed epoch 32767. A fence there does
//     as Kafka does: the abort stays on the old producer id at 32767, and
//     the fencing producer's retried InitProducerId moves the id to the
//     next producer id at epoch 0.

// Kind is what a request asks of the state machine.
type Kind int

const (
	// KindInitProducerId: a producer (re)starts; fences an older instance.
	KindInitProducerId Kind = iota
	// KindAddPartitions: a partition leader (version 2) or the client
	// (version 1) adds partitions, starting a transaction if none is open.
	KindAddPartitions
	// KindVerifyPartitions: checks the partitions are in the open
	// transaction; never writes.
	KindVerifyPartitions
	// KindEndTxn: the producer commits or aborts.
	KindEndTxn
	// KindTimeout: the coordinator's scan found the transaction open past
	// its transaction.timeout.ms (Request.Now decides).
	KindTimeout
	// KindMarkersDone: every marker of the Prepare* transaction
	// (Request.ProducerID, Request.Epoch) is written.
	KindMarkersDone
	// KindExpire: the coordinator's scan found the id idle past
	// transactional.id.expiration.ms (Request.ExpirationMs).
	KindExpire
	// KindResumeFence: a partition loaded with a PREPARE_EPOCH_FENCE record
	// (written by Strand before it kept that state in memory, as Kafka does)
	// continues the fence with its abort.
	KindResumeFence
)

var kindNames = map[Kind]string{
	KindInitProducerId: "InitProducerId", KindAddPartitions: "AddPartitions", KindVerifyPartitions: "VerifyPartitions",
	KindEndTxn: "EndTxn", KindTimeout: "Timeout", KindMarkersDone: "MarkersDone", KindExpire: "Expire", KindResumeFence: "ResumeFence",
}

func (k Kind) String() string { return kindNames[k] }

// Request is one input of the state machine.
type Request struct {
	Kind Kind
	// TransactionalID names the id in answers (the metadata may be nil).
	TransactionalID string
	// TxnVersion is the client's transaction version (1 or 2): 2 bumps the
	// epoch at every EndTxn and writes markers with the bumped epoch.
	TxnVersion int16
	// ProducerID and Epoch identify the producer; for InitProducerId they are
	// the optional expected id and epoch (ProducerID -1: none, a new producer).
	ProducerID int64
	Epoch      int16
	// Commit: EndTxn commits (else aborts).
	Commit bool
	// TimeoutMs is InitProducerId's transaction.timeout.ms.
	TimeoutMs  int32
	Partitions []TopicPartition
	// ExpirationMs is transactional.id.expiration.ms (KindExpire).
	ExpirationMs int64
	// NewProducerID is a producer id the driver allocated because an
	// earlier Decide asked for one (NeedProducerID); -1 otherwise.
	NewProducerID int64
	// Now is the coordinator's time, in Unix milliseconds.
	Now int64
}

// Decision is what the driver does with a request.
type Decision struct {
	// Err is the answer. With Write it is the answer once the write is
	// applied (a fence answers CONCURRENT_TRANSACTIONS after its abort is
	// durable); a failed write answers the write's error instead.
	Err error
	// Busy: Err is CONCURRENT_TRANSACTIONS because another transition of the
	// id is in flight or its markers are being written; the driver may wait
	// for that to finish and decide again.
	Busy bool
	// NeedProducerID: decide again with Request.NewProducerID set to a new
	// producer id from the controller's block (KindInitProducerId on an
	// unknown id: the driver creates the metadata with it first).
	NeedProducerID bool
	// Write is the transition to append; once the ISR has it, it becomes the
	// state (Metadata.apply).
	Write *transition
	// SendMarkers: once Write is applied, write the markers of the Prepare*
	// state it made.
	SendMarkers bool
	// ProducerID and Epoch are the answer's producer id and epoch when Err
	// is nil (InitProducerId, EndTxn).
	ProducerID int64
	Epoch      int16
}

// MaxEpoch is the largest producer epoch. A producer is handed at most
// MaxEpoch-1: under version 2 its markers carry its epoch + 1.
const MaxEpoch = math.MaxInt16

// exhausted reports an epoch that cannot be bumped for another
// transaction (Kafka's isEpochExhausted).
func exhausted(epoch int16) bool { return epoch >= MaxEpoch-1 }

func busy(format string, args ...any) Decision {
	return Decision{Err: errs.New(pb.ErrorCode_CONCURRENT_TRANSACTIONS, format, args...), Busy: true}
}

func fail(code pb.ErrorCode, format string, args ...any) Decision {
	return Decision{Err: errs.New(code, format, args...)}
}

// Decide is the state machine: m is the id's metadata (nil if unknown),
// read but never changed.
func Decide(m *Metadata, r Request) Decision {
	if r.TxnVersion == 0 {
		r.TxnVersion = 2
	}
	known := m != nil && m.State != Dead
	switch r.Kind {
	case KindInitProducerId:
		if !known {
			return Decision{NeedProducerID: true}
		}
		return decideInit(m, r)
	case KindAddPartitions, KindVerifyPartitions:
		if !known {
			return fail(pb.ErrorCode_INVALID_PRODUCER_ID_MAPPING, "no producer is initialised for transactional id %q (never, or it expired after transactional.id.expiration.ms idle)", r.TransactionalID)
		}
		return decideAdd(m, r)
	case KindEndTxn:
		if !known {
			return fail(pb.ErrorCode_INVALID_PRODUCER_ID_MAPPING, "no producer is initialised for transactional id %q (never, or it expired after transactional.id.expiration.ms idle)", r.TransactionalID)
		}
		if r.TxnVersion < 2 {
			return decideEndV1(m, r)
		}
		return decideEndV2(m, r)
	case KindTimeout:
		if known && m.State == PrepareEpochFence {
			// A fence whose abort could not be written yet (see
			// KindResumeFence): the periodic scan carries it on.
			return Decide(m, Request{Kind: KindResumeFence, Now: r.Now})
		}
		if !known || m.State != Ongoing || m.pending != nil || r.Now-m.StartTimeMs <= int64(m.TimeoutMs) {
			return Decision{}
		}
		return coordinatorAbort(m, r, reasonTimeout, nil)
	case KindMarkersDone:
		return decideMarkersDone(m, r)
	case KindExpire:
		if !known || !m.State.IsComplete() || m.pending != nil || r.Now-m.LastUpdateMs < r.ExpirationMs {
			return Decision{}
		}
		return Decision{Write: m.base(Dead, r.Now)}
	case KindResumeFence:
		if !known || m.State != PrepareEpochFence || m.pending != nil {
			return Decision{}
		}
		t := m.base(PrepareAbort, r.Now)
		return Decision{Write: t, SendMarkers: true}
	}
	return fail(pb.ErrorCode_INVALID_REQUEST, "unknown request kind %d", int(r.Kind))
}

// decideInit is InitProducerId on a known id (Kafka's
// prepareInitProducerIdTransit).
func decideInit(m *Metadata, r Request) Decision {
	if m.pending != nil {
		return busy("another change of %q is in progress", m.TransactionalID)
	}
	expected := r.ProducerID >= 0
	if expected {
		// The expected id must be the current one, or the previous one
		// when the request retries a rotation it never saw answered; a
		// just-created id (epoch -1) accepts any (a producer recovering
		// from UNKNOWN_PRODUCER_ID).
		valid := m.ProducerEpoch < 0 || r.ProducerID == m.ProducerID || (r.ProducerID == m.PrevProducerID && exhausted(r.Epoch))
		if !valid {
			return fail(pb.ErrorCode_PRODUCER_FENCED, "producerId=%d epoch %d is not the current instance of %q", r.ProducerID, r.Epoch, m.TransactionalID)
		}
	}
	switch m.State {
	case PrepareCommit, PrepareAbort, PrepareEpochFence:
		return busy("the previous transaction of %q is completing (%s)", m.TransactionalID, m.State)
	case Ongoing:
		// Fence the running instance: abort its transaction at a bumped
		// epoch (PREPARE_EPOCH_FENCE is the pending transition, never a
		// record) and have the caller retry; the retry bumps again.
		d := coordinatorAbort(m, r, reasonFenced, errs.New(pb.ErrorCode_CONCURRENT_TRANSACTIONS,
			"the open transaction of %q is being aborted to fence its previous producer; retry", m.TransactionalID))
		if planted.On(planted.FenceWritesPrepareEpochFence) && d.Write != nil {
			d.Write.state = PrepareEpochFence
		}
		return d
	}
	// Empty, CompleteCommit, CompleteAbort.
	t := m.base(Empty, r.Now)
	t.timeoutMs, t.partitions, t.startTimeMs, t.reason, t.nextPID, t.txnVersion = r.TimeoutMs, map[TopicPartition]bool{}, -1, reasonNone, -1, r.TxnVersion
	rotate := exhausted(m.ProducerEpoch) && (!expected || r.Epoch == m.ProducerEpoch)
	if planted.On(planted.FenceEpochOverflow) {
		// The check as it was: in int16, so 32767 + 1 wraps and passes.
		rotate = m.ProducerEpoch+1 >= MaxEpoch && (!expected || r.Epoch == m.ProducerEpoch)
	}
	switch {
	case rotate:
		if r.NewProducerID < 0 {
			return Decision{NeedProducerID: true}
		}
		t.prevPID, t.producerID, t.epoch, t.lastEpoch = m.ProducerID, r.NewProducerID, 0, -1
		if expected {
			t.lastEpoch = m.ProducerEpoch
		}
	case !expected:
		t.epoch, t.lastEpoch = m.ProducerEpoch+1, -1
	case m.ProducerEpoch < 0 || r.Epoch == m.ProducerEpoch:
		t.epoch, t.lastEpoch = m.ProducerEpoch+1, m.ProducerEpoch
	case r.Epoch == m.LastProducerEpoch && m.Reason != reasonFenced:
		// A retry of an InitProducerId that was answered: the same epoch.
		// Never the epoch a fence ended (records Strand wrote before it
		// recorded fences as Kafka does kept it as the last epoch).
	default:
		return fail(pb.ErrorCode_PRODUCER_FENCED, "producerId=%d epoch %d of %q is neither the current epoch %d nor the previous %d", r.ProducerID, r.Epoch, m.TransactionalID, m.ProducerEpoch, m.LastProducerEpoch)
	}
	return Decision{Write: t, ProducerID: t.producerID, Epoch: t.epoch}
}

// coordinatorAbort aborts the open transaction on the coordinator's own
// account (a fence, a timeout): PREPARE_ABORT at the epoch bumped once
// (Kafka's prepareFenceProducerEpoch), remembering why, so the aborted
// producer's next request is told. A fence at an exhausted epoch writes
// its abort at 32767 on the same producer id, as Kafka does; the fencing
// producer's retried InitProducerId then rotates to the next producer id
// at epoch 0 (decideInit). A timeout abort there records the next
// producer id now, so the transaction completes onto a fresh id at epoch
// 0 and the timed-out producer, which may carry on, is never handed 32767.
func coordinatorAbort(m *Metadata, r Request, reason string, answer error) Decision {
	t := m.base(PrepareAbort, r.Now)
	t.lastEpoch, t.reason = m.ProducerEpoch, reason
	if reason == reasonFenced && !planted.On(planted.FenceAtLastEpochRotatesEarly) {
		// As Kafka's fence: no last epoch, so the fenced producer is
		// never taken for a retry (abortedEpoch finds it all the same).
		t.lastEpoch = -1
	}
	t.epoch = m.ProducerEpoch
	if m.ProducerEpoch < MaxEpoch {
		t.epoch = m.ProducerEpoch + 1
	}
	if planted.On(planted.FenceEpochOverflow) && reason == reasonFenced {
		// The fence as it was: bumped with no check and no rotation.
		t.epoch = m.ProducerEpoch + 1
	} else if exhausted(m.ProducerEpoch) && (reason == reasonTimeout || planted.On(planted.FenceAtLastEpochRotatesEarly)) {
		if r.NewProducerID < 0 {
			return Decision{NeedProducerID: true}
		}
		t.nextPID = r.NewProducerID
	}
	return Decision{Write: t, SendMarkers: true, Err: answer}
}

// decideAdd is AddPartitionsToTxn (Kafka's handleAddPartitionsToTransaction
// and, for verify-only, handleVerifyPartitionsInTransaction).
func decideAdd(m *Metadata, r Request) Decision {
	if rotating(m, r) {
		return busy("the previous transaction of %q is completing onto producerId=%d", m.TransactionalID, r.ProducerID)
	}
	if r.ProducerID != m.ProducerID {
		if r.ProducerID == m.PrevProducerID && m.PrevProducerID >= 0 {
			// Strand: the id moved on to a new producer id; this one is old.
			return fail(pb.ErrorCode_PRODUCER_FENCED, "producerId=%d of %q was replaced by a newer producer id", r.ProducerID, m.TransactionalID)
		}
		return fail(pb.ErrorCode_INVALID_PRODUCER_ID_MAPPING, "transactional id %q does not belong to producerId=%d", m.TransactionalID, r.ProducerID)
	}
	if r.Epoch != m.ProducerEpoch {
		return Decision{Err: epochError(m, r.ProducerID, r.Epoch)}
	}
	if m.pending != nil {
		return busy("another change of %q is in progress", m.TransactionalID)
	}
	switch m.State {
	case PrepareCommit, PrepareAbort, PrepareEpochFence:
		return busy("the previous transaction of %q is completing (%s)", m.TransactionalID, m.State)
	}
	missing := false
	for _, tp := range r.Partitions {
		if !m.Partitions[tp] {
			missing = true
		}
	}
	if r.Kind == KindVerifyPartitions {
		// Kafka's handleVerifyPartitionsInTransaction: a partition the
		// transaction does not hold is TRANSACTION_ABORTABLE; the leader
		// that asked answers it as INVALID_TXN_STATE to a client too old
		// to know it (Produce below v11, TxnOffsetCommit below v4).
		if m.State != Ongoing || missing {
			return fail(pb.ErrorCode_TRANSACTION_ABORTABLE, "the partitions are not part of an open transaction of %q (add them with AddPartitionsToTxn or AddOffsetsToTxn first); abort the transaction", m.TransactionalID)
		}
		return Decision{}
	}
	if m.State == Ongoing && !missing {
		return Decision{}
	}
	t := m.base(Ongoing, r.Now)
	if m.State != Ongoing {
		// The add that starts a transaction gives it its version; a later
		// add of another version (a producer cannot change version
		// mid-transaction) does not change it.
		t.partitions, t.startTimeMs, t.reason, t.txnVersion = map[TopicPartition]bool{}, r.Now, reasonNone, r.TxnVersion
	}
	for _, tp := range r.Partitions {
		t.partitions[tp] = true
	}
	return Decision{Write: t}
}

// rotating reports a request of the producer id the transaction being
// completed moves to (an EndTxn at the end of the epochs answered it, epoch
// 0): its next transaction's first AddPartitions, or an abort of it before
// anything was sent, racing the markers. Strand: it waits for the markers
// like a request of the current producer id, instead of being answered
// INVALID_PRODUCER_ID_MAPPING (fatal to the producer) because the id only
// becomes current at COMPLETE_*.
func rotating(m *Metadata, r Request) bool {
	return m.NextProducerID >= 0 && r.ProducerID == m.NextProducerID && r.Epoch == 0 && m.State.IsPrepare()
}

// epochError explains a request from an epoch that is not the current one.
func epochError(m *Metadata, pid int64, epoch int16) error {
	if m.Reason != reasonNone && epoch == m.abortedEpoch() {
		switch m.Reason {
		case reasonTimeout:
			return errs.New(pb.ErrorCode_TRANSACTION_TIMED_OUT, "the transaction of %q was aborted by the coordinator after transaction.timeout.ms=%d", m.TransactionalID, m.TimeoutMs)
		case reasonFenced:
			return errs.New(pb.ErrorCode_PRODUCER_FENCED, "producerId=%d epoch %d of %q was fenced by a newer producer with the same transactional.id", pid, epoch, m.TransactionalID)
		}
	}
	if epoch < m.ProducerEpoch {
		return errs.New(pb.ErrorCode_PRODUCER_FENCED, "producerId=%d epoch %d of %q is older than the current epoch %d: a newer producer took over", pid, epoch, m.TransactionalID, m.ProducerEpoch)
	}
	// An epoch the coordinator never handed out: Kafka fences it too.
	return errs.New(pb.ErrorCode_PRODUCER_FENCED, "producerId=%d epoch %d of %q is newer than the coordinator's %d (its state was lost, or the epoch is forged)", pid, epoch, m.TransactionalID, m.ProducerEpoch)
}

func verb(commit bool) string {
	if commit {
		return "commit"
	}
	return "abort"
}

func invalidTxnState(m *Metadata, commit bool) Decision {
	return fail(pb.ErrorCode_INVALID_TXN_STATE, "cannot %s: the transaction of %q is %s", verb(commit), m.TransactionalID, m.State)
}

// decideEndV2 is EndTxn under transaction version 2 (Kafka's
// endTransaction): the epoch is bumped at every end; a retry is recognised
// by the epoch it carries (one below the current, or the last epoch of a
// producer id that rotated); an empty transaction may be ended.
func decideEndV2(m *Metadata, r Request) Decision {
	// Strand: the producer whose transaction the coordinator aborted hears
	// why, whatever it asks.
	aborted := m.Reason != reasonNone && r.Epoch == m.abortedEpoch() &&
		(r.ProducerID == m.ProducerID || (r.ProducerID == m.PrevProducerID && m.PrevProducerID >= 0))
	retryOnOverflow := r.ProducerID == m.PrevProducerID && m.PrevProducerID >= 0 && r.Epoch == MaxEpoch-1 && m.ProducerEpoch == 0
	retryOnBump := r.ProducerID == m.ProducerID && int32(m.ProducerEpoch) == int32(r.Epoch)+1
	if planted.On(planted.EndTxnRetryAfterRotationRefused) {
		// The recognition as it was: by the last epoch, which the rotation
		// had reset to -1.
		retryOnOverflow = r.ProducerID == m.PrevProducerID && r.Epoch == m.LastProducerEpoch
	}
	if aborted {
		switch {
		case m.Reason == reasonFenced:
			return Decision{Err: epochError(m, r.ProducerID, r.Epoch)}
		case r.Commit:
			return Decision{Err: epochError(m, r.ProducerID, r.Epoch)}
		}
		// Aborting what the coordinator aborted on timeout: a retry of
		// that abort (Kafka answers the same).
	}
	if rotating(m, r) {
		return busy("the previous transaction of %q is completing onto producerId=%d", m.TransactionalID, r.ProducerID)
	}
	if r.ProducerID != m.ProducerID && !retryOnOverflow {
		return fail(pb.ErrorCode_INVALID_PRODUCER_ID_MAPPING, "transactional id %q does not belong to producerId=%d", m.TransactionalID, r.ProducerID)
	}
	if m.pending != nil {
		return busy("another change of %q is in progress", m.TransactionalID)
	}
	var valid bool
	switch m.State {
	case Ongoing, Empty, PrepareEpochFence:
		valid = r.Epoch == m.ProducerEpoch
	case PrepareCommit, PrepareAbort:
		if r.Epoch == m.ProducerEpoch {
			// Strand: the next end racing this one's markers (Kafka
			// answers PRODUCER_FENCED) waits for them instead.
			return busy("the previous transaction of %q is completing (%s)", m.TransactionalID, m.State)
		}
		valid = retryOnBump
	case CompleteCommit, CompleteAbort:
		valid = retryOnBump || retryOnOverflow || r.Epoch == m.ProducerEpoch
	}
	if !valid {
		return Decision{Err: epochError(m, r.ProducerID, r.Epoch)}
	}
	retry := retryOnBump || retryOnOverflow
	answer := Decision{ProducerID: m.ProducerID, Epoch: m.ProducerEpoch}
	switch m.State {
	case Ongoing:
		return endV2(m, r, false)
	case PrepareCommit, PrepareAbort:
		if r.Commit == (m.State == PrepareCommit) {
			return busy("the %s of %q is being completed", verb(r.Commit), m.TransactionalID)
		}
		return invalidTxnState(m, r.Commit)
	case PrepareEpochFence:
		return busy("the transaction of %q is being aborted", m.TransactionalID)
	case CompleteCommit, CompleteAbort:
		same := r.Commit == (m.State == CompleteCommit)
		switch {
		case retry && same:
			return answer
		case retry:
			return invalidTxnState(m, r.Commit)
		}
		return endV2(m, r, true)
	case Empty:
		return endV2(m, r, true)
	}
	return invalidTxnState(m, r.Commit)
}

// endV2 writes PREPARE_COMMIT / PREPARE_ABORT with the epoch bumped (and,
// at an exhausted epoch, the next producer id, which the answer hands out).
// An empty transaction (from Empty or Complete*) has no partitions and
// starts now.
func endV2(m *Metadata, r Request, empty bool) Decision {
	if empty && !r.Commit && planted.On(planted.EmptyAbortRefused) {
		return invalidTxnState(m, r.Commit)
	}
	to := PrepareAbort
	if r.Commit {
		to = PrepareCommit
	}
	t := m.base(to, r.Now)
	t.lastEpoch, t.reason, t.txnVersion = m.ProducerEpoch, reasonNone, 2
	t.epoch = m.ProducerEpoch + 1
	if empty {
		t.partitions, t.startTimeMs = map[TopicPartition]bool{}, r.Now
	}
	if exhausted(m.ProducerEpoch) {
		if r.NewProducerID < 0 {
			return Decision{NeedProducerID: true}
		}
		t.nextPID = r.NewProducerID
		return Decision{Write: t, SendMarkers: true, ProducerID: t.nextPID, Epoch: 0}
	}
	return Decision{Write: t, SendMarkers: true, ProducerID: t.producerID, Epoch: t.epoch}
}

// decideEndV1 is EndTxn under transaction version 1: no epoch bump, the
// request's epoch must be the current one, and a repeat of an end that
// completed is answered NONE.
func decideEndV1(m *Metadata, r Request) Decision {
	if m.Reason != reasonNone && r.Epoch == m.abortedEpoch() && (r.ProducerID == m.ProducerID || (r.ProducerID == m.PrevProducerID && m.PrevProducerID >= 0)) {
		// Strand: aborted by the coordinator (fence, timeout): say so.
		return Decision{Err: epochError(m, r.ProducerID, r.Epoch)}
	}
	if r.ProducerID != m.ProducerID {
		return fail(pb.ErrorCode_INVALID_PRODUCER_ID_MAPPING, "transactional id %q does not belong to producerId=%d", m.TransactionalID, r.ProducerID)
	}
	if r.Epoch != m.ProducerEpoch {
		return Decision{Err: epochError(m, r.ProducerID, r.Epoch)}
	}
	if m.pending != nil {
		return busy("another change of %q is in progress", m.TransactionalID)
	}
	answer := Decision{ProducerID: m.ProducerID, Epoch: m.ProducerEpoch}
	switch m.State {
	case Ongoing:
		to := PrepareAbort
		if r.Commit {
			to = PrepareCommit
		}
		t := m.base(to, r.Now)
		// The markers follow the end's epoch rule: unbumped.
		t.reason, t.txnVersion = reasonNone, 1
		return Decision{Write: t, SendMarkers: true, ProducerID: t.producerID, Epoch: t.epoch}
	case CompleteCommit:
		if r.Commit {
			return answer
		}
	case CompleteAbort:
		if !r.Commit {
			return answer
		}
	case PrepareCommit:
		if r.Commit {
			return busy("the commit of %q is being completed", m.TransactionalID)
		}
	case PrepareAbort:
		if !r.Commit {
			return busy("the abort of %q is being completed", m.TransactionalID)
		}
	}
	return invalidTxnState(m, r.Commit)
}

// decideMarkersDone completes a Prepare* transaction once its markers are
// written: COMPLETE_*, no partitions, and, when the epoch was exhausted,
// the next producer id at epoch 0 (the previous id and its last epoch kept,
// so a retry of the EndTxn that rotated is still recognised).
func decideMarkersDone(m *Metadata, r Request) Decision {
	if m == nil || !m.State.IsPrepare() || m.ProducerID != r.ProducerID || m.ProducerEpoch != r.Epoch {
		return Decision{}
	}
	if m.pending != nil {
		return busy("another change of %q is in progress", m.TransactionalID)
	}
	to := CompleteAbort
	if m.State == PrepareCommit {
		to = CompleteCommit
	}
	t := m.base(to, r.Now)
	t.partitions = map[TopicPartition]bool{}
	if m.NextProducerID >= 0 {
		t.prevPID, t.producerID, t.nextPID, t.epoch = m.ProducerID, m.NextProducerID, -1, 0
		if planted.On(planted.EndTxnRetryAfterRotationRefused) {
			t.lastEpoch = -1
		}
	}
	return Decision{Write: t}
}
