// Package config holds the names, defaults and validation of the topic
// configs Strand understands, with Kafka's names.
package config

import (
	"fmt"
	"math"
	"sort"
	"strconv"
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
)

type kind int

const (
	kInt kind = iota
	kBool
	kString
)

type spec struct {
	kind kind
	min  int64
	// max is the largest value: math.MaxInt32 for what Kafka's ConfigDef
	// types INT, math.MaxInt64 for LONG.
	max  int64
	enum []string
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
	CleanupPolicy:          {kind: kString, enum: []string{"delete", "compact"}},
	MessageTimestampType:   {kind: kString, enum: []string{"CreateTime"}},
	TimestampBeforeMaxMs:   {kind: kInt, min: 0, max: maxLong},
	TimestampAfterMaxMs:    {kind: kInt, min: 0, max: maxLong},
	ProducerIDExpirationMs: {kind: kInt, min: 1, max: maxInt},
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
