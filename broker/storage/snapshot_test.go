package storage

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// snapTestState builds a manager with: producer 1 with seven idempotent
// batches (five retained), producer 2 with an open transaction after a
// commit (coordinator epoch 3), producer 3 known from a marker only, and
// producer 4 with an open transaction at a larger first offset.
func snapTestState() *ProducerStateManager {
	return psBuild(
		psSeqRun(1, 0, 0, 0, 7),
		psData(2, 0, 0, 2, 7, true),
		psMarker(2, 1, 3, record.ControlCommit, 9),
		psData(2, 1, 0, 3, 10, true),
		psMarker(3, 5, 1, record.ControlAbort, 13),
		psData(4, 2, 0, 1, 14, true),
	)
}

func TestSnapshotRoundTrip(t *testing.T) {
	dir := t.TempDir()
	m := snapTestState()
	if err := m.WriteSnapshot(dir, 15); err != nil {
		t.Fatal(err)
	}
	path := SnapshotPath(dir, 15)
	if filepath.Base(path) != "00000000000000000015.snapshot" {
		t.Fatalf("SnapshotPath = %s", path)
	}
	got, err := LoadSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Producers(), m.Producers()) {
		t.Fatalf("producers differ:\nloaded %+v\nwrote  %+v", got.Producers(), m.Producers())
	}
	if !reflect.DeepEqual(got.OngoingTxns(), m.OngoingTxns()) || len(got.OngoingTxns()) != 2 {
		t.Fatalf("ongoing differ: %+v vs %+v", got.OngoingTxns(), m.OngoingTxns())
	}
	if fu, ok := got.FirstUnstableOffset(); !ok || fu != 10 {
		t.Fatalf("FirstUnstableOffset = %d, %v; want 10", fu, ok)
	}
	if got.MapEndOffset() != 15 {
		t.Fatalf("MapEndOffset = %d, want 15", got.MapEndOffset())
	}
	// Every retained batch, not only the last, is still a duplicate.
	dup, err := got.CheckData(psBatch(1, 0, 2, 1, 99, false))
	if err != nil || dup == nil || dup.FirstOffset != 2 {
		t.Fatalf("oldest retained batch after load: dup %+v, err %v", dup, err)
	}
	dup, err = got.CheckData(psBatch(2, 1, 0, 3, 99, true))
	if err != nil || dup == nil || dup.FirstOffset != 10 || dup.LastOffset != 12 {
		t.Fatalf("transactional duplicate after load: dup %+v, err %v", dup, err)
	}
	if _, err := got.CheckData(psBatch(1, 0, 1, 1, 99, false)); psCode(err) != pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER {
		t.Fatalf("dropped batch after load: %v", err)
	}
	if _, err := got.CheckData(psBatch(2, 1, 3, 1, 99, false)); psCode(err) != pb.ErrorCode_INVALID_TXN_STATE {
		t.Fatalf("open transaction lost: %v", err)
	}
	if done, err := got.CheckMarker(3, 5, 1); done != MarkerRepeat || err != nil {
		t.Fatalf("marker-only producer after load: %v, %v", done, err)
	}
	if _, err := got.CheckMarker(2, 2, 2); psCode(err) != pb.ErrorCode_TRANSACTION_COORDINATOR_FENCED {
		t.Fatalf("coordinator epoch lost: %v", err)
	}
	c := got.ApplyMarker(2, 2, 3, record.ControlAbort, 15, 0)
	if c == nil || *c != (CompletedTxn{ProducerID: 2, FirstOffset: 10, LastOffset: 15, Aborted: true}) {
		t.Fatalf("completing the loaded transaction: %+v", c)
	}

	entries, err := ReadSnapshotEntries(path)
	if err != nil || !reflect.DeepEqual(entries, m.Producers()) {
		t.Fatalf("ReadSnapshotEntries = %+v, %v", entries, err)
	}
	// Writing did not touch the manager; no temp file is left behind.
	if !reflect.DeepEqual(m.Producers(), snapTestState().Producers()) {
		t.Fatal("WriteSnapshot changed state")
	}
	if names := snapDirNames(t, dir); !reflect.DeepEqual(names, []string{"00000000000000000015.snapshot"}) {
		t.Fatalf("directory holds %v", names)
	}
}

