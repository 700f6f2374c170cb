package storage

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/planted"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// AppendResult describes a completed append.
type AppendResult struct {
	FirstOffset int64
	LastOffset  int64
	// Duplicate: the batch was already in the log (same producer, epoch and
	// sequences); nothing was written and the offsets are the original ones.
	Duplicate bool
	// FlushDeferred: the fsync flush.messages=1 asks for runs in the
	// background (AppendAsLeaderDeferred); WaitDurable waits for it.
	FlushDeferred bool
	NumMessages   int64
	MaxTimestamp  int64
	Bytes         int
}

// validateBatches checks every batch in buf before anything is written, so
// a request is never half-written: whole batches only, magic 2, CRC, counts.
func validateBatches(buf []byte) ([]record.Header, error) {
	if len(buf) == 0 {
		return nil, errs.New(pb.ErrorCode_INVALID_RECORD, "no record batch in the request")
	}
	var hs []record.Header
	for pos := 0; pos < len(buf); {
		h, err := record.Validate(buf[pos:])
		if err != nil {
			return nil, err
		}
		if h.RecordCount == 0 {
			return nil, errs.New(pb.ErrorCode_INVALID_RECORD, "batch at byte %d holds no records", pos)
		}
		hs = append(hs, h)
		pos += h.Size()
	}
	return hs, nil
}

// AppendAsLeader validates client batches, checks producer state (dedup,
// sequence, epoch), assigns offsets and the leader epoch by rewriting the
// two header fields outside the CRC, and appends. Records are never decoded.
// A duplicate of one of a producer's last five batches appends nothing and
// returns the original offsets. Control batches are refused: only the
// coordinator writes markers, through AppendMarker. Under flush.messages=1
// it returns once the batch is fsynced (AppendAsLeaderDeferred does not wait).
func (l *Log) AppendAsLeader(buf []byte, leaderEpoch int32) (AppendResult, error) {
	res, err := l.AppendAsLeaderDeferred(buf, leaderEpoch)
	if err != nil || !res.FlushDeferred {
		return res, err
	}
	_, err = l.WaitDurable(context.Background(), res.LastOffset, nil)
	return res, err
}

// checkLeaderBatches validates a client's batches before the lock.
func (l *Log) checkLeaderBatches(buf []byte) ([]record.Header, error) {
	hs, err := validateBatches(buf)
	if err != nil {
		return nil, err
	}
	idempotent := 0
	for i := range hs {
		if hs[i].IsControl() {
			if planted.On(planted.ClientMarkersAccepted) {
				continue // appended as it came (appendLeaderLocked checks no producer for it)
			}
			return nil, errs.New(pb.ErrorCode_INVALID_RECORD, "control batches may only be written by a transaction coordinator")
		}
		if hs[i].HasProducerID() {
			// Kafka refuses these too (LogValidator): a producer id without a
			// sequence would be remembered as the batch -1..-1, and every
			// later one taken for its duplicate and dropped.
			if hs[i].BaseSequence < 0 || hs[i].ProducerEpoch < 0 {
				return nil, errs.New(pb.ErrorCode_INVALID_RECORD, "a batch with producerId=%d needs a producer epoch and a base sequence, got epoch %d and baseSequence %d",
					hs[i].ProducerID, hs[i].ProducerEpoch, hs[i].BaseSequence)
			}
			idempotent++
		}
	}
	if idempotent > 0 && len(hs) > 1 {
		return nil, errs.New(pb.ErrorCode_INVALID_RECORD, "an idempotent producer sends one batch per partition per request, got %d", len(hs))
	}
	return hs, nil
}

// AppendOrigin is where a leader append whose transactional batches were
// verified with their coordinator comes from (Kafka's AppendOrigin),
// which decides what of the verification its check covers. The zero
// value is an append that checks none (tools, tests, the transaction
// coordinator's own non-transactional writes).
type AppendOrigin int8

const (
	// OriginClient is a client's produce: a transactional batch that
	// does not continue an open transaction needs its guard, and while a
	// verification is pending a batch above its lowest sequence is
	// refused (CheckVerifiedData).
	OriginClient AppendOrigin = iota + 1
	// OriginCoordinator is the group coordinator's own transactional
	// offset write: it needs its guard as a client's batch does, but its
	// sequences are numbered by the coordinator under its own lock, and
	// it starts its verification at no sequence, so the lowest sequence
	// does not apply (Kafka checks sequences only for clients).
	OriginCoordinator
)

