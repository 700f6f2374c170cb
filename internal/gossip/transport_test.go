package gossip

import (
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/strand-io/strand/testkit/memnet"
	"github.com/strand-io/strand/testkit/wait"
)

// deadRecorder collects the ids OnDead reported.
type deadRecorder struct {
	mu  sync.Mutex
	ids map[int32]bool
}

func (d *deadRecorder) add(id int32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ids[id] = true
}

func (d *deadRecorder) has(id int32) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ids[id]
}

// startMem starts a member on the in-memory network at addr. Bind and the
// seeds' host names are what would fail on real sockets: Bind is left
// empty (a socket transport refuses it).
func startMem(t *testing.T, n *memnet.GossipNet, id int32, addr string, join ...string) (*Gossip, *deadRecorder) {
	t.Helper()
	tr, err := n.Transport(addr)
	if err != nil {
		t.Fatal(err)
	}
	d := &deadRecorder{ids: map[int32]bool{}}
	g, err := Start(Config{Meta: Meta{NodeID: id, Broker: true}, Join: join, Transport: tr, OnDead: d.add,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Kill)
	return g, d
}

func ids(g *Gossip) []int32 {
	var out []int32
	for id := range g.Members() {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	wait.Eventually(t, within, what, cond)
}

func threeMembers(t *testing.T) (*memnet.GossipNet, []*Gossip, []*deadRecorder) {
	n := memnet.NewGossipNet()
	addrs := []string{"127.0.0.1:7946", "127.0.0.2:7946", "127.0.0.3:7946"}
	var gs []*Gossip
	var ds []*deadRecorder
	for i, a := range addrs {
		var join []string
		if i > 0 {
			join = addrs[:1]
		}
		g, d := startMem(t, n, int32(i+1), a, join...)
		gs, ds = append(gs, g), append(ds, d)
	}
	waitFor(t, "all three see each other", 20*time.Second, func() bool {
		for _, g := range gs {
			if len(g.Members()) != 3 {
				return false
			}
		}
		return true
	})
	if m := gs[1].Members()[3]; !m.Broker || m.NodeID != 3 {
		t.Fatalf("member 3 as seen by 2: %+v", m)
	}
	return n, gs, ds
}

// TestGossipOverMemoryCrash: three members on the in-memory transport find
// each other through a seed; one crashes (its transport shut down, no
// goodbye) and the other two declare it dead.
func TestGossipOverMemoryCrash(t *testing.T) {
	_, gs, ds := threeMembers(t)
	gs[2].Kill()
	waitFor(t, "member 3 declared dead by 1 and 2", 60*time.Second, func() bool {
		return ds[0].has(3) && ds[1].has(3) && len(gs[0].Members()) == 2 && len(gs[1].Members()) == 2
	})
	if got := ids(gs[0]); got[0] != 1 || got[1] != 2 {
		t.Fatalf("members after the crash: %v", got)
	}
	if ds[0].has(2) || ds[1].has(1) {
		t.Fatal("a live member was declared dead")
	}
}

// TestGossipOverMemoryCut: a member cut off from the others (still running)
// is declared dead by them, and it declares them dead.
func TestGossipOverMemoryCut(t *testing.T) {
	n, gs, ds := threeMembers(t)
	n.Isolate("127.0.0.3:7946")
	waitFor(t, "the cut-off member declared dead, and it the others", 60*time.Second, func() bool {
		return ds[0].has(3) && ds[1].has(3) && ds[2].has(1) && ds[2].has(2) && len(gs[2].Members()) == 1
	})
	if ds[0].has(2) || ds[1].has(1) {
		t.Fatal("a member on the connected side was declared dead")
	}
}

// TestGossipOverMemoryLeave: a member that stops says goodbye and the
// others drop it.
func TestGossipOverMemoryLeave(t *testing.T) {
	_, gs, ds := threeMembers(t)
	gs[1].Stop()
	waitFor(t, "member 2 gone from 1 and 3", 20*time.Second, func() bool {
		return ds[0].has(2) && ds[2].has(2)
	})
}

// TestTransportAdvertiseMustBeIP: with a transport no name is looked up, so
// an advertised host name is refused rather than resolved.
func TestTransportAdvertiseMustBeIP(t *testing.T) {
	tr, err := memnet.NewGossipNet().Transport("127.0.0.1:7946")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown()
	if _, err := Start(Config{Meta: Meta{NodeID: 1}, Transport: tr, Advertise: "localhost:7946"}); err == nil {
		t.Fatal("a host name was accepted as the advertised address")
	}
}
