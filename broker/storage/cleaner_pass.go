package storage

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/strand-io/strand/record"
)

// What one cleaning pass keeps, Kafka's rules (Cleaner.java,
// MemoryRecords.filterTo, CleanedTransactionMetadata):
//
//   - The dirty section is [clean checkpoint, end), end being the first
//     segment base at or below the upper bound (the caller's HW and first
//     unstable offset), the active segment and the first segment holding a
//     record newer than min.compaction.lag.ms; a damaged segment stops it
//     too. The key → last offset map is built over the dirty section from
//     data batches of transactions that were not aborted; when the map
//     fills, end moves back to the segment where it filled.
//   - Every segment below end is rewritten (the clean section too, so
//     keys overwritten in the dirty section go); nothing at or above end
//     is read for anything but the .txnindex.
//   - A record stays if it has a key, no later offset of that key is in
//     the map, and it is not a tombstone past its batch's delete horizon.
//     Records of aborted transactions go.
//   - A batch that keeps a tombstone and has no delete horizon yet gets
//     one: now + delete.retention.ms (KIP-534).
//   - A transaction marker stays while some batch of its transaction is
//     still in the log (seen by this pass); once none is, it gets a delete
//     horizon like a tombstone and goes in the first pass after it.
//   - A producer's last data batch stays, emptied if none of its records
//     do, so its sequence and epoch survive a restart.
//   - A batch keeps its base and last offsets; retained records keep their
//     offsets and timestamps. Offsets that went are gaps, as in Kafka.

// CleanerCheckpointFile holds the partition's clean checkpoint: the
// offset below which the log has been cleaned (Kafka keeps one
// cleaner-offset-checkpoint per log dir; Strand one per partition). Below
// it, batches may skip offsets, which recovery must accept there.
const CleanerCheckpointFile = "cleaner-offset-checkpoint"

// readCleanCheckpoint returns the stored clean checkpoint, 0 when there is
// none (or it does not parse: cleaning restarts from the log start).
func readCleanCheckpoint(fsys FS, dir string) int64 {
	return readOffsetFile(fsys, filepath.Join(dir, CleanerCheckpointFile))
}

func writeCleanCheckpoint(fsys FS, dir string, off int64) error {
	return writeOffsetFile(fsys, filepath.Join(dir, CleanerCheckpointFile), off)
}

// ReplicaGapsFile holds the offset up to which this replica's log may skip
// offsets because the leader it replicated had cleaned them away (see
// Log.gapsFrom); recovery accepts gaps below it and below the clean
// checkpoint, nowhere else.
const ReplicaGapsFile = "replica-gaps-checkpoint"

// readReplicaGaps returns the stored replicated-gaps mark, 0 when none.
func readReplicaGaps(fsys FS, dir string) int64 {
	return readOffsetFile(fsys, filepath.Join(dir, ReplicaGapsFile))
}

func writeReplicaGaps(fsys FS, dir string, off int64) error {
	return writeOffsetFile(fsys, filepath.Join(dir, ReplicaGapsFile), off)
}

