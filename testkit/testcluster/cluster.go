// Package testcluster runs a real multi-node Strand cluster inside one test
// process: real gRPC on loopback ports (or on an in-memory network,
// Options.MemNet), real Raft, real memberlist, real disks in temp dirs,
// and every node-to-node and client connection routed through a
// fault.Network, so a test can stop, kill, restart and isolate nodes.
package testcluster

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/controller"
	"github.com/strand-io/strand/internal/syncx"
	"github.com/strand-io/strand/metadata"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/fault"
	"github.com/strand-io/strand/testkit/memnet"
	"github.com/strand-io/strand/testkit/simdisk"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// Options tune the cluster; zero values take the defaults below.
type Options struct {
	Nodes             int
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	ReplicaLag        time.Duration
	// Roles gives each node's roles (default: both).
	Roles func(id int32) (broker, controller bool)
	// Mutate adjusts each node's config before it starts.
	Mutate func(id int32, cfg *node.Config)
	// TLS, when set, starts every listener with TLS (tls.go); the
	// cluster's certificates are then in Cluster.TLS.
	TLS *TLSOptions
	// ListenerProtocols sets client listeners' security protocols by
	// listener name (e.g. SASL_PLAINTEXT on KAFKA, CLIENT, EXTERNAL).
	ListenerProtocols map[string]string
	// MemNet, when set, runs every node's client, inter-broker, Kafka and
	// Raft listener on an in-memory network (Cluster.Mem) and routes the
	// fault network's dials over it, and gossip on an in-memory memberlist
	// transport (Cluster.Gossip): no socket carries node-to-node or SDK
	// client traffic. A Kafka client from outside the process cannot
	// reach the Kafka listeners.
	MemNet bool
	// SimDisk, when set, gives every node an in-memory disk
	// (testkit/simdisk, Member.Disk) for its broker's files: partition
	// logs, indexes, snapshots and checkpoints. Kill then crashes that
	// disk after stopping the node, so the restart sees only what the
	// node had fsynced. Raft's bolt store and snapshot store stay in the
	// member's real directory: they fsync every write before it returns,
	// so a crash would lose nothing of theirs anyway.
	SimDisk bool
}

// Member is one node of the cluster.
type Member struct {
	ID   int32
	Dir  string
	Cfg  node.Config
	Node *node.Node // nil while stopped

	memLns []net.Listener // the in-memory listeners of the last start (Options.MemNet)
	// Disk is the node's simulated disk (Options.SimDisk; nil otherwise):
	// it outlives restarts, as a real disk does.
	Disk *simdisk.FS
}

// Name is the member's endpoint name on the fault network.
func (m *Member) Name() string { return fmt.Sprintf("node-%d", m.ID) }

// Cluster is a running test cluster.
type Cluster struct {
	T   testing.TB
	Net *fault.Network
	// Mem is the in-memory network of a cluster started with
	// Options.MemNet (nil otherwise).
	Mem *memnet.Network
	// Gossip is the in-memory network memberlist runs on in a cluster
	// started with Options.MemNet (nil otherwise).
	Gossip *memnet.GossipNet

	opts Options
	base string
	// TLS is the certificate material of a cluster started with
	// Options.TLS (nil otherwise).
	TLS    *ClusterTLS
	voters []controller.Voter // the voters the cluster was bootstrapped with

	mu      sync.Mutex
	members []*Member
	// startMu serialises TryStart; its waiters block on a channel, so a
	// cluster on virtual time (synctest) keeps its clock running.
	startMu syncx.Mutex
}

// nodeAddrs are one node's listen addresses.
type nodeAddrs struct{ listen, interBroker, raft, gossip, kafka string }

func (c *Cluster) newNodeAddrs(id int32) nodeAddrs {
	t := c.T
	if c.Mem != nil {
		h := fmt.Sprintf("node-%d.memnet", id)
		at := func(port int) string { return net.JoinHostPort(h, strconv.Itoa(port)) }
		// memberlist advertises an IP: a made-up one per node.
		gossip := net.JoinHostPort(fmt.Sprintf("127.1.0.%d", id), "7946")
		return nodeAddrs{at(9191), at(9192), at(9193), gossip, at(9092)}
	}
	return nodeAddrs{testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t)}
}

