package gossip

import (
	"bytes"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/strand-io/strand/testkit/testutil/ports"
)

func start(t *testing.T, id int32, key []byte, join ...string) (*Gossip, string) {
	t.Helper()
	addr, err := ports.Addr()
	if err != nil {
		t.Fatal(err)
	}
	g, err := Start(Config{Meta: Meta{NodeID: id, Broker: true}, Bind: addr, Join: join, SecretKey: key,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Kill)
	return g, addr
}

// TestEncryptedGossip: with gossip.encryption.key.location's key the
// members that share it find each other; one without it (or with another
// key) is never a member.
func TestEncryptedGossip(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	g1, a1 := start(t, 1, key)
	g2, _ := start(t, 2, key, a1)
	deadline := time.Now().Add(10 * time.Second)
	for len(g1.Members()) < 2 || len(g2.Members()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("members with the same key: %v / %v", g1.Members(), g2.Members())
		}
		time.Sleep(50 * time.Millisecond)
	}
	g3, _ := start(t, 3, nil, a1)
	g4, _ := start(t, 4, bytes.Repeat([]byte{9}, 16), a1)
	time.Sleep(2 * time.Second)
	if _, ok := g1.Members()[3]; ok {
		t.Fatal("a member without the key joined")
	}
	if _, ok := g1.Members()[4]; ok {
		t.Fatal("a member with another key joined")
	}
	if len(g3.Members()) > 1 || len(g4.Members()) > 1 {
		t.Fatalf("outsiders see %v / %v", g3.Members(), g4.Members())
	}
}