// readOffsetFile reads a one-offset file, 0 when it is missing or does
// not parse.
func readOffsetFile(fsys FS, path string) int64 {
	b, err := orOS(fsys).ReadFile(path)
	if err != nil {
		return 0
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// writeOffsetFile replaces a one-offset file atomically.
func writeOffsetFile(fsys FS, path string, off int64) error {
	return writeFileAtomic(fsys, path, []byte(strconv.FormatInt(off, 10)+"\n"))
}

// gapsAllowedLocked is where recovery stops accepting skipped offsets.
func (l *Log) gapsAllowedLocked() int64 { return max(l.cleanedTo, l.gapsFrom) }

// setCleanedLocked moves the clean checkpoint and persists it: down to a
// truncation point, up to a new log start or past a replicated gap.
func (l *Log) setCleanedLocked(off int64) {
	if off == l.cleanedTo {
		return
	}
	l.cleanedTo = off
	if err := writeCleanCheckpoint(l.fs, l.dir, off); err != nil {
		l.logger().Warn("could not write the clean checkpoint; the next pass cleans more than it must",
			"partition", l.key.String(), "offset", off, "reason", err.Error())
	}
}

// cleanBoundsLocked returns the first dirty and the first uncleanable
// offsets (Cleanable's).
func (l *Log) cleanBoundsLocked(upperBound, nowMs, minCompactionLagMs int64) (int64, int64) {
	firstDirty := max(l.logStart, l.cleanedTo)
	if leo := l.leoLocked(); firstDirty > leo {
		firstDirty = l.logStart
	}
	fu := min(upperBound, l.active().base)
	for _, s := range l.segs {
		if s.damaged {
			// A fenced range cannot be read; Kafka marks such a log
			// uncleanable. Nothing from there on is rewritten.
			fu = min(fu, s.base)
			break
		}
	}
	if minCompactionLagMs > 0 {
		for _, s := range l.segs[:len(l.segs)-1] {
			if s.next > firstDirty && s.maxTs > nowMs-minCompactionLagMs {
				fu = min(fu, s.base)
				break
			}
		}
	}
	return firstDirty, max(fu, firstDirty)
}

// cleanPlan is what a pass read from the log under its lock.
type cleanPlan struct {
	segs       []*segment // the segments to rewrite, then the first kept one
	sizes      []int64    // their sizes and ends when planned (read without the lock)
	nexts      []int64
	logStart   int64
	truncs     uint64 // Log.truncations when planned
	firstDirty int64
	end        int64 // the dirty end: segs[len-1].base
	aborted    map[int64][]AbortedTxn
	lastBatch  map[int64]int64 // producer id → last offset of its last data batch
	// markerEpoch: producer id → its epoch, for producers with no data
	// batch at that epoch (a transaction version 2 marker bumped it): the
	// marker carrying that epoch is all that tells a rebuilt producer
	// state the epoch, so it stays (Kafka keeps it "to ensure fencing").
	markerEpoch map[int64]int16
	interval    int
	maxSeg      int64
}

// abortedIfChanged turns a failure while reading into ErrCleanAborted
// when the log changed under the pass (a segment truncated or deleted).
func (l *Log) abortedIfChanged(p *cleanPlan, err error) error {
	if errors.Is(err, ErrCleanAborted) {
		return err
	}
	l.mu.RLock()
	changed := !l.unchangedLocked(p)
	l.mu.RUnlock()
	if changed {
		return fmt.Errorf("%w: %v", ErrCleanAborted, err)
	}
	return err
}

// unchangedLocked reports whether the segments the plan rewrites, and the
// one after them, are still the log's, with the same sizes.
func (l *Log) unchangedLocked(p *cleanPlan) bool {
	if l.closed || l.logStart != p.logStart || l.truncations != p.truncs || len(l.segs) < len(p.segs) {
		return false
	}
	for i, s := range p.segs {
		if l.segs[i] != s {
			return false
		}
		if i < len(p.segs)-1 && s.size != p.sizes[i] {
			return false
		}
	}
	return true
}

func (l *Log) planClean(o CleanOptions) (*cleanPlan, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, fmt.Errorf("%w: log %s is closed", ErrCleanAborted, l.key)
	}
	p := &cleanPlan{logStart: l.logStart, truncs: l.truncations, aborted: map[int64][]AbortedTxn{}, lastBatch: map[int64]int64{}, markerEpoch: map[int64]int16{},
		interval: l.cfg.IndexIntervalBytes, maxSeg: o.MaxSegmentBytes}
	if p.maxSeg <= 0 {
		p.maxSeg = l.cfg.SegmentBytes
	}
	p.maxSeg = min(p.maxSeg, math.MaxInt32)
	var fu int64
	p.firstDirty, fu = l.cleanBoundsLocked(o.UpperBound, o.NowMs, o.MinCompactionLagMs)
	end := min(fu, o.UpperBound, l.active().base)
	k := 0
	for k < len(l.segs)-1 && l.segs[k].next <= end {
		k++
	}
	for i := 0; i <= k; i++ {
		p.segs = append(p.segs, l.segs[i])
		p.sizes = append(p.sizes, l.segs[i].size)
		p.nexts = append(p.nexts, l.segs[i].next)
	}
	p.end = l.segs[k].base
	for _, s := range l.segs {
		for _, a := range s.txn.entries {
			p.aborted[a.ProducerID] = append(p.aborted[a.ProducerID], a)
		}
	}
	for _, e := range l.psm.Producers() {
		if off := e.LastOffset(); off >= 0 {
			p.lastBatch[e.ProducerID] = off
		} else if e.Epoch >= 0 {
			p.markerEpoch[e.ProducerID] = e.Epoch
		}
	}
	return p, nil
}

// abortedTxnOf returns the aborted transaction the data batch h belongs to.
func (p *cleanPlan) abortedTxnOf(h *record.Header) (AbortedTxn, bool) {
	if !h.IsTransactional() || h.IsControl() {
		return AbortedTxn{}, false
	}
	for _, a := range p.aborted[h.ProducerID] {
		if a.FirstOffset <= h.BaseOffset && h.BaseOffset <= a.LastOffset {
			return a, true
		}
	}
	return AbortedTxn{}, false
}

// A pass's 1 MiB read and write buffers and its batch buffer are reused
// from pass to pass and segment to segment (a pass over a log of many
// segments otherwise allocates, and the GC clears, a buffer per segment).
var (
	cleanerReaders   = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 1<<20) }}
	cleanerWriters   = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 1<<20) }}
	cleanerBatchBufs = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}
)