// leaderCheck is how a leader append checks a producer's batch: by its
// origin (CheckVerifiedData, CheckCoordinatorData, with guard), or, with
// none, only as CheckData does (tools, tests).
type leaderCheck struct {
	origin AppendOrigin
	guard  *VerificationGuard
}

func (l *Log) appendLeaderLocked(buf []byte, hs []record.Header, leaderEpoch int32, check leaderCheck) (AppendResult, error) {
	if err := l.checkWritable(); err != nil {
		return AppendResult{}, err
	}
	// A control batch gets here only with planted.ClientMarkersAccepted on.
	if len(hs) == 1 && hs[0].HasProducerID() && !hs[0].IsControl() {
		if err := l.guard.checkFence(&hs[0], l.clk.Now().UnixMilli()); err != nil {
			return AppendResult{}, err
		}
		dup, err := l.psm.checkData(&hs[0], check)
		if err != nil {
			return AppendResult{}, err
		}
		if dup != nil {
			return AppendResult{FirstOffset: dup.FirstOffset, LastOffset: dup.LastOffset, Duplicate: true}, nil
		}
	}
	next := l.leoLocked()
	pos := 0
	for i := range hs {
		b := buf[pos : pos+hs[i].Size()]
		record.SetBaseOffset(b, next)
		record.SetPartitionLeaderEpoch(b, leaderEpoch)
		hs[i].BaseOffset = next
		hs[i].PartitionLeaderEpoch = leaderEpoch
		next = hs[i].NextOffset()
		pos += hs[i].Size()
	}
	if _, err := l.epochs.assign(leaderEpoch, hs[0].BaseOffset); err != nil {
		return AppendResult{}, errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "write leader-epoch-checkpoint: %v", err)
	}
	res, err := l.writeLocked(buf, hs, nil)
	if err == nil && len(hs) == 1 && hs[0].HasProducerID() {
		l.guard.appended(&hs[0])
	}
	return res, err
}

// markerInfo is a decoded transaction marker of a replicated batch.
type markerInfo struct {
	typ        record.ControlType
	coordEpoch int32
}

// writeLocked appends validated batches whose offsets are set, rolling the
// active segment first when needed, and updates indexes and producer state.
// markers, when not nil, holds the decoded marker of every control batch
// (by index in hs): each is applied to producer state, and indexed in the
// .txnindex when it aborts a transaction, in log order with the data
// batches around it. Without it control batches change no producer (the
// caller applies the marker itself).
func (l *Log) writeLocked(buf []byte, hs []record.Header, markers []markerInfo) (AppendResult, error) {
	if err := l.maybeRollLocked(len(buf), hs[len(hs)-1].NextOffset()); err != nil {
		return AppendResult{}, err
	}
	s := l.active()
	start := s.size
	if start == 0 {
		// segment.ms counts from the first batch, not from the segment's creation.
		s.rollBase = l.clk.Now().UnixMilli()
	}
	if err := s.write(buf); err != nil {
		return AppendResult{}, errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "append to %s: %v", s.path, err)
	}
	res := AppendResult{FirstOffset: hs[0].BaseOffset, LastOffset: hs[len(hs)-1].LastOffset(), Bytes: len(buf), MaxTimestamp: -1}
	pos := start
	var firstErr error
	for i := range hs {
		h := &hs[i]
		s.indexBatch(h, pos, l.cfg.IndexIntervalBytes)
		pos += int64(h.Size())
		switch {
		case !h.IsControl():
			opens := h.IsTransactional() && h.ProducerID >= 0 && !l.psm.txnOpen(h.ProducerID)
			l.psm.ApplyData(h)
			if opens {
				l.guard.txnOpened(h.ProducerID, l.clk.Now().UnixMilli())
			}
		case markers != nil:
			if err := l.applyMarkerLocked(h, markers[i].typ, markers[i].coordEpoch, s); err != nil && firstErr == nil {
				firstErr = err
			}
		}
		res.NumMessages += int64(h.RecordCount)
		if h.MaxTimestamp > res.MaxTimestamp {
			res.MaxTimestamp = h.MaxTimestamp
		}
	}
	l.psm.SetMapEndOffset(s.next)
	l.unflushed += res.NumMessages
	return res, firstErr
}