func TestSnapshotEmptyAndOverwrite(t *testing.T) {
	dir := t.TempDir()
	if err := NewProducerStateManager().WriteSnapshot(dir, 0); err != nil {
		t.Fatal(err)
	}
	got, err := LoadSnapshot(SnapshotPath(dir, 0))
	if err != nil || got.Len() != 0 || got.MapEndOffset() != 0 {
		t.Fatalf("empty snapshot: %v, %v", got, err)
	}
	if err := snapTestState().WriteSnapshot(dir, 0); err != nil {
		t.Fatal(err)
	}
	if got, err = LoadSnapshot(SnapshotPath(dir, 0)); err != nil || got.Len() != 4 {
		t.Fatalf("overwritten snapshot: %v, %v", got, err)
	}
	if err := NewProducerStateManager().WriteSnapshot(dir, -1); err == nil {
		t.Fatal("snapshot at a negative offset was written")
	}
}

func snapDirNames(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// snapReseal recomputes the CRC so a structural fault is what is tested.
func snapReseal(b []byte) []byte {
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func TestSnapshotCorruptRefused(t *testing.T) {
	good := snapTestState().encodeSnapshot(15)
	// Producer 1's entry starts right after the header; its batch count is
	// the last byte of the fixed part.
	const firstEntry, batchCountAt = snapshotHeaderSize, snapshotHeaderSize + snapshotEntrySize - 1
	mutate := func(f func(b []byte) []byte) []byte {
		return f(append([]byte(nil), good...))
	}
	tests := []struct {
		name string
		data []byte
		msg  string
	}{
		{"empty file", nil, "shorter than"},
		{"torn header", good[:10], "shorter than"},
		{"unknown version", mutate(func(b []byte) []byte { b[1] = 9; return b }), "unsupported version 9"},
		{"bit flip in the body", mutate(func(b []byte) []byte { b[40] ^= 0x10; return b }), "CRC mismatch"},
		{"bit flip in the CRC", mutate(func(b []byte) []byte { b[3] ^= 0x01; return b }), "CRC mismatch"},
		{"truncated last batch", good[:len(good)-1], "CRC mismatch"},
		{"trailing byte", append(append([]byte(nil), good...), 0), "CRC mismatch"},
		{"resealed truncation", mutate(func(b []byte) []byte { return snapReseal(b[:len(b)-5]) }), "truncated"},
		{"resealed trailing bytes", mutate(func(b []byte) []byte { return snapReseal(append(b, 1, 2)) }), "unexpected bytes"},
		{"resealed huge entry count", mutate(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[14:], 1<<30)
			return snapReseal(b)
		}), "entry count"},
		{"resealed negative entry count", mutate(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[14:], 0xFFFFFFFF)
			return snapReseal(b)
		}), "entry count"},
		{"resealed six batches", mutate(func(b []byte) []byte { b[batchCountAt] = 6; return snapReseal(b) }), "6 batches"},
		{"resealed negative producer id", mutate(func(b []byte) []byte { b[firstEntry] = 0x80; return snapReseal(b) }), "negative producerId"},
		{"resealed duplicate producer id", mutate(func(b []byte) []byte {
			second := firstEntry + snapshotEntrySize + 5*snapshotBatchSize
			copy(b[second:second+8], b[firstEntry:firstEntry+8])
			return snapReseal(b)
		}), "appears twice"},
		{"resealed negative offset", mutate(func(b []byte) []byte { b[6] = 0xFF; return snapReseal(b) }), "negative offset"},
	}
	dir := t.TempDir()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "00000000000000000015.snapshot")
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			m, err := LoadSnapshot(path)
			if psCode(err) != pb.ErrorCode_CORRUPT_MESSAGE || m != nil {
				t.Fatalf("LoadSnapshot = %v, %v; want CORRUPT_MESSAGE and no state", m, err)
			}
			if !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name %q and the file", err, tc.msg)
			}
			if _, err := ReadSnapshotEntries(path); psCode(err) != pb.ErrorCode_CORRUPT_MESSAGE {
				t.Errorf("ReadSnapshotEntries: %v", err)
			}
		})
	}
}

