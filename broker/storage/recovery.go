package storage

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// recover loads the segments. Segments that end at or before recoveryPoint
// were fsynced before it was checkpointed and are trusted: their indexes
// are loaded and checked (checkTail), and one whose indexes do not match
// is re-verified alone. The segment holding recoveryPoint and everything
// after it are rescanned with CRC checks (verifySegment).
//
// What recovery may cut is the torn tail of the active segment, the only
// place a crash can leave half-written batches: every sealed segment was
// fsynced when it was rolled. A sealed segment with batches that do not
// verify, or that ends short of the next one, is damage, not a crash: its
// bytes stay on disk and the segments after it are kept; the damaged range
// is fenced (reads of it answer KAFKA_STORAGE_ERROR) and listed in
// DamagedSegmentsFile so every later Open verifies that segment again.
// Every cut and every fence is logged as a WARN and counted in Stats.
func (l *Log) recover(recoveryPoint int64) error {
	// A cleaner's swap a crash interrupted is finished first (or its
	// uncommitted files deleted), so the segments listed below are either
	// all the old ones or all the new ones.
	if err := finishSwapOnOpen(l.fs, l.dir); err != nil {
		return err
	}
	l.cleanedTo = readCleanCheckpoint(l.fs, l.dir)
	l.gapsFrom = readReplicaGaps(l.fs, l.dir)
	entries, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return err
	}
	var bases []int64
	present := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		present[name] = true
		if strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, ".deleted") {
			l.fs.Remove(filepath.Join(l.dir, name))
			continue
		}
		if b, ok := parseBase(name, LogSuffix); ok {
			bases = append(bases, b)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	// Indexes without a log file are leftovers.
	for name := range present {
		for _, suf := range []string{IndexSuffix, TimeIndexSuffix, TxnIndexSuffix} {
			if b, ok := parseBase(name, suf); ok && !present[FileName(b)+LogSuffix] {
				l.fs.Remove(filepath.Join(l.dir, name))
			}
		}
	}
	now := l.clk.Now().UnixMilli()
	if len(bases) == 0 {
		s, err := createSegment(l.fs, l.dir, 0, now, l.cfg.Files)
		if err != nil {
			return err
		}
		l.segs = []*segment{s}
		l.recoveryPoint = 0
		l.loadEpochs(nil)
		return l.writeDamaged()
	}
	for _, b := range bases {
		s, err := openSegment(l.fs, l.dir, b, l.cfg.Files)
		if err != nil {
			return err
		}
		s.gapsTo = l.gapsAllowedLocked()
		l.segs = append(l.segs, s)
	}
	l.logStart = l.segs[0].base
	damaged := readDamaged(l.fs, l.dir)

	rescanned := map[*segment]bool{}
	// Trusted segments: load indexes. A segment known to be damaged, or
	// whose indexes do not match it, is verified again on its own.
	firstRescan := len(l.segs) - 1
	for i, s := range l.segs {
		last := i == len(l.segs)-1
		trusted := !last && l.segs[i+1].base <= recoveryPoint
		if !trusted {
			firstRescan = i
			break
		}
		s.next = l.segs[i+1].base
		if damaged[s.base] {
			if err := l.verifySegment(s, s.next, false); err != nil {
				return err
			}
			rescanned[s] = true
			continue
		}
		if err := l.loadIndexes(s); err != nil {
			l.logger().Warn("segment indexes do not match the segment; rebuilding them from its batches",
				"partition", l.key.String(), "file", s.path, "reason", err.Error())
			if err := l.verifySegment(s, s.next, false); err != nil {
				return err
			}
			rescanned[s] = true
		}
	}
	for i := firstRescan; i < len(l.segs); i++ {
		s := l.segs[i]
		last := i == len(l.segs)-1
		end := int64(-1)
		if !last {
			end = l.segs[i+1].base
		}
		if err := l.verifySegment(s, end, last); err != nil {
			return err
		}
		rescanned[s] = true
	}
	// Empty trailing segments other than the first are removed so that the
	// active segment's base is its first offset.
	for len(l.segs) > 1 && l.active().size == 0 && l.active().base > l.segs[len(l.segs)-2].next {
		if err := l.active().remove(); err != nil {
			return err
		}
		l.segs = l.segs[:len(l.segs)-1]
	}
	// Rescanned segments that are no longer active are sealed again: their
	// time index gets back the entry that records their max timestamp,
	// without which the next Open would find their newest record too old
	// (retention) or miss it (OffsetForTimestamp).
	for _, s := range l.segs[:len(l.segs)-1] {
		if rescanned[s] {
			if err := s.seal(); err != nil {
				return err
			}
		}
	}
	// The recovery point stays where the checkpoint put it (never past the
	// log end). Every sealed segment was fsynced when it was rolled, so it
	// may move up to the active segment's base: the next crash rescans no
	// more than the active segment and what the checkpoint had not caught
	// up with.
	l.recoveryPoint = recoveryPoint
	if ab := l.active().base; l.recoveryPoint < ab {
		l.recoveryPoint = ab
	}
	if l.recoveryPoint > l.leoLocked() {
		l.recoveryPoint = l.leoLocked()
	}
	if l.recoveryPoint < l.logStart {
		l.recoveryPoint = l.logStart
	}
	if err := l.writeDamaged(); err != nil {
		return err
	}
	l.loadEpochs(rescanned)
	replayFrom := l.leoLocked()
	for s := range rescanned {
		if s.base < replayFrom {
			replayFrom = s.base
		}
	}
	return l.rebuildProducerStateLocked(l.leoLocked(), replayFrom, rescanned)
}

