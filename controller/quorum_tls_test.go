package controller_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/strand-io/strand/controller"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/certs"
	"github.com/strand-io/strand/internal/tlsconf"
	mt "github.com/strand-io/strand/metadata/metadatatest"
)

// raftSecurity is a node's CONTROLLER:SSL security with a certificate for
// cn from ca.
func raftSecurity(t *testing.T, ca *certs.CA, cn string) *tlsconf.Security {
	t.Helper()
	dir := t.TempDir()
	pair, err := ca.Issue(certs.Spec{CommonName: cn, Hosts: []string{"127.0.0.1"}, Server: true, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	ks, ts := filepath.Join(dir, "keystore.pem"), filepath.Join(dir, "truststore.pem")
	if err := os.WriteFile(ks, pair.KeystorePEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ts, ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	sec, err := tlsconf.New(tlsconf.Config{Protocols: map[string]tlsconf.Protocol{auth.ListenerController: tlsconf.SSL}, KeystoreLocation: ks, TruststoreLocation: ts}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

func withTLS(cfg controller.QuorumConfig, sec *tlsconf.Security) controller.QuorumConfig {
	cfg.ServerTLS, cfg.ClientTLS, cfg.CheckPeer = sec.ServerTLS(auth.ListenerController), sec.ClientTLS(auth.ListenerController), sec.CheckBroker
	return cfg
}

// TestAddVoterOverTLS: with the Raft transport over TLS (CONTROLLER:SSL)
// a new controller is added as in TestAddVoterCatchesUpFirst: the
// catch-up query (lastIndexQuery) and Raft's own RPCs run inside TLS.
func TestAddVoterOverTLS(t *testing.T) {
	ca, err := certs.NewCA("raft-test-ca", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	q := startLeader(t, withTLS(quorumConfig(t.TempDir(), addr, []controller.Voter{{ID: 1, Addr: addr}}), raftSecurity(t, ca, "broker")))
	defer q.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 5 {
		if _, err := q.Propose(ctx, mt.ProducerIdsRec(int64(1000*(i+1)))); err != nil {
			t.Fatal(err)
		}
	}
	addr2 := freeAddr(t)
	cfg2 := withTLS(quorumConfig(t.TempDir(), addr2, []controller.Voter{{ID: 1, Addr: addr}}), raftSecurity(t, ca, "broker"))
	cfg2.NodeID = 2
	q2, err := controller.StartQuorum(cfg2)
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Close()
	before := q.Raft.CommitIndex()
	if err := q.AddVoter(ctx, 2, addr2); err != nil {
		t.Fatalf("AddVoter(2) over TLS: %v", err)
	}
	if got := voterIDs(q.Voters()); !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("voters after AddVoter = %v", got)
	}
	if end := q2.Raft.LastIndex(); end < before {
		t.Fatalf("node 2's log ends at %d, before the leader's commit index %d", end, before)
	}
	if _, err := q.Propose(ctx, mt.ProducerIdsRec(99_000)); err != nil {
		t.Fatalf("the two-voter quorum over TLS does not commit: %v", err)
	}
}
