package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/internal/config"
)

// Node-wide checkpoint files in the data directory, as Kafka names them.
const (
	RecoveryPointFile = "recovery-point-offset-checkpoint"
	HighWatermarkFile = "replication-offset-checkpoint"
)

// Config is the partition table's configuration.
type Config struct {
	DataDir string
	// Log holds broker-level defaults (log.segment.bytes, …); topic configs override.
	Log storage.Config
	// MinInsyncReplicas is the broker default min.insync.replicas.
	MinInsyncReplicas int
	// RetentionCheckInterval is log.retention.check.interval.ms.
	RetentionCheckInterval time.Duration
	// CheckpointInterval is replica.high.watermark.checkpoint.interval.ms.
	CheckpointInterval time.Duration
	// ProducerExpirationCheckInterval is producer.id.expiration.check.interval.ms.
	ProducerExpirationCheckInterval time.Duration
	// Cleaner is the log cleaner's configuration (log.cleaner.*).
	Cleaner CleanerConfig
	Logger  *slog.Logger
}

// DefaultConfig returns Kafka's defaults for dataDir.
func DefaultConfig(dataDir string) Config {
	return Config{
		DataDir:                         dataDir,
		Log:                             storage.DefaultConfig(),
		MinInsyncReplicas:               1,
		RetentionCheckInterval:          5 * time.Minute,
		CheckpointInterval:              5 * time.Second,
		ProducerExpirationCheckInterval: 10 * time.Minute,
		Cleaner:                         DefaultCleanerConfig(),
	}
}

// Manager is the node's partition table: it opens every log found in the
// data directory at start (recovering those not cleanly closed), creates and
// deletes logs as metadata says, and runs the background work logs need:
// checkpoints, retention, producer expiry. Close stops it and leaves every
// log cleanly closed.
type Manager struct {
	cfg Config
	clk clock.Clock
	lg  *slog.Logger

	mu    sync.RWMutex
	parts map[storage.PartitionKey]*Partition
	// opening holds a channel, closed when done, per partition whose log
	// GetOrCreate is opening outside mu.
	opening map[storage.PartitionKey]chan struct{}
	// idMu serializes recording a topic id for logs that had none.
	idMu sync.Mutex

	// cleaner compacts the logs of compacted topics; nil when
	// log.cleaner.enable is false. It runs under cancel and wg.
	cleaner *cleaner

	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed bool

	// dyn is the dynamic broker configs in force (dynamic.go).
	dyn dynamicState
}

// Open loads the partition table from cfg.DataDir.
func Open(cfg Config, clk clock.Clock) (*Manager, error) {
	if clk == nil {
		clk = clock.Real
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.Default()
	}
	if cfg.Log.FS == nil {
		cfg.Log.FS = storage.OSFS{}
	}
	fsys := cfg.Log.FS
	if err := fsys.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	if cfg.Log.Logger == nil {
		cfg.Log.Logger = lg
	}
	if cfg.Log.Stats == nil {
		cfg.Log.Stats = new(storage.Stats) // shared by every log of this broker
	}
	rps, err := storage.ReadOffsetCheckpoint(fsys, filepath.Join(cfg.DataDir, RecoveryPointFile))
	if err != nil {
		lg.Warn("recovery point checkpoint unreadable; recovering every log from its start", "err", err)
		rps = map[storage.PartitionKey]int64{}
	}
	hws, err := storage.ReadOffsetCheckpoint(fsys, filepath.Join(cfg.DataDir, HighWatermarkFile))
	if err != nil {
		lg.Warn("high watermark checkpoint unreadable; starting from log start offsets", "err", err)
		hws = map[storage.PartitionKey]int64{}
	}
	// Until the next clean close, a crash must rescan what was written since.
	m := &Manager{cfg: cfg, clk: clk, lg: lg, parts: map[storage.PartitionKey]*Partition{}}
	// Logs whose deletion a crash interrupted (renamed aside, not yet
	// removed) go now; stray logs ("-stray") stay for the operator and,
	// like them, are never loaded as partitions.
	removed, err := storage.RemoveDeletedDirs(fsys, cfg.DataDir)
	for _, name := range removed {
		lg.Info("removed the directory of a deleted log", "dir", name)
	}
	if err != nil {
		return nil, fmt.Errorf("remove deleted logs: %w", err)
	}
	entries, err := fsys.ReadDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		key, ok := ParseDirName(e.Name())
		if !ok {
			continue
		}
		start := time.Now()
		l, err := storage.Open(filepath.Join(cfg.DataDir, e.Name()), key, cfg.Log, rps[key], clk)
		if err != nil {
			m.closeAll()
			return nil, fmt.Errorf("open log %s: %w", key, err)
		}
		// The topic the log belongs to. No file: a log written before
		// topic ids were recorded, adopted by the topic metadata names.
		// A file that does not read fails the load: taken for a log of
		// no known topic, the log of a topic deleted meanwhile would be
		// adopted by a new topic of the same name, its records served as
		// the new topic's (Kafka fails the load too).
		id, err := storage.ReadPartitionMetadata(fsys, l.Dir())
		if err != nil {
			_ = l.Close()
			m.closeAll()
			return nil, fmt.Errorf("open log %s: its topic id cannot be read (%w); move the directory aside or repair %s to start", key, err, storage.PartitionMetadataFile)
		}
		p := NewPartition(key, l, hws[key])
		p.SetMinISR(cfg.MinInsyncReplicas)
		if id != "" {
			p.setTopicID(id)
		}
		m.parts[key] = p
		lg.Debug("loaded log", "partition", key.String(), "logEnd", l.LogEndOffset(), "took", time.Since(start))
	}
	// Recovery points now reflect the logs as loaded (after any truncation).
	if err := m.writeCheckpoints(); err != nil {
		m.closeAll()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.wg.Add(1)
	go m.loop(ctx)
	if cfg.Cleaner.Enable {
		m.cleaner = newCleaner(cfg.Cleaner, clk, lg, m.compactedLogs)
		m.cleaner.start(ctx, &m.wg)
	}
	return m, nil
}