// maybeRollLocked starts a new segment when the active one would pass
// segment.bytes, is older than segment.ms, or would overflow its 32-bit
// relative offsets. The old segment is sealed (fsynced, indexes written)
// and a producer snapshot is written at the new base offset.
func (l *Log) maybeRollLocked(size int, nextAfter int64) error {
	s := l.active()
	if s.size == 0 {
		return nil
	}
	now := l.clk.Now().UnixMilli()
	full := s.size+int64(size) > l.cfg.SegmentBytes
	old := l.cfg.SegmentMs > 0 && now-s.rollBase >= l.cfg.SegmentMs
	overflow := nextAfter-s.base > math.MaxUint32-1 || s.size+int64(size) > math.MaxUint32
	if !full && !old && !overflow {
		return nil
	}
	return l.rollLocked(now)
}

func (l *Log) rollLocked(nowMs int64) error {
	s := l.active()
	base := s.next
	if err := s.seal(); err != nil {
		return l.failLocked(errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "seal segment %d: %v", s.base, err))
	}
	if err := l.psm.writeSnapshot(l.fs, l.dir, base); err != nil {
		return errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "producer snapshot at %d: %v", base, err)
	}
	ns, err := createSegment(l.fs, l.dir, base, nowMs, l.cfg.Files)
	if err != nil {
		return errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "new segment %d: %v", base, err)
	}
	l.segs = append(l.segs, ns)
	// Everything before the new segment is fsynced now.
	if base > l.recoveryPoint && l.allSealedBelow(base) {
		l.recoveryPoint = base
		l.unflushed = 0
		l.lastFlushMs = nowMs
	}
	return nil
}

// allSealedBelow reports whether no segment before the active one has unsynced bytes.
func (l *Log) allSealedBelow(base int64) bool {
	for _, s := range l.segs {
		if s.base < base && s.dirty {
			return false
		}
	}
	return true
}

// Roll forces a new segment (tests, tools).
func (l *Log) Roll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritable(); err != nil {
		return err
	}
	if l.active().size == 0 {
		return nil
	}
	return l.rollLocked(l.clk.Now().UnixMilli())
}

// AppendAsFollower appends batches fetched from the leader, offsets and
// epochs as the leader assigned them. The first batch must start at the log
// end. Producer state and the epoch history follow the batches, so a
// follower that becomes leader still recognises duplicates.
func (l *Log) AppendAsFollower(buf []byte) (AppendResult, error) {
	hs, err := validateBatches(buf)
	if err != nil {
		return AppendResult{}, err
	}
	l.mu.Lock()
	straddles := l.straddlesEmptyLocked(hs)
	var res AppendResult
	if !straddles {
		res, err = l.appendFollowerLocked(buf, hs)
	}
	l.mu.Unlock()
	if straddles {
		res, err = l.appendStraddlingFollower(buf, hs)
	}
	if err != nil {
		return res, err
	}
	return res, l.maybeFlush()
}

// straddlesEmptyLocked reports whether the log is empty (one empty segment,
// its end at the log start) and the first batch holds the log end without
// starting at it: base < log end <= last offset. A follower whose log start
// is inside a batch (DeleteRecords on the leader, then
// TruncateFullyAndStartAt at the leader's log start) gets that whole batch
// for its first fetch, since the leader's Read never splits one.
func (l *Log) straddlesEmptyLocked(hs []record.Header) bool {
	if len(hs) == 0 || len(l.segs) != 1 || l.active().size != 0 {
		return false
	}
	leo := l.leoLocked()
	return leo == l.logStart && hs[0].BaseOffset < leo && hs[0].NextOffset() > leo
}