// eachBatch reads the batches of a segment file up to size, without the
// log's lock or its file cache (the file is opened by name: if the
// segment went meanwhile, the open fails and the pass is aborted).
func eachBatch(fsys FS, path string, size int64, fn func(h *record.Header, batch []byte) error) error {
	f, err := orOS(fsys).OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	r := cleanerReaders.Get().(*bufio.Reader)
	r.Reset(io.LimitReader(f, size))
	bp := cleanerBatchBufs.Get().(*[]byte)
	buf := *bp
	defer func() {
		r.Reset(nil)
		cleanerReaders.Put(r)
		if cap(buf) <= 1<<20 { // not a rare large batch's buffer
			*bp = buf[:0]
		}
		cleanerBatchBufs.Put(bp)
	}()
	for pos := int64(0); pos < size; {
		if cap(buf) < record.HeaderSize {
			buf = make([]byte, 0, 64<<10)
		}
		buf = buf[:record.HeaderSize]
		if _, err := io.ReadFull(r, buf); err != nil {
			return fmt.Errorf("read %s at %d: %v", path, pos, err)
		}
		h, _ := record.ParseHeader(buf)
		if h.Magic != record.Magic || h.BatchLength < record.HeaderSize-record.LogOverhead || int64(h.Size()) > size-pos {
			return fmt.Errorf("%s: bad batch header at position %d", path, pos)
		}
		n := h.Size()
		if cap(buf) < n {
			nb := make([]byte, n)
			copy(nb, buf)
			buf = nb
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf[record.HeaderSize:]); err != nil {
			return fmt.Errorf("read %s at %d: %v", path, pos, err)
		}
		if err := fn(&h, buf); err != nil {
			return err
		}
		pos += int64(n)
	}
	return nil
}

// buildOffsetMap maps each key of the dirty section to its last offset.
// It stops at a segment boundary once MaxMapEntries would be passed
// (always taking the first dirty segment whole), returning where it
// stopped.
func (l *Log) buildOffsetMap(ctx context.Context, p *cleanPlan, o CleanOptions, st *CleanStats) (map[string]int64, int64, error) {
	keys := map[string]int64{}
	mapped := 0
	for i, s := range p.segs[:len(p.segs)-1] {
		if p.nexts[i] <= p.firstDirty {
			continue
		}
		upd := map[string]int64{}
		err := eachBatch(s.fs, s.path, p.sizes[i], func(h *record.Header, batch []byte) error {
			if h.IsControl() || h.LastOffset() < p.firstDirty {
				return nil
			}
			if _, ab := p.abortedTxnOf(h); ab {
				return nil
			}
			_, recs, err := record.Decode(batch)
			if err != nil {
				return fmt.Errorf("%s: batch at offset %d: %v", s.path, h.BaseOffset, err)
			}
			for _, r := range recs {
				if r.Key != nil && r.Offset >= p.firstDirty {
					upd[string(r.Key)] = r.Offset
				}
			}
			return nil
		})
		if err != nil {
			return nil, 0, err
		}
		if err := throttle(ctx, o, int(p.sizes[i])); err != nil {
			return nil, 0, err
		}
		if o.MaxMapEntries > 0 && mapped > 0 {
			fresh := 0
			for k := range upd {
				if _, ok := keys[k]; !ok {
					fresh++
				}
			}
			if len(keys)+fresh > o.MaxMapEntries {
				return keys, s.base, nil
			}
		}
		for k, v := range upd {
			keys[k] = v
		}
		mapped++
	}
	return keys, p.end, nil
}

