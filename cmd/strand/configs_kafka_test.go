package main

// Real node on real time: runs the built strand binary as a real OS process,
// which dials (or serves) real TCP sockets.

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// TestConfigsKafkaShape: `strand configs` in kafka-configs.sh's shape.
// --alter prints Kafka's completion lines for a topic, a broker and the
// cluster-wide default; --describe prints "Dynamic configs for … are:"
// (or "All configs", "Default configs for brokers in the cluster") and
// one "  name=value sensitive=false synonyms={SOURCE:name=value, …}" line
// per config, the synonyms in Kafka's precedence; a dynamic broker default
// reaches a topic's effective config on the running node; a bad name or
// a read-only config is refused with Kafka's error.
func TestConfigsKafkaShape(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	b := "--bootstrap=" + n.Addr()
	id := fmt.Sprint(n.ID())
	run(t, "", "topics", "create", "t", "--partitions", "1", b)
	line := func(out, name, value, syn string) bool {
		return regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(name+"="+value+" sensitive=false synonyms={"+syn+"}") + `$`).MatchString(out)
	}

	// Topics.
	mustContain(t, run(t, "", "configs", "--alter", "--entity-type", "topics", "--entity-name", "t",
		"--add-config", "retention.ms=1000,cleanup.policy=[compact,delete],segment.ms=600000", b), "Completed updating config for topic t.\n")
	out := run(t, "", "configs", "--describe", "--entity-type", "topics", "--entity-name", "t", b)
	if !strings.HasPrefix(out, "Dynamic configs for topic t are:\n") ||
		!line(out, "retention.ms", "1000", "DYNAMIC_TOPIC_CONFIG:retention.ms=1000") ||
		!line(out, "cleanup.policy", "compact,delete", "DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete") ||
		strings.Contains(out, "segment.bytes=") {
		t.Fatalf("describe topic:\n%s", out)
	}
	mustContain(t, run(t, "", "configs", "--alter", "--entity-type", "topics", "--entity-name", "t", "--delete-config", "retention.ms,segment.ms", b),
		"Completed updating config for topic t.")
	out = run(t, "", "configs", "--describe", "--entity-type", "topics", "--entity-name", "t", "--all", b)
	if !strings.HasPrefix(out, "All configs for topic t are:\n") || !line(out, "retention.ms", "604800000", "DEFAULT_CONFIG:retention.ms=604800000") ||
		!line(out, "segment.bytes", "1073741824", "DEFAULT_CONFIG:segment.bytes=1073741824") {
		t.Fatalf("describe topic --all:\n%s", out)
	}

	// Brokers: a per-broker config over a cluster-wide one over the default.
	mustContain(t, run(t, "", "configs", "--alter", "--entity-type", "brokers", "--entity-default",
		"--add-config", "log.retention.ms=7200000,log.segment.bytes=2097152", b), "Completed updating default config for brokers in the cluster.\n")
	mustContain(t, run(t, "", "configs", "--alter", "--entity-type", "brokers", "--entity-name", id,
		"--add-config", "log.retention.ms=3600000,follower.replication.throttled.rate=1000000", b), "Completed updating config for broker "+id+".\n")
	wait.Eventually(t, 10*time.Second, "the broker configs", func() bool {
		out = run(t, "", "configs", "--describe", "--entity-type", "brokers", "--entity-name", id, b)
		return strings.HasPrefix(out, "Dynamic configs for broker "+id+" are:\n") &&
			line(out, "log.retention.ms", "3600000", "DYNAMIC_BROKER_CONFIG:log.retention.ms=3600000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000, DEFAULT_CONFIG:log.retention.ms=604800000") &&
			line(out, "follower.replication.throttled.rate", "1000000", "DYNAMIC_BROKER_CONFIG:follower.replication.throttled.rate=1000000, DEFAULT_CONFIG:follower.replication.throttled.rate=9223372036854775807") &&
			!strings.Contains(out, "log.segment.bytes=") // a default one is not the broker's own
	})
	out = run(t, "", "configs", "--describe", "--entity-type", "brokers", "--entity-name", id, "--all", b)
	if !strings.HasPrefix(out, "All configs for broker "+id+" are:\n") ||
		!line(out, "log.segment.bytes", "2097152", "DYNAMIC_DEFAULT_BROKER_CONFIG:log.segment.bytes=2097152, DEFAULT_CONFIG:log.segment.bytes=1073741824") ||
		!line(out, "log.cleaner.threads", "1", "DEFAULT_CONFIG:log.cleaner.threads=1") {
		t.Fatalf("describe broker --all:\n%s", out)
	}
	out = run(t, "", "configs", "--describe", "--entity-type", "brokers", "--entity-default", b)
	if !strings.HasPrefix(out, "Default configs for brokers in the cluster are:\n") ||
		!line(out, "log.retention.ms", "7200000", "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000") ||
		!line(out, "log.segment.bytes", "2097152", "DYNAMIC_DEFAULT_BROKER_CONFIG:log.segment.bytes=2097152") {
		t.Fatalf("describe --entity-default:\n%s", out)
	}
	// The running node's topic without its own retention.ms now takes the
	// broker's dynamic one (per-broker beats cluster-wide).
	row := regexp.MustCompile(`(?m)^retention\.ms +3600000 +default$`)
	wait.Eventually(t, 10*time.Second, "the topic taking the dynamic broker default", func() bool {
		return row.MatchString(run(t, "", "configs", "describe", "t", b))
	})
	// Deleting the per-broker one falls back to the cluster-wide one.
	mustContain(t, run(t, "", "configs", "--alter", "--entity-type", "brokers", "--entity-name", id, "--delete-config", "log.retention.ms", b),
		"Completed updating config for broker "+id+".")
	row = regexp.MustCompile(`(?m)^retention\.ms +7200000 +default$`)
	wait.Eventually(t, 10*time.Second, "the cluster-wide default after the delete", func() bool {
		return row.MatchString(run(t, "", "configs", "describe", "t", b))
	})

	// Refusals.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--add-config", "no.such.config=1"}, "INVALID_CONFIG"},
		{[]string{"--add-config", "log.retention.ms=soon"}, "INVALID_CONFIG"},
		{[]string{"--add-config", "leader.replication.throttled.rate=-5"}, "INVALID_CONFIG"},
		{[]string{"--add-config", "log.cleaner.threads=4"}, "INVALID_REQUEST"},
	} {
		args := append([]string{"configs", "--alter", "--entity-type", "brokers", "--entity-name", id}, c.args...)
		o, err := exec.Command(binary, append(args, b)...).CombinedOutput()
		if err == nil || !strings.Contains(string(o), c.want) {
			t.Fatalf("strand %s: err %v, want %s in:\n%s", strings.Join(args, " "), err, c.want, o)
		}
	}
}
