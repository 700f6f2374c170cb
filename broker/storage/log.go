// Package storage is a partition's log on disk: segments of record batches
// stored byte for byte, a sparse offset index and a time index per segment,
// the .txnindex of aborted transactions, producer-state snapshots and the
// leader-epoch checkpoint. It knows nothing of replication: the
// caller says which offsets are committed (the high watermark) when it
// matters.
//
// Concurrency: a Log is safe for concurrent use. Appends, truncation and
// retention take the write lock; reads take the read lock for the duration
// of their file reads. Flushes are serialised by a separate lock, so one
// fsync covers every batch appended while the previous one ran (group commit).
package storage

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// EpochCheckpointFile is the per-partition leader-epoch checkpoint's name.
const EpochCheckpointFile = "leader-epoch-checkpoint"

// Log is one partition's log.
type Log struct {
	fs  FS // cfg.FS, or OSFS
	dir string
	key PartitionKey
	clk clock.Clock

	mu             sync.RWMutex
	cfg            Config
	segs           []*segment // by base offset; the last is active
	logStart       int64
	recoveryPoint  int64 // offsets below are on disk (fsynced)
	psm            *ProducerStateManager
	epochs         LeaderEpochCache
	unflushed      int64 // messages appended since the last flush
	lastFlushMs    int64
	closed         bool
	onRecoverPoint func()
	// guard is the leader's in-memory transaction bookkeeping (txnguard.go).
	guard txnGuard
	// hwHeard is the highest HW OnHighWatermarkUpdated has heard (capped
	// at the log end then, lowered to a truncation's cut): every marker
	// below it was in the ISR, so a producer state rebuilt after a
	// truncation releases those it replays (TruncateTo).
	hwHeard atomic.Int64

	// The background flusher of leader appends under flush.messages=1
	// (AppendAsLeaderDeferred): at most one runs; it is the Log's, and it
	// ends on its own once nothing is left to flush or the log is closed
	// (Close waits for it).
	flusherRunning bool
	deferredEnd    int64         // the end of the last deferred leader append
	flushErr       error         // a failed fsync (sticky: see FlushTo)
	flushed        chan struct{} // closed and replaced after every flush attempt
	bg             sync.WaitGroup
	syncHook       func(File) error // tests: replaces a segment's fsync in FlushTo

	flushMu sync.Mutex

	// The log cleaner (cleaner*.go): one pass at a time (cleanMu); the
	// clean checkpoint, below which batches may skip offsets (cleanedTo,
	// persisted in CleanerCheckpointFile); a test hook into the swap.
	cleanMu   sync.Mutex
	cleanedTo int64
	// gapsFrom: below it a replicated batch may follow a gap (a cleaned
	// leader's removed offsets), persisted in ReplicaGapsFile. It is kept
	// apart from the clean checkpoint: a follower's own log below a gap
	// is not cleaned, and its cleaner must still build its key map there.
	gapsFrom int64
	// truncations counts the truncations of the log's end: a cleaning
	// pass planned before one must not swap (a producer's last batch it
	// dropped, since a later one existed, may be the last again), as
	// Kafka aborts cleaning on truncation.
	truncations     uint64
	deleteHorizonMs int64 // Cleanable.DeleteHorizonMs
	swapHook        swapHook
}

// Dir is the partition directory.
func (l *Log) Dir() string { return l.dir }

// Key names the partition.
func (l *Log) Key() PartitionKey { return l.key }

// DirName is the directory name of a partition: <topic>-<partition>.
func DirName(topic string, partition int32) string { return fmt.Sprintf("%s-%d", topic, partition) }

// Config returns the log's configuration.
func (l *Log) Config() Config {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cfg
}

// SetConfig changes the configuration (a topic config update).
func (l *Log) SetConfig(c Config) {
	l.mu.Lock()
	l.cfg = c
	l.mu.Unlock()
}

// LogEndOffset is the offset the next batch will get.
func (l *Log) LogEndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.leoLocked()
}

func (l *Log) leoLocked() int64 { return l.active().next }

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

// LogStartOffset is the first offset still in the log.
func (l *Log) LogStartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.logStart
}

