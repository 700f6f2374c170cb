// Package config holds the names, defaults and validation of the topic
// configs Strand understands, with Kafka's names.
package config

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Topic config keys (Kafka's topic-level names).
const (
	SegmentBytes           = "segment.bytes"
	SegmentMs              = "segment.ms"
	RetentionMs            = "retention.ms"
	RetentionBytes         = "retention.bytes"
	FlushMessages          = "flush.messages"
	FlushMs                = "flush.ms"
	IndexIntervalBytes     = "index.interval.bytes"
	MinInsyncReplicas      = "min.insync.replicas"
	UncleanLeaderElection  = "unclean.leader.election.enable"
	MaxMessageBytes        = "max.message.bytes"
	CleanupPolicy          = "cleanup.policy"
	MessageTimestampType   = "message.timestamp.type"
	TimestampBeforeMaxMs   = "message.timestamp.before.max.ms"
	TimestampAfterMaxMs    = "message.timestamp.after.max.ms"
	ProducerIDExpirationMs = "producer.id.expiration.ms"
	// Compaction.
	MinCleanableDirtyRatio = "min.cleanable.dirty.ratio"
	MinCompactionLagMs     = "min.compaction.lag.ms"
	MaxCompactionLagMs     = "max.compaction.lag.ms"
	DeleteRetentionMs      = "delete.retention.ms"
)

// cleanup.policy values: Kafka's list of delete and compact, in any order.
const (
	PolicyDelete        = "delete"
	PolicyCompact       = "compact"
	PolicyCompactDelete = "compact,delete"
)

type kind int

const (
	kInt kind = iota
	kBool
	kString
	kDouble // Kafka's DOUBLE, with Between(min, max) in dmin and dmax
	kPolicy // cleanup.policy: a list of delete and compact
)

type spec struct {
	kind kind
	min  int64
	// max is the largest value: math.MaxInt32 for what Kafka's ConfigDef
	// types INT, math.MaxInt64 for LONG.
	max  int64
	enum []string
	// dmin, dmax bound a kDouble.
	dmin, dmax float64
}

const (
	maxInt  = math.MaxInt32
	maxLong = math.MaxInt64
)

// topicSpecs: Kafka's LogConfig types and validators (INT or LONG, and
// atLeast). segment.bytes keeps Kafka's old floor of 14 bytes (one empty
// batch's overhead) rather than 4.x's 1 MiB, for tests with tiny segments.
var topicSpecs = map[string]spec{
	SegmentBytes:           {kind: kInt, min: 14, max: maxInt},
	SegmentMs:              {kind: kInt, min: 1, max: maxLong},
	RetentionMs:            {kind: kInt, min: -1, max: maxLong},
	RetentionBytes:         {kind: kInt, min: -1, max: maxLong},
	FlushMessages:          {kind: kInt, min: 1, max: maxLong},
	FlushMs:                {kind: kInt, min: 0, max: maxLong},
	IndexIntervalBytes:     {kind: kInt, min: 0, max: maxInt},
	MinInsyncReplicas:      {kind: kInt, min: 1, max: maxInt},
	UncleanLeaderElection:  {kind: kBool},
	MaxMessageBytes:        {kind: kInt, min: 0, max: maxInt},
	CleanupPolicy:          {kind: kPolicy},
	MessageTimestampType:   {kind: kString, enum: []string{"CreateTime"}},
	TimestampBeforeMaxMs:   {kind: kInt, min: 0, max: maxLong},
	TimestampAfterMaxMs:    {kind: kInt, min: 0, max: maxLong},
	ProducerIDExpirationMs: {kind: kInt, min: 1, max: maxInt},
	MinCleanableDirtyRatio: {kind: kDouble, dmin: 0, dmax: 1},
	MinCompactionLagMs:     {kind: kInt, min: 0, max: maxLong},
	MaxCompactionLagMs:     {kind: kInt, min: 1, max: maxLong},
	DeleteRetentionMs:      {kind: kInt, min: 0, max: maxLong},
}

// TopicKeys lists the known topic config keys, sorted.
func TopicKeys() []string {
	out := make([]string, 0, len(topicSpecs))
	for k := range topicSpecs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ValidateTopic checks one topic config entry and explains a refusal.
func ValidateTopic(key, value string) error {
	s, ok := topicSpecs[key]
	if !ok {
		return fmt.Errorf("unknown topic config %q (known: %v)", key, TopicKeys())
	}
	switch s.kind {
	case kInt:
		v, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return fmt.Errorf("%s=%q is not an integer in [%d, %d]", key, value, s.min, s.max)
		}
		switch {
		case v > s.max:
			return fmt.Errorf("invalid value %d for configuration %s: not a number of type INT (at most %d)", v, key, s.max)
		case v < s.min:
			return fmt.Errorf("invalid value %d for configuration %s: value must be at least %d", v, key, s.min)
		}
	case kBool:
		if value != "true" && value != "false" {
			return fmt.Errorf("%s=%q must be true or false", key, value)
		}
	case kDouble:
		v, err := strconv.ParseFloat(value, 64)
		if err != nil || math.IsNaN(v) {
			return fmt.Errorf("%s=%q is not a number in [%g, %g]", key, value, s.dmin, s.dmax)
		}
		if v < s.dmin || v > s.dmax {
			return fmt.Errorf("invalid value %s for configuration %s: value must be between %g and %g", value, key, s.dmin, s.dmax)
		}
	case kPolicy:
		if _, ok := NormalizePolicy(value); !ok {
			return fmt.Errorf("invalid value %q for configuration %s: %q must be one of [delete, compact], or both separated by a comma", value, key, value)
		}
	case kReplicas:
		if _, _, err := ParseThrottledReplicas(value, -1); err != nil {
			return fmt.Errorf("invalid value %q for configuration %s: %v", value, key, err)
		}
	case kString:
		for _, e := range s.enum {
			if e == value {
				return nil
			}
		}
		return fmt.Errorf("%s=%q is not supported (supported: %v)", key, value, s.enum)
	}
	return nil
}

// ValidateTopicSet checks what single values cannot show: the configs a
// topic would have after a create or alter, together. As Kafka's
// LogConfig.validateValues, min.compaction.lag.ms may not exceed
// max.compaction.lag.ms.
func ValidateTopicSet(cfg map[string]string) error {
	minLag, maxLag := Int(cfg, MinCompactionLagMs, 0), Int(cfg, MaxCompactionLagMs, maxLong)
	if minLag > maxLag {
		return fmt.Errorf("conflict topic config setting %s (%d) > %s (%d)", MinCompactionLagMs, minLag, MaxCompactionLagMs, maxLag)
	}
	return nil
}

// Merged is a topic's configs after setting set, then deleting del (the
// order the controller writes their records in).
func Merged(cur, set map[string]string, del []string) map[string]string {
	out := make(map[string]string, len(cur)+len(set))
	for k, v := range cur {
		out[k] = v
	}
	for k, v := range set {
		out[k] = v
	}
	for _, k := range del {
		delete(out, k)
	}
	return out
}

// NormalizePolicy reads a cleanup.policy value as Kafka's list parser does
// (items separated by commas, spaces around them ignored, each delete or
// compact) and writes it one way: delete, compact or compact,delete, so
// "delete,compact" and "compact, delete" mean and show the same.
func NormalizePolicy(value string) (string, bool) {
	var del, compact bool
	for _, item := range strings.Split(value, ",") {
		switch strings.TrimSpace(item) {
		case PolicyDelete:
			del = true
		case PolicyCompact:
			compact = true
		default:
			return "", false
		}
	}
	switch {
	case del && compact:
		return PolicyCompactDelete, true
	case compact:
		return PolicyCompact, true
	}
	return PolicyDelete, true
}

// Normalize returns the form a topic config value is stored and shown in:
// cleanup.policy normalised, anything else as given. Call it on values
// ValidateTopic accepted.
func Normalize(key, value string) string {
	if key == CleanupPolicy {
		if p, ok := NormalizePolicy(value); ok {
			return p
		}
	}
	return value
}

// Float reads a double config, falling back to def.
func Float(cfg map[string]string, key string, def float64) float64 {
	if v, ok := cfg[key]; ok {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f
		}
	}
	return def
}

// Int reads an integer config, falling back to def.
func Int(cfg map[string]string, key string, def int64) int64 {
	if v, ok := cfg[key]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	}
	return def
}

// Bool reads a boolean config, falling back to def.
func Bool(cfg map[string]string, key string, def bool) bool {
	switch cfg[key] {
	case "true":
		return true
	case "false":
		return false
	}
	return def
}
