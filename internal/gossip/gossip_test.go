package gossip

import (
	"bytes"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strand-io/strand/testkit/memnet"
	"github.com/strand-io/strand/testkit/wait"
)

// startKeyed starts member id on the in-memory gossip network n, with
// the encryption key (nil: none), joining the given addresses.
func startKeyed(t *testing.T, n *memnet.GossipNet, id int32, addr string, key []byte, join ...string) *Gossip {
	t.Helper()
	tr, err := n.Transport(addr)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Start(Config{Meta: Meta{NodeID: id, Broker: true}, Join: join, SecretKey: key, Transport: tr,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Kill)
	return g
}

// TestEncryptedGossip: with gossip.encryption.key.location's key the
// members that share it find each other; one without it (or with another
// key) is never a member. Memberlist encrypts above its transport, so the
// in-memory one serves, and the test runs in a synctest bubble: "never"
// is a window of virtual time, long to memberlist and free to the test.
func TestEncryptedGossip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.NewGossipNet()
		key := bytes.Repeat([]byte{7}, 32)
		a1 := "127.0.0.1:7946"
		g1 := startKeyed(t, n, 1, a1, key)
		g2 := startKeyed(t, n, 2, "127.0.0.2:7946", key, a1)
		wait.Eventually(t, 10*time.Second, "the members with the same key to see each other", func() bool {
			return len(g1.Members()) == 2 && len(g2.Members()) == 2
		})
		g3 := startKeyed(t, n, 3, "127.0.0.3:7946", nil, a1)
		g4 := startKeyed(t, n, 4, "127.0.0.4:7946", bytes.Repeat([]byte{9}, 16), a1)
		// Virtual time: twenty seconds of gossip rounds and probes, in
		// which neither outsider may become a member.
		time.Sleep(20 * time.Second) // virtual time (synctest)
		if _, ok := g1.Members()[3]; ok {
			t.Fatal("a member without the key joined")
		}
		if _, ok := g1.Members()[4]; ok {
			t.Fatal("a member with another key joined")
		}
		if len(g3.Members()) > 1 || len(g4.Members()) > 1 {
			t.Fatalf("outsiders see %v / %v", g3.Members(), g4.Members())
		}
	})
}

// TestProbe: a member that is there answers a probe; once it stops (a
// kill: no goodbye) it does not, well before gossip declares it dead; a
// member never seen is not there.
func TestProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.NewGossipNet()
		a1 := "127.0.0.1:7946"
		g1 := startKeyed(t, n, 1, a1, nil)
		g2 := startKeyed(t, n, 2, "127.0.0.2:7946", nil, a1)
		wait.Eventually(t, 10*time.Second, "the members to see each other", func() bool {
			return len(g1.Members()) == 2 && len(g2.Members()) == 2
		})
		if !g1.Probe(2) {
			t.Fatal("a live member did not answer a probe")
		}
		if g1.Probe(3) {
			t.Fatal("a member never seen answered a probe")
		}
		g2.Kill()
		began := time.Now()
		if g1.Probe(2) {
			t.Fatal("a killed member answered a probe")
		}
		if took := time.Since(began); took > time.Second {
			t.Fatalf("the probe of a killed member took %v", took)
		}
	})
}
