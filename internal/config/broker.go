package config

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Dynamic broker configs: the broker configs that
// IncrementalAlterConfigs may set per broker (resource name "<id>") or
// cluster-wide (""), with Kafka's names. Each takes effect on a running
// broker when the metadata record reaches it.
const (
	// LeaderThrottledRate is leader.replication.throttled.rate: bytes per
	// second this broker sends to out-of-sync followers of the partitions
	// leader.replication.throttled.replicas names (Kafka's default,
	// Long.MAX_VALUE, is no limit).
	LeaderThrottledRate = "leader.replication.throttled.rate"
	// FollowerThrottledRate is follower.replication.throttled.rate: bytes
	// per second this broker fetches, as an out-of-sync follower, of the
	// partitions follower.replication.throttled.replicas names.
	FollowerThrottledRate = "follower.replication.throttled.rate"
	// CleanerIOMaxBytesPerSecond is log.cleaner.io.max.bytes.per.second.
	CleanerIOMaxBytesPerSecond = "log.cleaner.io.max.bytes.per.second"
	// CleanerBackoffMs is log.cleaner.backoff.ms: how long an idle
	// cleaner thread sleeps before it looks for a dirty log again.
	CleanerBackoffMs = "log.cleaner.backoff.ms"
)

// Replication throttle topic configs: "partition:broker,…" or
// "*", the replicas throttled on the leader side and on the follower side.
const (
	LeaderThrottledReplicas   = "leader.replication.throttled.replicas"
	FollowerThrottledReplicas = "follower.replication.throttled.replicas"
)

// kReplicas is the kind of the *.replication.throttled.replicas topic
// configs (outside topic.go's iota block, to keep that file's edits small).
const kReplicas kind = 100

func init() {
	topicSpecs[LeaderThrottledReplicas] = spec{kind: kReplicas}
	topicSpecs[FollowerThrottledReplicas] = spec{kind: kReplicas}
}

// BrokerLogSynonyms maps the broker-level log defaults to the topic
// configs they are the default of (Kafka's ServerTopicConfigSynonyms).
var BrokerLogSynonyms = map[string]string{
	"log.segment.bytes":                 SegmentBytes,
	"log.roll.ms":                       SegmentMs,
	"log.retention.ms":                  RetentionMs,
	"log.retention.bytes":               RetentionBytes,
	"log.flush.interval.messages":       FlushMessages,
	"log.flush.interval.ms":             FlushMs,
	"log.index.interval.bytes":          IndexIntervalBytes,
	"log.cleanup.policy":                CleanupPolicy,
	"log.cleaner.min.cleanable.ratio":   MinCleanableDirtyRatio,
	"log.cleaner.min.compaction.lag.ms": MinCompactionLagMs,
	"log.cleaner.max.compaction.lag.ms": MaxCompactionLagMs,
	"log.cleaner.delete.retention.ms":   DeleteRetentionMs,
	MinInsyncReplicas:                   MinInsyncReplicas,
}

// BrokerReadOnly are broker configs Strand knows but reads only from the
// node's flags or config file: changing them needs a restart (Kafka can
// resize the cleaner's threads and buffer at run time; Strand cannot yet).
var BrokerReadOnly = map[string]bool{
	"log.cleaner.enable":             true,
	"log.cleaner.threads":            true,
	"log.cleaner.dedupe.buffer.size": true,
}

// DynamicBrokerKeys lists the broker configs that can be altered, sorted.
func DynamicBrokerKeys() []string {
	out := []string{LeaderThrottledRate, FollowerThrottledRate, CleanerIOMaxBytesPerSecond, CleanerBackoffMs}
	for k := range BrokerLogSynonyms {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ErrBrokerReadOnly marks a refusal because the config is read-only (the
// caller answers Kafka's INVALID_REQUEST rather than INVALID_CONFIG).
type ErrBrokerReadOnly struct{ Name string }

func (e ErrBrokerReadOnly) Error() string {
	return fmt.Sprintf("Cannot update these configs dynamically: [%s] (read-only: set it in the broker's configuration and restart)", e.Name)
}

// ValidateBroker checks one dynamic broker config entry: an
// ErrBrokerReadOnly for a static config, another error for an unknown
// name or a bad value.
func ValidateBroker(key, value string) error {
	if BrokerReadOnly[key] {
		return ErrBrokerReadOnly{Name: key}
	}
	switch key {
	case LeaderThrottledRate, FollowerThrottledRate:
		v, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return fmt.Errorf("invalid value %q for configuration %s: not a number of type LONG", value, key)
		}
		if v < 0 {
			return fmt.Errorf("invalid value %d for configuration %s: value must be at least 0", v, key)
		}
		return nil
	case CleanerBackoffMs:
		v, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return fmt.Errorf("invalid value %q for configuration %s: not a number of type LONG", value, key)
		}
		if v < 0 {
			return fmt.Errorf("invalid value %d for configuration %s: value must be at least 0", v, key)
		}
		if v > math.MaxInt64/int64(time.Millisecond) {
			return fmt.Errorf("invalid value %d for configuration %s: at most %d milliseconds", v, key, math.MaxInt64/int64(time.Millisecond))
		}
		return nil
	case CleanerIOMaxBytesPerSecond:
		v, err := strconv.ParseFloat(value, 64)
		if err != nil || math.IsNaN(v) {
			return fmt.Errorf("invalid value %q for configuration %s: not a number of type DOUBLE", value, key)
		}
		if v <= 0 {
			return fmt.Errorf("invalid value %s for configuration %s: value must be positive", value, key)
		}
		return nil
	}
	topicKey, ok := BrokerLogSynonyms[key]
	if !ok {
		return fmt.Errorf("unknown dynamic broker config %q (known: %v)", key, DynamicBrokerKeys())
	}
	if err := ValidateTopic(topicKey, value); err != nil {
		return fmt.Errorf("%s: %v", key, err)
	}
	return nil
}

// NormalizeBroker is the stored form of a dynamic broker config value
// (log.cleanup.policy normalised like cleanup.policy).
func NormalizeBroker(key, value string) string {
	if t, ok := BrokerLogSynonyms[key]; ok {
		return Normalize(t, value)
	}
	return value
}

// ParseThrottledReplicas reads a *.replication.throttled.replicas value:
// "" (none), "*" (every partition) or "partition:broker,…". It returns
// the partitions listed for broker (broker < 0: only validates).
func ParseThrottledReplicas(value string, broker int32) (all bool, parts map[int32]bool, err error) {
	v := strings.TrimSpace(value)
	switch v {
	case "":
		return false, nil, nil
	case "*":
		return true, nil, nil
	}
	parts = map[int32]bool{}
	for _, item := range strings.Split(v, ",") {
		p, b, ok := strings.Cut(strings.TrimSpace(item), ":")
		pn, err1 := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		bn, err2 := strconv.ParseInt(strings.TrimSpace(b), 10, 32)
		if !ok || err1 != nil || err2 != nil || pn < 0 || bn < 0 {
			return false, nil, fmt.Errorf("must be the literal '*' or a list of replicas in the form [PartitionId]:[BrokerId],[PartitionId]:[BrokerId],...; %q is not", item)
		}
		if int32(bn) == broker {
			parts[int32(pn)] = true
		}
	}
	return false, parts, nil
}
