// Package gossip runs hashicorp/memberlist so nodes learn each other's
// addresses and roles and hear early about failures. Gossip is advisory:
// only Raft-committed fencing moves leadership.
package gossip

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Meta is what each node gossips about itself.
type Meta struct {
	NodeID  int32  `json:"id"`
	Address string `json:"addr"`
	// InterBroker is the address of the node's inter-broker listener.
	InterBroker string `json:"ib,omitempty"`
	RaftAddr    string `json:"raft,omitempty"`
	Broker      bool   `json:"broker"`
	Controller  bool   `json:"controller"`
}

// Config configures gossip.
type Config struct {
	Meta      Meta
	Bind      string // host:port
	Advertise string // host:port (default Bind)
	Join      []string
	// OnDead is called when a member is declared dead (or leaves).
	OnDead func(id int32)
	Logger *slog.Logger
	// SecretKey, when set, is the AES key (16, 24 or 32 bytes) memberlist
	// encrypts every gossip message with (gossip.encryption.key.location);
	// a member without it, or with another key, is not heard.
	SecretKey []byte
	// Transport, when set, carries gossip instead of UDP/TCP sockets
	// (tests and simulations: an in-memory network). Bind is then
	// ignored, the advertised address is the transport's (Advertise, if
	// set, must be IP:port and is only handed to it), and no name is
	// looked up; seeds in Join should be IP:port, as memberlist resolves
	// any other host name through DNS.
	Transport memberlist.Transport
}

// Gossip is a running memberlist.
type Gossip struct {
	cfg  Config
	ml   *memberlist.Memberlist
	lg   *slog.Logger
	meta []byte

	mu      sync.Mutex
	members map[int32]Meta
	// addrs is where each live member's memberlist listens, for Probe.
	addrs map[int32]probeAddr

	cancel context.CancelFunc
	done   chan struct{}
}

// Start joins the gossip pool (retrying the seeds in the background).
func Start(cfg Config) (*Gossip, error) {
	lg := cfg.Logger
	if lg == nil {
		lg = slog.Default()
	}
	meta, err := json.Marshal(cfg.Meta)
	if err != nil {
		return nil, err
	}
	g := &Gossip{cfg: cfg, lg: lg, meta: meta, members: map[int32]Meta{cfg.Meta.NodeID: cfg.Meta}, addrs: map[int32]probeAddr{}}
	mc := memberlist.DefaultLANConfig()
	mc.Name = strconv.Itoa(int(cfg.Meta.NodeID))
	if cfg.Transport != nil {
		mc.Transport = cfg.Transport
		if cfg.Advertise != "" {
			ah, ap, err := splitHostPort(cfg.Advertise)
			if err != nil {
				return nil, fmt.Errorf("gossip advertise %q: %w", cfg.Advertise, err)
			}
			if net.ParseIP(ah) == nil {
				return nil, fmt.Errorf("gossip advertise %q: host must be an IP with a custom transport", cfg.Advertise)
			}
			mc.AdvertiseAddr, mc.AdvertisePort = ah, ap
		}
	} else if err := bindAndAdvertise(mc, cfg); err != nil {
		return nil, err
	}
	mc.Delegate = g
	if len(cfg.SecretKey) > 0 {
		mc.SecretKey = cfg.SecretKey
	}
	mc.Events = g
	mc.Logger = log.New(io.Discard, "", 0)
	mc.ProbeInterval = 500 * time.Millisecond
	mc.ProbeTimeout = 300 * time.Millisecond
	mc.SuspicionMult = 3
	mc.GossipInterval = 100 * time.Millisecond
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("start gossip: %w", err)
	}
	g.ml = ml
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel, g.done = cancel, make(chan struct{})
	go g.joinLoop(ctx)
	return g, nil
}

// bindAndAdvertise sets the socket transport's bind address and the
// address advertised to other members (a host name there is resolved once,
// memberlist advertising IPs).
func bindAndAdvertise(mc *memberlist.Config, cfg Config) error {
	host, port, err := splitHostPort(cfg.Bind)
	if err != nil {
		return fmt.Errorf("gossip listen %q: %w", cfg.Bind, err)
	}
	mc.BindAddr, mc.BindPort = host, port
	adv := cfg.Advertise
	if adv == "" {
		adv = cfg.Bind
	}
	ah, ap, err := splitHostPort(adv)
	if err != nil {
		return fmt.Errorf("gossip advertise %q: %w", adv, err)
	}
	if ip := net.ParseIP(ah); ip == nil {
		if addrs, err := net.LookupHost(ah); err == nil && len(addrs) > 0 {
			ah = addrs[0]
		}
	}
	mc.AdvertiseAddr, mc.AdvertisePort = ah, ap
	return nil
}

