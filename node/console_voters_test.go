package node

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/controller"
	"github.com/strand-io/strand/testkit/wait"
)

// TestConsoleShowsCurrentVoters: the console's voters are the Raft
// configuration's, not the --controller-voters the node was started with
// (they differ after AddVoter or RemoveVoter; here the configured list
// names a voter 2 the quorum does not have).
func TestConsoleShowsCurrentVoters(t *testing.T) {
	addr := freePort(t)
	lg := slog.New(slog.NewTextHandler(io.Discard, nil))
	q, err := controller.StartQuorum(controller.QuorumConfig{
		NodeID: 1, Dir: t.TempDir(), Bind: addr, Voters: []controller.Voter{{ID: 1, Addr: addr}},
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: 10 * time.Millisecond, Logger: lg,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	wait.Eventually(t, 10*time.Second, "the quorum's configuration", func() bool { return len(q.Voters()) == 1 })
	n := &Node{lg: lg, Quorum: q}
	n.cfg.NodeID = 1
	n.cfg.Voters = []controller.Voter{{ID: 1, Addr: addr}, {ID: 2, Addr: "gone.example:9093"}}
	rec := httptest.NewRecorder()
	n.newConsole().ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	body := rec.Body.String()
	if !strings.Contains(body, addr) || strings.Contains(body, "gone.example:9093") {
		t.Fatalf("console voters are not the Raft configuration's (want only 1@%s):\n%s", addr, body)
	}
}