// startNode starts a member's node; on an in-memory network it first
// listens there on the member's addresses (again after a restart).
func (c *Cluster) startNode(m *Member) (*node.Node, error) {
	cfg := m.Cfg
	if c.Mem != nil {
		for _, ln := range m.memLns {
			ln.Close()
		}
		m.memLns = nil
		listen := func(addr string) (net.Listener, error) {
			ln, err := c.Mem.Listen(addr)
			if err == nil {
				m.memLns = append(m.memLns, ln)
			}
			return ln, err
		}
		var err error
		if cfg.Listener, err = listen(cfg.Listen); err != nil {
			return nil, err
		}
		if cfg.InterBrokerListener, err = listen(cfg.InterBrokerListen); err != nil {
			return nil, err
		}
		if cfg.KafkaListen != "" {
			if cfg.KafkaListener, err = listen(cfg.KafkaListen); err != nil {
				return nil, err
			}
		}
		if cfg.Controller {
			if cfg.ControllerListener, err = listen(cfg.ControllerListen); err != nil {
				return nil, err
			}
		}
		// A stopped node's memberlist shut its transport down, which
		// frees the address for the restart.
		gt, err := c.Gossip.Transport(cfg.GossipListen)
		if err != nil {
			return nil, err
		}
		cfg.GossipTransport = gt
	}
	return node.Start(cfg)
}

// newMember builds a member's config: its listeners registered on the
// fault network, the cluster's bootstrap voters, gossip seeds join, the
// test timeouts, then Options.Mutate and mutate.
func (c *Cluster) newMember(id int32, a nodeAddrs, isBroker, isController bool, join []string, mutate func(*node.Config)) *Member {
	opts := c.opts
	dir := filepath.Join(c.base, fmt.Sprintf("node%d", id))
	cfg := node.DefaultConfig(id, dir)
	cfg.Broker, cfg.Controller = isBroker, isController
	cfg.Listen, cfg.InterBrokerListen, cfg.ControllerListen, cfg.GossipListen = a.listen, a.interBroker, a.raft, a.gossip
	if cfg.Broker {
		cfg.KafkaListen = a.kafka
	}
	cfg.Voters = append([]controller.Voter(nil), c.voters...)
	cfg.Join = join
	cfg.HeartbeatInterval = opts.HeartbeatInterval
	cfg.QuorumTimeouts = node.QuorumTimeouts{Heartbeat: 150 * time.Millisecond, Election: 150 * time.Millisecond, LeaderLease: 100 * time.Millisecond, Commit: 5 * time.Millisecond}
	cfg.ControllerConfig.SessionTimeout = opts.SessionTimeout
	cfg.ControllerConfig.LeaderImbalanceInterval = time.Second
	cfg.ControllerConfig.UncleanCheckInterval = time.Second
	cfg.ReplicationConfig.ReplicaLagTimeMax = opts.ReplicaLag
	cfg.ReplicationConfig.FetchBackoff = 100 * time.Millisecond
	cfg.ReplicationConfig.FetchWaitMax = 200 * time.Millisecond
	cfg.Logger = testutil.Logger() // node.Start adds node=<id>
	m := &Member{ID: id, Dir: dir, Cfg: cfg}
	if opts.SimDisk {
		m.Disk = simdisk.New(nil)
		cfg.FS = m.Disk
	}
	c.Net.Register(m.Name(), cfg.Listen)
	c.Net.Register(m.Name(), cfg.InterBrokerListen)
	if cfg.KafkaListen != "" {
		c.Net.Register(m.Name(), cfg.KafkaListen)
	}
	c.Net.Register(m.Name(), cfg.ControllerListen)
	cfg.Dial = c.Net.Dialer(m.Name())
	if opts.ListenerProtocols != nil {
		cfg.SASL.Protocols = opts.ListenerProtocols
	}
	cfg.RaftDial = c.Net.Dialer(m.Name())
	cfg.MarkerDial = c.Net.Dialer(m.Name() + "-markers")
	if c.TLS != nil {
		c.TLS.configure(c.T, id, &cfg)
	}
	if opts.Mutate != nil {
		opts.Mutate(id, &cfg)
	}
	if mutate != nil {
		mutate(&cfg)
	}
	m.Cfg = cfg
	return m
}

