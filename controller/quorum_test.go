package controller_test

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	mt "github.com/strand-io/strand/metadata/metadatatest"

	"github.com/strand-io/strand/controller"
	"github.com/strand-io/strand/testkit/testutil/ports"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := ports.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func quorumConfig(dir, addr string, voters []controller.Voter) controller.QuorumConfig {
	return controller.QuorumConfig{
		NodeID: 1, Dir: dir, Bind: addr, Voters: voters,
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func startLeader(t *testing.T, cfg controller.QuorumConfig) *controller.Quorum {
	t.Helper()
	q, err := controller.StartQuorum(cfg)
	if err != nil {
		t.Fatalf("StartQuorum: %v", err)
	}
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for !q.IsLeader() {
		select {
		case <-q.Raft.LeaderCh():
		case <-timeout.C:
			q.Close()
			t.Fatal("single voter did not become leader")
		}
	}
	// Everything committed in earlier terms is applied before we look.
	if err := q.Raft.Barrier(10 * time.Second).Error(); err != nil {
		q.Close()
		t.Fatalf("barrier: %v", err)
	}
	return q
}

func TestQuorumRestart(t *testing.T) {
	cases := []struct {
		name     string
		snapshot bool // take a Raft snapshot before closing: restart restores it
	}{
		{"log replay", false},
		{"snapshot restore", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			addr := freeAddr(t)
			orig := []controller.Voter{{ID: 1, Addr: addr}}
			q := startLeader(t, quorumConfig(dir, addr, orig))
			if q.LeaderID() != 1 {
				t.Fatalf("leader id = %d", q.LeaderID())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			off, err := q.Propose(ctx, mt.RegisterRec(1, 0, false), mt.TopicRec("t", map[string]string{"k": "v"}))
			if err != nil {
				q.Close()
				t.Fatalf("Propose: %v", err)
			}
			img := q.FSM.Image()
			if img.Offset != off || img.Brokers[1] == nil || img.Brokers[1].Epoch != off || img.Topic("t") == nil {
				q.Close()
				t.Fatalf("after Propose at %d: image %+v", off, img)
			}
			// A refused batch reports its error and changes nothing.
			if _, err := q.Propose(ctx, mt.TopicRec("t", nil)); err == nil {
				q.Close()
				t.Fatal("duplicate topic committed")
			}
			off2, err := q.Propose(ctx, mt.ProducerIdsRec(1000))
			if err != nil || off2 <= off {
				q.Close()
				t.Fatalf("second Propose = %d, %v", off2, err)
			}
			want := mt.DeepCopy(q.FSM.Image())
			if c.snapshot {
				if err := q.Raft.Snapshot().Error(); err != nil {
					q.Close()
					t.Fatalf("snapshot: %v", err)
				}
			}
			if err := q.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}

			// Restart on the same state with a different voter list: it must
			// neither bootstrap again nor join with state made for other
			// voters; StartQuorum refuses and releases the directory.
			for _, other := range [][]controller.Voter{
				{{ID: 1, Addr: addr}, {ID: 2, Addr: "127.0.0.1:2"}},
				{{ID: 1, Addr: "127.0.0.1:1"}},
				{{ID: 2, Addr: addr}},
			} {
				if bad, err := controller.StartQuorum(quorumConfig(dir, addr, other)); err == nil {
					bad.Close()
					t.Fatalf("StartQuorum with voters %v on state for %v succeeded", other, orig)
				}
			}
			// Restarting with no voter list (nothing to bootstrap from) or the
			// original one finds the original configuration and the committed
			// state.
			var q2 *controller.Quorum
			for i, voters := range [][]controller.Voter{nil, orig} {
				if q2 != nil {
					if err := q2.Close(); err != nil {
						t.Fatalf("Close: %v", err)
					}
				}
				q2 = startLeader(t, quorumConfig(dir, addr, voters))
				if got := q2.Voters(); !reflect.DeepEqual(got, orig) {
					q2.Close()
					t.Fatalf("restart %d: voters = %v, want %v", i, got, orig)
				}
				if got := q2.FSM.Image(); !reflect.DeepEqual(got, want) {
					q2.Close()
					t.Fatalf("restart %d: image %+v\nwant %+v", i, got, want)
				}
				// After a restore the FSM only has the image; after a replay it
				// has the batches themselves.
				bs, err := q2.FSM.Since(ctx, 0)
				if err != nil {
					q2.Close()
					t.Fatal(err)
				}
				if restored := len(bs) == 1 && bs[0].Snapshot; restored != c.snapshot {
					q2.Close()
					t.Fatalf("restart %d: Since(0) = %d batches (snapshot %v), want restored=%v", i, len(bs), restored, c.snapshot)
				}
			}
			defer q2.Close()
			// And it keeps committing on top.
			off3, err := q2.Propose(ctx, mt.ProducerIdsRec(2000))
			if err != nil || off3 <= off2 {
				t.Fatalf("Propose after restart = %d, %v", off3, err)
			}
			if q2.FSM.Image().NextProducerID != 2000 {
				t.Fatalf("next producer id = %d", q2.FSM.Image().NextProducerID)
			}
		})
	}
}

// TestQuorumNonMemberDoesNotBootstrap: a node that is not among the voters
// it is given never bootstraps a group of its own.
func TestQuorumNonMemberDoesNotBootstrap(t *testing.T) {
	cases := []struct {
		name   string
		voters []controller.Voter
	}{
		{"other voters", []controller.Voter{{ID: 2, Addr: "127.0.0.1:1"}, {ID: 3, Addr: "127.0.0.1:2"}}},
		{"no voters", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q, err := controller.StartQuorum(quorumConfig(t.TempDir(), freeAddr(t), c.voters))
			if err != nil {
				t.Fatalf("StartQuorum: %v", err)
			}
			defer q.Close()
			if got := q.Voters(); len(got) != 0 {
				t.Fatalf("non-member bootstrapped with voters %v", got)
			}
			if q.IsLeader() {
				t.Fatal("non-member is leader")
			}
		})
	}
}