// compactedLogs lists the cleaner's candidates: every healthy local log
// whose topic is compacted, with its upper bound min(HW, first unstable
// offset) (the partition's last stable offset).
func (m *Manager) compactedLogs() []cleanCandidate {
	var out []cleanCandidate
	for _, p := range m.All() {
		cfg := p.Log.Config()
		if !cfg.Cleanup.Compact() || p.Log.Failed() != nil {
			continue
		}
		out = append(out, cleanCandidate{key: p.Key, log: p.Log, cfg: cfg, upperBound: p.LastStableOffset()})
	}
	return out
}

// CleanerMetrics returns the log cleaner's gauges (zero when it is off).
func (m *Manager) CleanerMetrics() CleanerMetrics {
	if m.cleaner == nil {
		return CleanerMetrics{}
	}
	return m.cleaner.metrics()
}

// ParseDirName reads "<topic>-<partition>".
func ParseDirName(name string) (storage.PartitionKey, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return storage.PartitionKey{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 {
		return storage.PartitionKey{}, false
	}
	return storage.PartitionKey{Topic: name[:i], Partition: int32(p)}, true
}

// Config is the configuration the Manager was opened with.
func (m *Manager) Config() Config { return m.cfg }

// LogStats counts the fsyncs of this broker's logs.
func (m *Manager) LogStats() *storage.Stats { return m.cfg.Log.Stats }

// LogConfig merges topic configs over the broker defaults (the static
// ones, with the dynamic broker configs of SetDynamic over them).
func (m *Manager) LogConfig(topicConfigs map[string]string) (storage.Config, int) {
	base, minISR := m.logDefaults()
	return mergeLog(base, minISR, topicConfigs)
}

func mergeLog(c storage.Config, minISR int, topicConfigs map[string]string) (storage.Config, int) {
	c.SegmentBytes = config.Int(topicConfigs, config.SegmentBytes, c.SegmentBytes)
	c.SegmentMs = config.Int(topicConfigs, config.SegmentMs, c.SegmentMs)
	c.RetentionMs = config.Int(topicConfigs, config.RetentionMs, c.RetentionMs)
	c.RetentionBytes = config.Int(topicConfigs, config.RetentionBytes, c.RetentionBytes)
	c.FlushMessages = config.Int(topicConfigs, config.FlushMessages, c.FlushMessages)
	c.FlushMs = config.Int(topicConfigs, config.FlushMs, c.FlushMs)
	c.IndexIntervalBytes = int(config.Int(topicConfigs, config.IndexIntervalBytes, int64(c.IndexIntervalBytes)))
	c.ProducerIDExpirationMs = config.Int(topicConfigs, config.ProducerIDExpirationMs, c.ProducerIDExpirationMs)
	if v, ok := topicConfigs[config.CleanupPolicy]; ok {
		if p, ok := ParseCleanupPolicy(v); ok {
			c.Cleanup = p
		}
	}
	c.MinCleanableDirtyRatio = config.Float(topicConfigs, config.MinCleanableDirtyRatio, c.MinCleanableDirtyRatio)
	c.MinCompactionLagMs = config.Int(topicConfigs, config.MinCompactionLagMs, c.MinCompactionLagMs)
	c.MaxCompactionLagMs = config.Int(topicConfigs, config.MaxCompactionLagMs, c.MaxCompactionLagMs)
	c.DeleteRetentionMs = config.Int(topicConfigs, config.DeleteRetentionMs, c.DeleteRetentionMs)
	minISR = int(config.Int(topicConfigs, config.MinInsyncReplicas, int64(minISR)))
	return c, minISR
}

// ParseCleanupPolicy reads a cleanup.policy value (either order, spaces
// allowed, as config.NormalizePolicy).
func ParseCleanupPolicy(v string) (storage.CleanupPolicy, bool) {
	n, ok := config.NormalizePolicy(v)
	switch {
	case !ok:
		return storage.CleanupDelete, false
	case n == config.PolicyCompact:
		return storage.CleanupCompact, true
	case n == config.PolicyCompactDelete:
		return storage.CleanupCompactDelete, true
	}
	return storage.CleanupDelete, true
}

// Get returns a local partition or nil.
func (m *Manager) Get(key storage.PartitionKey) *Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.parts[key]
}

