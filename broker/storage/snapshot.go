package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Producer snapshot file format, version 1. A snapshot is the producer
// state of a partition as of an offset (every batch below it applied),
// written at segment roll and at close as <20-digit offset>.snapshot in
// the partition directory. All integers are big-endian.
//
//	header (18 bytes)
//	  version            int16   = 1
//	  crc                uint32  CRC-32C (Castagnoli) of every byte after this field
//	  offset             int64   the offset the state is built up to (MapEndOffset)
//	  entryCount         int32   number of producer entries
//	entry (31 bytes + 32 per batch), entries in increasing producerId order
//	  producerId         int64
//	  epoch              int16
//	  coordinatorEpoch   int32   -1 when no marker arrived yet
//	  txnFirstOffset     int64   first offset of the open transaction, -1 if none
//	  lastTimestamp      int64
//	  batchCount         int8    0..5 retained batches, oldest first
//	  batch (32 bytes)
//	    firstSeq         int32
//	    lastSeq          int32
//	    firstOffset      int64
//	    lastOffset       int64
//	    maxTimestamp     int64
//
// Unlike Kafka, which keeps only a producer's last batch, all retained
// batches are stored, so a re-sent batch is still recognised as a duplicate
// after a restart. The file must end exactly after the last entry.
const (
	snapshotVersion    = int16(1)
	snapshotHeaderSize = 18
	snapshotCRCStart   = 6
	snapshotEntrySize  = 31
	snapshotBatchSize  = 32
	snapshotTmpSuffix  = SnapshotSuffix + ".tmp"
)

var snapshotCRCTable = crc32.MakeTable(crc32.Castagnoli)

// SnapshotPath is the path of the producer snapshot at offset off in dir.
func SnapshotPath(dir string, off int64) string {
	return filepath.Join(dir, FileName(off)+SnapshotSuffix)
}

// parseSnapshotName reads the offset from a snapshot file name.
func parseSnapshotName(name string) (int64, bool) {
	s, ok := strings.CutSuffix(name, SnapshotSuffix)
	if !ok || len(s) != 20 {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// encodeSnapshot renders the state in the version 1 format.
func (m *ProducerStateManager) encodeSnapshot(offset int64) []byte {
	pids := make([]int64, 0, len(m.producers))
	size := snapshotHeaderSize
	for pid, s := range m.producers {
		pids = append(pids, pid)
		size += snapshotEntrySize + s.n*snapshotBatchSize
	}
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	b := make([]byte, snapshotHeaderSize, size)
	binary.BigEndian.PutUint16(b[0:], uint16(snapshotVersion))
	binary.BigEndian.PutUint64(b[6:], uint64(offset))
	binary.BigEndian.PutUint32(b[14:], uint32(len(pids)))
	be := binary.BigEndian
	for _, pid := range pids {
		s := m.producers[pid]
		b = be.AppendUint64(b, uint64(pid))
		b = be.AppendUint16(b, uint16(s.epoch))
		b = be.AppendUint32(b, uint32(s.coordEpoch))
		b = be.AppendUint64(b, uint64(s.txnFirst))
		b = be.AppendUint64(b, uint64(s.lastTimestamp))
		b = append(b, byte(s.n))
		for _, bm := range s.batches[:s.n] {
			b = be.AppendUint32(b, uint32(bm.FirstSeq))
			b = be.AppendUint32(b, uint32(bm.LastSeq))
			b = be.AppendUint64(b, uint64(bm.FirstOffset))
			b = be.AppendUint64(b, uint64(bm.LastOffset))
			b = be.AppendUint64(b, uint64(bm.MaxTimestamp))
		}
	}
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[snapshotCRCStart:], snapshotCRCTable))
	return b
}

// snapshotReader walks a snapshot body; callers check lengths first.
type snapshotReader struct {
	b   []byte
	pos int
}

func (r *snapshotReader) u8() uint8 { v := r.b[r.pos]; r.pos++; return v }
func (r *snapshotReader) u16() uint16 {
	v := binary.BigEndian.Uint16(r.b[r.pos:])
	r.pos += 2
	return v
}
func (r *snapshotReader) u32() uint32 {
	v := binary.BigEndian.Uint32(r.b[r.pos:])
	r.pos += 4
	return v
}
func (r *snapshotReader) u64() uint64 {
	v := binary.BigEndian.Uint64(r.b[r.pos:])
	r.pos += 8
	return v
}
func (r *snapshotReader) left() int { return len(r.b) - r.pos }