// DamagedSegmentsFile lists, one base offset a line, the segments of a
// partition that recovery found damaged and fenced. They are verified on
// every Open until retention or truncation removes them.
const DamagedSegmentsFile = "damaged-segments"

func readDamaged(fsys FS, dir string) map[int64]bool {
	out := map[int64]bool{}
	b, err := orOS(fsys).ReadFile(filepath.Join(dir, DamagedSegmentsFile))
	if err != nil {
		return out
	}
	for _, f := range strings.Fields(string(b)) {
		if v, err := strconv.ParseInt(f, 10, 64); err == nil {
			out[v] = true
		}
	}
	return out
}

// writeDamaged brings DamagedSegmentsFile up to date with the segments'
// damage (removing it when there is none).
func (l *Log) writeDamaged() error {
	return writeDamagedList(l.fs, l.dir, l.damagedListLocked())
}

// damagedListLocked is DamagedSegmentsFile's content for l.segs.
func (l *Log) damagedListLocked() string {
	var b strings.Builder
	for _, s := range l.segs {
		if s.damaged {
			fmt.Fprintf(&b, "%d\n", s.base)
		}
	}
	return b.String()
}

// writeDamagedList writes DamagedSegmentsFile (content from
// damagedListLocked) without the log's lock; callers hold flushMu.
func writeDamagedList(fsys FS, dir, content string) error {
	fsys = orOS(fsys)
	path := filepath.Join(dir, DamagedSegmentsFile)
	if content == "" {
		if err := fsys.Remove(path); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	}
	if old, err := fsys.ReadFile(path); err == nil && string(old) == content {
		return nil
	}
	return writeFileAtomic(fsys, path, []byte(content))
}

// DamagedRanges lists the offset ranges recovery fenced off ([from, to)
// each), oldest first.
func (l *Log) DamagedRanges() [][2]int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out [][2]int64
	for _, s := range l.segs {
		if s.damaged {
			out = append(out, [2]int64{s.dmgFrom, s.dmgTo})
		}
	}
	return out
}

func (l *Log) logger() *slog.Logger {
	if l.cfg.Logger != nil {
		return l.cfg.Logger
	}
	return slog.Default()
}