// appendStraddlingFollower appends batches whose first one straddles the
// end of an empty log, as Kafka's follower does after an
// UnexpectedAppendOffsetException: the empty log restarts at the batch's
// base offset and the log start stays where it was (inside the batch), so
// the offsets below it stay unreadable; the start's checkpoint is durable
// before the segment is replaced, and Open raises the start to it again.
// It takes flushMu (a segment goes) before mu, and checks again under both.
func (l *Log) appendStraddlingFollower(buf []byte, hs []record.Header) (AppendResult, error) {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritable(); err != nil {
		return AppendResult{}, err
	}
	if !l.straddlesEmptyLocked(hs) {
		return l.appendFollowerLocked(buf, hs)
	}
	start := l.logStart
	l.logger().Info("the first replicated batch straddles the log start; restarting the empty log at its base",
		"partition", l.key.String(), "batchBase", hs[0].BaseOffset, "logStart", start)
	if err := l.truncateFullyLocked(hs[0].BaseOffset, start); err != nil {
		return AppendResult{}, err
	}
	res, err := l.appendFollowerLocked(buf, hs)
	if err != nil {
		// Refused before anything was written (a later batch out of order,
		// a bad marker) or failed writing: the log end must not stay below
		// its start, so the log goes back to empty at the start.
		if l.leoLocked() < start {
			if rerr := l.truncateFullyLocked(start, start); rerr != nil {
				l.logger().Warn("could not restart the log at its start after a refused append", "partition", l.key.String(), "reason", rerr.Error())
			}
		}
		return res, err
	}
	// As Open does after recovery: no epoch entry starts below the log start.
	_ = l.epochs.truncateFromStart(l.logStart)
	return res, nil
}

func (l *Log) appendFollowerLocked(buf []byte, hs []record.Header) (AppendResult, error) {
	if err := l.checkWritable(); err != nil {
		return AppendResult{}, err
	}
	next := l.leoLocked()
	gapTo := int64(-1)
	for i := range hs {
		// A leader's cleaned segments skip the offsets its cleaner removed
		// (as in Kafka, offsets only have to increase).
		if hs[i].BaseOffset < next {
			return AppendResult{}, errs.New(pb.ErrorCode_CORRUPT_MESSAGE, "replicated batch at offset %d does not follow the log end %d", hs[i].BaseOffset, next)
		}
		if hs[i].BaseOffset > next {
			gapTo = hs[i].BaseOffset
		}
		next = hs[i].NextOffset()
	}
	// Decode every marker before anything is written, so a bad one refuses
	// the whole request instead of leaving it written but not applied.
	markers := make([]markerInfo, len(hs))
	pos := 0
	for i := range hs {
		if hs[i].IsControl() {
			typ, coordEpoch, err := record.ReadControlBatch(buf[pos : pos+hs[i].Size()])
			if err != nil {
				return AppendResult{}, errs.New(pb.ErrorCode_CORRUPT_MESSAGE, "replicated control batch at offset %d: %v", hs[i].BaseOffset, err)
			}
			markers[i] = markerInfo{typ, coordEpoch}
		}
		pos += hs[i].Size()
	}
	// Recovery accepts gaps only below the clean checkpoint and the
	// replicated-gaps mark, so the mark moves past a replicated gap before
	// the batch after it is written. The clean checkpoint stays: this
	// replica's own log below the gap is not cleaned (its key map must
	// still cover it, or a key's older value outlives its tombstone).
	if gapTo > l.gapsFrom {
		if err := writeReplicaGaps(l.fs, l.dir, gapTo); err != nil {
			return AppendResult{}, errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "write %s: %v", ReplicaGapsFile, err)
		}
		l.gapsFrom = gapTo
	}
	for i := range hs {
		if _, err := l.epochs.assign(hs[i].PartitionLeaderEpoch, hs[i].BaseOffset); err != nil {
			return AppendResult{}, errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "write leader-epoch-checkpoint: %v", err)
		}
	}
	return l.writeLocked(buf, hs, markers)
}

// applyMarkerBatchLocked applies a stored control batch to producer state
// and, for an abort that ended an open transaction, appends the .txnindex
// entry to seg.
func (l *Log) applyMarkerBatchLocked(h *record.Header, batch []byte, seg *segment) error {
	typ, coordEpoch, err := record.ReadControlBatch(batch)
	if err != nil {
		return err
	}
	return l.applyMarkerLocked(h, typ, coordEpoch, seg)
}

// applyMarkerLocked applies the decoded marker of the stored control batch h.
func (l *Log) applyMarkerLocked(h *record.Header, typ record.ControlType, coordEpoch int32, seg *segment) error {
	done := l.psm.ApplyMarker(h.ProducerID, h.ProducerEpoch, coordEpoch, typ, h.BaseOffset, h.MaxTimestamp)
	if done != nil {
		l.guard.txnEnded(h.ProducerID)
	}
	if done == nil || !done.Aborted || seg == nil {
		return nil
	}
	return l.indexAbortLocked(done, seg)
}

