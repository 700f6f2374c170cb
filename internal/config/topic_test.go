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
