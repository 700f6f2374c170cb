package main

// Real node on real time: the strand CLI under test dials its --bootstrap address
// over real TCP; it has no in-memory dialer that could reach MemNet.

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testutil"
)

// TestACLsCommand: `strand acls` in kafka-acls' shape: --add prints
// "Adding ACLs for resource `ResourcePattern(…)`:" with one
// "\t(principal=…, host=…, operation=…, permissionType=…)" line per ACL;
// adding one again says it already exists; --list prints "Current ACLs
// for resource `…`:" blocks (of one resource, of a principal, or all);
// --producer and --consumer add the operations Kafka's conveniences do;
// --remove without --force asks and does nothing on "n", with --force
// removes; a MATCH listing shows the prefixed and wildcard ACLs that
// apply to a name.
func TestACLsCommand(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) {
		cfg.Authorizer = node.AuthorizerConfig{ClassName: authz.StandardClassName, SuperUsers: []auth.Principal{auth.Anonymous}}
	})
	b := "--bootstrap=" + n.Addr()

	out := run(t, "", "acls", b, "--add", "--allow-principal", "User:alice", "--operation", "Write", "--operation", "Describe", "--topic", "orders")
	want := "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`: \n" +
		" \t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)\n" +
		"\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)\n\n"
	if out != want {
		t.Fatalf("--add printed\n%q\nwant\n%q", out, want)
	}
	out = run(t, "", "acls", b, "--add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders")
	if out != "Acl (pattern=ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL), entry=(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)) already exists.\n" {
		t.Fatalf("adding again printed %q", out)
	}
	out = run(t, "", "acls", b, "--list", "--topic", "orders")
	want = "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:\n" +
		"\t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)\n" +
		"\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)\n\n"
	if out != want {
		t.Fatalf("--list printed\n%q\nwant\n%q", out, want)
	}

	// The conveniences.
	run(t, "", "acls", b, "--add", "--producer", "--allow-principal", "User:prod", "--topic", "pay-", "--resource-pattern-type", "prefixed",
		"--transactional-id", "tx-")
	run(t, "", "acls", b, "--add", "--producer", "--idempotent", "--allow-principal", "User:prod", "--topic", "orders")
	run(t, "", "acls", b, "--add", "--consumer", "--allow-principal", "User:cons", "--allow-host", "10.0.0.7", "--topic", "orders", "--group", "g1")
	run(t, "", "acls", b, "--add", "--deny-principal", "User:mallory", "--operation", "Read", "--topic", "*")
	out = run(t, "", "acls", b, "--list")
	mustContain(t, out,
		"Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=pay-, patternType=PREFIXED)`:\n"+
			"\t(principal=User:prod, host=*, operation=WRITE, permissionType=ALLOW)\n"+
			"\t(principal=User:prod, host=*, operation=CREATE, permissionType=ALLOW)\n"+
			"\t(principal=User:prod, host=*, operation=DESCRIBE, permissionType=ALLOW)\n\n",
		"Current ACLs for resource `ResourcePattern(resourceType=TRANSACTIONAL_ID, name=tx-, patternType=PREFIXED)`:\n"+
			"\t(principal=User:prod, host=*, operation=WRITE, permissionType=ALLOW)\n"+
			"\t(principal=User:prod, host=*, operation=DESCRIBE, permissionType=ALLOW)\n\n",
		"Current ACLs for resource `ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)`:\n"+
			"\t(principal=User:prod, host=*, operation=IDEMPOTENT_WRITE, permissionType=ALLOW)\n\n",
		"Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=g1, patternType=LITERAL)`:\n"+
			"\t(principal=User:cons, host=10.0.0.7, operation=READ, permissionType=ALLOW)\n\n",
		"\t(principal=User:cons, host=10.0.0.7, operation=READ, permissionType=ALLOW)\n"+
			"\t(principal=User:cons, host=10.0.0.7, operation=DESCRIBE, permissionType=ALLOW)\n",
		"Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=*, patternType=LITERAL)`:\n"+
			"\t(principal=User:mallory, host=*, operation=READ, permissionType=DENY)\n\n")

	// --principal: only that principal's ACLs, under its heading.
	out = run(t, "", "acls", b, "--list", "--principal", "User:cons")
	if !strings.HasPrefix(out, "ACLs for principal `User:cons`\n") || strings.Contains(out, "User:alice") || !strings.Contains(out, "User:cons") {
		t.Fatalf("--list --principal printed\n%s", out)
	}
	// MATCH: what applies to topic pay-in.
	out = run(t, "", "acls", b, "--list", "--topic", "pay-in", "--resource-pattern-type", "match")
	mustContain(t, out, "name=pay-, patternType=PREFIXED", "name=*, patternType=LITERAL")
	if strings.Contains(out, "name=orders") {
		t.Fatalf("MATCH pay-in listed orders:\n%s", out)
	}

	// --remove asks; "n" keeps the ACLs.
	out = run(t, "n\n", "acls", b, "--remove", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders")
	mustContain(t, out, "Are you sure you want to remove ACLs: \n \t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)\n from resource filter `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`? (y/n)")
	mustContain(t, run(t, "", "acls", b, "--list", "--topic", "orders"), "operation=WRITE, permissionType=ALLOW)")
	// --force removes alice's Write, and only it.
	run(t, "", "acls", b, "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders")
	out = run(t, "", "acls", b, "--list", "--topic", "orders", "--principal", "User:alice")
	if strings.Contains(out, "User:alice, host=*, operation=WRITE") || !strings.Contains(out, "User:alice, host=*, operation=DESCRIBE") {
		t.Fatalf("after removing alice's Write:\n%s", out)
	}
	// "y" removes every ACL of the resource.
	out = run(t, "y\n", "acls", b, "--remove", "--topic", "orders")
	mustContain(t, out, "Are you sure you want to delete all ACLs for resource filter `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`? (y/n)")
	if out := run(t, "", "acls", b, "--list", "--topic", "orders"); out != "" {
		t.Fatalf("orders still has ACLs:\n%s", out)
	}

	// Refusals, as kafka-acls.
	mustContain(t, runFail(t, "acls", b, "--add", "--topic", "x"), "You must specify one of: --allow-principal, --deny-principal")
	mustContain(t, runFail(t, "acls", b, "--add", "--allow-principal", "User:a", "--operation", "Read", "--cluster"), "ResourceType CLUSTER only supports operations")
	mustContain(t, runFail(t, "acls", b, "--add", "--allow-principal", "User:a", "--topic", "x", "--resource-pattern-type", "match"), "is not valid when adding acls")
	mustContain(t, runFail(t, "acls", b, "--list", "--add"), "exactly one action")
	mustContain(t, runFail(t, "acls", b, "--add", "--allow-principal", "alice", "--topic", "x"), "Type:Name")
}