func (l *Log) indexAbortLocked(done *CompletedTxn, seg *segment) error {
	// Only open transactions count here, as in Kafka's .txnindex: whether
	// markers are replicated is no part of the stored entry.
	lso := done.LastOffset + 1
	if fu, ok := l.psm.FirstUndecidedOffset(); ok && fu < lso {
		lso = fu
	}
	a := AbortedTxn{ProducerID: done.ProducerID, FirstOffset: done.FirstOffset, LastOffset: done.LastOffset, LastStableOffset: lso}
	if err := seg.txn.append(a, l.cfg.SyncEveryWrite()); err != nil {
		return l.failLocked(errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "append %s: %v", seg.txn.path, err))
	}
	return nil
}

// MarkerResult describes an appended (or already present) marker.
type MarkerResult struct {
	// Offset is the marker's offset (-1 when AlreadyDone).
	Offset int64
	// AlreadyDone: nothing was written, because the marker repeats one
	// this partition already applied (a coordinator re-sending after
	// failover, or after the first attempt's answer was lost), or because
	// the producer has no open transaction here (NothingToEnd).
	AlreadyDone bool
	// NothingToEnd, with AlreadyDone: the producer has no open
	// transaction here (MarkerNothingToEnd).
	NothingToEnd bool
	// LogEndOffset, for AlreadyDone, is the log end offset when the repeat
	// was checked, under the same lock: the marker it repeats is below it,
	// so once the high watermark reaches it the ISR has that marker.
	LogEndOffset int64
	// Completed: an open transaction of the producer ended here.
	Completed *CompletedTxn
}

// AppendMarker writes a COMMIT or ABORT control batch for a producer, as a
// coordinator's WriteTxnMarkers asks (epoch = the bumped producer epoch).
func (l *Log) AppendMarker(pid int64, epoch int16, coordinatorEpoch int32, typ record.ControlType, leaderEpoch int32) (MarkerResult, error) {
	return l.AppendMarkerVersion(pid, epoch, coordinatorEpoch, typ, leaderEpoch, 2)
}

// AppendMarkerVersion is AppendMarker with the transaction version of the
// writer: 2 applies the strict epoch rule (the marker carries the bumped
// epoch), lower versions accept the current epoch (CheckLegacyMarker). A
// marker that ends no open transaction writes nothing (AlreadyDone); under
// version 2 one with nothing to end also fences the producer's older
// epochs on this leader for MarkerFenceTTL (txnGuard), as the marker would
// have had it been written.
func (l *Log) AppendMarkerVersion(pid int64, epoch int16, coordinatorEpoch int32, typ record.ControlType, leaderEpoch int32, txnVersion int32) (MarkerResult, error) {
	l.mu.Lock()
	res, err := l.appendMarkerLocked(pid, epoch, coordinatorEpoch, typ, leaderEpoch, txnVersion)
	l.mu.Unlock()
	if err != nil || res.AlreadyDone {
		return res, err
	}
	return res, l.maybeFlush()
}

func (l *Log) appendMarkerLocked(pid int64, epoch int16, coordinatorEpoch int32, typ record.ControlType, leaderEpoch int32, txnVersion int32) (MarkerResult, error) {
	if err := l.checkWritable(); err != nil {
		return MarkerResult{}, err
	}
	check := l.psm.CheckMarker
	if txnVersion < 2 {
		check = l.psm.CheckLegacyMarker
	}
	verdict, err := check(pid, epoch, coordinatorEpoch)
	if err != nil {
		return MarkerResult{}, err
	}
	switch verdict {
	case MarkerRepeat:
		// Nothing is written, but the marker still ends the verification
		// of a batch on its way, as the written marker would have.
		l.psm.clearVerification(pid, true, epoch, max(txnVersion, 1))
		return MarkerResult{AlreadyDone: true, Offset: -1, LogEndOffset: l.leoLocked()}, nil
	case MarkerNothingToEnd:
		l.psm.clearVerification(pid, true, epoch, max(txnVersion, 1))
		if txnVersion >= 2 {
			l.guard.fence(pid, epoch, l.clk.Now().UnixMilli())
		}
		return MarkerResult{AlreadyDone: true, NothingToEnd: true, Offset: -1, LogEndOffset: l.leoLocked()}, nil
	}
	return l.writeMarkerLocked(pid, epoch, coordinatorEpoch, typ, leaderEpoch, max(txnVersion, 1))
}

