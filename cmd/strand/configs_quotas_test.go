package main

import (
	"testing"

	"github.com/strand-io/strand/testkit/testutil"
)

// TestConfigsUserQuotas: client quotas in kafka-configs' shape: --alter of
// a user and of the default user prints Kafka's completion lines,
// --describe prints "Quota configs for user-principal 'alice' are
// producer_byte_rate=1048576.0, …" (values as Java prints doubles), a
// delete removes a key, and an unknown key is refused before any request.
func TestConfigsUserQuotas(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	b := "--bootstrap=" + n.Addr()
	mustContain(t, run(t, "", "configs", "--alter", "--entity-type", "users", "--entity-name", "alice",
		"--add-config", "producer_byte_rate=1048576,consumer_byte_rate=20971520", b), "Completed updating config for user alice.\n")
	mustContain(t, run(t, "", "configs", "--alter", "--entity-type", "users", "--entity-default",
		"--add-config", "request_percentage=150.5", b), "Completed updating default config for users in the cluster.\n")
	out := run(t, "", "configs", "--describe", "--entity-type", "users", b)
	mustContain(t, out,
		"Quota configs for the default user-principal are request_percentage=150.5\n",
		"Quota configs for user-principal 'alice' are producer_byte_rate=1048576.0, consumer_byte_rate=2.097152E7\n")
	mustContain(t, run(t, "", "configs", "--alter", "--entity-type", "users", "--entity-name", "alice", "--delete-config", "consumer_byte_rate", b),
		"Completed updating config for user alice.\n")
	if out := run(t, "", "configs", "--describe", "--entity-type", "users", "--entity-name", "alice", b); out != "Quota configs for user-principal 'alice' are producer_byte_rate=1048576.0\n" {
		t.Fatalf("describe alice after the delete:\n%q", out)
	}
	mustContain(t, runFail(t, "configs", "--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config", "producer_byte_rte=1", b), "unknown quota key")
	mustContain(t, runFail(t, "configs", "--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config", "producer_byte_rate=0", b), "positive")
}
