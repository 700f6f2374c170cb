package storage

import (
	"path/filepath"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// LogStartCheckpointFile holds a log start offset that is not a segment's
// base: one that DeleteRecords (Kafka API 21) moved into a segment, or a
// follower's that followed its leader's. Open takes the larger of it and
// the first segment's base. (Kafka keeps one log-start-offset-checkpoint
// per data directory; Strand keeps one file per partition, like its other
// checkpoints.)
const LogStartCheckpointFile = "log-start-offset-checkpoint"

// AdvanceLogStart moves the log start offset up to offset (never down, never
// past the log end): the records below it can no longer be read (a fetch
// below answers OFFSET_OUT_OF_RANGE). Whole segments below the new start
// are deleted, as retention deletes them. The new start is checkpointed
// before it is used, so it survives a restart. It returns the log start
// offset after the call.
//
// Lock order (ARCHITECTURE.md): flushMu serialises every change of the log
// start and every segment removal (TruncateTo, TruncateFullyAndStartAt,
// DeleteRetention, the cleaner's swap), so the start and the log end cannot
// move down while the checkpoint is written without mu; the fsyncs of the
// checkpoint and the file deletes run without mu, which is taken only to
// check and to publish the new start.
func (l *Log) AdvanceLogStart(offset int64) (int64, error) {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	if err := l.checkWritable(); err != nil {
		start := l.logStart
		l.mu.Unlock()
		return start, err
	}
	if offset <= l.logStart {
		start := l.logStart
		l.mu.Unlock()
		return start, nil
	}
	if leo := l.leoLocked(); offset > leo {
		start := l.logStart
		l.mu.Unlock()
		return start, errs.New(pb.ErrorCode_OFFSET_OUT_OF_RANGE, "log start offset %d of %s would be past the log end %d", offset, l.key, leo)
	}
	old := l.logStart
	l.mu.Unlock()

	// Durable before anyone can see the new start or a segment goes: a
	// crash after this point restarts at offset, before it at the old start.
	// (Appends may run meanwhile: they only move the log end up.)
	if err := writeOffsetFile(l.fs, filepath.Join(l.dir, LogStartCheckpointFile), offset); err != nil {
		return old, errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "checkpoint the log start offset of %s: %v", l.key, err)
	}

	l.mu.Lock()
	if err := l.checkWritable(); err != nil {
		// Closed meanwhile: the checkpoint holds the new start, which the
		// next Open applies.
		l.mu.Unlock()
		return old, err
	}
	l.logStart = offset
	var gone []*segment
	for len(l.segs) > 1 && l.segs[0].next <= offset && l.segs[1].base <= offset {
		gone = append(gone, l.segs[0])
		l.segs = l.segs[1:]
	}
	if l.recoveryPoint < l.logStart {
		l.recoveryPoint = l.logStart
	}
	_ = l.epochs.truncateFromStart(l.logStart)
	if l.cleanedTo > 0 && l.cleanedTo < l.logStart {
		l.setCleanedLocked(l.logStart)
	}
	l.psm.OnHighWatermarkUpdated(l.logStart)
	firstBase := l.segs[0].base
	damaged := l.damagedListLocked()
	start := l.logStart
	l.mu.Unlock()

	// Readers hold mu while they read, so no reader reaches the segments
	// taken out of l.segs above; flushMu keeps FlushTo off their files.
	if len(gone) > 0 {
		for _, s := range gone {
			if err := s.remove(); err != nil {
				return start, errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "delete a segment of %s below its log start: %v", l.key, err)
			}
		}
		_ = writeDamagedList(l.fs, l.dir, damaged)
		offs, _ := listSnapshots(l.fs, l.dir)
		for _, o := range offs {
			if o < firstBase {
				l.fs.Remove(SnapshotPath(l.dir, o))
			}
		}
	}
	return start, nil
}

// loadLogStartLocked applies LogStartCheckpointFile after recovery: the log
// start is the larger of the first segment's base and the checkpoint,
// never past the log end.
func (l *Log) loadLogStartLocked() {
	ck := readOffsetFile(l.fs, filepath.Join(l.dir, LogStartCheckpointFile))
	if ck <= l.logStart {
		return
	}
	l.logStart = min(ck, l.leoLocked())
	if l.recoveryPoint < l.logStart {
		l.recoveryPoint = l.logStart
	}
	_ = l.epochs.truncateFromStart(l.logStart)
}