// writeMarkerLocked appends a checked marker as leader, written under
// transaction version txnVersion (1: at the producer's epoch; 2: at the
// bumped epoch), and applies it.
func (l *Log) writeMarkerLocked(pid int64, epoch int16, coordinatorEpoch int32, typ record.ControlType, leaderEpoch int32, txnVersion int32) (MarkerResult, error) {
	now := l.clk.Now().UnixMilli()
	batch := record.BuildControlBatch(pid, epoch, typ, coordinatorEpoch, now)
	off := l.leoLocked()
	record.SetBaseOffset(batch, off)
	record.SetPartitionLeaderEpoch(batch, leaderEpoch)
	h, err := record.ParseHeader(batch)
	if err != nil {
		return MarkerResult{}, err
	}
	if _, err := l.epochs.assign(leaderEpoch, off); err != nil {
		return MarkerResult{}, errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "write leader-epoch-checkpoint: %v", err)
	}
	if _, err := l.writeLocked(batch, []record.Header{h}, nil); err != nil {
		return MarkerResult{}, err
	}
	completed := l.psm.applyMarker(pid, epoch, coordinatorEpoch, typ, off, now, txnVersion)
	if completed != nil {
		l.guard.txnEnded(pid)
		if completed.Aborted {
			if err := l.indexAbortLocked(completed, l.active()); err != nil {
				return MarkerResult{}, err
			}
		}
	}
	return MarkerResult{Offset: off, Completed: completed}, nil
}

// AppendAsLeaderDeferred is AppendAsLeader for a caller that waits for
// durability itself: under flush.messages=1 it does not fsync before
// returning but hands the fsync to the background flusher
// (Result.FlushDeferred), so the next request's append runs while this
// one's fsync does, and one fsync covers every batch appended meanwhile.
// The high watermark still counts only fsynced offsets (DurableEnd); an
// acks=1 answer waits for WaitDurable. Other flush policies flush as
// AppendAsLeader does. It does not check transaction verification (the
// transaction coordinator's writes, tools): a client's produce appends
// with AppendVerifiedDeferred, the group coordinator with
// AppendCoordinatorDeferred.
func (l *Log) AppendAsLeaderDeferred(buf []byte, leaderEpoch int32) (AppendResult, error) {
	return l.appendAsLeader(buf, leaderEpoch, leaderCheck{})
}

// AppendVerifiedDeferred is AppendAsLeaderDeferred for a client's produce:
// a transactional batch that does not continue its producer's open
// transaction must present guard, the verification StartTxnVerification
// made before its coordinator was asked, still current (no marker for the
// producer came in between), or it is refused INVALID_TXN_STATE (see
// verification.go). guard is nil for a batch that needed none.
func (l *Log) AppendVerifiedDeferred(buf []byte, leaderEpoch int32, guard *VerificationGuard) (AppendResult, error) {
	return l.appendAsLeader(buf, leaderEpoch, leaderCheck{origin: OriginClient, guard: guard})
}

// AppendCoordinatorDeferred is AppendVerifiedDeferred for the group
// coordinator's own writes (OriginCoordinator): a transactional offset
// write must present the guard its StartTxnVerification made before the
// transaction coordinator was asked, still current, or it is refused
// INVALID_TXN_STATE and nothing is written; the lowest sequence of a
// pending verification is not checked. Its other writes carry no
// producer and are appended as AppendAsLeaderDeferred appends them.
func (l *Log) AppendCoordinatorDeferred(buf []byte, leaderEpoch int32, guard *VerificationGuard) (AppendResult, error) {
	return l.appendAsLeader(buf, leaderEpoch, leaderCheck{origin: OriginCoordinator, guard: guard})
}