func throttle(ctx context.Context, o CleanOptions, n int) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrCleanAborted, err)
	}
	if o.Throttle == nil || n <= 0 {
		return nil
	}
	if err := o.Throttle(ctx, n); err != nil {
		return fmt.Errorf("%w: %v", ErrCleanAborted, err)
	}
	return nil
}

// cleaner is one pass's rewrite: the map, and what it learns of
// transactions as it goes (CleanedTransactionMetadata).
type cleaner struct {
	l    *Log
	p    *cleanPlan
	o    CleanOptions
	keys map[string]int64
	st   *CleanStats
	// observed: aborted transactions with a batch still in the log;
	// committed: producers with a batch of a committed transaction seen
	// since their last marker. A marker stays while either says so.
	observed  map[AbortedTxn]bool
	committed map[int64]bool
	horizon   int64 // the earliest delete horizon of a kept batch, -1 none
	pending   int   // bytes not yet reported to the throttle
}

// output is one cleaned segment being written, under temporary names.
type output struct {
	seg  *segment // its indexes and counters; paths are the temporary ones
	f    File
	w    *bufio.Writer
	txns []AbortedTxn
	last int64 // last offset written, -1 none
}

// cleanedSuffix marks a cleaned segment's files until the swap.
const cleanedSuffix = ".cleaned"

func (o *output) paths() []string {
	return []string{o.seg.path, o.seg.idx.path, o.seg.tix.path, o.seg.txn.path}
}

// releaseWriter gives the output's write buffer back for the next one
// (its bytes are flushed or abandoned).
func (o *output) releaseWriter() {
	if o.w != nil {
		o.w.Reset(nil)
		cleanerWriters.Put(o.w)
		o.w = nil
	}
}

func removeOutputs(outs []*output) {
	for _, o := range outs {
		o.releaseWriter()
		if o.f != nil {
			o.f.Close()
		}
		for _, p := range o.paths() {
			o.seg.fs.Remove(p)
		}
	}
}

