package storage

import (
	"os"
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
func (l *Log) AdvanceLogStart(offset int64) (int64, error) {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritable(); err != nil {
		return l.logStart, err
	}
	if offset <= l.logStart {
		return l.logStart, nil
	}
	if leo := l.leoLocked(); offset > leo {
		return l.logStart, errs.New(pb.ErrorCode_OFFSET_OUT_OF_RANGE, "log start offset %d of %s would be past the log end %d", offset, l.key, leo)
	}
	if err := writeOffsetFile(filepath.Join(l.dir, LogStartCheckpointFile), offset); err != nil {
		return l.logStart, errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "checkpoint the log start offset of %s: %v", l.key, err)
	}
	l.logStart = offset
	removed := false
	for len(l.segs) > 1 && l.segs[0].next <= offset && l.segs[1].base <= offset {
		if err := l.segs[0].remove(); err != nil {
			return l.logStart, errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "delete a segment of %s below its log start: %v", l.key, err)
		}
		l.segs = l.segs[1:]
		removed = true
	}
	if removed {
		_ = l.writeDamaged()
		offs, _ := ListSnapshots(l.dir)
		for _, o := range offs {
			if o < l.segs[0].base {
				os.Remove(SnapshotPath(l.dir, o))
			}
		}
	}
	if l.recoveryPoint < l.logStart {
		l.recoveryPoint = l.logStart
	}
	_ = l.epochs.truncateFromStart(l.logStart)
	if l.cleanedTo > 0 && l.cleanedTo < l.logStart {
		l.setCleanedLocked(l.logStart)
	}
	l.psm.OnHighWatermarkUpdated(l.logStart)
	return l.logStart, nil
}

// loadLogStartLocked applies LogStartCheckpointFile after recovery: the log
// start is the larger of the first segment's base and the checkpoint,
// never past the log end.
func (l *Log) loadLogStartLocked() {
	ck := readOffsetFile(filepath.Join(l.dir, LogStartCheckpointFile))
	if ck <= l.logStart {
		return
	}
	l.logStart = min(ck, l.leoLocked())
	if l.recoveryPoint < l.logStart {
		l.recoveryPoint = l.logStart
	}
	_ = l.epochs.truncateFromStart(l.logStart)
}