// GetOrCreate returns the local partition, creating its log if needed, with
// the topic's configs applied.
func (m *Manager) GetOrCreate(key storage.PartitionKey, topicConfigs map[string]string) (*Partition, error) {
	return m.GetOrCreateTopic(key, "", topicConfigs)
}

// GetOrCreateTopic is GetOrCreate for the topic with id topicID (""
// when not known), recorded in the log's partition.metadata. A log that
// has no id yet takes this one; a log of another id is refused (its
// topic was deleted and created again: the caller removes the old log
// first, see Stray).
func (m *Manager) GetOrCreateTopic(key storage.PartitionKey, topicID string, topicConfigs map[string]string) (*Partition, error) {
	lc, minISR := m.LogConfig(topicConfigs)
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return nil, errors.New("partition manager is closed")
		}
		if p := m.parts[key]; p != nil {
			p.Log.SetConfig(lc)
			p.SetMinISR(minISR)
			m.mu.Unlock()
			if err := m.assignTopicID(p, topicID); err != nil {
				return nil, err
			}
			return p, nil
		}
		if ch := m.opening[key]; ch != nil {
			m.mu.Unlock()
			<-ch
			continue
		}
		// Open (recovery, file creation, fsyncs) runs outside mu: readers
		// of the partition table do not wait for it, and several logs can
		// be opened at once (as when 10 000 partitions are created).
		ch := make(chan struct{})
		if m.opening == nil {
			m.opening = map[storage.PartitionKey]chan struct{}{}
		}
		m.opening[key] = ch
		m.mu.Unlock()
		l, err := storage.Open(filepath.Join(m.cfg.DataDir, storage.DirName(key.Topic, key.Partition)), key, lc, 0, m.clk)
		if err == nil && topicID != "" {
			// Recorded before the partition is in the table, so no reader
			// finds it without its id.
			if werr := storage.WritePartitionMetadata(m.cfg.Log.FS, l.Dir(), topicID); werr != nil {
				_ = l.Close()
				l, err = nil, fmt.Errorf("record the topic id of %s: %w", key, werr)
			}
		}
		m.mu.Lock()
		delete(m.opening, key)
		close(ch)
		if err != nil {
			m.mu.Unlock()
			return nil, err
		}
		if m.closed {
			m.mu.Unlock()
			_ = l.Close()
			return nil, errors.New("partition manager is closed")
		}
		p := NewPartition(key, l, 0)
		p.SetMinISR(minISR)
		if topicID != "" {
			p.setTopicID(topicID)
		}
		m.parts[key] = p
		m.mu.Unlock()
		return p, nil
	}
}

// Stray reports whether p is the log of another topic than the one with
// id topicID: a topic deleted and created again under the same name while
// this broker was away (Kafka's stray logs). Neither id known: not stray.
func Stray(p *Partition, topicID string) bool {
	have := p.TopicID()
	return have != "" && topicID != "" && have != topicID
}

// assignTopicID records topicID for a log that has none yet (created
// before ids were recorded); a log of another id is refused.
func (m *Manager) assignTopicID(p *Partition, topicID string) error {
	if topicID == "" {
		return nil
	}
	m.idMu.Lock()
	defer m.idMu.Unlock()
	switch have := p.TopicID(); {
	case have == topicID:
		return nil
	case have != "":
		return fmt.Errorf("the log of %s belongs to topic id %s, not %s", p.Key, have, topicID)
	}
	if err := storage.WritePartitionMetadata(m.cfg.Log.FS, p.Log.Dir(), topicID); err != nil {
		return fmt.Errorf("record the topic id of %s: %w", p.Key, err)
	}
	p.setTopicID(topicID)
	return nil
}