// verifySegment re-reads a segment with CRC checks and rebuilds its offset
// and time indexes (its .txnindex is cleared here and rebuilt by the
// producer-state replay). end is the next segment's base offset, or -1
// for the active segment.
//
// A batch that does not verify is handled by where it is:
//   - followed by a batch that verifies (the bad one's length still leads
//     to it): the bad batch's offsets are fenced and the scan goes on;
//   - in the active segment, with nothing verifiable after it: a torn tail.
//     The file is cut there (as Kafka does), the only case in which
//     recovery removes bytes;
//   - in a sealed segment, with nothing verifiable after it: fenced up to
//     the next segment's base. A sealed segment that ends short of the
//     next segment's base is fenced the same way.
//
// A segment has at most one fenced range; a second one widens it.
func (l *Log) verifySegment(s *segment, end int64, active bool) error {
	s.idx.reset()
	s.tix.reset()
	s.maxTs = -1
	s.bytesSinceIndex = 0
	s.next = s.base
	s.damaged = false
	first := true
	fn := func(h *record.Header, pos int64, _ []byte) error {
		if first && h.MaxTimestamp > 0 {
			s.rollBase = h.MaxTimestamp
		}
		first = false
		s.indexBatch(h, pos, l.cfg.IndexIntervalBytes)
		return nil
	}
	pos, next := int64(0), s.base
	for {
		res, err := s.scanFrom(pos, next, true, fn)
		if err != nil {
			return err
		}
		pos, next = res.end, res.next
		if res.corrupt == nil {
			break
		}
		if rpos, rnext, ok := s.resync(pos, next); ok {
			l.fence(s, next, rnext, pos, rpos, res.corrupt)
			pos, next = rpos, rnext
			// Index the next good batch, so reads after the fenced range
			// start there rather than walking through it.
			s.bytesSinceIndex = l.cfg.IndexIntervalBytes
			continue
		}
		if active {
			cut := s.size - pos
			l.logger().Warn("recovery truncated the torn tail of the active segment",
				"partition", l.key.String(), "file", s.path, "offset", next, "position", pos,
				"bytes", cut, "reason", res.corrupt.Error())
			if st := l.cfg.Stats; st != nil {
				st.RecoveryTruncatedBytes.Add(cut)
			}
			if err := s.truncateFile(pos); err != nil {
				return err
			}
			s.size = pos
			s.dirty = true
			break
		}
		to := end
		if to < next {
			to = next
		}
		l.fence(s, next, to, pos, s.size, res.corrupt)
		next = to
		break
	}
	// Below the clean checkpoint a segment may end short of the next one:
	// the cleaner removed its last records.
	if !active && next < end && end > s.gapsTo {
		l.fence(s, next, end, s.size, s.size, fmt.Errorf("the segment's batches end at offset %d, the next segment starts at %d", next, end))
		next = end
	}
	s.next = next
	if err := s.txn.reset(); err != nil {
		return err
	}
	if err := s.idx.flush(false); err != nil {
		return err
	}
	return s.tix.flush(false)
}

// fence marks offsets [from, to) at bytes [pos, endPos) of s as damaged
// (widening an earlier fenced range of s), logs it and counts it.
func (l *Log) fence(s *segment, from, to, pos, endPos int64, why error) {
	if s.damaged {
		from, pos = s.dmgFrom, s.dmgPos
	}
	s.damaged = true
	s.dmgFrom, s.dmgTo, s.dmgPos, s.dmgEnd, s.dmgWhy = from, to, pos, endPos, why.Error()
	l.logger().Warn("recovery found damaged batches in a segment; keeping the segment and every later one, and refusing reads of the damaged offsets",
		"partition", l.key.String(), "file", s.path, "fromOffset", from, "toOffset", to,
		"position", pos, "bytes", endPos-pos, "reason", why.Error())
	if st := l.cfg.Stats; st != nil {
		st.RecoveryFencedBytes.Add(endPos - pos)
	}
}

// resync looks past the batch at pos that did not verify: if its header's
// length leads to a batch that verifies and whose offset is above next,
// it returns that batch's position and base offset.
func (s *segment) resync(pos, next int64) (int64, int64, bool) {
	if s.size-pos < record.HeaderSize {
		return 0, 0, false
	}
	hb, err := s.readAt(pos, record.HeaderSize)
	if err != nil {
		return 0, 0, false
	}
	h, _ := record.ParseHeader(hb)
	if h.Magic != record.Magic || h.BatchLength < record.HeaderSize-record.LogOverhead {
		return 0, 0, false
	}
	q := pos + int64(h.Size())
	if q+record.HeaderSize > s.size {
		return 0, 0, false
	}
	hb, err = s.readAt(q, record.HeaderSize)
	if err != nil {
		return 0, 0, false
	}
	h2, _ := record.ParseHeader(hb)
	if h2.Magic != record.Magic || h2.BatchLength < record.HeaderSize-record.LogOverhead || q+int64(h2.Size()) > s.size || h2.BaseOffset <= next {
		return 0, 0, false
	}
	b, err := s.readAt(q, h2.Size())
	if err != nil {
		return 0, 0, false
	}
	if _, err := record.Validate(b); err != nil {
		return 0, 0, false
	}
	return q, h2.BaseOffset, true
}