// NodeSpec describes a node AddNode adds to a running cluster.
type NodeSpec struct {
	// Broker, Controller: the node's roles; both false means broker only.
	Broker, Controller bool
	// Mutate adjusts the node's config after Options.Mutate.
	Mutate func(cfg *node.Config)
}

// AddNode starts one more node (the next id) on a running cluster, as an
// operator would with `strand server --join`: it knows the cluster's
// bootstrap voters and every member's gossip address. A broker-only node
// is waited for until it is ready (registered, unfenced, caught up) and
// can be used at once. A node with the controller role is not a voter:
// its --controller-voters do not name it, so it bootstraps nothing and
// waits to be added (Admin.AddVoter); AddNode then returns without
// waiting, and the caller waits with WaitReady after adding it. Safe to
// call while the cluster is under load.
func (c *Cluster) AddNode(spec NodeSpec) *Member {
	c.T.Helper()
	if !spec.Broker && !spec.Controller {
		spec.Broker = true
	}
	var join []string
	for _, m := range c.Members() {
		join = append(join, m.Cfg.GossipListen)
	}
	c.mu.Lock()
	id := int32(len(c.members) + 1)
	c.mu.Unlock()
	m := c.newMember(id, c.newNodeAddrs(id), spec.Broker, spec.Controller, join, spec.Mutate)
	n, err := c.startNode(m)
	if err != nil {
		c.T.Fatalf("add node %d: %v", id, err)
	}
	m.Node = n
	c.mu.Lock()
	c.members = append(c.members, m)
	c.mu.Unlock()
	if !spec.Controller {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := n.WaitReady(ctx); err != nil {
			c.T.Fatal(err)
		}
	}
	return m
}

// Grow adds n broker-only nodes (AddNode) and returns them, each ready.
func (c *Cluster) Grow(n int) []*Member {
	c.T.Helper()
	var out []*Member
	for i := 0; i < n; i++ {
		out = append(out, c.AddNode(NodeSpec{Broker: true}))
	}
	return out
}

// New starts a cluster and waits until every broker is registered and unfenced.
func New(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	if opts.SessionTimeout == 0 {
		opts.SessionTimeout = 2 * time.Second
	}
	if opts.HeartbeatInterval == 0 {
		opts.HeartbeatInterval = 200 * time.Millisecond
	}
	if opts.ReplicaLag == 0 {
		opts.ReplicaLag = 3 * time.Second
	}
	c := &Cluster{T: t, Net: fault.NewNetwork(), opts: opts, base: t.TempDir()}
	if opts.MemNet {
		c.Mem = memnet.New()
		c.Gossip = memnet.NewGossipNet()
		c.Net.SetTransport(c.Mem.Dial)
	}
	if opts.TLS != nil {
		c.TLS = newClusterTLS(t, c.base, *opts.TLS)
	}
	all := make([]nodeAddrs, opts.Nodes)
	roles := opts.Roles
	if roles == nil {
		roles = func(int32) (bool, bool) { return true, true }
	}
	for i := range all {
		all[i] = c.newNodeAddrs(int32(i + 1))
		if _, ctl := roles(int32(i + 1)); ctl {
			c.voters = append(c.voters, controller.Voter{ID: int32(i + 1), Addr: all[i].raft})
		}
	}
	for i := range all {
		id := int32(i + 1)
		var join []string
		for j := range all {
			if j != i {
				join = append(join, all[j].gossip)
			}
		}
		b, ctl := roles(id)
		c.members = append(c.members, c.newMember(id, all[i], b, ctl, join, nil))
	}
	// Start all at once: the quorum needs a majority before anyone registers.
	var wg sync.WaitGroup
	errs := make([]error, len(c.members))
	for i, m := range c.members {
		wg.Add(1)
		go func(i int, m *Member) {
			defer wg.Done()
			n, err := c.startNode(m)
			errs[i] = err
			m.Node = n
		}(i, m)
	}
	wg.Wait()
	t.Cleanup(c.Close)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	c.WaitReady(30 * time.Second)
	return c
}

