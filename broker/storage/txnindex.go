package storage

import (
	"encoding/binary"
	"fmt"
	"os"
)

// AbortedTxn is one .txnindex entry: an aborted transaction of a producer,
// from its first offset to its ABORT marker, and the LSO once it ended.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// txnIndexEntry is Kafka's layout: version int16 (0), producerId int64,
// firstOffset int64, lastOffset int64, lastStableOffset int64.
const txnIndexEntry = 34

// txnIndex holds the aborted transactions whose markers fall in a segment.
// Unlike the offset indexes it is written through on every append: losing an
// entry would make an aborted transaction visible to read_committed readers
// of an already-flushed segment.
type txnIndex struct {
	fs       FS // nil: OSFS
	path     string
	entries  []AbortedTxn
	unsynced bool // entries appended without an fsync
}

// appendTxnEntry appends a's encoding to buf.
func appendTxnEntry(buf []byte, a AbortedTxn) []byte {
	var b [txnIndexEntry]byte
	binary.BigEndian.PutUint64(b[2:], uint64(a.ProducerID))
	binary.BigEndian.PutUint64(b[10:], uint64(a.FirstOffset))
	binary.BigEndian.PutUint64(b[18:], uint64(a.LastOffset))
	binary.BigEndian.PutUint64(b[26:], uint64(a.LastStableOffset))
	return append(buf, b[:]...)
}

func (t *txnIndex) append(a AbortedTxn, sync bool) error {
	b := appendTxnEntry(nil, a)
	f, err := orOS(t.fs).OpenFile(t.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(b[:]); err != nil {
		return err
	}
	if sync {
		if err := f.Sync(); err != nil {
			return err
		}
	} else {
		t.unsynced = true
	}
	t.entries = append(t.entries, a)
	return nil
}

// sync fsyncs the file if entries were appended without one.
func (t *txnIndex) sync() error {
	if !t.unsynced {
		return nil
	}
	if err := syncFile(t.fs, t.path); err != nil {
		return err
	}
	t.unsynced = false
	return nil
}

// rewrite replaces the file with the in-memory entries.
func (t *txnIndex) rewrite() error {
	buf := make([]byte, 0, len(t.entries)*txnIndexEntry)
	for _, a := range t.entries {
		var b [txnIndexEntry]byte
		binary.BigEndian.PutUint64(b[2:], uint64(a.ProducerID))
		binary.BigEndian.PutUint64(b[10:], uint64(a.FirstOffset))
		binary.BigEndian.PutUint64(b[18:], uint64(a.LastOffset))
		binary.BigEndian.PutUint64(b[26:], uint64(a.LastStableOffset))
		buf = append(buf, b[:]...)
	}
	t.unsynced = false
	if len(buf) == 0 {
		if err := orOS(t.fs).Remove(t.path); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	}
	return writeFileAtomic(t.fs, t.path, buf)
}

func (t *txnIndex) truncateTo(offset int64) error {
	keep := t.entries[:0]
	for _, a := range t.entries {
		if a.LastOffset < offset {
			keep = append(keep, a)
		}
	}
	if len(keep) == len(t.entries) {
		return nil
	}
	t.entries = keep
	return t.rewrite()
}

func (t *txnIndex) reset() error {
	t.entries = nil
	return t.rewrite()
}

// load reads and checks the file; a torn or inconsistent file is an error so
// that the caller rescans the segment.
func (t *txnIndex) load(base, next int64) error {
	t.entries = nil
	b, err := orOS(t.fs).ReadFile(t.path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	entries, err := ParseTxnIndex(b)
	if err != nil {
		return fmt.Errorf("%s: %w", t.path, err)
	}
	for _, a := range entries {
		if a.LastOffset < base || a.LastOffset >= next || a.FirstOffset > a.LastOffset {
			return fmt.Errorf("%s: entry %+v outside segment [%d,%d)", t.path, a, base, next)
		}
	}
	t.entries = entries
	return nil
}

// ParseTxnIndex decodes a .txnindex file.
func ParseTxnIndex(b []byte) ([]AbortedTxn, error) {
	if len(b)%txnIndexEntry != 0 {
		return nil, fmt.Errorf("txn index size %d is not a multiple of %d", len(b), txnIndexEntry)
	}
	var out []AbortedTxn
	for i := 0; i < len(b); i += txnIndexEntry {
		if v := binary.BigEndian.Uint16(b[i:]); v != 0 {
			return nil, fmt.Errorf("txn index entry %d has version %d", i/txnIndexEntry, v)
		}
		out = append(out, AbortedTxn{
			ProducerID:       int64(binary.BigEndian.Uint64(b[i+2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(b[i+10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(b[i+18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(b[i+26:])),
		})
	}
	return out, nil
}