// loadIndexes loads and checks a trusted segment's three indexes. Besides
// each file's own consistency, the segment's tail is checked against them
// (checkTail), so an index that was cut short or points at the wrong place
// is rebuilt rather than trusted.
func (l *Log) loadIndexes(s *segment) error {
	if err := s.idx.load(s.size); err != nil {
		return err
	}
	if err := s.tix.load(s.next - s.base); err != nil {
		return err
	}
	if err := s.txn.load(s.base, s.next); err != nil {
		return err
	}
	maxTs, err := l.checkTail(s)
	if err != nil {
		return err
	}
	s.maxTs = maxTs
	// Should truncation make this segment active again, its next index
	// entry comes index.interval.bytes after the last one.
	s.bytesSinceIndex = int(s.size)
	if n := len(s.idx.pos); n > 0 {
		s.bytesSinceIndex = int(s.size - int64(s.idx.pos[n-1]))
	}
	if s.size >= record.HeaderSize {
		if hb, err := s.readAt(0, record.HeaderSize); err == nil {
			if h, err := record.ParseHeader(hb); err == nil && h.MaxTimestamp > 0 {
				s.rollBase = h.MaxTimestamp
			}
		}
	}
	return nil
}

// checkTail checks a trusted segment against its loaded indexes by reading
// the batch headers from the last offset-index entry to the end of the
// file: the batch there must have the entry's offset, the batches must
// follow each other up to the file's end and the next segment's base, none
// of them may lack the index entry index.interval.bytes calls for (an
// index cut at an entry boundary), and the time index must hold the
// newest timestamp among them (its last entry, written at roll, is the
// segment's max timestamp). It returns the segment's max timestamp.
func (l *Log) checkTail(s *segment) (int64, error) {
	from, want := int64(0), s.base
	if n := len(s.idx.rel); n > 0 {
		from, want = int64(s.idx.pos[n-1]), s.base+int64(s.idx.rel[n-1])
	}
	interval := int64(l.cfg.IndexIntervalBytes)
	tailMax := int64(-1)
	fromIndex := len(s.idx.rel) > 0
	err := s.walkHeaders(from, func(h *record.Header, pos int64) error {
		// Below the clean checkpoint batches may skip offsets, except
		// where the index says which offset is there.
		gap := h.BaseOffset > want && h.BaseOffset <= s.gapsTo && !(pos == from && fromIndex)
		if h.BaseOffset != want && !gap {
			return fmt.Errorf("%s: batch at position %d has offset %d, the index says %d", s.path, pos, h.BaseOffset, want)
		}
		if pos > from && pos-from >= interval {
			return fmt.Errorf("%s: no index entry for the batch at offset %d, position %d", s.idx.path, h.BaseOffset, pos)
		}
		if h.MaxTimestamp > tailMax {
			tailMax = h.MaxTimestamp
		}
		want = h.NextOffset()
		return nil
	})
	if err != nil {
		return 0, err
	}
	if want != s.next && !(want < s.next && s.next <= s.gapsTo) {
		return 0, fmt.Errorf("%s: batches end at offset %d, the next segment starts at %d", s.path, want, s.next)
	}
	maxTs := tailMax
	if ts, ok := s.tix.maxTimestamp(); ok || tailMax >= 0 {
		if !ok || ts < tailMax {
			return 0, fmt.Errorf("%s: newest timestamp %d is not in the time index", s.tix.path, tailMax)
		}
		maxTs = ts
	}
	return maxTs, nil
}

