package main

// Real node on real time: starts the server's real Kafka listener with SASL settings
// and handshakes over TCP.

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/node"
)

// TestSASLMechanismsSetting: sasl.enabled.mechanisms takes Kafka's names
// of what Strand runs and refuses the rest.
func TestSASLMechanismsSetting(t *testing.T) {
	var cfg node.Config
	if err := serverSettings["sasl.enabled.mechanisms"](&cfg, "SCRAM-SHA-512, PLAIN"); err != nil || !slices.Equal(cfg.SASL.EnabledMechanisms, []string{"SCRAM-SHA-512", "PLAIN"}) {
		t.Fatalf("%v %v", cfg.SASL.EnabledMechanisms, err)
	}
	for _, bad := range []string{"GSSAPI", "", "SCRAM-SHA-1", "OAUTHBEARER,PLAIN"} {
		if err := serverSettings["sasl.enabled.mechanisms"](&cfg, bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestFailedAuthenticationDelaySetting: connection.failed.authentication.delay.ms
// in milliseconds, 0 turning the delay off, negative refused; a node whose
// delay is not less than connections.max.idle.ms does not start (Kafka's
// rule).
func TestFailedAuthenticationDelaySetting(t *testing.T) {
	set := serverSettings["connection.failed.authentication.delay.ms"]
	var cfg node.Config
	if err := set(&cfg, "250"); err != nil || cfg.SASL.FailedAuthenticationDelay != 250*time.Millisecond {
		t.Fatalf("250: %v %v", cfg.SASL.FailedAuthenticationDelay, err)
	}
	if err := set(&cfg, "0"); err != nil || cfg.SASL.FailedAuthenticationDelay >= 0 {
		t.Fatalf("0 (off): %v %v", cfg.SASL.FailedAuthenticationDelay, err)
	}
	if err := set(&cfg, "-1"); err == nil {
		t.Fatal("-1 accepted")
	}
	bad := node.DefaultConfig(1, t.TempDir())
	bad.ConnectionsMaxIdle, bad.SASL.FailedAuthenticationDelay = time.Second, 2*time.Second
	if n, err := node.Start(bad); err == nil || !strings.Contains(err.Error(), "connections.max.idle.ms") {
		if n != nil {
			n.Stop()
		}
		t.Fatalf("a delay above connections.max.idle.ms: %v", err)
	}
}
