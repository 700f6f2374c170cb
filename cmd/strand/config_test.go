package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/internal/node"
)

func configFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "server.conf")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The preferred-leader check interval has Kafka's name and unit
// (leader.imbalance.check.interval.seconds, default 300); the name Strand
// used before (…interval.ms) still works, with a deprecation warning.
func TestLeaderImbalanceIntervalHasKafkasName(t *testing.T) {
	cfg := node.DefaultConfig(1, t.TempDir())
	if got := cfg.ControllerConfig.LeaderImbalanceInterval; got != 300*time.Second {
		t.Fatalf("default interval %v, want Kafka's 300 s", got)
	}
	var logs bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&logs, nil))
	if err := applyConfigFile(&cfg, configFile(t, "leader.imbalance.check.interval.seconds: 30\n"), lg); err != nil {
		t.Fatal(err)
	}
	if got := cfg.ControllerConfig.LeaderImbalanceInterval; got != 30*time.Second {
		t.Fatalf("leader.imbalance.check.interval.seconds: 30 gave %v", got)
	}
	if logs.Len() != 0 {
		t.Fatalf("the Kafka name logged: %s", logs.String())
	}
	if err := applyConfigFile(&cfg, configFile(t, "leader.imbalance.check.interval.ms: 45000\n"), lg); err != nil {
		t.Fatal(err)
	}
	if got := cfg.ControllerConfig.LeaderImbalanceInterval; got != 45*time.Second {
		t.Fatalf("leader.imbalance.check.interval.ms: 45000 gave %v", got)
	}
	if !strings.Contains(logs.String(), "deprecated") || !strings.Contains(logs.String(), "leader.imbalance.check.interval.seconds") {
		t.Fatalf("no deprecation warning naming the new setting: %q", logs.String())
	}
	// The compose cluster's settings file uses the new name.
	if err := applyConfigFile(&cfg, filepath.Join("..", "..", "deploy", "server.conf"), slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
}
