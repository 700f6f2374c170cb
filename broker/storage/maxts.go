package storage

import (
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// MaxTimestampOffset answers ListOffsets' max-timestamp query (-3,
// KIP-734): the offset and timestamp of the first record with the largest
// timestamp among the data records from the log start to upperBound;
// ok=false when there is none.
func (l *Log) MaxTimestampOffset(upperBound int64) (offset, timestamp int64, ok bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	best := int64(-1)
	for _, s := range l.segs {
		if s.base >= upperBound || s.next <= l.logStart {
			continue
		}
		_, serr := s.scan(0, false, func(h *record.Header, bpos int64, batch []byte) error {
			if s.skipDamaged(bpos) || h.IsControl() || h.MaxTimestamp <= best || h.NextOffset() <= l.logStart || h.BaseOffset >= upperBound {
				return nil
			}
			_, recs, derr := record.Decode(batch)
			if derr != nil {
				return derr
			}
			for _, r := range recs {
				if r.Offset >= l.logStart && r.Offset < upperBound && r.Timestamp > best {
					best, offset, timestamp, ok = r.Timestamp, r.Offset, r.Timestamp, true
				}
			}
			return nil
		})
		if serr != nil {
			return 0, 0, false, errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "max timestamp lookup in %s: %v", l.key, serr)
		}
	}
	return offset, timestamp, ok, nil
}