// RecoveryPoint is the offset below which everything is fsynced.
func (l *Log) RecoveryPoint() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.recoveryPoint
}

// DurableEnd is the end of what may count towards the high watermark: the
// log end, or with flush.messages=1 the end of what is fsynced.
func (l *Log) DurableEnd() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.cfg.SyncEveryWrite() {
		return l.recoveryPoint
	}
	return l.leoLocked()
}

// Size is the total bytes of all segments.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// NumSegments is the number of segments.
func (l *Log) NumSegments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segs)
}

// LatestEpoch is the newest leader epoch in the log's history (-1 none).
func (l *Log) LatestEpoch() int32 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.Latest()
}

// Epochs returns the leader-epoch history.
func (l *Log) Epochs() []EpochEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.Entries()
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch from the history.
func (l *Log) EndOffsetForEpoch(epoch int32) (int32, int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.EndOffsetFor(epoch, l.leoLocked())
}

// FirstUnstableOffset is the first offset a read_committed reader must not
// pass (the last stable offset is at most this): the first offset of the
// oldest transaction that is open, or completed by a marker the high
// watermark has not passed yet (as last reported to OnHighWatermarkUpdated).
func (l *Log) FirstUnstableOffset() (int64, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.psm.FirstUnstableOffset()
}

// FirstUndecidedOffset is the first offset of the oldest open transaction,
// whether or not completed transactions' markers are replicated.
func (l *Log) FirstUndecidedOffset() (int64, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.psm.FirstUndecidedOffset()
}

// OnHighWatermarkUpdated tells the producer state the partition's high
// watermark: completed transactions whose marker is below hw stop holding
// back the first unstable offset. The owner of the high watermark calls it
// whenever the HW may have moved. It reports whether anything changed (the
// last stable offset may then move without the HW moving). It takes the
// write lock only when there is something to forget.
func (l *Log) OnHighWatermarkUpdated(hw int64) bool {
	l.mu.RLock()
	heard := min(hw, l.leoLocked())
	for {
		old := l.hwHeard.Load()
		if heard <= old || l.hwHeard.CompareAndSwap(old, heard) {
			break
		}
	}
	due := l.psm.hasReplicatedTxns(hw)
	l.mu.RUnlock()
	if !due {
		return false
	}
	l.mu.Lock()
	l.psm.OnHighWatermarkUpdated(hw)
	l.mu.Unlock()
	return true
}

// UnreplicatedTxns lists the completed transactions whose marker the high
// watermark has not passed yet (they hold back the last stable offset).
func (l *Log) UnreplicatedTxns() []CompletedTxn {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.psm.UnreplicatedTxns()
}

// Producers returns the active producers' state.
func (l *Log) Producers() []ProducerEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.psm.Producers()
}

// OngoingTxns lists the open transactions, oldest first.
func (l *Log) OngoingTxns() []OngoingTxn {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.psm.OngoingTxns()
}

// ProducerCount is the number of producer ids with state in this partition.
func (l *Log) ProducerCount() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.psm.Len()
}

// RemoveExpiredProducers forgets producers idle past producer.id.expiration.ms.
func (l *Log) RemoveExpiredProducers() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.psm.RemoveExpired(l.clk.Now().UnixMilli(), l.cfg.ProducerIDExpirationMs)
}

// Open opens (creating if needed) the log in dir, recovering everything at
// or after recoveryPoint: batches are re-read with their CRCs checked, the
// first torn or corrupt batch and everything after it are truncated, the
// indexes of the rescanned segments are rebuilt, and producer state is
// reloaded from the newest good snapshot and replayed.
func Open(dir string, key PartitionKey, cfg Config, recoveryPoint int64, clk clock.Clock) (*Log, error) {
	if clk == nil {
		clk = clock.Real
	}
	fsys := orOS(cfg.FS)
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	l := &Log{fs: fsys, dir: dir, key: key, clk: clk, cfg: cfg, psm: NewProducerStateManager(), flushed: make(chan struct{}), guard: txnGuard{since: clk.Now().UnixMilli()}, deleteHorizonMs: -1}
	l.epochs.fs, l.epochs.path = fsys, filepath.Join(dir, EpochCheckpointFile)
	if err := l.recover(recoveryPoint); err != nil {
		l.closeFiles()
		return nil, fmt.Errorf("recover %s: %w", dir, err)
	}
	l.loadLogStartLocked()
	l.lastFlushMs = clk.Now().UnixMilli()
	// With flush.messages=1 only fsynced offsets count towards the high
	// watermark; what recovery re-read is served, so make it durable now
	// rather than at the next append (which may never come).
	if cfg.SyncEveryWrite() && l.recoveryPoint < l.leoLocked() {
		if err := l.FlushTo(l.leoLocked()); err != nil {
			l.closeFiles()
			return nil, fmt.Errorf("flush %s after recovery: %w", dir, err)
		}
	}
	return l, nil
}