// loadEpochs reads the leader-epoch checkpoint and checks it against the
// log before trusting it: entries past the log end are dropped (as Kafka
// truncates the epoch cache to the log end on load; a WARN when one
// starts beyond it), and every entry inside the log must name the epoch
// of the batch at its start offset. A checkpoint that is unreadable, does
// not increase, or names an epoch the log does not hold is rebuilt from
// the batches' partitionLeaderEpoch fields (with a WARN), so a lying file
// cannot hold back new epochs forever or mislead a follower's truncation.
func (l *Log) loadEpochs(rescanned map[*segment]bool) {
	entries, err := readEpochCheckpoint(l.fs, l.epochs.path)
	if err == nil {
		err = l.checkEpochs(entries)
	}
	if err == nil {
		leo := l.leoLocked()
		var beyond []EpochEntry
		for _, e := range entries {
			if e.StartOffset > leo {
				beyond = append(beyond, e)
			}
		}
		if len(beyond) > 0 {
			l.logger().Warn("leader-epoch checkpoint has epochs starting beyond the log end; dropping them",
				"partition", l.key.String(), "file", l.epochs.path, "logEnd", leo, "dropped", fmt.Sprint(beyond))
		}
		l.epochs.entries = entries
		_ = l.epochs.truncateFromEnd(leo)
		_ = l.epochs.truncateFromStart(l.logStart)
		return
	}
	if !os.IsNotExist(err) {
		l.logger().Warn("leader-epoch checkpoint is not to be trusted; rebuilding it from the batches",
			"partition", l.key.String(), "file", l.epochs.path, "reason", err.Error())
	}
	missing := os.IsNotExist(err)
	l.epochs.entries = nil
	for _, s := range l.segs {
		_, _ = s.scan(0, false, func(h *record.Header, pos int64, _ []byte) error {
			if !s.skipDamaged(pos) && h.PartitionLeaderEpoch > l.epochs.Latest() {
				l.epochs.entries = append(l.epochs.entries, EpochEntry{h.PartitionLeaderEpoch, h.BaseOffset})
			}
			return nil
		})
	}
	if missing && len(l.epochs.entries) == 0 {
		// A log without a checkpoint and without epochs in its batches (a
		// new partition): an empty checkpoint would say what its absence
		// says, and writing it costs a file, an fsync and a directory
		// fsync per partition created, which adds up at 10 000 partitions.
		return
	}
	_ = l.epochs.flush()
}

// checkEpochs checks each checkpoint entry that starts inside the log
// against the batch holding its start offset: that batch must carry the
// entry's epoch.
func (l *Log) checkEpochs(entries []EpochEntry) error {
	leo := l.leoLocked()
	for _, e := range entries {
		if e.StartOffset < l.logStart || e.StartOffset >= leo {
			continue
		}
		s := l.segs[l.segmentFor(e.StartOffset)]
		if s.inDamage(e.StartOffset) {
			continue
		}
		_, h, ok, err := s.findBatch(e.StartOffset)
		if err != nil {
			return err
		}
		// An epoch starts at a batch boundary, except where the log start
		// moved into its first batch.
		if e.StartOffset < l.gapsAllowedLocked() && (!ok || h.BaseOffset > e.StartOffset) {
			continue // the cleaner may have removed the epoch's first batches
		}
		if !ok || h.BaseOffset > e.StartOffset || h.BaseOffset < e.StartOffset && e.StartOffset != l.logStart {
			return fmt.Errorf("epoch %d starts at offset %d, where no batch of the log starts", e.Epoch, e.StartOffset)
		}
		if h.PartitionLeaderEpoch != e.Epoch {
			return fmt.Errorf("epoch %d starts at offset %d, whose batch was written in epoch %d", e.Epoch, e.StartOffset, h.PartitionLeaderEpoch)
		}
	}
	return nil
}

// rebuildProducerStateLocked reloads producer state as of upTo: the newest
// snapshot at or below snapshotAtMost that reads back cleanly (damaged ones are
// deleted), then every batch after it replayed. Snapshots above upTo are
// deleted. Aborted transactions met in segments of reindex get their
// .txnindex entries back.
func (l *Log) rebuildProducerStateLocked(upTo, snapshotAtMost int64, reindex map[*segment]bool) error {
	if err := deleteSnapshotsAbove(l.fs, l.dir, upTo); err != nil {
		return err
	}
	offs, err := listSnapshots(l.fs, l.dir)
	if err != nil {
		return err
	}
	psm := NewProducerStateManager()
	from := l.logStart
	for i := len(offs) - 1; i >= 0; i-- {
		if offs[i] > snapshotAtMost {
			continue
		}
		if offs[i] < l.logStart {
			break
		}
		path := SnapshotPath(l.dir, offs[i])
		loaded, err := loadSnapshot(l.fs, path)
		if err != nil {
			// Said, not dropped silently: the state comes from an older
			// snapshot or the log's batches instead, which takes longer.
			attrs := []any{"partition", l.key.String(), "file", path, "reason", err.Error()}
			if rerr := l.fs.Remove(path); rerr != nil && !os.IsNotExist(rerr) {
				attrs = append(attrs, "removeErr", rerr.Error())
			}
			l.logger().Warn("producer-state snapshot does not load; deleting it and rebuilding the producer state from an older snapshot or the log", attrs...)
			continue
		}
		psm, from = loaded, offs[i]
		break
	}
	psm.adoptVerifications(l.psm)
	l.psm = psm
	for _, s := range l.segs {
		if s.next <= from || s.base >= upTo {
			continue
		}
		pos := int64(0)
		if from > s.base {
			pos = s.idx.lookup(from)
		}
		seg := s
		_, err := s.scan(pos, false, func(h *record.Header, bpos int64, batch []byte) error {
			if seg.skipDamaged(bpos) || h.BaseOffset < from || h.BaseOffset >= upTo {
				return nil
			}
			if h.IsControl() {
				var target *segment
				if reindex[seg] {
					target = seg
				}
				return l.applyMarkerBatchLocked(h, batch, target)
			}
			l.psm.ApplyData(h)
			return nil
		})
		if err != nil {
			return fmt.Errorf("replay producer state from %d: %w", from, err)
		}
	}
	l.psm.SetMapEndOffset(upTo)
	return nil
}