// Close stops every node.
func (c *Cluster) Close() {
	c.Net.HealAll()
	for _, m := range c.Members() {
		if n := c.Take(m.ID); n != nil {
			n.Kill()
		}
	}
}

// Members lists the members.
func (c *Cluster) Members() []*Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Member(nil), c.members...)
}

// Member returns a member by id.
func (c *Cluster) Member(id int32) *Member { return c.Members()[id-1] }

// Running returns the running nodes.
func (c *Cluster) Running() []*Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Member
	for _, m := range c.members {
		if m.Node != nil {
			out = append(out, m)
		}
	}
	return out
}

// Take detaches a member's running node from the cluster (nil if it is
// down), under the lock Running and TryStart take, so a goroutine that
// stops it does so without racing another that lists the running nodes.
func (c *Cluster) Take(id int32) *node.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.members[id-1]
	n := m.Node
	m.Node = nil
	return n
}

// NodeOf is member id's running node (nil if it is down), read under the
// cluster's lock.
func (c *Cluster) NodeOf(id int32) *node.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.members[id-1].Node
}

// InterBrokerAddrs lists every node's inter-broker listener, by node id.
func (c *Cluster) InterBrokerAddrs() map[int32]string {
	out := map[int32]string{}
	for _, m := range c.Members() {
		out[m.ID] = m.Cfg.InterBrokerListen
	}
	return out
}

// Bootstrap lists every node's client address.
func (c *Cluster) Bootstrap() []string {
	var out []string
	for _, m := range c.Members() {
		out = append(out, m.Cfg.Listen)
	}
	return out
}

// KafkaAddrs lists every broker's Kafka listener (what a Kafka client's
// bootstrap.servers takes).
func (c *Cluster) KafkaAddrs() []string {
	var out []string
	for _, m := range c.Members() {
		if m.Cfg.KafkaListen != "" {
			out = append(out, m.Cfg.KafkaListen)
		}
	}
	return out
}

// ClientOpts are the options a test client needs: bootstrap and the fault
// network's dialer for endpoint "client".
func (c *Cluster) ClientOpts(extra ...client.Opt) []client.Opt {
	dial := c.Net.Dialer("client")
	opts := []client.Opt{client.Bootstrap(c.Bootstrap()...), client.DialOptions(grpc.WithContextDialer(dial)),
		client.RetryBackoff(20*time.Millisecond, 200*time.Millisecond), client.Logger(testutil.Logger())}
	if c.TLS != nil {
		opts = append(opts, c.TLS.clientOpts(c.T)...)
	}
	return append(opts, extra...)
}

// WaitReady waits until every running node's broker is unfenced and caught up.
func (c *Cluster) WaitReady(timeout time.Duration) {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, m := range c.Running() {
		n := c.NodeOf(m.ID)
		if n == nil {
			continue // stopped meanwhile
		}
		if err := n.WaitReady(ctx); err != nil {
			c.T.Fatal(err)
		}
	}
}

// Kill stops a node as kill -9 would: no controlled shutdown, no clean
// close of its logs (the bytes stay, like the page cache keeps them). On
// a cluster with Options.SimDisk the node's disk then crashes, as if the
// machine lost power: what the node had not fsynced is gone.
func (c *Cluster) Kill(id int32) {
	if n := c.Take(id); n != nil {
		n.Kill()
		if m := c.Member(id); m.Disk != nil {
			m.Disk.Crash()
		}
	}
}

// Stop stops a node cleanly (controlled shutdown).
func (c *Cluster) Stop(id int32) {
	if n := c.Take(id); n != nil {
		if err := n.Stop(); err != nil {
			c.T.Logf("stop node %d: %v", id, err)
		}
	}
}

