package main

// Real node on real time: the strand CLI under test dials its --bootstrap address
// over real TCP; it has no in-memory dialer that could reach MemNet.

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

// TestConfigsClientQuotas: client-id and user + client-id quotas in
// kafka-configs' shape: --entity-type clients (a name or the default),
// users and clients together in either order with names paired by
// position, Kafka's completion lines (the first type given), describes
// that list exactly the entities of the types given, and a SCRAM key
// refused for clients before any request.
func TestConfigsClientQuotas(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	b := "--bootstrap=" + n.Addr()
	mustContain(t, run(t, "", "configs", "--alter", "--entity-type", "clients", "--entity-name", "app",
		"--add-config", "producer_byte_rate=1024", b), "Completed updating config for client app.\n")
	mustContain(t, run(t, "", "configs", "--alter", "--entity-type", "clients", "--entity-default",
		"--add-config", "consumer_byte_rate=2048", b), "Completed updating default config for clients in the cluster.\n")
	mustContain(t, run(t, "", "configs", "--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app",
		"--add-config", "producer_byte_rate=512", b), "Completed updating config for user alice.\n")
	// Clients first, the default user second.
	mustContain(t, run(t, "", "configs", "--alter", "--entity-type", "clients", "--entity-default", "--entity-type", "users", "--entity-default",
		"--add-config", "request_percentage=25", b), "Completed updating default config for clients in the cluster.\n")
	mustContain(t, run(t, "", "configs", "--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config", "producer_byte_rate=4096", b),
		"Completed updating config for user alice.\n")

	if out := run(t, "", "configs", "--describe", "--entity-type", "clients", b); out !=
		"Quota configs for the default client-id are consumer_byte_rate=2048.0\n"+
			"Quota configs for client-id 'app' are producer_byte_rate=1024.0\n" {
		t.Errorf("describe clients:\n%s", out)
	}
	if out := run(t, "", "configs", "--describe", "--entity-type", "clients", "--entity-name", "app", b); out != "Quota configs for client-id 'app' are producer_byte_rate=1024.0\n" {
		t.Errorf("describe client app:\n%s", out)
	}
	if out := run(t, "", "configs", "--describe", "--entity-type", "users", "--entity-type", "clients", b); out !=
		"Quota configs for the default user-principal, the default client-id are request_percentage=25.0\n"+
			"Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=512.0\n" {
		t.Errorf("describe users and clients:\n%s", out)
	}
	if out := run(t, "", "configs", "--describe", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app", b); out !=
		"Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=512.0\n" {
		t.Errorf("describe alice/app:\n%s", out)
	}
	// The users alone: alice's user quota, not her client's.
	if out := run(t, "", "configs", "--describe", "--entity-type", "users", "--entity-name", "alice", b); out != "Quota configs for user-principal 'alice' are producer_byte_rate=4096.0\n" {
		t.Errorf("describe user alice:\n%s", out)
	}
	mustContain(t, run(t, "", "configs", "--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app",
		"--delete-config", "producer_byte_rate", b), "Completed updating config for user alice.\n")
	if out := run(t, "", "configs", "--describe", "--entity-type", "users", "--entity-type", "clients", "--entity-name", "app", b); out != "" {
		t.Errorf("describe users of client app after the delete:\n%s", out)
	}
	mustContain(t, runFail(t, "configs", "--alter", "--entity-type", "clients", "--entity-name", "app", "--add-config", "SCRAM-SHA-256=[password=x]", b), "only quota configs")
	mustContain(t, runFail(t, "configs", "--alter", "--entity-type", "users", "--entity-type", "clients", "--entity-name", "app", "--add-config", "producer_byte_rate=1", b),
		"must be specified with each --entity-type")
	mustContain(t, runFail(t, "configs", "--alter", "--entity-type", "topics", "--entity-type", "clients", "--entity-name", "a", "--entity-name", "b", "--add-config", "producer_byte_rate=1", b),
		"only 'users' and 'clients'")
}