func splitHostPort(s string) (string, int, error) {
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.Atoi(p)
	return h, n, err
}

func (g *Gossip) joinLoop(ctx context.Context) {
	defer close(g.done)
	for ctx.Err() == nil {
		if len(g.cfg.Join) == 0 || g.ml.NumMembers() > 1 {
			t := time.NewTimer(2 * time.Second)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
			continue
		}
		if _, err := g.ml.Join(g.cfg.Join); err != nil {
			g.lg.Debug("gossip join failed; retrying", "seeds", g.cfg.Join, "err", err)
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// Members returns what is known of every live member.
func (g *Gossip) Members() map[int32]Meta {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[int32]Meta, len(g.members))
	for k, v := range g.members {
		out[k] = v
	}
	return out
}

// Address returns a member's client gRPC address ("" if unknown).
func (g *Gossip) Address(id int32) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.members[id].Address
}

// PeerAddress returns the address of a member's inter-broker listener (its
// only address for a member that gossips none), "" if unknown.
func (g *Gossip) PeerAddress(id int32) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m := g.members[id]; m.InterBroker != "" {
		return m.InterBroker
	}
	return g.members[id].Address
}

// Stop leaves the pool.
func (g *Gossip) Stop() {
	g.cancel()
	<-g.done
	_ = g.ml.Leave(500 * time.Millisecond)
	_ = g.ml.Shutdown()
}

// Kill stops without saying goodbye (tests simulating a crash).
func (g *Gossip) Kill() {
	g.cancel()
	<-g.done
	_ = g.ml.Shutdown()
}

// memberlist.Delegate
func (g *Gossip) NodeMeta(limit int) []byte           { return g.meta }
func (g *Gossip) NotifyMsg([]byte)                    {}
func (g *Gossip) GetBroadcasts(int, int) [][]byte     { return nil }
func (g *Gossip) LocalState(bool) []byte              { return nil }
func (g *Gossip) MergeRemoteState(buf []byte, _ bool) {}

// memberlist.EventDelegate
func (g *Gossip) NotifyJoin(n *memberlist.Node)   { g.update(n) }
func (g *Gossip) NotifyUpdate(n *memberlist.Node) { g.update(n) }
func (g *Gossip) NotifyLeave(n *memberlist.Node) {
	var m Meta
	if json.Unmarshal(n.Meta, &m) != nil {
		return
	}
	g.mu.Lock()
	if m.NodeID != g.cfg.Meta.NodeID {
		delete(g.members, m.NodeID)
		delete(g.addrs, m.NodeID)
	}
	g.mu.Unlock()
	if g.cfg.OnDead != nil && m.NodeID != g.cfg.Meta.NodeID {
		g.cfg.OnDead(m.NodeID)
	}
}

func (g *Gossip) update(n *memberlist.Node) {
	var m Meta
	if err := json.Unmarshal(n.Meta, &m); err != nil {
		return
	}
	g.mu.Lock()
	g.members[m.NodeID] = m
	g.addrs[m.NodeID] = probeAddr{name: n.Name, addr: &net.UDPAddr{IP: n.Addr, Port: int(n.Port)}}
	g.mu.Unlock()
}

type probeAddr struct {
	name string
	addr net.Addr
}

// Probe asks member id directly whether it is there: one memberlist ping
// to it, answered or not within the probe timeout (300 ms). It reports
// false for a member gossip holds dead or has never seen. The controller
// asks this of a broker whose heartbeats stopped before it fences it
// early: a process killed or stopped does not answer, one whose
// heartbeats are merely slow (a busy controller) does. The ping runs on
// memberlist's own goroutines, so a broker stuck elsewhere still answers
// and keeps its whole session timeout.
func (g *Gossip) Probe(id int32) bool {
	g.mu.Lock()
	a, ok := g.addrs[id]
	g.mu.Unlock()
	if !ok {
		return false
	}
	_, err := g.ml.Ping(a.name, a.addr)
	return err == nil
}