// Start starts a stopped node again with the same addresses and data.
func (c *Cluster) Start(id int32) {
	c.T.Helper()
	m := c.Member(id)
	if m.Node != nil {
		return
	}
	n, err := c.startNode(m)
	if err != nil {
		c.T.Fatalf("restart node %d: %v", id, err)
	}
	m.Node = n
}

// Isolate cuts a node off from every other node and from clients.
func (c *Cluster) Isolate(id int32) { c.Net.Isolate(c.Member(id).Name()) }

// Heal restores a node's links.
func (c *Cluster) Heal(id int32) { c.Net.Heal(c.Member(id).Name()) }

// image returns the freshest metadata image among running brokers.
func (c *Cluster) image() *metadata.Image {
	var best *metadata.Image
	for _, m := range c.Running() {
		// Read under the lock: a goroutine may stop the node meanwhile (Take).
		n := c.NodeOf(m.ID)
		if n == nil || n.Repl == nil {
			continue
		}
		if img := n.Repl.Image(); best == nil || img.Offset > best.Offset {
			best = img
		}
	}
	if best == nil {
		return metadata.EmptyImage()
	}
	return best
}

// Image is the freshest metadata image of the running nodes.
func (c *Cluster) Image() *metadata.Image { return c.image() }

// Partition returns a partition as the freshest image knows it.
func (c *Cluster) Partition(topic string, p int32) *metadata.Partition {
	return c.image().Partition(topic, p)
}

// ActiveController is the id of the active controller (-1 if none).
func (c *Cluster) ActiveController() int32 {
	for _, m := range c.Running() {
		if n := c.NodeOf(m.ID); n != nil && n.Controller != nil && n.Controller.IsActive() {
			return m.ID
		}
	}
	return -1
}

// Eventually polls cond every 20 ms until it holds or timeout passes.
func (c *Cluster) Eventually(timeout time.Duration, what string, cond func() bool) {
	c.T.Helper()
	wait.Eventually(c.T, timeout, what, cond)
}

// Log returns a running node's local log of a partition (nil if none).
func (c *Cluster) Log(id int32, topic string, p int32) *storage.Log {
	n := c.NodeOf(id)
	if n == nil || n.Parts == nil {
		return nil
	}
	part := n.Parts.Get(storage.PartitionKey{Topic: topic, Partition: p})
	if part == nil {
		return nil
	}
	return part.Log
}

// CreateTopic creates a topic through the SDK and waits until every
// running broker's metadata has it with its leaders and full ISRs (a
// Kafka client may ask any broker, and one that has not caught up answers
// UNKNOWN_TOPIC_OR_PARTITION).
func (c *Cluster) CreateTopic(name string, partitions, rf int32, configs map[string]string) {
	c.T.Helper()
	adm, err := client.NewAdmin(c.ClientOpts()...)
	if err != nil {
		c.T.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := adm.CreateTopic(ctx, client.TopicSpec{Name: name, Partitions: partitions, ReplicationFactor: rf, Configs: configs}); err != nil {
		c.T.Fatal(err)
	}
	c.Eventually(20*time.Second, "leaders of "+name+" on every broker", func() bool {
		for _, m := range c.Running() {
			n := c.NodeOf(m.ID)
			if n == nil || n.Repl == nil {
				continue
			}
			t := n.Repl.Image().Topic(name)
			if t == nil || len(t.Partitions) != int(partitions) {
				return false
			}
			for _, p := range t.Partitions {
				if p.Leader < 0 || len(p.ISR) != int(rf) {
					return false
				}
			}
		}
		return true
	})
}

// TryStart is Start for callers that must not fail the test from their
// goroutine (a fault scheduler): it returns the error instead. A node
// that is running is left alone.
func (c *Cluster) TryStart(id int32) error {
	// One start at a time: two starters (a fault's end and a drill, say)
	// must not both find the node down and both start it.
	c.startMu.Lock()
	defer c.startMu.Unlock()
	m := c.Member(id)
	c.mu.Lock()
	running := m.Node != nil
	c.mu.Unlock()
	if running {
		return nil
	}
	n, err := c.startNode(m)
	if err != nil {
		return err
	}
	c.mu.Lock()
	m.Node = n
	c.mu.Unlock()
	return nil
}
