package node

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/strand-io/strand/controller"
	"github.com/strand-io/strand/internal/gossip"
	"github.com/strand-io/strand/testkit/memnet"
	"github.com/strand-io/strand/testkit/wait"
)

// TestStartGossipTransport: a node given Config.GossipTransport (and no
// GossipListen) gossips over it: a member on the same in-memory network
// learns the node's addresses and roles from it.
func TestStartGossipTransport(t *testing.T) {
	gn := memnet.NewGossipNet()
	tr, err := gn.Transport("127.0.0.1:7946")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig(1, t.TempDir())
	cfg.Listen = freePort(t)
	cfg.ControllerListen = freePort(t)
	cfg.Voters = []controller.Voter{{ID: 1, Addr: cfg.ControllerListen}}
	cfg.HeartbeatInterval = 100 * time.Millisecond
	cfg.QuorumTimeouts = QuorumTimeouts{Heartbeat: 100 * time.Millisecond, Election: 100 * time.Millisecond, LeaderLease: 100 * time.Millisecond, Commit: 5 * time.Millisecond}
	cfg.GossipTransport = tr
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if n.Gossip == nil {
		t.Fatal("no gossip with a gossip transport")
	}

	tr2, err := gn.Transport("127.0.0.2:7946")
	if err != nil {
		t.Fatal(err)
	}
	peer, err := gossip.Start(gossip.Config{Meta: gossip.Meta{NodeID: 2, Broker: true}, Transport: tr2,
		Join: []string{"127.0.0.1:7946"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Kill()
	waitGossip(t, "the peer hears of the node", func() bool { _, ok := peer.Members()[1]; return ok })
	if m := peer.Members()[1]; m.Address != n.Addr() || !m.Broker || !m.Controller || m.RaftAddr != cfg.ControllerListen {
		t.Fatalf("node 1 as gossiped: %+v (node at %s, raft %s)", m, n.Addr(), cfg.ControllerListen)
	}
	waitGossip(t, "the node hears of the peer", func() bool { _, ok := n.Gossip.Members()[2]; return ok })
}

func waitGossip(t *testing.T, what string, cond func() bool) {
	t.Helper()
	wait.Eventually(t, 20*time.Second, what, cond)
}
