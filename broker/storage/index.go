package storage

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sort"
)

// offsetIndex is a segment's sparse offset index: (offset - base, file
// position) pairs, 8 bytes each on disk (two big-endian uint32, Kafka's
// layout). It lives in memory; the file is brought up to date on flush, roll
// and close, and is rebuilt from the log whenever recovery rescans a segment.
type offsetIndex struct {
	fs      FS // nil: OSFS
	path    string
	base    int64
	rel     []uint32
	pos     []uint32
	written int // entries already in the file
}

const offsetIndexEntry = 8

func (ix *offsetIndex) append(offset int64, position int64) {
	ix.rel = append(ix.rel, uint32(offset-ix.base))
	ix.pos = append(ix.pos, uint32(position))
}

// lookup returns the position of the largest indexed offset <= offset (0 if none).
func (ix *offsetIndex) lookup(offset int64) int64 {
	r := offset - ix.base
	i := sort.Search(len(ix.rel), func(i int) bool { return int64(ix.rel[i]) > r })
	if i == 0 {
		return 0
	}
	return int64(ix.pos[i-1])
}

// truncateTo drops entries for offsets >= offset.
func (ix *offsetIndex) truncateTo(offset int64) {
	r := offset - ix.base
	i := sort.Search(len(ix.rel), func(i int) bool { return int64(ix.rel[i]) >= r })
	ix.rel, ix.pos = ix.rel[:i], ix.pos[:i]
	if ix.written > i {
		ix.written = -1 // rewrite the file on next flush
	}
}

func (ix *offsetIndex) reset() {
	ix.rel, ix.pos = ix.rel[:0], ix.pos[:0]
	ix.written = -1
}

// flush brings the file up to date.
func (ix *offsetIndex) flush(sync bool) error {
	return writeIndexFile(ix.fs, ix.path, &ix.written, len(ix.rel), offsetIndexEntry, func(i int, b []byte) {
		binary.BigEndian.PutUint32(b, ix.rel[i])
		binary.BigEndian.PutUint32(b[4:], ix.pos[i])
	}, sync)
}

// load reads the file and checks it: sizes a multiple of 8, offsets and
// positions strictly increasing, positions inside the segment. A file that
// fails is reported so the caller rebuilds the index from the log.
func (ix *offsetIndex) load(segSize int64) error {
	b, err := orOS(ix.fs).ReadFile(ix.path)
	if err != nil {
		return err
	}
	if len(b)%offsetIndexEntry != 0 {
		return fmt.Errorf("offset index %s: size %d is not a multiple of %d", ix.path, len(b), offsetIndexEntry)
	}
	ix.rel, ix.pos = ix.rel[:0], ix.pos[:0]
	for i := 0; i < len(b); i += offsetIndexEntry {
		r := binary.BigEndian.Uint32(b[i:])
		p := binary.BigEndian.Uint32(b[i+4:])
		if n := len(ix.rel); n > 0 && (r <= ix.rel[n-1] || p <= ix.pos[n-1]) {
			return fmt.Errorf("offset index %s: entry %d (%d,%d) does not increase", ix.path, n, r, p)
		}
		if int64(p) >= segSize {
			return fmt.Errorf("offset index %s: position %d beyond segment size %d", ix.path, p, segSize)
		}
		ix.rel = append(ix.rel, r)
		ix.pos = append(ix.pos, p)
	}
	ix.written = len(ix.rel)
	return nil
}

// timeIndex maps timestamps to offsets: (maxTimestamp so far, offset - base)
// entries, 12 bytes each (int64 + uint32), added beside offset-index entries
// whenever the segment's max timestamp grew.
type timeIndex struct {
	fs      FS // nil: OSFS
	path    string
	base    int64
	ts      []int64
	rel     []uint32
	written int
}

const timeIndexEntry = 12

func (ti *timeIndex) maybeAppend(ts int64, offset int64) {
	if n := len(ti.ts); n > 0 && ts <= ti.ts[n-1] {
		return
	}
	ti.ts = append(ti.ts, ts)
	ti.rel = append(ti.rel, uint32(offset-ti.base))
}

// lookup returns the offset of the last entry whose timestamp is < ts, i.e.
// a safe place to start scanning for the first record with timestamp >= ts.
func (ti *timeIndex) lookup(ts int64) int64 {
	i := sort.Search(len(ti.ts), func(i int) bool { return ti.ts[i] >= ts })
	if i == 0 {
		return ti.base
	}
	return ti.base + int64(ti.rel[i-1])
}

func (ti *timeIndex) maxTimestamp() (int64, bool) {
	if len(ti.ts) == 0 {
		return 0, false
	}
	return ti.ts[len(ti.ts)-1], true
}

func (ti *timeIndex) truncateTo(offset int64) {
	r := offset - ti.base
	i := sort.Search(len(ti.rel), func(i int) bool { return int64(ti.rel[i]) >= r })
	ti.ts, ti.rel = ti.ts[:i], ti.rel[:i]
	if ti.written > i {
		ti.written = -1
	}
}

func (ti *timeIndex) reset() {
	ti.ts, ti.rel = ti.ts[:0], ti.rel[:0]
	ti.written = -1
}

func (ti *timeIndex) flush(sync bool) error {
	return writeIndexFile(ti.fs, ti.path, &ti.written, len(ti.ts), timeIndexEntry, func(i int, b []byte) {
		binary.BigEndian.PutUint64(b, uint64(ti.ts[i]))
		binary.BigEndian.PutUint32(b[8:], ti.rel[i])
	}, sync)
}

func (ti *timeIndex) load(nextRel int64) error {
	b, err := orOS(ti.fs).ReadFile(ti.path)
	if err != nil {
		return err
	}
	if len(b)%timeIndexEntry != 0 {
		return fmt.Errorf("time index %s: size %d is not a multiple of %d", ti.path, len(b), timeIndexEntry)
	}
	ti.ts, ti.rel = ti.ts[:0], ti.rel[:0]
	for i := 0; i < len(b); i += timeIndexEntry {
		ts := int64(binary.BigEndian.Uint64(b[i:]))
		r := binary.BigEndian.Uint32(b[i+8:])
		if n := len(ti.ts); n > 0 && (ts <= ti.ts[n-1] || r < ti.rel[n-1]) {
			return fmt.Errorf("time index %s: entry %d does not increase", ti.path, n)
		}
		if int64(r) >= nextRel {
			return fmt.Errorf("time index %s: offset %d beyond the segment", ti.path, ti.base+int64(r))
		}
		ti.ts = append(ti.ts, ts)
		ti.rel = append(ti.rel, r)
	}
	ti.written = len(ti.ts)
	return nil
}

// writeIndexFile appends entries [*written, n) to path, or rewrites it whole
// when *written is -1.
func writeIndexFile(fsys FS, path string, written *int, n, size int, put func(i int, b []byte), sync bool) error {
	if *written == n && !sync {
		return nil
	}
	flag := os.O_WRONLY | os.O_CREATE
	from := *written
	if from < 0 || from > n {
		flag |= os.O_TRUNC
		from = 0
	}
	f, err := orOS(fsys).OpenFile(path, flag, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if from == 0 {
		if err := f.Truncate(0); err != nil {
			return err
		}
	}
	buf := make([]byte, (n-from)*size)
	for i := from; i < n; i++ {
		put(i, buf[(i-from)*size:])
	}
	if _, err := f.Seek(int64(from*size), io.SeekStart); err != nil {
		return err
	}
	if _, err := f.Write(buf); err != nil {
		return err
	}
	if err := f.Truncate(int64(n * size)); err != nil {
		return err
	}
	if sync {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	*written = n
	return nil
}
