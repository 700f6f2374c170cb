package controller_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/strand-io/strand/controller"
	mt "github.com/strand-io/strand/metadata/metadatatest"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/wait"
)

// silentNode listens on a Raft address, accepts, and never answers: a
// controller that is up but never catches up (stuck, or behind a link that
// drops everything after the handshake).
func silentNode(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	return ln.Addr().String()
}

// TestAddVoterNeverCaughtUpIsNotAVoter: a node that answers the probe but
// never catches up is not made a voter. Before the fix AddVoter made it a
// voter at once (it answered success, and the configuration kept a voter
// that holds nothing: with it, every commit needs both nodes). Now it joins as a non-voter, AddVoter answers
// REQUEST_TIMED_OUT when ctx ends, the non-voter is removed again, and the
// single voter still commits.
func TestAddVoterNeverCaughtUpIsNotAVoter(t *testing.T) {
	addr := freeAddr(t)
	q := startLeader(t, quorumConfig(t.TempDir(), addr, []controller.Voter{{ID: 1, Addr: addr}}))
	defer q.Close()
	silent := silentNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	wantCode(t, "AddVoter of a node that never catches up", q.AddVoter(ctx, 2, silent), pb.ErrorCode_REQUEST_TIMED_OUT)
	voters, nonvoters := q.Members()
	if got := voterIDs(voters); !slices.Equal(got, []int32{1}) || len(nonvoters) != 0 {
		t.Fatalf("after a failed AddVoter: voters %v, non-voters %v; want voters [1] and no non-voter", got, nonvoters)
	}
	pctx, pcancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer pcancel()
	if _, err := q.Propose(pctx, mt.ProducerIdsRec(1000)); err != nil {
		t.Fatalf("the quorum does not commit after a failed AddVoter: %v", err)
	}
}

// TestAddVoterCatchesUpFirst: a real new controller (started with voters
// that do not name it) is added: it holds the leader's committed log
// before it is a voter, and ends a voter of the two-voter quorum that
// commits.
func TestAddVoterCatchesUpFirst(t *testing.T) {
	addr := freeAddr(t)
	q := startLeader(t, quorumConfig(t.TempDir(), addr, []controller.Voter{{ID: 1, Addr: addr}}))
	defer q.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 20 {
		if _, err := q.Propose(ctx, mt.ProducerIdsRec(int64(1000*(i+1)))); err != nil {
			t.Fatal(err)
		}
	}
	addr2 := freeAddr(t)
	cfg2 := quorumConfig(t.TempDir(), addr2, []controller.Voter{{ID: 1, Addr: addr}})
	cfg2.NodeID = 2
	q2, err := controller.StartQuorum(cfg2)
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Close()
	before := q.Raft.CommitIndex()
	if err := q.AddVoter(ctx, 2, addr2); err != nil {
		t.Fatalf("AddVoter(2): %v", err)
	}
	if got := voterIDs(q.Voters()); !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("voters after AddVoter = %v", got)
	}
	if end := q2.Raft.LastIndex(); end < before {
		t.Fatalf("node 2's log ends at %d, before the leader's commit index %d at the add", end, before)
	}
	if _, err := q.Propose(ctx, mt.ProducerIdsRec(99_000)); err != nil {
		t.Fatalf("the two-voter quorum does not commit: %v", err)
	}
}

// TestRestartAfterAddVoterFirstStartFile: after AddVoter the Raft
// configuration differs from the --controller-voters the node was first
// started with; a restart with that unchanged command line starts, with an
// intact first-start record and with a torn (empty) one, which is unknown
// (a warning), not a reason to refuse. The record is written whole: no
// temp file is left next to it.
func TestRestartAfterAddVoterFirstStartFile(t *testing.T) {
	for _, torn := range []bool{false, true} {
		t.Run(map[bool]string{false: "intact", true: "torn"}[torn], func(t *testing.T) {
			dir, addr := t.TempDir(), freeAddr(t)
			orig := []controller.Voter{{ID: 1, Addr: addr}}
			q := startLeader(t, quorumConfig(dir, addr, orig))
			addr2 := freeAddr(t)
			cfg2 := quorumConfig(t.TempDir(), addr2, orig)
			cfg2.NodeID = 2
			q2, err := controller.StartQuorum(cfg2)
			if err != nil {
				q.Close()
				t.Fatal(err)
			}
			defer q2.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := q.AddVoter(ctx, 2, addr2); err != nil {
				q.Close()
				t.Fatalf("AddVoter(2): %v", err)
			}
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "first-start-voters")
			if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
				t.Fatalf("a temp file is left next to the first-start record: %v", err)
			}
			if torn {
				if err := os.WriteFile(path, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			q, err = controller.StartQuorum(quorumConfig(dir, addr, orig))
			if err != nil {
				t.Fatalf("restart with the unchanged --controller-voters after AddVoter: %v", err)
			}
			defer q.Close()
			wait.Eventually(t, 10*time.Second, "the restarted node to see both voters", func() bool {
				return slices.Equal(voterIDs(q.Voters()), []int32{1, 2})
			})
		})
	}
}
