package broker

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/internal/config"
)

// dynamicState is what the dynamic broker configs override of
// the static Config: the log defaults and min.insync.replicas, merged
// once per change.
type dynamicState struct {
	mu     sync.RWMutex
	set    bool
	log    storage.Config
	minISR int
}

// logDefaults is the broker-level log config in force: the static one
// with the dynamic broker configs over it.
func (m *Manager) logDefaults() (storage.Config, int) {
	m.dyn.mu.RLock()
	defer m.dyn.mu.RUnlock()
	if m.dyn.set {
		return m.dyn.log, m.dyn.minISR
	}
	return m.cfg.Log, m.cfg.MinInsyncReplicas
}

// SetDynamic applies this broker's dynamic configs (its own over the
// cluster-wide ones, Kafka's names: log.retention.ms, …,
// log.cleaner.io.max.bytes.per.second) over the static configuration; a
// name absent goes back to the static value. The log defaults apply to
// partitions opened from now on and to LogConfig; the caller re-applies
// LogConfig to open logs. The cleaner's I/O rate and backoff change at
// once. It
// reports whether the log defaults changed.
func (m *Manager) SetDynamic(vals map[string]string) bool {
	asTopic := map[string]string{}
	for bk, tk := range config.BrokerLogSynonyms {
		if v, ok := vals[bk]; ok {
			asTopic[tk] = v
		}
	}
	lc, minISR := mergeLog(m.cfg.Log, m.cfg.MinInsyncReplicas, asTopic)
	m.dyn.mu.Lock()
	changed := !m.dyn.set && (len(asTopic) > 0) || m.dyn.set && (m.dyn.log != lc || m.dyn.minISR != minISR)
	m.dyn.set, m.dyn.log, m.dyn.minISR = true, lc, minISR
	m.dyn.mu.Unlock()
	rate := m.cfg.Cleaner.IOMaxBytesPerSecond
	if v, ok := vals[config.CleanerIOMaxBytesPerSecond]; ok {
		if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 && !math.IsNaN(f) {
			rate = f
		}
	}
	backoff := m.cfg.Cleaner.Backoff
	if v, ok := vals[config.CleanerBackoffMs]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 && n <= math.MaxInt64/int64(time.Millisecond) {
			backoff = time.Duration(n) * time.Millisecond
		}
	}
	if m.cleaner != nil {
		m.cleaner.throttle.setRate(rate)
		m.cleaner.setBackoff(backoff)
	}
	return changed
}

// CleanerBackoff is log.cleaner.backoff.ms in force, or the configured one
// when the cleaner is off.
func (m *Manager) CleanerBackoff() time.Duration {
	if m.cleaner == nil {
		return m.cfg.Cleaner.Backoff
	}
	return m.cleaner.backoffNow()
}

// CleanerIORate is the cleaner's I/O limit in force (bytes/s;
// MaxFloat64 for none), or the configured one when the cleaner is off.
func (m *Manager) CleanerIORate() float64 {
	if m.cleaner == nil {
		return m.cfg.Cleaner.IOMaxBytesPerSecond
	}
	m.cleaner.throttle.mu.Lock()
	defer m.cleaner.throttle.mu.Unlock()
	return m.cleaner.throttle.rate
}

// setRate changes the byte rate (log.cleaner.io.max.bytes.per.second
// altered at run time); bookings already made stand.
func (t *byteThrottle) setRate(rate float64) {
	t.mu.Lock()
	t.rate = rate
	t.mu.Unlock()
}
