package config

import (
	"strconv"
	"strings"
	"testing"
)

// Each topic config takes the range Kafka's ConfigDef gives it: INT
// configs fit an int32, LONG configs any int64 at or above their floor.
func TestValidateTopicRanges(t *testing.T) {
	const maxInt64 = "9223372036854775807"
	maxInt32 := strconv.Itoa(1<<31 - 1)
	for _, tc := range []struct {
		key, value string
		want       string // "" accepts; else a piece of the refusal
	}{
		{SegmentBytes, maxInt64, "not a number of type INT"},
		{SegmentBytes, maxInt32, ""},
		{SegmentBytes, "13", "at least 14"},
		{MaxMessageBytes, maxInt64, "not a number of type INT"},
		{IndexIntervalBytes, "2147483648", "not a number of type INT"},
		{MinInsyncReplicas, maxInt64, "not a number of type INT"},
		{MinInsyncReplicas, "0", "at least 1"},
		{ProducerIDExpirationMs, maxInt64, "not a number of type INT"},
		{RetentionMs, maxInt64, ""},
		{RetentionMs, "-2", "at least -1"},
		{RetentionMs, "-1", ""},
		{SegmentMs, "0", "at least 1"},
		{SegmentMs, maxInt64, ""},
		{FlushMessages, "0", "at least 1"},
		{RetentionBytes, "9223372036854775808", "not an integer"},
		{TimestampAfterMaxMs, "3600000", ""},
		{TimestampBeforeMaxMs, maxInt64, ""},
		{TimestampAfterMaxMs, "-1", "at least 0"},
	} {
		err := ValidateTopic(tc.key, tc.value)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s=%s: refused (%v), want accepted", tc.key, tc.value, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s=%s: got %v, want a refusal saying %q", tc.key, tc.value, err, tc.want)
		}
	}
}

// Every numeric topic config accepts the floor of its range and one above
// it: a spec whose maximum was left out would refuse every value.
func TestTopicRangesAreNotEmpty(t *testing.T) {
	for key, s := range topicSpecs {
		if s.kind != kInt {
			continue
		}
		for _, v := range []int64{s.min, s.min + 1} {
			if err := ValidateTopic(key, strconv.FormatInt(v, 10)); err != nil {
				t.Errorf("%s=%d refused: %v", key, v, err)
			}
		}
	}
}

// cleanup.policy takes Kafka's list of delete and compact in either order,
// with spaces, and is stored and shown as one of three forms; anything
// else is refused. The compaction configs take Kafka's ranges, and
// min.cleanable.dirty.ratio is a DOUBLE in [0, 1].
func TestCompactionConfigs(t *testing.T) {
	for in, want := range map[string]string{
		"delete": PolicyDelete, "compact": PolicyCompact, "compact,delete": PolicyCompactDelete,
		"delete,compact": PolicyCompactDelete, " compact , delete ": PolicyCompactDelete, "compact,compact": PolicyCompact,
	} {
		if err := ValidateTopic(CleanupPolicy, in); err != nil {
			t.Errorf("cleanup.policy=%q refused: %v", in, err)
		}
		if got := Normalize(CleanupPolicy, in); got != want {
			t.Errorf("cleanup.policy=%q normalised to %q, want %q", in, got, want)
		}
	}
	for _, bad := range []string{"", "purge", "compact,", "compact;delete", "Compact"} {
		if err := ValidateTopic(CleanupPolicy, bad); err == nil {
			t.Errorf("cleanup.policy=%q accepted", bad)
		}
	}
	for _, tc := range []struct {
		key, value string
		ok         bool
	}{
		{MinCleanableDirtyRatio, "0", true},
		{MinCleanableDirtyRatio, "0.01", true},
		{MinCleanableDirtyRatio, "1", true},
		{MinCleanableDirtyRatio, "1.01", false},
		{MinCleanableDirtyRatio, "-0.5", false},
		{MinCleanableDirtyRatio, "NaN", false},
		{MinCleanableDirtyRatio, "half", false},
		{MinCompactionLagMs, "0", true},
		{MinCompactionLagMs, "-1", false},
		{MaxCompactionLagMs, "9223372036854775807", true},
		{MaxCompactionLagMs, "0", false},
		{DeleteRetentionMs, "0", true},
		{DeleteRetentionMs, "-1", false},
	} {
		if err := ValidateTopic(tc.key, tc.value); (err == nil) != tc.ok {
			t.Errorf("%s=%s: got %v, want accepted=%v", tc.key, tc.value, err, tc.ok)
		}
	}
	if got := Float(map[string]string{MinCleanableDirtyRatio: "0.1"}, MinCleanableDirtyRatio, 0.5); got != 0.1 {
		t.Errorf("Float read %v", got)
	}
	if got := Float(nil, MinCleanableDirtyRatio, 0.5); got != 0.5 {
		t.Errorf("Float default %v", got)
	}
}

// min.compaction.lag.ms may not exceed max.compaction.lag.ms, judged on
// the configs a topic would have after the change, as Kafka's
// LogConfig.validateValues does.
func TestCompactionLagsConflict(t *testing.T) {
	cur := map[string]string{MaxCompactionLagMs: "1000"}
	if err := ValidateTopicSet(Merged(cur, map[string]string{MinCompactionLagMs: "1000"}, nil)); err != nil {
		t.Fatalf("equal lags refused: %v", err)
	}
	if err := ValidateTopicSet(Merged(cur, map[string]string{MinCompactionLagMs: "1001"}, nil)); err == nil || !strings.Contains(err.Error(), "conflict topic config setting min.compaction.lag.ms") {
		t.Fatalf("min above max: %v", err)
	}
	// Deleting max.compaction.lag.ms brings back its default, Long.MAX.
	if err := ValidateTopicSet(Merged(cur, map[string]string{MinCompactionLagMs: "5000"}, []string{MaxCompactionLagMs})); err != nil {
		t.Fatalf("min under the default max refused: %v", err)
	}
}