// The authorizer's settings have Kafka's names: authorizer.class.name
// takes the standard authorizer's class (or its short name) and refuses
// any other; super.users is a semicolon list of Type:Name principals.
func TestAuthorizerSettings(t *testing.T) {
	lg := slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))
	cfg := node.DefaultConfig(1, t.TempDir())
	if cfg.Authorizer.ClassName != "" || cfg.Authorizer.AllowEveryoneIfNoACLFound {
		t.Fatalf("default authorizer settings %+v, want none (every request allowed)", cfg.Authorizer)
	}
	body := "authorizer.class.name: org.apache.kafka.metadata.authorizer.StandardAuthorizer\n" +
		"super.users: User:admin;User:CN=ops\nallow.everyone.if.no.acl.found: true\n"
	if err := applyConfigFile(&cfg, configFile(t, body), lg); err != nil {
		t.Fatal(err)
	}
	a := cfg.Authorizer
	if a.ClassName != authz.StandardClassName || !a.AllowEveryoneIfNoACLFound || len(a.SuperUsers) != 2 ||
		a.SuperUsers[0] != auth.User("admin") || a.SuperUsers[1] != auth.User("CN=ops") {
		t.Fatalf("got %+v", a)
	}
	for _, line := range []string{
		"authorizer.class.name: kafka.security.authorizer.AclAuthorizer",
		"super.users: admin",
		"allow.everyone.if.no.acl.found: maybe",
	} {
		cfg := node.DefaultConfig(1, t.TempDir())
		if err := applyConfigFile(&cfg, configFile(t, line+"\n"), lg); err == nil {
			t.Errorf("%q accepted", line)
		}
	}
	cfg = node.DefaultConfig(1, t.TempDir())
	if err := applyConfigFile(&cfg, configFile(t, "authorizer.class.name: StandardAuthorizer\n"), lg); err != nil || cfg.Authorizer.ClassName == "" {
		t.Fatalf("short name: %v", err)
	}
}
