package storage

import (
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// ReadResult is what Read returns.
type ReadResult struct {
	// Records holds whole batches, byte for byte as stored; the caller owns
	// it (with ReadInto, it is the start of the buffer alloc returned).
	Records []byte
	// FirstOffset is the base offset of the first batch (it may be below the
	// asked offset: batches are never split).
	FirstOffset int64
	LogStart    int64
	LogEnd      int64
}

// Read returns whole batches starting with the one that holds offset, up to
// maxBytes, never a batch reaching upperBound or beyond (the high watermark
// for consumers, the LSO for read_committed, the log end for followers).
// With minOneBatch the first batch is returned even when it is larger than
// maxBytes, so a consumer can always make progress (KIP-74). Reads stay in
// one segment. An offset outside [log start, log end] is OFFSET_OUT_OF_RANGE.
func (l *Log) Read(offset int64, maxBytes int, upperBound int64, minOneBatch bool) (ReadResult, error) {
	return l.ReadInto(offset, maxBytes, upperBound, minOneBatch, nil)
}

// Alloc returns a buffer of n bytes for a read to fill; its contents may be
// anything (every byte is overwritten).
type Alloc func(n int) []byte

// ReadInto is Read with the file read into a buffer from alloc (nil:
// allocated), called at most once and only for a read that returns
// records. The buffer is as long as the bytes read from the segment, at
// most maxBytes (or the first batch); Records is its start, cut at the last
// whole batch below upperBound.
func (l *Log) ReadInto(offset int64, maxBytes int, upperBound int64, minOneBatch bool, alloc Alloc) (ReadResult, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.checkOpen(); err != nil {
		return ReadResult{}, err
	}
	res := ReadResult{LogStart: l.logStart, LogEnd: l.leoLocked(), FirstOffset: offset}
	if offset < l.logStart || offset > res.LogEnd {
		return res, errs.New(pb.ErrorCode_OFFSET_OUT_OF_RANGE, "offset %d is outside the log [%d, %d] of %s", offset, l.logStart, res.LogEnd, l.key)
	}
	if upperBound > res.LogEnd {
		upperBound = res.LogEnd
	}
	if offset >= upperBound || maxBytes <= 0 && !minOneBatch {
		return res, nil
	}
	for i := l.segmentFor(offset); i < len(l.segs); i++ {
		s := l.segs[i]
		if s.next <= offset {
			continue
		}
		if s.inDamage(offset) {
			return res, errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "offsets %d to %d of %s are in a damaged segment (%s): %s; offset %d onwards can be read",
				s.dmgFrom, s.dmgTo-1, l.key, s.path, s.dmgWhy, s.dmgTo)
		}
		pos, h, ok, err := s.findBatch(offset)
		if err != nil {
			return res, errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "read %s: %v", l.key, err)
		}
		if !ok {
			continue
		}
		if h.BaseOffset >= upperBound || h.NextOffset() > upperBound {
			return res, nil
		}
		res.FirstOffset = h.BaseOffset
		want := int64(maxBytes)
		if rem := s.readLimit(pos) - pos; want > rem {
			want = rem
		}
		if want < int64(h.Size()) {
			if !minOneBatch {
				return res, nil
			}
			want = int64(h.Size())
		}
		var buf []byte
		if alloc != nil {
			buf = alloc(int(want))[:want]
		} else {
			buf = make([]byte, want)
		}
		err = s.readInto(pos, buf)
		if err != nil {
			return res, errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "read %s: %v", l.key, err)
		}
		// Cut at the last whole batch below upperBound.
		end := 0
		for it := record.NewIter(buf); it.Next(); {
			bh := it.Header()
			if bh.NextOffset() > upperBound {
				break
			}
			end = it.Pos()
		}
		res.Records = buf[:end]
		return res, nil
	}
	return res, nil
}

// CollectAborted returns the aborted transactions that overlap
// [startOffset, upperBound), for a read_committed fetch of that range.
//
// An entry lives in the segment of its ABORT marker, which may be any
// number of segments after the range (a long transaction). As in Kafka the
// search stops at the first entry whose LastStableOffset is at or past
// upperBound: every transaction open when that marker was written started
// at or after its LSO, so no later marker can end one that began below
// upperBound.
func (l *Log) CollectAborted(startOffset, upperBound int64) []AbortedTxn {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []AbortedTxn
	for i := l.segmentFor(startOffset); i < len(l.segs); i++ {
		for _, a := range l.segs[i].txn.entries {
			if a.LastOffset >= startOffset && a.FirstOffset < upperBound {
				out = append(out, a)
			}
			if a.LastStableOffset >= upperBound {
				return out
			}
		}
	}
	return out
}

// AllAborted returns every .txnindex entry (tools, tests).
func (l *Log) AllAborted() []AbortedTxn { return l.CollectAborted(l.LogStartOffset(), 1<<62) }

// OffsetForTimestamp finds the first record whose timestamp is at least ts,
// below upperBound; ok=false when there is none.
func (l *Log) OffsetForTimestamp(ts int64, upperBound int64) (offset, timestamp int64, ok bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.segs {
		if s.maxTs < ts || s.base >= upperBound {
			continue
		}
		start := s.tix.lookup(ts)
		pos := s.idx.lookup(start)
		var found bool
		_, err := s.scan(pos, false, func(h *record.Header, bpos int64, batch []byte) error {
			if s.skipDamaged(bpos) {
				return nil
			}
			if found || h.MaxTimestamp < ts || h.IsControl() || h.NextOffset() > upperBound {
				return nil
			}
			_, recs, derr := record.Decode(batch)
			if derr != nil {
				return derr
			}
			for _, r := range recs {
				if r.Timestamp >= ts && r.Offset >= l.logStart {
					offset, timestamp, found = r.Offset, r.Timestamp, true
					return errStopScan
				}
			}
			return nil
		})
		if err != nil && err != errStopScan {
			return 0, 0, false, errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "timestamp lookup in %s: %v", l.key, err)
		}
		if found {
			return offset, timestamp, true, nil
		}
	}
	return 0, 0, false, nil
}

type stopScan struct{}

func (stopScan) Error() string { return "stop" }

var errStopScan error = stopScan{}

// LastBatchIsControl reports whether the batch just below offset is a
// transaction marker (so "the end" of a partition is a control record, and
// a consumer at HW-1 has nothing left to read).
func (l *Log) LastBatchIsControl(offset int64) bool {
	if offset <= 0 {
		return false
	}
	h, ok, err := l.headerOf(offset - 1)
	return err == nil && ok && h.IsControl() && h.LastOffset() == offset-1
}