// TruncateTo removes every batch at or after offset (a follower cutting a
// divergent suffix, KIP-101). Indexes, .txnindex, the epoch history and
// producer state follow.
func (l *Log) TruncateTo(offset int64) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritable(); err != nil {
		return err
	}
	if offset >= l.leoLocked() {
		return nil
	}
	// A cut at or below the log start (or one that "never split a batch"
	// would move there) empties the log and restarts it at the log start,
	// as Kafka's truncateTo does: the log end never drops below the start.
	if offset <= l.logStart {
		return l.truncateFullyLocked(l.logStart, l.logStart)
	}
	l.truncations++
	for len(l.segs) > 1 && l.active().base >= offset {
		if err := l.active().remove(); err != nil {
			return errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "truncate %s: %v", l.key, err)
		}
		l.segs = l.segs[:len(l.segs)-1]
	}
	s := l.active()
	var pos int64
	var h record.Header
	var ok bool
	var err error
	if s.inDamage(offset) {
		// Never walk a fenced range: cut where it starts.
		if s.dmgFrom <= l.logStart {
			return l.truncateFullyLocked(l.logStart, l.logStart)
		}
		pos, offset = s.dmgPos, s.dmgFrom
		err = s.truncateAt(pos, offset)
	} else {
		pos, h, ok, err = s.findBatch(offset)
	}
	if err != nil {
		return errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "truncate %s: %v", l.key, err)
	}
	if ok {
		// Never split a batch: cut before the one holding offset, unless
		// that would end the log below its start (a start inside the batch).
		if h.BaseOffset <= l.logStart {
			return l.truncateFullyLocked(l.logStart, l.logStart)
		}
		if h.BaseOffset < offset {
			offset = h.BaseOffset
		}
		if err := s.truncateAt(pos, offset); err != nil {
			return errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "truncate %s: %v", l.key, err)
		}
	} else if err == nil && !s.inDamage(offset) && s.next > offset {
		// offset is in the gap the cleaner left at the end of a segment
		// that is active again: no bytes to cut, but the log ends there.
		s.next = offset
	}
	if err := s.syncFile(); err != nil {
		return l.failLocked(errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "truncate %s: %v", l.key, err))
	}
	s.dirty = false
	_ = s.idx.flush(false)
	_ = s.tix.flush(false)
	_ = l.writeDamaged()
	if l.recoveryPoint > offset {
		l.recoveryPoint = offset
	}
	if err := l.epochs.truncateFromEnd(offset); err != nil {
		return errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "truncate epochs %s: %v", l.key, err)
	}
	old := l.psm
	if err := l.rebuildProducerStateLocked(offset, offset, nil); err != nil {
		return err
	}
	// The rebuilt state knows only the unreplicated transactions whose
	// marker it replayed; those completed before its snapshot, with the
	// marker still in the log, go on holding back the first unstable
	// offset until the HW passes the marker. Those whose marker was cut
	// went with it. Those it replayed whose marker a HW heard before had
	// passed are released again at once: otherwise the last stable offset
	// would fall back to the first of them until the partition next told
	// its HW, and a replica promoted meanwhile would publish it.
	l.psm.keepUnreplicatedBelow(old, offset)
	if l.hwHeard.Load() > offset {
		l.hwHeard.Store(offset)
	}
	l.psm.OnHighWatermarkUpdated(l.hwHeard.Load())
	if l.cleanedTo > offset {
		l.setCleanedLocked(offset)
	}
	if l.gapsFrom > offset {
		l.gapsFrom = offset
		if err := writeReplicaGaps(l.fs, l.dir, offset); err != nil {
			l.logger().Warn("could not lower the replicated-gaps mark after a truncation", "partition", l.key.String(), "offset", offset, "reason", err.Error())
		}
	}
	return nil
}