// decodeSnapshot parses a whole snapshot file into a fresh manager. Every
// refusal is CORRUPT_MESSAGE naming the file and the problem; nothing is
// returned with an error.
func decodeSnapshot(name string, b []byte) (*ProducerStateManager, int64, error) {
	corrupt := func(format string, args ...any) error {
		return errs.New(pb.ErrorCode_CORRUPT_MESSAGE, "producer snapshot %s: %s", name, fmt.Sprintf(format, args...))
	}
	if len(b) < snapshotHeaderSize {
		return nil, 0, corrupt("%d bytes is shorter than the %d-byte header (torn write?)", len(b), snapshotHeaderSize)
	}
	r := &snapshotReader{b: b}
	if v := int16(r.u16()); v != snapshotVersion {
		return nil, 0, corrupt("unsupported version %d (this broker reads version %d)", v, snapshotVersion)
	}
	stored := r.u32()
	if got := crc32.Checksum(b[snapshotCRCStart:], snapshotCRCTable); got != stored {
		return nil, 0, corrupt("CRC mismatch: stored %#08x, computed %#08x over %d bytes", stored, got, len(b)-snapshotCRCStart)
	}
	offset := int64(r.u64())
	count := int32(r.u32())
	if offset < 0 {
		return nil, 0, corrupt("negative offset %d", offset)
	}
	if count < 0 || int64(count)*snapshotEntrySize > int64(r.left()) {
		return nil, 0, corrupt("entry count %d does not fit in %d remaining bytes", count, r.left())
	}
	m := NewProducerStateManager()
	for i := int32(0); i < count; i++ {
		if r.left() < snapshotEntrySize {
			return nil, 0, corrupt("entry %d truncated at byte %d", i, r.pos)
		}
		pid := int64(r.u64())
		s := &producerState{
			epoch:         int16(r.u16()),
			coordEpoch:    int32(r.u32()),
			txnFirst:      int64(r.u64()),
			lastTimestamp: int64(r.u64()),
		}
		n := int(r.u8())
		switch {
		case pid < 0:
			return nil, 0, corrupt("entry %d has negative producerId %d", i, pid)
		case m.producers[pid] != nil:
			return nil, 0, corrupt("producerId %d appears twice", pid)
		case s.txnFirst < -1:
			return nil, 0, corrupt("producerId %d has transaction first offset %d", pid, s.txnFirst)
		case n > NumBatchesToRetain:
			return nil, 0, corrupt("producerId %d has %d batches, at most %d are retained", pid, n, NumBatchesToRetain)
		case r.left() < n*snapshotBatchSize:
			return nil, 0, corrupt("producerId %d: %d batches truncated at byte %d", pid, n, r.pos)
		}
		for j := 0; j < n; j++ {
			s.addBatch(BatchMetadata{
				FirstSeq:     int32(r.u32()),
				LastSeq:      int32(r.u32()),
				FirstOffset:  int64(r.u64()),
				LastOffset:   int64(r.u64()),
				MaxTimestamp: int64(r.u64()),
			})
		}
		m.put(pid, s)
	}
	if r.left() != 0 {
		return nil, 0, corrupt("%d unexpected bytes after the last entry", r.left())
	}
	m.mapEndOff = offset
	return m, offset, nil
}

// WriteSnapshot writes the current state as of offset to
// SnapshotPath(dir, offset), atomically: a temporary file is written and
// fsynced, renamed over the final name, and the directory is fsynced. A
// crash leaves either the old file (or none) or the complete new one, plus
// at most a *.snapshot.tmp file, which ListSnapshots ignores and
// DeleteSnapshotsAbove removes. It does not change the manager.
func (m *ProducerStateManager) WriteSnapshot(dir string, offset int64) error {
	return m.writeSnapshot(OSFS{}, dir, offset)
}

