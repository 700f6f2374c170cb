package storage

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// writeFileAtomic writes data to path through a temp file, fsync and rename,
// then fsyncs the directory, so a crash leaves either the old or the new file.
func writeFileAtomic(fsys FS, path string, data []byte) error {
	fsys = orOS(fsys)
	tmp := path + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return err
	}
	return fsys.SyncDir(filepath.Dir(path))
}

// syncFile fsyncs an existing file by name; a missing file is nothing to sync.
func syncFile(fsys FS, path string) error {
	f, err := orOS(fsys).OpenFile(path, os.O_RDWR, 0)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	serr := f.Sync()
	if cerr := f.Close(); serr == nil {
		serr = cerr
	}
	return serr
}

// PartitionKey names a partition in node-wide checkpoint files.
type PartitionKey struct {
	Topic     string
	Partition int32
}

func (k PartitionKey) String() string { return fmt.Sprintf("%s-%d", k.Topic, k.Partition) }

// WriteOffsetCheckpoint writes Kafka's offset checkpoint format (used for
// recovery-point-offset-checkpoint, replication-offset-checkpoint and
// log-start-offset-checkpoint): a version line "0", a count line, then
// "topic partition offset" lines.
func WriteOffsetCheckpoint(fsys FS, path string, offsets map[PartitionKey]int64) error {
	keys := make([]PartitionKey, 0, len(offsets))
	for k := range offsets {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Topic != keys[j].Topic {
			return keys[i].Topic < keys[j].Topic
		}
		return keys[i].Partition < keys[j].Partition
	})
	for _, k := range keys {
		if k.Topic == "" || strings.ContainsAny(k.Topic, " \t\r\n\v\f") {
			return fmt.Errorf("%s: topic %q cannot be written to an offset checkpoint", path, k.Topic)
		}
		if k.Partition < 0 {
			return fmt.Errorf("%s: negative partition %d of %q", path, k.Partition, k.Topic)
		}
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(keys))
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %d %d\n", k.Topic, k.Partition, offsets[k])
	}
	return writeFileAtomic(fsys, path, b.Bytes())
}

// ReadOffsetCheckpoint reads a file written by WriteOffsetCheckpoint. A
// missing file is an empty map; a malformed one is an error.
func ReadOffsetCheckpoint(fsys FS, path string) (map[PartitionKey]int64, error) {
	out := map[PartitionKey]int64{}
	data, err := orOS(fsys).ReadFile(path)
	if os.IsNotExist(err) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) < 2 || lines[0] != "0" {
		return nil, fmt.Errorf("%s: bad checkpoint header", path)
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n != len(lines)-2 {
		return nil, fmt.Errorf("%s: count %q does not match %d entries", path, lines[1], len(lines)-2)
	}
	for _, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) != 3 {
			return nil, fmt.Errorf("%s: bad line %q", path, l)
		}
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		o, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || p < 0 {
			return nil, fmt.Errorf("%s: bad line %q", path, l)
		}
		k := PartitionKey{f[0], int32(p)}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%s: %s appears twice", path, k)
		}
		out[k] = o
	}
	return out, nil
}

// EpochEntry is one leader epoch and the first offset written in it.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

func writeEpochCheckpoint(fsys FS, path string, entries []EpochEntry) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(entries))
	for _, e := range entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return writeFileAtomic(fsys, path, b.Bytes())
}

// ReadEpochCheckpoint reads a leader-epoch-checkpoint file (Kafka's format:
// "0", count, then "epoch startOffset" lines). Entries must increase in both
// epoch and offset.
func ReadEpochCheckpoint(path string) ([]EpochEntry, error) {
	return readEpochCheckpoint(OSFS{}, path)
}

func readEpochCheckpoint(fsys FS, path string) ([]EpochEntry, error) {
	f, err := orOS(fsys).OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(lines) < 2 || lines[0] != "0" {
		return nil, fmt.Errorf("%s: bad header", path)
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n != len(lines)-2 {
		return nil, fmt.Errorf("%s: count does not match entries", path)
	}
	var out []EpochEntry
	for _, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) != 2 {
			return nil, fmt.Errorf("%s: bad line %q", path, l)
		}
		epoch, err1 := strconv.ParseInt(f[0], 10, 32)
		start, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || epoch < 0 || start < 0 {
			return nil, fmt.Errorf("%s: bad line %q", path, l)
		}
		e := EpochEntry{Epoch: int32(epoch), StartOffset: start}
		if k := len(out); k > 0 && (e.Epoch <= out[k-1].Epoch || e.StartOffset < out[k-1].StartOffset) {
			return nil, fmt.Errorf("%s: entries do not increase at %q", path, l)
		}
		out = append(out, e)
	}
	return out, nil
}
