package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// The swap of cleaned segments, crash-safe.
//
// A pass writes its outputs as <base>.log.cleaned (and .index, .timeindex,
// .txnindex with the same suffix) and fsyncs them. Under the log's lock it
// then writes CleanerSwapFile, naming the replaced offsets [from, end),
// the outputs' bases and the new clean checkpoint: that file is the
// commit point. completeSwap then removes the replaced segments' files and
// renames the outputs into place, writes the clean checkpoint and removes
// CleanerSwapFile. Each step can be repeated, so when a crash interrupts
// it Open finishes it (finishSwapOnOpen); without CleanerSwapFile a
// .cleaned file is a pass that never committed and is deleted. A crash
// leaves the old segments or the new ones, never a mix.

// CleanerSwapFile is the manifest of a committed, unfinished swap.
const CleanerSwapFile = "cleaner-swap"

// errCrashForTest, returned by a test's swap hook, stops a pass where it
// is and leaves its files as a crash would (nothing is cleaned up).
var errCrashForTest = errors.New("storage: simulated crash")

// swapHook is a Log's test hook (Log.swapHook), called before each step
// of a pass's end; an error stops the pass there.
type swapHook func(step string) error

func (h swapHook) step(name string) error {
	if h != nil {
		return h(name)
	}
	return nil
}

type swapManifest struct {
	from, end, checkpoint int64
	bases                 []int64
}

func (m swapManifest) encode() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %d %d\n", m.from, m.end, m.checkpoint)
	for _, x := range m.bases {
		fmt.Fprintf(&b, "%d\n", x)
	}
	return []byte(b.String())
}

func parseSwapManifest(b []byte) (swapManifest, error) {
	f := strings.Fields(string(b))
	if len(f) < 4 {
		return swapManifest{}, fmt.Errorf("%s: %d fields, want at least 4", CleanerSwapFile, len(f))
	}
	v := make([]int64, len(f))
	for i, s := range f {
		x, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return swapManifest{}, fmt.Errorf("%s: %v", CleanerSwapFile, err)
		}
		v[i] = x
	}
	return swapManifest{from: v[0], end: v[1], checkpoint: v[2], bases: v[3:]}, nil
}

var segmentSuffixes = []string{LogSuffix, IndexSuffix, TimeIndexSuffix, TxnIndexSuffix}

// completeSwap carries out a committed swap in dir; it may be run again
// after any partial run. A file of the replaced range that has no
// .cleaned twin is an old segment's unless its base is an output's (the
// twin was renamed onto it already).
func completeSwap(fsys FS, dir string, m swapManifest, hook swapHook) error {
	fsys = orOS(fsys)
	out := map[int64]bool{}
	for _, b := range m.bases {
		out[b] = true
	}
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return err
	}
	present := map[string]bool{}
	for _, e := range entries {
		present[e.Name()] = true
	}
	if err := hook.step("remove-old"); err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		for _, suf := range segmentSuffixes {
			b, ok := parseBase(name, suf)
			if !ok || b < m.from || b >= m.end {
				continue
			}
			if out[b] && !present[name+cleanedSuffix] {
				continue // already the cleaned one
			}
			if err := fsys.Remove(filepath.Join(dir, name)); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
	}
	if err := hook.step("rename-cleaned"); err != nil {
		return err
	}
	for _, b := range m.bases {
		for _, suf := range segmentSuffixes {
			p := filepath.Join(dir, FileName(b)+suf)
			if present[FileName(b)+suf+cleanedSuffix] {
				if err := fsys.Rename(p+cleanedSuffix, p); err != nil && !os.IsNotExist(err) {
					return err
				}
			}
		}
	}
	if err := fsys.SyncDir(dir); err != nil {
		return err
	}
	if err := hook.step("checkpoint"); err != nil {
		return err
	}
	if err := writeCleanCheckpoint(fsys, dir, m.checkpoint); err != nil {
		return err
	}
	if err := hook.step("remove-manifest"); err != nil {
		return err
	}
	if err := fsys.Remove(filepath.Join(dir, CleanerSwapFile)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return fsys.SyncDir(dir)
}

// finishSwapOnOpen completes a committed swap a crash interrupted, or
// deletes the files of a pass that never committed. It runs before the
// segments are listed.
func finishSwapOnOpen(fsys FS, dir string) error {
	fsys = orOS(fsys)
	b, err := fsys.ReadFile(filepath.Join(dir, CleanerSwapFile))
	switch {
	case err == nil:
		m, perr := parseSwapManifest(b)
		if perr != nil {
			return perr
		}
		if err := completeSwap(fsys, dir, m, nil); err != nil {
			return fmt.Errorf("complete the cleaner's swap: %w", err)
		}
	case !os.IsNotExist(err):
		return err
	}
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), cleanedSuffix) {
			fsys.Remove(filepath.Join(dir, e.Name()))
		}
	}
	return nil
}

// swapCleaned replaces the plan's segments by the outputs, under the
// log's lock and flushMu (FlushTo fsyncs segment files outside the lock;
// none may be closed under it), if the log did not change meanwhile.
func (l *Log) swapCleaned(p *cleanPlan, outs []*output, checkpoint, horizon int64) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.unchangedLocked(p) {
		return fmt.Errorf("%w: the segments of %s changed during the pass", ErrCleanAborted, l.key)
	}
	if err := l.swapHook.step("manifest"); err != nil {
		return err
	}
	m := swapManifest{from: p.segs[0].base, end: p.end, checkpoint: checkpoint, bases: sortedBases(outs)}
	if err := writeFileAtomic(l.fs, filepath.Join(l.dir, CleanerSwapFile), m.encode()); err != nil {
		l.fs.Remove(filepath.Join(l.dir, CleanerSwapFile))
		return errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "commit the cleaned segments of %s: %v", l.key, err)
	}
	// Committed. Readers hold the lock while they read, so no file of the
	// replaced segments is in use; close them before they go.
	old := p.segs[:len(p.segs)-1]
	for _, s := range old {
		s.closeFile()
	}
	if err := completeSwap(l.fs, l.dir, m, l.swapHook); err != nil {
		if errors.Is(err, errCrashForTest) {
			return err
		}
		// The disk holds a swap that the next Open finishes; in memory the
		// old segments are gone. Take no more writes (as after a failed
		// fsync) so nothing is acknowledged that a restart would not see.
		return l.failLocked(errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "swap the cleaned segments of %s: %v", l.key, err))
	}
	segs := make([]*segment, 0, len(l.segs)-len(old)+len(outs))
	for _, o := range outs {
		s := o.seg
		final := newSegmentStruct(l.fs, l.dir, s.base, l.cfg.Files)
		s.path, s.idx.path, s.tix.path, s.txn.path = final.path, final.idx.path, final.tix.path, final.txn.path
		s.cache = l.cfg.Files
		s.dirty = false
		s.gapsTo = max(checkpoint, l.gapsFrom)
		segs = append(segs, s)
	}
	segs = append(segs, l.segs[len(old):]...)
	l.segs = segs
	l.cleanedTo = checkpoint
	l.deleteHorizonMs = horizon
	return nil
}
