package main

// Real node on real time: the strand CLI under test dials its --bootstrap address
// over real TCP; it has no in-memory dialer that could reach MemNet.

import (
	"strings"
	"testing"

	"github.com/strand-io/strand/testkit/testutil"
)

// TestConfigsUsersScram: kafka-configs' users entity sets, describes and
// deletes SCRAM credentials with Kafka's lines; a password never shows;
// bad iterations, a missing password and two changes of one user in one
// request are refused with Kafka's errors.
func TestConfigsUsersScram(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	b := "--bootstrap=" + n.Addr()
	mustContain(t, run(t, "", "configs", "--alter", "--entity-type", "users", "--entity-name", "alice",
		"--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret]", b), "Completed updating config for user alice.\n")
	mustContain(t, run(t, "", "configs", "--alter", "--entity-type", "users", "--entity-name", "bob",
		"--add-config", "SCRAM-SHA-512=[password=bob-secret]", b), "Completed updating config for user bob.\n")
	out := run(t, "", "configs", "--describe", "--entity-type", "users", "--entity-name", "alice", b)
	if out != "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192\n" {
		t.Fatalf("describe alice:\n%q", out)
	}
	out = run(t, "", "configs", "--describe", "--entity-type", "users", b)
	if out != "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192\n"+
		"SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=4096\n" {
		t.Fatalf("describe all:\n%q", out)
	}
	if strings.Contains(out, "secret") {
		t.Fatal("a password shows")
	}
	mustContain(t, runFail(t, "configs", "--alter", "--entity-type", "users", "--entity-name", "carol",
		"--add-config", "SCRAM-SHA-256=[iterations=100,password=x]", b), "UNACCEPTABLE_CREDENTIAL", "Too few iterations")
	mustContain(t, runFail(t, "configs", "--alter", "--entity-type", "users", "--entity-name", "carol",
		"--add-config", "SCRAM-SHA-256=[password=x],SCRAM-SHA-512=[password=x]", b), "DUPLICATE_RESOURCE", "A user credential cannot be altered twice in the same request")
	mustContain(t, runFail(t, "configs", "--alter", "--entity-type", "users", "--entity-name", "carol",
		"--add-config", "SCRAM-SHA-256=[iterations=4096]", b), "password is required")
	mustContain(t, runFail(t, "configs", "--alter", "--entity-type", "users", "--entity-name", "carol",
		"--delete-config", "SCRAM-SHA-256", b), "RESOURCE_NOT_FOUND")
	mustContain(t, run(t, "", "configs", "--alter", "--entity-type", "users", "--entity-name", "alice", "--delete-config", "SCRAM-SHA-256", b),
		"Completed updating config for user alice.\n")
	if out := run(t, "", "configs", "--describe", "--entity-type", "users", "--entity-name", "alice", b); out != "" {
		t.Fatalf("alice after delete:\n%q", out)
	}
}
