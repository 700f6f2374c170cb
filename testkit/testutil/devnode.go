// Package testutil starts real single-node servers for tests in other
// packages (real gRPC on loopback, real Raft, real disks in temp dirs).
package testutil

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/strand-io/strand/controller"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testutil/ports"
)

// FreeAddr returns a loopback address with a free port.
func FreeAddr(t testing.TB) string {
	t.Helper()
	a, err := ports.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Logger is quiet unless STRAND_TEST_LOG is set.
func Logger() *slog.Logger {
	if os.Getenv("STRAND_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// FastQuorum are Raft timeouts for tests.
var FastQuorum = node.QuorumTimeouts{Heartbeat: 100 * time.Millisecond, Election: 100 * time.Millisecond, LeaderLease: 100 * time.Millisecond, Commit: 5 * time.Millisecond}

// DevConfig is a one-node config in dir with fast timeouts.
func DevConfig(t testing.TB, dir string) node.Config {
	cfg, err := devConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func devConfig(dir string) (node.Config, error) {
	cfg := node.DefaultConfig(1, dir)
	var err error
	if cfg.Listen, err = ports.Addr(); err != nil {
		return cfg, err
	}
	if cfg.InterBrokerListen, err = ports.Addr(); err != nil {
		return cfg, err
	}
	if cfg.ControllerListen, err = ports.Addr(); err != nil {
		return cfg, err
	}
	cfg.Voters = []controller.Voter{{ID: 1, Addr: cfg.ControllerListen}}
	cfg.HeartbeatInterval = 100 * time.Millisecond
	cfg.QuorumTimeouts = FastQuorum
	cfg.Dev = true
	cfg.Logger = Logger()
	return cfg, nil
}

// StartDevNode starts a one-node server in dir, as StartDev does, for code
// that has no testing.TB (a TestMain serving a package's examples), and
// waits until it serves. stop stops it.
func StartDevNode(dir string, mutate ...func(*node.Config)) (n *node.Node, stop func(), err error) {
	cfg, err := devConfig(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, m := range mutate {
		m(&cfg)
	}
	if n, err = node.Start(cfg); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		n.Stop()
		return nil, nil, err
	}
	return n, func() { n.Stop() }, nil
}

// StartDev starts a one-node server and waits until it serves; it is
// stopped when the test ends.
func StartDev(t testing.TB, dir string, mutate ...func(*node.Config)) *node.Node {
	t.Helper()
	cfg := DevConfig(t, dir)
	for _, m := range mutate {
		m(&cfg)
	}
	return StartNode(t, cfg)
}

// StartNode starts a node from cfg and waits for it.
func StartNode(t testing.TB, cfg node.Config) *node.Node {
	t.Helper()
	n, err := node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return n
}

// FreePortBlock returns the first of n consecutive free loopback ports,
// claimed for this test binary.
func FreePortBlock(t testing.TB, n int) int {
	t.Helper()
	base, err := ports.Block(n)
	if err != nil {
		t.Fatal(err)
	}
	return base
}