// Delete removes a partition and its files.
func (m *Manager) Delete(key storage.PartitionKey) error {
	m.mu.Lock()
	p := m.parts[key]
	delete(m.parts, key)
	m.mu.Unlock()
	if p == nil {
		return nil
	}
	p.SetLeadership(Leadership{Role: RoleNone, Leader: -1}, nil)
	return p.Log.Delete()
}

// MarkStray stops serving a partition whose log is no replica of the
// cluster's and sets its directory aside under a "-stray" name
// (storage.Log.MarkStray), which it returns.
func (m *Manager) MarkStray(key storage.PartitionKey) (string, error) {
	m.mu.Lock()
	p := m.parts[key]
	delete(m.parts, key)
	m.mu.Unlock()
	if p == nil {
		return "", nil
	}
	p.SetLeadership(Leadership{Role: RoleNone, Leader: -1}, nil)
	return p.Log.MarkStray()
}

// All returns every local partition, sorted.
func (m *Manager) All() []*Partition {
	m.mu.RLock()
	out := make([]*Partition, 0, len(m.parts))
	for _, p := range m.parts {
		out = append(out, p)
	}
	m.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Key.Topic != out[j].Key.Topic {
			return out[i].Key.Topic < out[j].Key.Topic
		}
		return out[i].Key.Partition < out[j].Key.Partition
	})
	return out
}

func (m *Manager) writeCheckpoints() error {
	rps := map[storage.PartitionKey]int64{}
	hws := map[storage.PartitionKey]int64{}
	for _, p := range m.All() {
		rps[p.Key] = p.Log.RecoveryPoint()
		hws[p.Key] = p.HighWatermark()
	}
	if err := storage.WriteOffsetCheckpoint(m.cfg.Log.FS, filepath.Join(m.cfg.DataDir, RecoveryPointFile), rps); err != nil {
		return err
	}
	return storage.WriteOffsetCheckpoint(m.cfg.Log.FS, filepath.Join(m.cfg.DataDir, HighWatermarkFile), hws)
}

func (m *Manager) loop(ctx context.Context) {
	defer m.wg.Done()
	ck := m.clk.NewTicker(m.cfg.CheckpointInterval)
	defer ck.Stop()
	ret := m.clk.NewTicker(m.cfg.RetentionCheckInterval)
	defer ret.Stop()
	exp := m.clk.NewTicker(m.cfg.ProducerExpirationCheckInterval)
	defer exp.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ck.C():
			if err := m.writeCheckpoints(); err != nil {
				m.lg.Error("write checkpoints", "err", err)
			}
			m.flushByTime()
		case <-ret.C():
			m.RunRetention()
		case <-exp.C():
			for _, p := range m.All() {
				if n := p.Log.RemoveExpiredProducers(); n > 0 {
					m.lg.Info("expired idle producers", "partition", p.Key.String(), "count", n)
				}
			}
		}
	}
}

// flushByTime applies flush.ms.
func (m *Manager) flushByTime() {
	for _, p := range m.All() {
		c := p.Log.Config()
		if c.FlushMs < 1<<62 {
			if err := p.Log.Flush(); err != nil {
				m.lg.Error("flush", "partition", p.Key.String(), "err", err)
			}
		}
	}
}

// RunRetention deletes expired segments below each partition's HW now.
func (m *Manager) RunRetention() {
	for _, p := range m.All() {
		n, err := p.Log.DeleteRetention(p.HighWatermark())
		if err != nil {
			m.lg.Error("retention", "partition", p.Key.String(), "err", err)
		} else if n > 0 {
			m.lg.Info("deleted segments by retention", "partition", p.Key.String(), "segments", n, "logStart", p.Log.LogStartOffset())
		}
	}
}

func (m *Manager) closeAll() {
	for _, p := range m.parts {
		p.Log.Close()
	}
}

// Close stops background work, closes every log cleanly and writes the
// checkpoints, so the next Open rescans nothing.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	var errs []error
	for _, p := range m.All() {
		if err := p.Log.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", p.Key, err))
		}
	}
	if err := m.writeCheckpoints(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Abandon stops background work and drops every log without a clean
// close or checkpoint, as kill -9 would (tests).
func (m *Manager) Abandon() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	for _, p := range m.All() {
		p.Log.Abandon()
	}
}
