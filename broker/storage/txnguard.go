package storage

import (
	"time"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// MarkerFenceTTL is how long a leader keeps the fence of a marker it
// answered with nothing to end (txnGuard.fences). The fence covers one
// race: a partition leader adds its partition to a transaction, and
// before it appends the batch the transaction ends (the producer aborts,
// or a new instance fences it) and the marker arrives. The late batch
// must then be refused, as the marker, had it been written, would have
// refused it by its bumped epoch. The window is the leader's own append
// right after AddPartitionsToTxn answered, well under a second; two
// minutes leave room for a stalled process.
const MarkerFenceTTL = 2 * time.Minute

// maxMarkerFences bounds the fences one partition keeps (only other nodes
// send markers, and a fence lives MarkerFenceTTL at most).
const maxMarkerFences = 10000

// txnGuard is a leader's in-memory transaction bookkeeping that is no part
// of the replicated producer state, guarded by Log.mu:
//
//   - fences: for a producer id, the epoch of a marker the partition
//     answered with nothing to end (MarkerNothingToEnd) and when; batches
//     of that producer at an older epoch are refused for MarkerFenceTTL.
//   - opened: when this log saw each open transaction begin, by the
//     broker's clock (its batches' timestamps are the producer's); a
//     transaction it found open at recovery counts from since, when the
//     log was opened. The administrator's abort uses it.
type txnGuard struct {
	fences map[int64]markerFence
	opened map[int64]int64 // producer id -> ms
	since  int64
}

type markerFence struct {
	epoch int16
	atMs  int64
}

func (g *txnGuard) fence(pid int64, epoch int16, nowMs int64) {
	if g.fences == nil {
		g.fences = map[int64]markerFence{}
	}
	if f, ok := g.fences[pid]; ok && f.epoch > epoch {
		epoch = f.epoch
	}
	if _, ok := g.fences[pid]; !ok && len(g.fences) >= maxMarkerFences {
		for id, f := range g.fences {
			if nowMs-f.atMs >= MarkerFenceTTL.Milliseconds() {
				delete(g.fences, id)
			}
		}
		for id := range g.fences { // still full: drop any one
			if len(g.fences) < maxMarkerFences {
				break
			}
			delete(g.fences, id)
		}
	}
	g.fences[pid] = markerFence{epoch, nowMs}
}

// checkFence refuses a leader append of h older than its producer's fence.
func (g *txnGuard) checkFence(h *record.Header, nowMs int64) error {
	f, ok := g.fences[h.ProducerID]
	if !ok {
		return nil
	}
	if nowMs-f.atMs >= MarkerFenceTTL.Milliseconds() {
		delete(g.fences, h.ProducerID)
		return nil
	}
	if h.ProducerEpoch < f.epoch {
		return errs.New(pb.ErrorCode_INVALID_PRODUCER_EPOCH,
			"producerId=%d: batch epoch %d is older than epoch %d, at which its transaction ended before this batch arrived",
			h.ProducerID, h.ProducerEpoch, f.epoch)
	}
	return nil
}

// appended forgets the fence of a producer that appended at or above it.
func (g *txnGuard) appended(h *record.Header) {
	if f, ok := g.fences[h.ProducerID]; ok && h.ProducerEpoch >= f.epoch {
		delete(g.fences, h.ProducerID)
	}
}

func (g *txnGuard) txnOpened(pid int64, nowMs int64) {
	if g.opened == nil {
		g.opened = map[int64]int64{}
	}
	g.opened[pid] = nowMs
}

func (g *txnGuard) txnEnded(pid int64) { delete(g.opened, pid) }

// openSince is when this log saw pid's open transaction begin.
func (g *txnGuard) openSince(pid int64) int64 {
	if ms, ok := g.opened[pid]; ok {
		return ms
	}
	return g.since
}

// AbortHanging is the administrator's partition-scoped abort of a hanging
// transaction (kafka-transactions abort, Transactions.AbortTransaction):
// it writes an ABORT marker at the producer's current epoch and
// coordinator epoch, as a coordinator of transaction version 1 would, if
// and only if:
//
//   - pid has a transaction open here that starts at startOffset;
//   - epoch is the producer's current epoch here;
//   - the transaction has been open, as far as this log has seen (by the
//     broker's clock, since the log was opened), for at least minOpen:
//     transaction.max.timeout.ms, after which its coordinator, if it
//     still knew it, would have aborted it itself. A younger transaction
//     may still commit; aborting it here would tear it.
//
// Otherwise it refuses with INVALID_TXN_STATE or INVALID_PRODUCER_EPOCH
// and writes nothing. It never commits, never moves the epoch and never
// touches a producer without an open transaction.
func (l *Log) AbortHanging(pid int64, epoch int16, startOffset int64, minOpen time.Duration, leaderEpoch int32) (MarkerResult, error) {
	l.mu.Lock()
	res, err := l.abortHangingLocked(pid, epoch, startOffset, minOpen, leaderEpoch)
	l.mu.Unlock()
	if err != nil {
		return res, err
	}
	return res, l.maybeFlush()
}

func (l *Log) abortHangingLocked(pid int64, epoch int16, startOffset int64, minOpen time.Duration, leaderEpoch int32) (MarkerResult, error) {
	if err := l.checkWritable(); err != nil {
		return MarkerResult{}, err
	}
	s, ok := l.psm.producers[pid]
	if !ok || s.txnFirst < 0 {
		return MarkerResult{}, errs.New(pb.ErrorCode_INVALID_TXN_STATE, "producerId=%d has no open transaction in %s", pid, l.key)
	}
	if s.txnFirst != startOffset {
		return MarkerResult{}, errs.New(pb.ErrorCode_INVALID_TXN_STATE,
			"the open transaction of producerId=%d in %s starts at offset %d, not %d", pid, l.key, s.txnFirst, startOffset)
	}
	if epoch != s.epoch {
		return MarkerResult{}, errs.New(pb.ErrorCode_INVALID_PRODUCER_EPOCH,
			"producerId=%d is at epoch %d in %s, not %d", pid, s.epoch, l.key, epoch)
	}
	now := l.clk.Now().UnixMilli()
	if open := time.Duration(now-l.guard.openSince(pid)) * time.Millisecond; open < minOpen {
		return MarkerResult{}, errs.New(pb.ErrorCode_INVALID_TXN_STATE,
			"the transaction of producerId=%d starting at offset %d in %s has been open for %v as far as this broker has seen; only a transaction open longer than transaction.max.timeout.ms (%v) can be aborted here, since until then its coordinator may still end it (a live transaction aborted here would be torn)",
			pid, startOffset, l.key, open.Round(time.Second), minOpen)
	}
	// At the producer's own epoch, as a version 1 marker.
	return l.writeMarkerLocked(pid, s.epoch, max(s.coordEpoch, 0), record.ControlAbort, leaderEpoch, 1)
}