func (l *Log) closeFiles() {
	for _, s := range l.segs {
		s.close()
	}
}

// Close flushes everything, writes a producer snapshot at the log end and
// closes the files. After Close the recovery point equals the log end, so
// the next Open rescans nothing.
func (l *Log) Close() error {
	err := l.close()
	l.bg.Wait() // the background flusher sees the log closed and ends
	return err
}

func (l *Log) close() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	var firstErr error
	for _, s := range l.segs {
		if err := s.sync(); err != nil && firstErr == nil {
			firstErr = err
		}
		if err := s.txn.sync(); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if err := l.active().seal(); err != nil && firstErr == nil {
		firstErr = err
	}
	if err := l.psm.writeSnapshot(l.fs, l.dir, l.leoLocked()); err != nil && firstErr == nil {
		firstErr = err
	}
	if firstErr == nil && l.flushErr == nil {
		l.recoveryPoint = l.leoLocked()
	}
	l.closeFiles()
	l.signalFlushedLocked(nil)
	return firstErr
}

// Suffixes of a partition directory set aside, as Kafka names them: one
// being deleted (removed at the next start if a crash interrupted the
// removal) and a stray log kept for the operator.
const (
	DeleteDirSuffix = "-delete"
	StrayDirSuffix  = "-stray"
)

// AsideDirName is the name a partition's directory takes when set aside
// (Kafka's): "<topic>-<partition>.<unique id><suffix>", the topic cut
// short if the whole would pass 255 bytes. It does not read as a
// partition's directory (ParseDirName), so no restart loads it as one.
func AsideDirName(topic string, partition int32, suffix string) string {
	var id [16]byte
	_, _ = rand.Read(id[:])
	tail := fmt.Sprintf("-%d.%s%s", partition, hex.EncodeToString(id[:]), suffix)
	if n := 255 - len(tail); len(topic) > n {
		topic = topic[:n]
	}
	return topic + tail
}

// IsAsideDirName reports whether name is a directory AsideDirName made
// with suffix.
func IsAsideDirName(name, suffix string) bool {
	rest, ok := strings.CutSuffix(name, suffix)
	if !ok {
		return false
	}
	i := strings.LastIndexByte(rest, '.')
	if i < 0 || i == len(rest)-1 {
		return false
	}
	j := strings.LastIndexByte(rest[:i], '-')
	if j <= 0 {
		return false
	}
	_, err := strconv.ParseUint(rest[j+1:i], 10, 31)
	return err == nil
}

// closeForRemoval closes the log for good, without the snapshot and
// seal a clean close writes: its files are about to go.
func (l *Log) closeForRemoval() {
	l.flushMu.Lock()
	l.mu.Lock()
	l.closed = true
	l.closeFiles()
	l.signalFlushedLocked(nil)
	l.mu.Unlock()
	l.flushMu.Unlock()
	l.bg.Wait()
}

// setAside renames the log's directory to AsideDirName(suffix) beside it
// and fsyncs the parent, so the rename outlives a crash. It returns the
// new path.
func (l *Log) setAside(suffix string) (string, error) {
	aside := filepath.Join(filepath.Dir(l.dir), AsideDirName(l.key.Topic, l.key.Partition, suffix))
	if err := l.fs.Rename(l.dir, aside); err != nil {
		return "", err
	}
	if err := l.fs.SyncDir(filepath.Dir(l.dir)); err != nil {
		return aside, err
	}
	return aside, nil
}