// TruncateFullyAndStartAt empties the log and restarts it at offset (a
// follower whose fetch offset fell below the leader's log start).
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritable(); err != nil {
		return err
	}
	return l.truncateFullyLocked(offset, offset)
}

// truncateFullyLocked empties the log, restarts it (its only, empty
// segment) at base and sets the log start to start (start >= base: a
// follower whose first fetched batch straddles its log start keeps the
// start inside that batch). The log start checkpoint is written first, and
// a failure leaves the log as it was: were it written after the segments
// went, a crash (or a failed write) would bring back an older, higher start
// at the next Open and hide records appended from the new one.
// Callers hold flushMu and mu.
func (l *Log) truncateFullyLocked(base, start int64) error {
	if err := writeOffsetFile(l.fs, filepath.Join(l.dir, LogStartCheckpointFile), start); err != nil {
		return errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "checkpoint the log start offset of %s: %v", l.key, err)
	}
	l.truncations++
	if l.hwHeard.Load() > start {
		l.hwHeard.Store(start)
	}
	for _, s := range l.segs {
		if err := s.remove(); err != nil {
			return errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "truncate %s: %v", l.key, err)
		}
	}
	s, err := createSegment(l.fs, l.dir, base, l.clk.Now().UnixMilli(), l.cfg.Files)
	if err != nil {
		return errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "truncate %s: %v", l.key, err)
	}
	l.segs = []*segment{s}
	l.logStart, l.recoveryPoint = start, base
	_ = l.writeDamaged()
	l.epochs.entries = nil
	_ = l.epochs.flush()
	if err := deleteSnapshotsAbove(l.fs, l.dir, -1); err != nil {
		return err
	}
	psm := NewProducerStateManager()
	psm.adoptVerifications(l.psm)
	l.psm = psm
	l.psm.SetMapEndOffset(base)
	l.setCleanedLocked(base)
	if l.gapsFrom != base {
		l.gapsFrom = base
		_ = writeReplicaGaps(l.fs, l.dir, base)
	}
	return nil
}

// DeleteRetention deletes whole segments below hw that retention.ms or
// retention.bytes no longer keep, never the active one, and moves the log
// start offset. It returns how many segments went.
func (l *Log) DeleteRetention(hw int64) (int, error) {
	// flushMu: FlushTo fsyncs segment files outside the log lock, so a
	// segment must not be closed and removed under it.
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, nil
	}
	// A compact-only log keeps every segment: the cleaner, not retention,
	// decides what goes (Kafka's LogConfig.delete false).
	if !l.cfg.Cleanup.Delete() {
		return 0, nil
	}
	now := l.clk.Now().UnixMilli()
	var total int64
	for _, s := range l.segs {
		total += s.size
	}
	n := 0
	for len(l.segs) > 1 {
		s := l.segs[0]
		if s.next > hw {
			break
		}
		byTime := l.cfg.RetentionMs >= 0 && s.maxTs >= 0 && now-s.maxTs > l.cfg.RetentionMs
		bySize := l.cfg.RetentionBytes >= 0 && total-s.size >= l.cfg.RetentionBytes
		if !byTime && !bySize {
			break
		}
		if err := s.remove(); err != nil {
			return n, err
		}
		total -= s.size
		l.segs = l.segs[1:]
		n++
	}
	if n > 0 {
		_ = l.writeDamaged()
		// DeleteRecords may have put the start inside the new first segment.
		l.logStart = max(l.logStart, l.segs[0].base)
		if l.recoveryPoint < l.logStart {
			l.recoveryPoint = l.logStart
		}
		_ = l.epochs.truncateFromStart(l.logStart)
		if l.cleanedTo > 0 && l.cleanedTo < l.logStart {
			l.setCleanedLocked(l.logStart)
		}
		// A marker below the log start is below the HW: nothing there
		// holds back the first unstable offset any more.
		l.psm.OnHighWatermarkUpdated(l.logStart)
		offs, _ := listSnapshots(l.fs, l.dir)
		// Keep the snapshot at the new start so a restart can replay from it.
		for _, o := range offs {
			if o < l.logStart {
				l.fs.Remove(SnapshotPath(l.dir, o))
			}
		}
	}
	return n, nil
}
