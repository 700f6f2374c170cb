package storage

import (
	"container/list"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/strand-io/strand/record"
)

// Segment file suffixes, as Kafka names them.
const (
	LogSuffix       = ".log"
	IndexSuffix     = ".index"
	TimeIndexSuffix = ".timeindex"
	TxnIndexSuffix  = ".txnindex"
	SnapshotSuffix  = ".snapshot"
)

// FileName is the 20-digit zero-padded offset Kafka names segment files by.
func FileName(offset int64) string { return fmt.Sprintf("%020d", offset) }

// parseBase reads the base offset from a segment file name.
func parseBase(name, suffix string) (int64, bool) {
	if !strings.HasSuffix(name, suffix) {
		return 0, false
	}
	s := strings.TrimSuffix(name, suffix)
	if len(s) != 20 {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// segment is one .log file and its indexes. Its mutable fields are guarded
// by the owning Log's lock.
type segment struct {
	base     int64
	path     string // the .log file
	cache    *FileCache
	fmu      sync.Mutex // guards f when cache is nil (else cache.mu)
	fs       FS
	f        File          // open while in use or cached (files.go)
	refs     int           // users of f (cache.mu)
	elem     *list.Element // in cache.idle while open and unused
	gone     bool          // closed for good
	size     int64
	next     int64 // offset after the last batch (== base when empty)
	maxTs    int64 // largest batch maxTimestamp
	rollBase int64 // ms timestamp segment.ms counts from
	idx      offsetIndex
	tix      timeIndex
	txn      txnIndex

	bytesSinceIndex int
	dirty           bool // bytes written since the last fsync
	// gapsTo: batches whose base offset is at or below it may skip
	// offsets (the cleaner removed records there), and a segment ending
	// at or below it may end short of the next one.
	gapsTo int64

	// A damaged range found by recovery (recovery.go): batches that do not
	// verify in a segment that must not be cut. Its bytes stay on disk but
	// are never served; offsets in [dmgFrom, dmgTo) answer
	// KAFKA_STORAGE_ERROR, bytes [dmgPos, dmgEnd) are never read out.
	damaged bool
	dmgFrom int64
	dmgTo   int64
	dmgPos  int64
	dmgEnd  int64
	dmgWhy  string
}

// inDamage reports whether offset lies in the segment's damaged range.
func (s *segment) inDamage(offset int64) bool {
	return s.damaged && offset >= s.dmgFrom && offset < s.dmgTo
}

// readLimit is where a read starting at byte pos must stop: the start of
// the damaged range when pos is before it, else the end of the file.
func (s *segment) readLimit(pos int64) int64 {
	if s.damaged && pos < s.dmgPos {
		return s.dmgPos
	}
	return s.size
}

// skipDamaged reports whether the batch at byte pos is in the damaged
// range (scans over the whole segment pass it by).
func (s *segment) skipDamaged(pos int64) bool {
	return s.damaged && pos >= s.dmgPos && pos < s.dmgEnd
}

func segmentPaths(dir string, base int64) (logp, idx, tix, txn string) {
	n := filepath.Join(dir, FileName(base))
	return n + LogSuffix, n + IndexSuffix, n + TimeIndexSuffix, n + TxnIndexSuffix
}

func newSegmentStruct(fsys FS, dir string, base int64, cache *FileCache) *segment {
	fsys = orOS(fsys)
	logp, idx, tix, txn := segmentPaths(dir, base)
	return &segment{
		fs: fsys, base: base, path: logp, cache: cache, next: base, maxTs: -1,
		idx: offsetIndex{fs: fsys, path: idx, base: base},
		tix: timeIndex{fs: fsys, path: tix, base: base},
		txn: txnIndex{fs: fsys, path: txn},
	}
}

// createSegment makes a new empty segment (truncating leftovers of the same name).
func createSegment(fsys FS, dir string, base int64, nowMs int64, cache *FileCache) (*segment, error) {
	fsys = orOS(fsys)
	logp, idx, tix, txn := segmentPaths(dir, base)
	f, err := fsys.OpenFile(logp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	for _, p := range []string{idx, tix, txn} {
		if err := fsys.Remove(p); err != nil && !os.IsNotExist(err) {
			return nil, err
		}
	}
	s := newSegmentStruct(fsys, dir, base, cache)
	s.rollBase = nowMs
	return s, nil
}

// openSegment finds an existing segment's log file (opened when first
// used); indexes are loaded by the caller.
func openSegment(fsys FS, dir string, base int64, cache *FileCache) (*segment, error) {
	logp, _, _, _ := segmentPaths(dir, base)
	st, err := orOS(fsys).Stat(logp)
	if err != nil {
		return nil, err
	}
	s := newSegmentStruct(fsys, dir, base, cache)
	s.size = st.Size()
	s.rollBase = st.ModTime().UnixMilli()
	return s, nil
}

// write appends b at the end of the segment.
func (s *segment) write(b []byte) error {
	f, err := s.use()
	if err != nil {
		return err
	}
	defer s.done()
	if _, err := f.WriteAt(b, s.size); err != nil {
		return err
	}
	s.size += int64(len(b))
	s.dirty = true
	return nil
}

// indexBatch updates the sparse indexes for a batch just written at pos.
func (s *segment) indexBatch(h *record.Header, pos int64, interval int) {
	if h.MaxTimestamp > s.maxTs {
		s.maxTs = h.MaxTimestamp
	}
	if s.bytesSinceIndex >= interval {
		s.idx.append(h.BaseOffset, pos)
		s.tix.maybeAppend(s.maxTs, h.BaseOffset)
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += h.Size()
	s.next = h.NextOffset()
}

// sync fsyncs the log file and writes the indexes.
func (s *segment) sync() error {
	if s.dirty {
		if err := s.syncFile(); err != nil {
			return err
		}
		s.dirty = false
	}
	if err := s.idx.flush(false); err != nil {
		return err
	}
	return s.tix.flush(false)
}

// seal finishes a segment that stops being active: a final time-index entry
// for its max timestamp (which is how Open learns the segment's newest
// timestamp), everything on disk, .txnindex included.
func (s *segment) seal() error {
	if s.maxTs >= 0 && s.next > s.base {
		s.tix.maybeAppend(s.maxTs, s.next-1)
	}
	if s.dirty {
		if err := s.syncFile(); err != nil {
			return err
		}
		s.dirty = false
	}
	if err := s.idx.flush(true); err != nil {
		return err
	}
	if err := s.tix.flush(true); err != nil {
		return err
	}
	return s.txn.sync()
}

func (s *segment) close() error { return s.closeFile() }

// syncFile fsyncs the segment's .log file.
func (s *segment) syncFile() error {
	f, err := s.use()
	if err != nil {
		return err
	}
	defer s.done()
	return f.Sync()
}

// truncateFile cuts the .log file at pos.
func (s *segment) truncateFile(pos int64) error {
	f, err := s.use()
	if err != nil {
		return err
	}
	defer s.done()
	return f.Truncate(pos)
}

// remove deletes the segment's files.
func (s *segment) remove() error {
	s.closeFile()
	var errs []error
	for _, p := range []string{s.path, s.idx.path, s.tix.path, s.txn.path} {
		if err := s.fs.Remove(p); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// truncateAt cuts the log file at byte pos (a batch boundary) and drops
// index entries at or past offset.
func (s *segment) truncateAt(pos int64, offset int64) error {
	if err := s.truncateFile(pos); err != nil {
		return err
	}
	s.size = pos
	s.next = offset
	if s.damaged {
		switch {
		case pos <= s.dmgPos:
			s.damaged = false // the damaged range went with the cut
		case pos < s.dmgEnd || offset < s.dmgTo:
			s.dmgEnd, s.dmgTo = min(s.dmgEnd, pos), min(s.dmgTo, offset)
		}
	}
	s.idx.truncateTo(offset)
	s.tix.truncateTo(offset)
	s.dirty = true
	// The max timestamp and the bytes since the last index entry are those
	// of what is left: the time index up to the last offset-index entry,
	// then the batches after it.
	s.maxTs = -1
	if ts, ok := s.tix.maxTimestamp(); ok {
		s.maxTs = ts
	}
	from := int64(0)
	if n := len(s.idx.pos); n > 0 {
		from = int64(s.idx.pos[n-1])
	}
	if err := s.walkHeaders(from, func(h *record.Header, _ int64) error {
		if h.MaxTimestamp > s.maxTs {
			s.maxTs = h.MaxTimestamp
		}
		return nil
	}); err != nil {
		return err
	}
	s.bytesSinceIndex = int(pos - from)
	return s.txn.truncateTo(offset)
}

// walkHeaders reads the batch headers from byte pos to the end of the
// segment (without reading the records or checking CRCs), calling fn for
// each. A header that is not a batch's, or a batch running past the end of
// the file, is an error.
func (s *segment) walkHeaders(pos int64, fn func(h *record.Header, pos int64) error) error {
	if pos >= s.size {
		return nil
	}
	f, err := s.use()
	if err != nil {
		return err
	}
	defer s.done()
	var hb [record.HeaderSize]byte
	for pos < s.size {
		if s.size-pos < record.HeaderSize {
			return fmt.Errorf("%s: %d trailing bytes at position %d are not a batch header", s.path, s.size-pos, pos)
		}
		if _, err := f.ReadAt(hb[:], pos); err != nil {
			return fmt.Errorf("read %s at %d: %v", s.path, pos, err)
		}
		h, _ := record.ParseHeader(hb[:])
		if h.Magic != record.Magic || h.BatchLength < record.HeaderSize-record.LogOverhead || int64(h.Size()) > s.size-pos {
			return fmt.Errorf("%s: bad batch header at position %d (magic %d, batchLength %d)", s.path, pos, h.Magic, h.BatchLength)
		}
		if err := fn(&h, pos); err != nil {
			return err
		}
		pos += int64(h.Size())
	}
	return nil
}

// scanResult tells where a scan stopped.
type scanResult struct {
	end     int64 // byte position after the last good batch
	next    int64 // offset after the last good batch (base if none)
	corrupt error // why the scan stopped early, nil at a clean end
}

// scan reads batches from byte pos to the end of the segment, calling fn
// for each. The batch slice is only valid during the call. With verify
// (always from pos 0), every CRC is checked and every batch must start
// where the previous one ended, the first at the segment's base (Strand's
// logs have no gaps, and baseOffset is outside the CRC); the scan stops at
// the first torn or corrupt batch and reports it in corrupt (not as an
// error: recovery truncates there).
func (s *segment) scan(pos int64, verify bool, fn func(h *record.Header, pos int64, batch []byte) error) (scanResult, error) {
	return s.scanFrom(pos, s.base, verify, fn)
}

// scanFrom is scan starting at byte pos, where the batch with offset next
// is expected (verify checks offsets from there).
func (s *segment) scanFrom(pos, next int64, verify bool, fn func(h *record.Header, pos int64, batch []byte) error) (scanResult, error) {
	res := scanResult{end: pos, next: next}
	if pos >= s.size {
		return res, nil
	}
	f, err := s.use()
	if err != nil {
		return res, err
	}
	defer s.done()
	const chunk = 1 << 20
	buf := make([]byte, 0, chunk)
	for res.end < s.size {
		want := int64(chunk)
		if rem := s.size - res.end; rem < want {
			want = rem
		}
		buf = buf[:want]
		n, err := f.ReadAt(buf, res.end)
		if int64(n) < want {
			return res, fmt.Errorf("read %s at %d: %v", s.path, res.end, err)
		}
		if len(buf) < record.HeaderSize {
			res.corrupt = fmt.Errorf("%d trailing bytes at position %d are not a whole batch header", len(buf), res.end)
			return res, nil
		}
		h, _ := record.ParseHeader(buf)
		if h.Magic != record.Magic || h.BatchLength < record.HeaderSize-record.LogOverhead {
			res.corrupt = fmt.Errorf("bad batch header at position %d (magic %d, batchLength %d)", res.end, h.Magic, h.BatchLength)
			return res, nil
		}
		size := int64(h.Size())
		if size > s.size-res.end {
			res.corrupt = fmt.Errorf("batch at position %d claims %d bytes, %d remain", res.end, size, s.size-res.end)
			return res, nil
		}
		if size > int64(len(buf)) {
			buf = make([]byte, size)
			if n, err := f.ReadAt(buf, res.end); int64(n) < size {
				return res, fmt.Errorf("read %s at %d: %v", s.path, res.end, err)
			}
		}
		// Walk every whole batch in the buffer.
		off := int64(0)
		for off+record.HeaderSize <= int64(len(buf)) {
			b := buf[off:]
			h, _ := record.ParseHeader(b)
			if h.Magic != record.Magic || h.BatchLength < record.HeaderSize-record.LogOverhead {
				res.corrupt = fmt.Errorf("bad batch header at position %d (magic %d, batchLength %d)", res.end, h.Magic, h.BatchLength)
				return res, nil
			}
			size := int64(h.Size())
			if size > int64(len(b)) {
				if res.end+size > s.size {
					res.corrupt = fmt.Errorf("batch at position %d claims %d bytes, %d remain", res.end, size, s.size-res.end)
					return res, nil
				}
				break // read the rest with the next chunk
			}
			if verify {
				if _, err := record.Validate(b[:size]); err != nil {
					res.corrupt = fmt.Errorf("batch at position %d (offset %d): %v", res.end, h.BaseOffset, err)
					return res, nil
				}
				if h.BaseOffset != res.next && !(h.BaseOffset > res.next && h.BaseOffset <= s.gapsTo) {
					res.corrupt = fmt.Errorf("batch at position %d has offset %d, expected %d", res.end, h.BaseOffset, res.next)
					return res, nil
				}
				if h.NextOffset()-s.base > math.MaxUint32 {
					res.corrupt = fmt.Errorf("batch at position %d (offset %d) is beyond the segment's 32-bit relative offsets", res.end, h.BaseOffset)
					return res, nil
				}
			}
			if err := fn(&h, res.end, b[:size]); err != nil {
				return res, err
			}
			res.end += size
			res.next = h.NextOffset()
			off += size
		}
		buf = buf[:0]
		if cap(buf) > chunk {
			buf = make([]byte, 0, chunk)
		}
	}
	return res, nil
}

// readAt reads n bytes at pos.
func (s *segment) readAt(pos int64, n int) ([]byte, error) {
	b := make([]byte, n)
	if err := s.readInto(pos, b); err != nil {
		return nil, err
	}
	return b, nil
}

// readInto fills b with the bytes at pos.
func (s *segment) readInto(pos int64, b []byte) error {
	f, err := s.use()
	if err != nil {
		return err
	}
	defer s.done()
	if m, err := f.ReadAt(b, pos); m < len(b) {
		return fmt.Errorf("read %s at %d: %v", s.path, pos, err)
	}
	return nil
}

// findBatch returns the byte position of the batch holding offset (or the
// first batch after it), and that batch's header; ok=false if none.
func (s *segment) findBatch(offset int64) (int64, record.Header, bool, error) {
	pos := s.idx.lookup(offset)
	if pos+record.HeaderSize > s.size {
		return 0, record.Header{}, false, nil
	}
	f, err := s.use()
	if err != nil {
		return 0, record.Header{}, false, err
	}
	defer s.done()
	var hb [record.HeaderSize]byte
	for pos+record.HeaderSize <= s.size {
		if _, err := f.ReadAt(hb[:], pos); err != nil {
			return 0, record.Header{}, false, err
		}
		h, _ := record.ParseHeader(hb[:])
		if h.BatchLength <= 0 {
			return 0, h, false, fmt.Errorf("bad batch header at position %d of %s", pos, s.path)
		}
		if h.LastOffset() >= offset {
			return pos, h, true, nil
		}
		pos += int64(h.Size())
	}
	return 0, record.Header{}, false, nil
}