// TestSnapshotEveryTruncationAndBitFlip: no prefix and no single-bit
// change of a snapshot is ever accepted (or panics).
func TestSnapshotEveryTruncationAndBitFlip(t *testing.T) {
	good := snapTestState().encodeSnapshot(15)
	if _, _, err := decodeSnapshot("good", good); err != nil {
		t.Fatalf("good snapshot refused: %v", err)
	}
	for n := 0; n < len(good); n++ {
		if m, _, err := decodeSnapshot("t", good[:n]); psCode(err) != pb.ErrorCode_CORRUPT_MESSAGE || m != nil {
			t.Fatalf("truncated to %d bytes: %v", n, err)
		}
	}
	b := append([]byte(nil), good...)
	for i := range b {
		for bit := 0; bit < 8; bit++ {
			b[i] ^= 1 << bit
			if m, _, err := decodeSnapshot("f", b); psCode(err) != pb.ErrorCode_CORRUPT_MESSAGE || m != nil {
				t.Fatalf("bit %d of byte %d flipped: %v", bit, i, err)
			}
			b[i] ^= 1 << bit
		}
	}
}

func TestLoadSnapshotNameAndIOErrors(t *testing.T) {
	dir := t.TempDir()
	if err := snapTestState().WriteSnapshot(dir, 15); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(SnapshotPath(dir, 15))
	if err != nil {
		t.Fatal(err)
	}
	// A snapshot renamed to another offset would replay from the wrong place.
	if err := os.WriteFile(SnapshotPath(dir, 20), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSnapshot(SnapshotPath(dir, 20)); psCode(err) != pb.ErrorCode_CORRUPT_MESSAGE {
		t.Fatalf("misnamed snapshot: %v", err)
	}
	if es, err := ReadSnapshotEntries(SnapshotPath(dir, 20)); err != nil || len(es) != 4 {
		t.Fatalf("dump of a misnamed snapshot: %d entries, %v", len(es), err)
	}
	// Any other name is not checked.
	other := filepath.Join(dir, "copy.bin")
	if err := os.WriteFile(other, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if m, err := LoadSnapshot(other); err != nil || m.MapEndOffset() != 15 {
		t.Fatalf("snapshot under another name: %v", err)
	}
	if _, err := LoadSnapshot(SnapshotPath(dir, 99)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing snapshot: %v", err)
	}
}

func TestSnapshotFiles(t *testing.T) {
	dir := t.TempDir()
	m := snapTestState()
	for _, off := range []int64{30, 0, 10, 20} {
		if err := m.WriteSnapshot(dir, off); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"00000000000000000040.snapshot.tmp", "00000000000000000010.log", "junk.snapshot", "10.snapshot"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	list := func() []int64 {
		t.Helper()
		offs, err := ListSnapshots(dir)
		if err != nil {
			t.Fatal(err)
		}
		return offs
	}
	if got := list(); !reflect.DeepEqual(got, []int64{0, 10, 20, 30}) {
		t.Fatalf("ListSnapshots = %v", got)
	}
	if err := DeleteSnapshotsAbove(dir, 20); err != nil {
		t.Fatal(err)
	}
	if got := list(); !reflect.DeepEqual(got, []int64{0, 10, 20}) {
		t.Fatalf("after DeleteSnapshotsAbove(20): %v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "00000000000000000040.snapshot.tmp")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("DeleteSnapshotsAbove left an interrupted temp file")
	}
	if err := DeleteSnapshotsBelow(dir, 10); err != nil {
		t.Fatal(err)
	}
	if got := list(); !reflect.DeepEqual(got, []int64{10, 20}) {
		t.Fatalf("after DeleteSnapshotsBelow(10): %v", got)
	}
	if err := DeleteSnapshotsAbove(dir, -1); err != nil {
		t.Fatal(err)
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("after DeleteSnapshotsAbove(-1): %v", got)
	}
	for _, name := range []string{"00000000000000000010.log", "junk.snapshot", "10.snapshot"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatalf("%s was deleted: %v", name, err)
		}
	}
	missing := filepath.Join(dir, "nope")
	if offs, err := ListSnapshots(missing); err != nil || offs != nil {
		t.Fatalf("ListSnapshots(missing) = %v, %v", offs, err)
	}
	if err := DeleteSnapshotsAbove(missing, 0); err != nil {
		t.Fatal(err)
	}
	if err := DeleteSnapshotsBelow(missing, 0); err != nil {
		t.Fatal(err)
	}
	if err := m.WriteSnapshot(missing, 1); err == nil {
		t.Fatal("WriteSnapshot into a missing directory succeeded")
	}
}