func (l *Log) appendAsLeader(buf []byte, leaderEpoch int32, check leaderCheck) (AppendResult, error) {
	hs, err := l.checkLeaderBatches(buf)
	if err != nil {
		return AppendResult{}, err
	}
	l.mu.Lock()
	res, err := l.appendLeaderLocked(buf, hs, leaderEpoch, check)
	// A duplicate (a retry) is answered with the original's offsets, and
	// not before the original is on disk.
	deferred := err == nil && l.cfg.SyncEveryWrite() && (!res.Duplicate || l.recoveryPoint <= res.LastOffset)
	if deferred {
		if end := res.LastOffset + 1; end > l.deferredEnd {
			l.deferredEnd = end
		}
		l.startFlusherLocked()
	}
	l.mu.Unlock()
	if err != nil {
		return res, err
	}
	if deferred {
		res.FlushDeferred = true
		return res, nil
	}
	if res.Duplicate {
		return res, nil
	}
	return res, l.maybeFlush()
}

// startFlusherLocked starts the background flusher unless it runs; a
// running one loops until deferredEnd is fsynced, so it covers this
// append too.
func (l *Log) startFlusherLocked() {
	if l.flusherRunning || l.closed {
		return
	}
	l.flusherRunning = true
	l.bg.Add(1)
	go l.flushLoop()
}

func (l *Log) flushLoop() {
	defer l.bg.Done()
	for {
		l.mu.Lock()
		// Only as far as the deferred appends: a flusher does not outlive
		// the last of them (after flush.messages changes, or as a follower).
		// A truncation may have cut them: then only up to the log end,
		// which an fsync can reach.
		if leo := l.leoLocked(); l.deferredEnd > leo {
			l.deferredEnd = leo
		}
		if l.closed || l.recoveryPoint >= l.deferredEnd {
			l.flusherRunning = false
			l.mu.Unlock()
			return
		}
		target := l.deferredEnd
		l.mu.Unlock()
		if err := l.FlushTo(target); err != nil {
			// FlushTo told the waiters; the next append starts a new try.
			l.mu.Lock()
			l.flusherRunning = false
			l.mu.Unlock()
			return
		}
	}
}

// signalFlushedLocked records the outcome of a flush attempt (or the
// log's closing) and wakes WaitDurable.
func (l *Log) signalFlushedLocked(err error) {
	if err != nil {
		l.flushErr = err
	}
	close(l.flushed)
	l.flushed = make(chan struct{})
}