func (c *cleaner) newOutput(base int64) (*output, error) {
	s := newSegmentStruct(c.l.fs, c.l.dir, base, nil)
	s.path += cleanedSuffix
	s.idx.path += cleanedSuffix
	s.tix.path += cleanedSuffix
	s.txn.path += cleanedSuffix
	f, err := s.fs.OpenFile(s.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	w := cleanerWriters.Get().(*bufio.Writer)
	w.Reset(f)
	return &output{seg: s, f: f, w: w, last: -1}, nil
}

func (o *output) write(h *record.Header, b []byte, interval int) error {
	if _, err := o.w.Write(b); err != nil {
		return err
	}
	if o.seg.size == 0 && h.MaxTimestamp > 0 {
		o.seg.rollBase = h.MaxTimestamp
	}
	o.seg.indexBatch(h, o.seg.size, interval)
	o.seg.size += int64(len(b))
	o.last = h.LastOffset()
	return nil
}

// finish makes the output's files durable: the log, its offset and time
// indexes (with the entry for its max timestamp that sealing adds) and
// its .txnindex, written even when empty so that the swap replaces the
// old one.
func (o *output) finish(next int64) error {
	s := o.seg
	s.next = next
	if s.maxTs >= 0 && o.last >= 0 {
		s.tix.maybeAppend(s.maxTs, o.last)
	}
	if err := o.w.Flush(); err != nil {
		return err
	}
	o.releaseWriter()
	if err := o.f.Sync(); err != nil {
		return err
	}
	if err := o.f.Close(); err != nil {
		return err
	}
	o.f = nil
	s.idx.written, s.tix.written = -1, -1
	if err := s.idx.flush(true); err != nil {
		return err
	}
	if err := s.tix.flush(true); err != nil {
		return err
	}
	s.txn.entries = o.txns
	buf := make([]byte, 0, len(o.txns)*txnIndexEntry)
	for _, a := range o.txns {
		buf = appendTxnEntry(buf, a)
	}
	tf, err := s.fs.OpenFile(s.txn.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = tf.Write(buf)
	if err == nil {
		err = tf.Sync()
	}
	if cerr := tf.Close(); err == nil {
		err = cerr
	}
	s.bytesSinceIndex = int(s.size)
	if n := len(s.idx.pos); n > 0 {
		s.bytesSinceIndex = int(s.size - int64(s.idx.pos[n-1]))
	}
	return err
}

// groups splits the segments to rewrite into runs whose total size stays
// within the segment size and whose offsets fit 32-bit relative offsets
// (Kafka's groupSegmentsBySize, on the sizes before cleaning).
func (p *cleanPlan) groups() [][2]int {
	var out [][2]int
	n := len(p.segs) - 1
	for i := 0; i < n; {
		size := p.sizes[i]
		j := i + 1
		for j < n && size+p.sizes[j] <= p.maxSeg && p.segs[j+1].base-1-p.segs[i].base <= math.MaxInt32 {
			size += p.sizes[j]
			j++
		}
		out = append(out, [2]int{i, j})
		i = j
	}
	return out
}

// rewrite writes the cleaned segments, one per group. An output left
// empty (every batch of its group went) is folded into the one before, so
// the log gets no empty segment but possibly its first.
func (c *cleaner) rewrite(ctx context.Context) ([]*output, error) {
	var outs []*output
	for _, g := range c.p.groups() {
		out, err := c.newOutput(c.p.segs[g[0]].base)
		if err != nil {
			return outs, err
		}
		outs = append(outs, out)
		for i := g[0]; i < g[1]; i++ {
			s := c.p.segs[i]
			if err := eachBatch(s.fs, s.path, c.p.sizes[i], func(h *record.Header, batch []byte) error {
				return c.cleanBatch(ctx, out, h, batch)
			}); err != nil {
				return outs, err
			}
			c.st.BytesRead += c.p.sizes[i]
		}
		next := c.p.segs[g[1]].base
		if err := out.finish(next); err != nil {
			return outs, err
		}
		if out.seg.size == 0 && len(outs) > 1 {
			removeOutputs(outs[len(outs)-1:])
			outs = outs[:len(outs)-1]
			outs[len(outs)-1].seg.next = next
		}
		if err := throttle(ctx, c.o, c.pending); err != nil {
			return outs, err
		}
		c.pending = 0
	}
	for _, out := range outs {
		c.st.BytesWritten += out.seg.size
	}
	return outs, nil
}

func hasTombstone(recs []record.Record) bool {
	for i := range recs {
		if recs[i].Value == nil {
			return true
		}
	}
	return false
}

// cleanBatch applies the rules to one batch and writes what stays.
func (c *cleaner) cleanBatch(ctx context.Context, out *output, h *record.Header, batch []byte) error {
	c.pending += len(batch)
	if c.pending >= 1<<20 {
		if err := throttle(ctx, c.o, c.pending); err != nil {
			return err
		}
		c.pending = 0
	}
	c.st.RecordsRead += int64(h.RecordCount)
	horizon, hasHorizon := h.DeleteHorizonMs()
	newHorizon := c.o.NowMs + c.o.DeleteRetentionMs
	if h.IsControl() {
		typ, _, err := record.ReadControlBatch(batch)
		if err != nil {
			return c.keep(out, h, batch, nil)
		}
		var entry *AbortedTxn
		removable := false
		switch typ {
		case record.ControlAbort:
			for _, a := range c.p.aborted[h.ProducerID] {
				if a.LastOffset == h.BaseOffset {
					entry = &a
					break
				}
			}
			removable = entry == nil || !c.observed[*entry]
		case record.ControlCommit:
			removable = !c.committed[h.ProducerID]
			delete(c.committed, h.ProducerID)
		}
		if ep, ok := c.p.markerEpoch[h.ProducerID]; ok && ep == h.ProducerEpoch {
			removable = false // the producer's last word (see markerEpoch)
		}
		if !removable {
			return c.keep(out, h, batch, entry)
		}
		switch {
		case hasHorizon && horizon <= c.o.NowMs:
			return nil // the marker's transaction left no data, and its horizon passed
		case hasHorizon:
			return c.keep(out, h, batch, entry)
		}
		_, recs, err := record.Decode(batch)
		if err != nil {
			return err
		}
		nb, err := record.BuildRetained(h, recs, newHorizon)
		if err != nil {
			return err
		}
		nh, _ := record.ParseHeader(nb)
		return c.keep(out, &nh, nb, entry)
	}
	last, ok := c.p.lastBatch[h.ProducerID]
	lastOfProducer := ok && h.HasProducerID() && last == h.LastOffset()
	if a, aborted := c.p.abortedTxnOf(h); aborted {
		c.observed[a] = true
		if lastOfProducer {
			return c.keepEmpty(out, h)
		}
		return nil
	}
	if h.IsTransactional() {
		c.committed[h.ProducerID] = true
	}
	_, recs, err := record.Decode(batch)
	if err != nil {
		return fmt.Errorf("batch at offset %d: %v", h.BaseOffset, err)
	}
	kept := recs[:0:0]
	for _, r := range recs {
		if r.Key == nil {
			continue // a compacted topic's record needs a key (Kafka drops it too)
		}
		if off, ok := c.keys[string(r.Key)]; ok && r.Offset < off {
			continue
		}
		if r.Value == nil && hasHorizon && horizon <= c.o.NowMs {
			continue
		}
		kept = append(kept, r)
	}
	switch {
	case len(kept) == 0 && lastOfProducer:
		return c.keepEmpty(out, h)
	case len(kept) == 0:
		return nil
	}
	// A batch has a delete horizon exactly while it holds a tombstone
	// (Kafka's filterTo sets it only on a batch with tombstones or a
	// marker): one whose tombstones went loses it, or the log would count
	// as past its horizon, and be cleaned again, for ever.
	tomb := hasTombstone(kept)
	if len(kept) == len(recs) && hasHorizon == tomb {
		return c.keep(out, h, batch, nil)
	}
	hz := record.NoDeleteHorizon
	switch {
	case tomb && hasHorizon:
		hz = horizon
	case tomb:
		hz = newHorizon
	}
	nb, err := record.BuildRetained(h, kept, hz)
	if err != nil {
		return err
	}
	nh, _ := record.ParseHeader(nb)
	return c.keep(out, &nh, nb, nil)
}

func (c *cleaner) keepEmpty(out *output, h *record.Header) error {
	nb, err := record.BuildRetained(h, nil, record.NoDeleteHorizon)
	if err != nil {
		return err
	}
	nh, _ := record.ParseHeader(nb)
	return c.keep(out, &nh, nb, nil)
}

// keep writes a batch to the output, with the .txnindex entry of the
// abort marker it is, if any.
func (c *cleaner) keep(out *output, h *record.Header, batch []byte, entry *AbortedTxn) error {
	if out.seg.size+int64(len(batch)) > math.MaxInt32 {
		return fmt.Errorf("cleaned segment %d would pass 2 GiB", out.seg.base)
	}
	if err := out.write(h, batch, c.p.interval); err != nil {
		return err
	}
	c.pending += len(batch) // the throttle counts bytes written too
	if entry != nil {
		out.txns = append(out.txns, *entry)
	}
	if hz, ok := h.DeleteHorizonMs(); ok && (c.horizon < 0 || hz < c.horizon) {
		c.horizon = hz
	}
	c.st.RecordsWritten += int64(h.RecordCount)
	return nil
}

// sortedBases lists the outputs' base offsets.
func sortedBases(outs []*output) []int64 {
	b := make([]int64, len(outs))
	for i, o := range outs {
		b[i] = o.seg.base
	}
	sort.Slice(b, func(i, j int) bool { return b[i] < b[j] })
	return b
}
