package main

// Real node on real time: the strand CLI under test dials its --bootstrap address
// over real TCP; it has no in-memory dialer that could reach MemNet.

import (
	"regexp"
	"testing"
	"time"

	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// TestConfigsCommand: `strand configs describe` lists a topic's effective
// configs with their sources, the compaction ones included, and `strand
// configs alter` sets and removes them (a removed one shows the default).
func TestConfigsCommand(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	b := "--bootstrap=" + n.Addr()
	run(t, "", "topics", "create", "table", "--partitions", "1", "--config", "cleanup.policy=delete,compact", b)
	row := func(out, name, value, source string) bool {
		return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` +` + regexp.QuoteMeta(value) + ` +` + source + `$`).MatchString(out)
	}
	out := run(t, "", "configs", "describe", "table", b)
	for _, want := range [][3]string{
		{"cleanup.policy", "compact,delete", "topic"},
		{"min.cleanable.dirty.ratio", "0.5", "default"},
		{"min.compaction.lag.ms", "0", "default"},
		{"max.compaction.lag.ms", "9223372036854775807", "default"},
		{"delete.retention.ms", "86400000", "default"},
		{"retention.ms", "604800000", "default"},
	} {
		if !row(out, want[0], want[1], want[2]) {
			t.Fatalf("configs describe lacks %v:\n%s", want, out)
		}
	}
	out = run(t, "", "configs", "describe", "--broker", b)
	for _, want := range [][3]string{
		{"log.cleanup.policy", "delete", "default"},
		{"log.cleaner.threads", "1", "default"},
		{"log.cleaner.dedupe.buffer.size", "134217728", "default"},
		{"log.cleaner.backoff.ms", "15000", "default"},
		{"min.insync.replicas", "1", "default"},
	} {
		if !row(out, want[0], want[1], want[2]) {
			t.Fatalf("configs describe --broker lacks %v:\n%s", want, out)
		}
	}
	mustContain(t, run(t, "", "configs", "alter", "table", "--set", "min.cleanable.dirty.ratio=0.2", "--delete", "cleanup.policy", b),
		"Altered configs of topic table.")
	wait.Eventually(t, 10*time.Second, "the altered configs", func() bool {
		out = run(t, "", "configs", "describe", "table", b)
		return row(out, "min.cleanable.dirty.ratio", "0.2", "topic") && row(out, "cleanup.policy", "delete", "default")
	})
}