// WaitDurable blocks until offset is fsynced. It returns the flush's
// KAFKA_STORAGE_ERROR if the fsync failed, the log's error if it was
// closed, and ctx's error at ctx's end. onWake, if not nil, is a channel
// that also ends a wait without a result (nil is returned with done false),
// so a caller can re-check leadership.
func (l *Log) WaitDurable(ctx context.Context, offset int64, onWake <-chan struct{}) (done bool, err error) {
	for {
		l.mu.RLock()
		rp, ch, ferr := l.recoveryPoint, l.flushed, l.flushErr
		cerr := l.checkOpen()
		l.mu.RUnlock()
		switch {
		case rp > offset:
			return true, nil
		case cerr != nil:
			return false, cerr
		case ferr != nil:
			return false, ferr
		}
		select {
		case <-ch:
		case <-onWake:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// maybeFlush applies the flush policy after an append.
func (l *Log) maybeFlush() error {
	l.mu.RLock()
	due := l.unflushed >= l.cfg.FlushMessages ||
		(l.cfg.FlushMs < math.MaxInt64 && l.clk.Now().UnixMilli()-l.lastFlushMs >= l.cfg.FlushMs)
	l.mu.RUnlock()
	if !due {
		return nil
	}
	return l.Flush()
}

// Flush fsyncs everything appended so far and moves the recovery point to
// the log end. Concurrent callers share fsyncs: whoever waits while one runs
// finds its data covered by the next (group commit).
func (l *Log) Flush() error {
	l.mu.RLock()
	target := l.leoLocked()
	l.mu.RUnlock()
	return l.FlushTo(target)
}

// FlushTo makes sure offsets below target are on disk. The OnFlush
// callback runs after flushMu is released, so the next group fsync does not
// wait for it.
func (l *Log) FlushTo(target int64) error {
	l.flushMu.Lock()
	cb, err := l.flushToLocked(target)
	l.flushMu.Unlock()
	if cb != nil {
		cb()
	}
	return err
}

// flushToLocked is FlushTo with flushMu held; it returns the callback to
// run if the recovery point moved.
func (l *Log) flushToLocked(target int64) (func(), error) {
	l.mu.RLock()
	if ferr := l.flushErr; ferr != nil {
		// A failed fsync is not retried: Linux may have dropped the dirty
		// pages it could not write, and a later fsync would succeed and
		// move the recovery point (and the HW) over data that is not on
		// disk. The log stays failed until the broker restarts and
		// recovery checks the tail (Kafka takes the log dir offline).
		l.mu.RUnlock()
		return nil, ferr
	}
	if l.recoveryPoint >= target || l.closed {
		l.mu.RUnlock()
		return nil, nil
	}
	end := l.leoLocked()
	pending := l.unflushed
	var dirty []*segment
	var txnFiles []string
	for _, s := range l.segs {
		if s.dirty || s.next > l.recoveryPoint {
			dirty = append(dirty, s)
			if len(s.txn.entries) > 0 {
				txnFiles = append(txnFiles, s.txn.path)
			}
		}
	}
	stats := l.cfg.Stats
	l.mu.RUnlock()
	// fsync without the log lock: appends go on meanwhile. (Segments are
	// only removed under flushMu, so the files stay open.)
	start := time.Now()
	for _, s := range dirty {
		f, err := s.use()
		if err == nil {
			err = l.fsync(f)
			s.done()
		}
		if err != nil {
			return nil, l.flushFailed(errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "fsync %s: %v", s.path, err))
		}
	}
	// The .txnindex of a segment below the recovery point is trusted at the
	// next Open and cannot be checked against the log, so it must be on disk
	// as well.
	for _, p := range txnFiles {
		if err := syncFile(l.fs, p); err != nil {
			return nil, l.flushFailed(errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "fsync %s: %v", p, err))
		}
	}
	if stats != nil && len(dirty) > 0 {
		stats.Flushes.Add(1)
		stats.FlushNanos.Add(int64(time.Since(start)))
	}
	l.mu.Lock()
	for _, s := range dirty {
		if s.next <= end {
			s.dirty = false
		}
		_ = s.idx.flush(false)
		_ = s.tix.flush(false)
	}
	if end > l.recoveryPoint {
		l.recoveryPoint = end
	}
	// Messages appended while the fsync ran are still unflushed.
	if l.unflushed -= pending; l.unflushed < 0 {
		l.unflushed = 0
	}
	l.lastFlushMs = l.clk.Now().UnixMilli()
	l.signalFlushedLocked(nil)
	cb := l.onRecoverPoint
	l.mu.Unlock()
	return cb, nil
}

// Failed is the fsync failure that stopped the log's writes, or nil.
func (l *Log) Failed() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.flushErr
}

// fsync syncs a segment file (tests replace it through syncHook).
func (l *Log) fsync(f File) error {
	if l.syncHook != nil {
		return l.syncHook(f)
	}
	return f.Sync()
}

// flushFailed makes err the log's flush failure (sticky, see FlushTo),
// wakes WaitDurable and returns err.
func (l *Log) flushFailed(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failLocked(err)
}

// failLocked records a failed fsync of the log's files (FlushTo, a roll's
// seal, truncation, the .txnindex): from then on the log takes no appends
// and fsyncs nothing more, so nothing can move the recovery point (and the
// HW) over pages the kernel may have dropped. Reads go on.
func (l *Log) failLocked(err error) error {
	if l.flushErr == nil && l.cfg.Stats != nil {
		l.cfg.Stats.fail(fmt.Errorf("%s: %w", l.key, err))
	}
	l.signalFlushedLocked(err)
	return err
}

// SetSyncHookForTesting replaces the fsync of the log's segment files in
// flushes (tests of storage failures outside this package).
func (l *Log) SetSyncHookForTesting(f func(File) error) {
	l.flushMu.Lock()
	l.syncHook = f
	l.flushMu.Unlock()
}

// OnFlush registers a function called after every flush that moved the
// recovery point (the replication manager re-evaluates the high watermark
// under flush.messages=1). It runs without the log's locks but possibly
// under the caller's (an append's), so it must not block.
func (l *Log) OnFlush(f func()) {
	l.mu.Lock()
	l.onRecoverPoint = f
	l.mu.Unlock()
}
