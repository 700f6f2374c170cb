package storage

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
)

// IndexEntry is one offset-index entry: an absolute offset and a byte position.
type IndexEntry struct {
	Offset   int64
	Position int64
}

// TimeIndexEntry is one time-index entry.
type TimeIndexEntry struct {
	Timestamp int64
	Offset    int64
}

// baseOf reads the base offset from a segment file's name.
func baseOf(path string) (int64, error) {
	name := filepath.Base(path)
	for _, suf := range []string{IndexSuffix, TimeIndexSuffix, TxnIndexSuffix, LogSuffix, SnapshotSuffix} {
		if b, ok := parseBase(name, suf); ok {
			return b, nil
		}
	}
	return 0, fmt.Errorf("%s: not a segment file name", path)
}

// ReadOffsetIndex decodes an .index file (for dump tools). Trailing bytes
// that are not a whole entry are reported as an error after the entries.
func ReadOffsetIndex(path string) ([]IndexEntry, error) { return readOffsetIndex(OSFS{}, path) }

func readOffsetIndex(fsys FS, path string) ([]IndexEntry, error) {
	base, err := baseOf(path)
	if err != nil {
		return nil, err
	}
	b, err := orOS(fsys).ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []IndexEntry
	for i := 0; i+offsetIndexEntry <= len(b); i += offsetIndexEntry {
		out = append(out, IndexEntry{Offset: base + int64(binary.BigEndian.Uint32(b[i:])), Position: int64(binary.BigEndian.Uint32(b[i+4:]))})
	}
	if r := len(b) % offsetIndexEntry; r != 0 {
		return out, fmt.Errorf("found %d invalid bytes at the end of %s", r, path)
	}
	return out, nil
}

// ReadTimeIndex decodes a .timeindex file (for dump tools).
func ReadTimeIndex(path string) ([]TimeIndexEntry, error) { return readTimeIndex(OSFS{}, path) }

func readTimeIndex(fsys FS, path string) ([]TimeIndexEntry, error) {
	base, err := baseOf(path)
	if err != nil {
		return nil, err
	}
	b, err := orOS(fsys).ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []TimeIndexEntry
	for i := 0; i+timeIndexEntry <= len(b); i += timeIndexEntry {
		out = append(out, TimeIndexEntry{Timestamp: int64(binary.BigEndian.Uint64(b[i:])), Offset: base + int64(binary.BigEndian.Uint32(b[i+8:]))})
	}
	if r := len(b) % timeIndexEntry; r != 0 {
		return out, fmt.Errorf("found %d invalid bytes at the end of %s", r, path)
	}
	return out, nil
}