func (m *ProducerStateManager) writeSnapshot(fsys FS, dir string, offset int64) error {
	fsys = orOS(fsys)
	if offset < 0 {
		return fmt.Errorf("producer snapshot at negative offset %d", offset)
	}
	data := m.encodeSnapshot(offset)
	final := SnapshotPath(dir, offset)
	tmp := filepath.Join(dir, FileName(offset)+snapshotTmpSuffix)
	if err := writeSnapshotFileSync(fsys, tmp, data); err != nil {
		fsys.Remove(tmp)
		return err
	}
	if err := fsys.Rename(tmp, final); err != nil {
		fsys.Remove(tmp)
		return fmt.Errorf("producer snapshot: %w", err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("producer snapshot: fsync directory %s: %w", dir, err)
	}
	return nil
}

func writeSnapshotFileSync(fsys FS, path string, data []byte) error {
	f, err := fsys.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("producer snapshot: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("producer snapshot: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("producer snapshot: fsync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("producer snapshot: close %s: %w", path, err)
	}
	return nil
}

// LoadSnapshot reads a snapshot file into a new manager whose MapEndOffset
// is the snapshot's offset. A torn, truncated, bit-flipped or otherwise
// malformed file is refused with a CORRUPT_MESSAGE error naming the
// problem, as is a file whose name (when it is a snapshot name) disagrees
// with the offset inside; nothing is ever partially loaded. A read failure
// is returned wrapped (errors.Is(err, fs.ErrNotExist) works).
func LoadSnapshot(path string) (*ProducerStateManager, error) {
	return loadSnapshot(OSFS{}, path)
}

func loadSnapshot(fsys FS, path string) (*ProducerStateManager, error) {
	data, err := orOS(fsys).ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read producer snapshot: %w", err)
	}
	m, off, err := decodeSnapshot(path, data)
	if err != nil {
		return nil, err
	}
	if named, ok := parseSnapshotName(filepath.Base(path)); ok && named != off {
		return nil, errs.New(pb.ErrorCode_CORRUPT_MESSAGE, "producer snapshot %s holds state as of offset %d, not %d", path, off, named)
	}
	return m, nil
}

// ReadSnapshotEntries decodes a snapshot file for a dump tool: the
// producers sorted by id, with the same checks (and errors) as
// LoadSnapshot except the file-name check.
func ReadSnapshotEntries(path string) ([]ProducerEntry, error) {
	data, err := OSFS{}.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read producer snapshot: %w", err)
	}
	m, _, err := decodeSnapshot(path, data)
	if err != nil {
		return nil, err
	}
	return m.Producers(), nil
}

// ListSnapshots returns the offsets of the snapshot files in dir, in
// increasing order. Other files (including interrupted *.snapshot.tmp
// writes) are ignored; a missing dir has no snapshots.
func ListSnapshots(dir string) ([]int64, error) { return listSnapshots(OSFS{}, dir) }

func listSnapshots(fsys FS, dir string) ([]int64, error) {
	des, err := orOS(fsys).ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list producer snapshots: %w", err)
	}
	var offs []int64
	for _, de := range des {
		if de.IsDir() {
			continue
		}
		if off, ok := parseSnapshotName(de.Name()); ok {
			offs = append(offs, off)
		}
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	return offs, nil
}

// DeleteSnapshotsAbove removes every snapshot with an offset greater than
// off (off = -1 removes all), and any *.snapshot.tmp left by an
// interrupted WriteSnapshot. The snapshot at off itself is kept.
func DeleteSnapshotsAbove(dir string, off int64) error {
	return deleteSnapshotsAbove(OSFS{}, dir, off)
}

func deleteSnapshotsAbove(fsys FS, dir string, off int64) error {
	fsys = orOS(fsys)
	des, err := fsys.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("list producer snapshots: %w", err)
	}
	for _, de := range des {
		name := de.Name()
		o, ok := parseSnapshotName(name)
		if !(ok && o > off) && !strings.HasSuffix(name, snapshotTmpSuffix) {
			continue
		}
		if err := fsys.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("delete producer snapshot: %w", err)
		}
	}
	return nil
}

// DeleteSnapshotsBelow removes every snapshot with an offset lower than
// off; the snapshot at off itself is kept.
func DeleteSnapshotsBelow(dir string, off int64) error {
	fsys := OSFS{}
	offs, err := listSnapshots(fsys, dir)
	if err != nil {
		return err
	}
	for _, o := range offs {
		if o >= off {
			break
		}
		if err := fsys.Remove(SnapshotPath(dir, o)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("delete producer snapshot: %w", err)
		}
	}
	return nil
}