// deleteHook, when set (tests), runs between the rename of a deleted
// log's directory and its removal; an error stops the removal there, as
// a crash would.
var deleteHook atomic.Pointer[func(aside string) error]

// Delete closes the log and removes its directory, atomically across a
// crash: the directory is first renamed to a "-delete" name (Kafka's) and
// the rename made durable, then removed. A crash during the removal
// leaves a directory no restart loads as the partition (a partial log
// would be recovered as the partition's), and the next start removes it
// (RemoveDeletedDirs).
func (l *Log) Delete() error {
	l.closeForRemoval()
	aside, err := l.setAside(DeleteDirSuffix)
	if err != nil {
		if aside == "" {
			return fmt.Errorf("delete %s: %w", l.dir, err)
		}
		return fmt.Errorf("delete %s: renamed to %s but: %w", l.dir, aside, err)
	}
	if h := deleteHook.Load(); h != nil {
		if err := (*h)(aside); err != nil {
			return err
		}
	}
	return l.fs.RemoveAll(aside)
}

// MarkStray closes the log and renames its directory to a "-stray" name
// (Kafka's stray logs since 3.7): a log of a topic the cluster no longer
// has, or no longer places here, is kept on disk for the operator to
// inspect and remove, but no restart loads it as a partition. It returns
// the new path.
func (l *Log) MarkStray() (string, error) {
	l.closeForRemoval()
	return l.setAside(StrayDirSuffix)
}

// RemoveDeletedDirs removes, in dataDir, the directories of deleted logs
// whose removal a crash interrupted (Delete). It returns their names.
func RemoveDeletedDirs(fsys FS, dataDir string) ([]string, error) {
	fsys = orOS(fsys)
	entries, err := fsys.ReadDir(dataDir)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range entries {
		if !e.IsDir() || !IsAsideDirName(e.Name(), DeleteDirSuffix) {
			continue
		}
		if err := fsys.RemoveAll(filepath.Join(dataDir, e.Name())); err != nil {
			return removed, err
		}
		removed = append(removed, e.Name())
	}
	return removed, nil
}

// segmentFor returns the index of the segment holding offset.
func (l *Log) segmentFor(offset int64) int {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset })
	if i == 0 {
		return 0
	}
	return i - 1
}

// checkWritable is checkOpen for appends, rolls and truncation: a log
// whose fsync failed takes no more writes (failLocked).
func (l *Log) checkWritable() error {
	if err := l.checkOpen(); err != nil {
		return err
	}
	return l.flushErr
}

func (l *Log) checkOpen() error {
	if l.closed {
		return errs.New(pb.ErrorCode_KAFKA_STORAGE_ERROR, "log %s is closed", l.key)
	}
	return nil
}

// headerOf is a helper for tests and tools: the header of the batch holding offset.
func (l *Log) headerOf(offset int64) (record.Header, bool, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	s := l.segs[l.segmentFor(offset)]
	_, h, ok, err := s.findBatch(offset)
	return h, ok, err
}

// ProducerTxn reports whether pid has a transaction open in this partition
// and at which epoch.
func (l *Log) ProducerTxn(pid int64) (epoch int16, open bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	e, ok := l.psm.Get(pid)
	if !ok {
		return -1, false
	}
	return e.Epoch, e.CurrentTxnFirstOffset >= 0
}

// OldestOpenTxn returns the open transaction holding the first unstable
// offset and the timestamp of its first batch (its start, for age gauges).
func (l *Log) OldestOpenTxn() (OngoingTxn, int64, bool) {
	l.mu.RLock()
	txns := l.psm.OngoingTxns()
	l.mu.RUnlock()
	if len(txns) == 0 {
		return OngoingTxn{}, 0, false
	}
	t := txns[0]
	h, ok, err := l.headerOf(t.FirstOffset)
	if err != nil || !ok {
		return t, t.LastTimestamp, true
	}
	return t, h.FirstTimestamp, true
}

// SetDeleteHookForTesting makes f run in Delete between the rename of the
// log's directory and its removal, an error from f stopping Delete there
// as a crash would, until restore is called.
func SetDeleteHookForTesting(f func(aside string) error) (restore func()) {
	deleteHook.Store(&f)
	return func() { deleteHook.Store(nil) }
}
