// Package node assembles one Strand process: controller (a Raft voter),
// broker (partition logs, replication, coordinators), gossip, and the gRPC
// front door, started and stopped in order. cmd/strand and the in-process
// test cluster both build nodes with it.
package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/strand-io/strand/api"
	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/controller"
	"github.com/strand-io/strand/controller/channel"
	"github.com/strand-io/strand/coordinator"
	"github.com/strand-io/strand/coordinator/group"
	"github.com/strand-io/strand/coordinator/txn"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/gossip"
	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/internal/rpc"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/replication"
	"github.com/strand-io/strand/request"
)

// Config is a node's configuration (the server's flags).
type Config struct {
	NodeID     int32
	Broker     bool
	Controller bool
	// Listen is the client listener's gRPC address; Advertise is what
	// clients dial (Metadata hands it out).
	Listen, Advertise string
	// Listener, if set, is used instead of listening on Listen (tests).
	Listener net.Listener
	// InterBrokerListen / InterBrokerAdvertise: the inter-broker listener,
	// which serves only what other nodes send (the Controller service,
	// follower fetches, transaction markers, AddPartitionsToTxn; see
	// api/listeners.go) and only to the cluster's addresses
	// (api.PeerFilter). Brokers register InterBrokerAdvertise and peers dial
	// it. An empty InterBrokerListen takes a free port on Listen's host; an
	// empty InterBrokerAdvertise is Advertise's host with the port bound
	// when the listen host names every interface, else the bound address.
	InterBrokerListen, InterBrokerAdvertise string
	// InterBrokerListener, if set, is used instead of listening on
	// InterBrokerListen (tests).
	InterBrokerListener net.Listener
	// ExternalListen / ExternalAdvertise: a second, client-facing listener
	// (like Kafka's EXTERNAL) whose Metadata hands out external addresses,
	// for clients outside the nodes' network (a container host).
	ExternalListen, ExternalAdvertise string
	// MetricsListen serves /metrics and /debug/pprof over HTTP ("" = off).
	MetricsListen string
	// ControllerListen / ControllerAdvertise: the Raft transport.
	ControllerListen, ControllerAdvertise string
	// GossipListen / GossipAdvertise: memberlist; Join lists seeds.
	GossipListen, GossipAdvertise string
	Join                          []string
	DataDir                       string
	Voters                        []controller.Voter
	Dev                           bool
	Rack                          string

	BrokerConfig      broker.Config
	ControllerConfig  controller.Config
	ReplicationConfig replication.Config
	QuorumTimeouts    QuorumTimeouts
	HeartbeatInterval time.Duration
	MessageMaxBytes   int
	// OffsetMetadataMaxBytes is offset.metadata.max.bytes: the longest
	// metadata string an offset commit may carry (Kafka's default 4096).
	OffsetMetadataMaxBytes int
	// TimestampBeforeMaxMs and TimestampAfterMaxMs are
	// log.message.timestamp.before.max.ms and
	// log.message.timestamp.after.max.ms: how far a produced record's
	// CreateTime may be behind or ahead of the leader's clock.
	TimestampBeforeMaxMs, TimestampAfterMaxMs int64
	// ProduceMaxInFlight is max.in.flight.requests.per.stream: requests of
	// one Produce stream read and not yet answered before the node stops
	// reading it (back-pressure; see api.producerService.Produce).
	ProduceMaxInFlight int
	// TxnTopic and OffsetsTopic configure the internal topics (in dev mode
	// replication factor and min ISR are lowered to 1).
	TxnTopic, OffsetsTopic coordinator.InternalTopic
	GroupConfig            group.Config
	TxnConfig              txn.Config

	// Dial routes this node's outgoing gRPC connections (the fault layer).
	Dial rpc.DialFunc
	// RaftDial routes outgoing Raft connections.
	RaftDial rpc.DialFunc
	// MarkerDial routes the transaction coordinator's WriteTxnMarkers
	// connections (default: Dial), so a drill can hold markers alone.
	MarkerDial rpc.DialFunc
	Clock      clock.Clock
	Logger     *slog.Logger
	// TestingFaults serves the test-only fault endpoints under
	// /debug/faults/ on the metrics listener (faults.go). Only drills set
	// it (strand server reads STRAND_TESTING_FAULTS=1); never in production.
	TestingFaults bool
	// ConnectionsMaxIdle (connections.max.idle.ms, default 10 min): a
	// connection with no RPC in flight for this long is closed, on every
	// listener (api.ConnectionOptions). Zero means the default.
	ConnectionsMaxIdle time.Duration
	// MaxConnections (max.connections) caps the connections open at once
	// on the client listeners together; MaxConnectionsPerIP
	// (max.connections.per.ip) those from one address, except for the
	// addresses (or host names) MaxConnectionsPerIPOverrides names. Zero
	// means the default derived from the process's descriptor limit
	// (ConnectionLimits).
	MaxConnections, MaxConnectionsPerIP int
	MaxConnectionsPerIPOverrides        map[string]int
	// UnaryInterceptors run first on every unary call the node's gRPC
	// servers take, before the start-up gate (tests: hold or refuse
	// chosen RPCs, such as this broker's registration).
	UnaryInterceptors []grpc.UnaryServerInterceptor
}

// QuorumTimeouts tunes Raft (zero keeps hashicorp/raft's defaults).
type QuorumTimeouts struct {
	Heartbeat, Election, LeaderLease, Commit time.Duration
}

// DefaultConfig returns Kafka's defaults for a combined node.
func DefaultConfig(id int32, dataDir string) Config {
	return Config{
		NodeID: id, Broker: true, Controller: true, DataDir: dataDir,
		BrokerConfig:           broker.DefaultConfig(dataDir),
		ControllerConfig:       controller.DefaultConfig(id),
		ReplicationConfig:      replication.DefaultConfig(id),
		HeartbeatInterval:      2 * time.Second,
		MessageMaxBytes:        1048588,
		OffsetMetadataMaxBytes: 4096,
		ProduceMaxInFlight:     api.DefaultProduceMaxInFlight,
		TimestampBeforeMaxMs:   record.DefaultTimestampBeforeMaxMs,
		TimestampAfterMaxMs:    record.DefaultTimestampAfterMaxMs,
		// connections.max.idle.ms
		ConnectionsMaxIdle: 10 * time.Minute,
		TxnTopic:           coordinator.DefaultTransactionTopic(),
		OffsetsTopic:       coordinator.DefaultOffsetsTopic(),
		GroupConfig:        group.DefaultConfig(id),
		TxnConfig:          txn.DefaultConfig(id),
	}
}

// Node is a running Strand process.
type Node struct {
	cfg Config
	lg  *slog.Logger

	grpc    *grpc.Server // the client listener's
	extGRPC *grpc.Server // the external client listener's
	ibGRPC  *grpc.Server // the inter-broker listener's
	http    *http.Server
	health  *health.Server
	ln      net.Listener
	ibLn    net.Listener
	// peers admits the inter-broker listener's callers (api.PeerFilter).
	peers *api.PeerFilter
	// metaImg is the newest metadata image the broker's follower built,
	// acted on or not yet (the peer filter reads its brokers).
	metaImg atomic.Pointer[metadata.Image]
	pool    *rpc.Pool
	// markerPool is the transaction coordinator's own pool when MarkerDial is set.
	markerPool *rpc.Pool
	// gate refuses client requests until the node is ready (api.StartupGate).
	gate *api.StartupGate
	// ctrlCatchUp is, on a controller-only node, the Raft commit index it
	// must apply before it is ready (0: not known yet).
	ctrlCatchUp atomic.Uint64
	readyOnce   sync.Once

	Quorum     *controller.Quorum
	Controller *controller.Controller
	Gossip     *gossip.Gossip
	Remote     *channel.Remote
	Lifecycle  *channel.Lifecycle
	Parts      *broker.Manager
	Repl       *replication.Manager
	PIDs       *coordinator.ProducerIDManager
	Locator    *coordinator.Locator
	TxnClient  *txn.Client
	Groups     *group.Coordinator
	TxnCoord   *txn.Coordinator

	// metrics counts the front door's bytes, records and requests.
	metrics *api.Metrics
	// handler answers client requests for every front door (nil on a
	// controller-only node).
	handler *request.Handler
	// connMetrics counts the listeners' connections (api.ConnLimiter).
	connMetrics *api.ConnMetrics

	applied   atomic.Int64
	clusterID atomic.Pointer[string]
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	// suspectCtx bounds the gossip-triggered Suspect waits.
	suspectCtx    context.Context
	suspectCancel context.CancelFunc
	stopped       atomic.Bool
}

// Addr is the address clients dial (the client listener).
func (n *Node) Addr() string { return n.cfg.Advertise }

// InterBrokerAddr is the address other nodes dial (the inter-broker listener).
func (n *Node) InterBrokerAddr() string { return n.cfg.InterBrokerAdvertise }

// ID is the node id.
func (n *Node) ID() int32 { return n.cfg.NodeID }

// AppliedOffset is the metadata offset the broker has applied.
func (n *Node) AppliedOffset() int64 { return n.applied.Load() }

// Start brings a node up.
func Start(cfg Config) (*Node, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.Default()
	}
	lg = lg.With("node", cfg.NodeID)
	for _, b := range planted.Active() {
		lg.Warn("planted bug switched on: this node runs with a fixed bug put back (for rehearsing a checker; never in production)", "bug", b.String(), "env", planted.EnvVar)
	}
	if cfg.TestingFaults {
		lg.Warn("testing faults enabled: the metrics listener serves /debug/faults/ (for drills; never in production)", "metricsListen", cfg.MetricsListen)
	}
	if !cfg.Broker && !cfg.Controller {
		return nil, errors.New("a node needs at least one role: broker, controller")
	}
	applyFDBudget(&cfg, lg)
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, lg: lg}
	n.suspectCtx, n.suspectCancel = context.WithCancel(context.Background())
	ok := false
	defer func() {
		if !ok {
			n.shutdown(false)
		}
	}()
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
		}
	}
	n.ln = ln
	if n.cfg.Advertise == "" {
		n.cfg.Advertise = ln.Addr().String()
	}
	if err := n.listenInterBroker(); err != nil {
		return nil, err
	}
	meta, err := readMeta(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if meta.nodeID >= 0 && meta.nodeID != cfg.NodeID {
		return nil, fmt.Errorf("data directory %s belongs to node %d, not %d", cfg.DataDir, meta.nodeID, cfg.NodeID)
	}
	n.pool = rpc.NewPool(cfg.Dial)
	cid := meta.clusterID
	n.clusterID.Store(&cid)

	if cfg.Controller {
		q, err := controller.StartQuorum(controller.QuorumConfig{
			NodeID: cfg.NodeID, Dir: filepath.Join(cfg.DataDir, "controller"), Bind: cfg.ControllerListen, Advertise: cfg.ControllerAdvertise,
			Voters: cfg.Voters, Dial: cfg.RaftDial, Logger: lg,
			HeartbeatTimeout: cfg.QuorumTimeouts.Heartbeat, ElectionTimeout: cfg.QuorumTimeouts.Election,
			LeaderLeaseTimeout: cfg.QuorumTimeouts.LeaderLease, CommitTimeout: cfg.QuorumTimeouts.Commit,
		})
		if err != nil {
			return nil, err
		}
		n.Quorum = q
		cc := cfg.ControllerConfig
		cc.NodeID, cc.Logger = cfg.NodeID, lg
		n.Controller = controller.New(cc, q, cfg.Clock)
		n.Controller.Start()
	}
	if cfg.GossipListen != "" {
		raftAdv := cfg.ControllerAdvertise
		if raftAdv == "" {
			raftAdv = cfg.ControllerListen
		}
		g, err := gossip.Start(gossip.Config{
			Meta: gossip.Meta{NodeID: cfg.NodeID, Address: n.cfg.Advertise, InterBroker: n.cfg.InterBrokerAdvertise, RaftAddr: raftAdv, Broker: cfg.Broker, Controller: cfg.Controller},
			Bind: cfg.GossipListen, Advertise: cfg.GossipAdvertise, Join: cfg.Join, Logger: lg,
			OnDead: func(id int32) {
				if n.Controller != nil {
					go n.Controller.Suspect(n.suspectCtx, id, cfg.HeartbeatInterval)
				}
			},
		})
		if err != nil {
			return nil, err
		}
		n.Gossip = g
	}
	var localLeader func() int32
	if n.Quorum != nil {
		localLeader = n.Quorum.LeaderID
	}
	voters := make([]int32, 0, len(cfg.Voters))
	for _, v := range cfg.Voters {
		voters = append(voters, v.ID)
	}
	n.Remote = channel.NewRemote(n.pool, n.addressOf, func() []int32 { return voters }, localLeader)

	n.metrics = api.NewMetrics()
	n.connMetrics = api.NewConnMetrics()
	clientLimits, ibLimits, err := n.connectionLimits()
	if err != nil {
		return nil, err
	}
	clientConns := api.NewConnLimiter(clientLimits, n.connMetrics, lg)
	ibConns := api.NewConnLimiter(ibLimits, n.connMetrics, lg)
	deps := &api.Deps{NodeID: cfg.NodeID, Controller: n.Controller, ProduceMaxInFlight: cfg.ProduceMaxInFlight, Logger: lg, Metrics: n.metrics}
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	if cfg.Broker {
		bc := cfg.BrokerConfig
		bc.DataDir, bc.Logger = cfg.DataDir, lg
		parts, err := broker.Open(bc, cfg.Clock)
		if err != nil {
			return nil, err
		}
		n.Parts = parts
		n.Lifecycle = &channel.Lifecycle{NodeID: cfg.NodeID, IncarnationID: newIncarnation(), Address: n.cfg.Advertise, ExternalAddress: cfg.ExternalAdvertise,
			InterBrokerAddress: n.cfg.InterBrokerAdvertise, Rack: cfg.Rack,
			ClusterID: func() string { return *n.clusterID.Load() }, Interval: cfg.HeartbeatInterval, Remote: n.Remote, Applied: n.applied.Load, Logger: lg}
		n.applied.Store(-1)
		rc := cfg.ReplicationConfig
		rc.NodeID, rc.Logger = cfg.NodeID, lg
		n.Repl = replication.New(rc, parts, n.Remote, peers{n.pool}, n.Lifecycle.Epoch, cfg.Clock)
		n.Repl.Start()
		n.PIDs = coordinator.NewProducerIDManager(&blockSource{n: n}, lg)
		txnTopic, offTopic := cfg.TxnTopic, cfg.OffsetsTopic
		if cfg.Dev {
			txnTopic.ReplicationFactor, txnTopic.MinISR = 1, 1
			offTopic.ReplicationFactor, offTopic.MinISR = 1, 1
		}
		n.Locator = coordinator.NewLocator(n.Repl, n.Remote, txnTopic, offTopic)
		n.TxnClient = txn.NewClient(n.Locator, n.pool)
		gc := cfg.GroupConfig
		gc.NodeID, gc.Topic, gc.Logger = cfg.NodeID, offTopic, lg
		n.Groups = group.New(gc, n.Repl, n.Locator, n.TxnClient, cfg.Clock)
		n.Groups.Start()
		tc := cfg.TxnConfig
		tc.NodeID, tc.Topic, tc.Logger = cfg.NodeID, txnTopic, lg
		markerPool := n.pool
		if cfg.MarkerDial != nil {
			n.markerPool = rpc.NewPool(cfg.MarkerDial)
			markerPool = n.markerPool
		}
		n.TxnCoord = txn.New(tc, n.Repl, n.PIDs, markerPool, cfg.Clock)
		n.TxnCoord.Start()
		// The one request layer both front doors call (package request).
		n.handler = &request.Handler{NodeID: cfg.NodeID, Repl: n.Repl, Remote: n.Remote, PIDs: n.PIDs, MessageMaxBytes: cfg.MessageMaxBytes,
			TimestampBeforeMaxMs: cfg.TimestampBeforeMaxMs, TimestampAfterMaxMs: cfg.TimestampAfterMaxMs, Clock: cfg.Clock, Logger: lg,
			Locator: n.Locator, TxnCoord: n.TxnCoord, TxnClient: n.TxnClient, Groups: n.Groups, Metrics: n.metrics,
			OffsetMetadataMaxBytes: cfg.OffsetMetadataMaxBytes, TxnMaxTimeout: cfg.TxnConfig.MaxTimeout, ReadBuffer: api.ReadBuffer}
		deps.Handler = n.handler
		var src metadata.Source
		if n.Quorum != nil {
			src = n.Quorum.FSM
		} else {
			src = &channel.StreamSource{Remote: n.Remote, NodeID: cfg.NodeID}
		}
		n.wg.Add(1)
		go n.followMetadata(ctx, src, meta)
		n.Lifecycle.Start()
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			select {
			case <-n.Lifecycle.Registered():
				n.PIDs.Prefetch()
			case <-ctx.Done():
			}
		}()
	}
	// Client requests wait behind the gate until the node is ready; what
	// other nodes send arrives on the inter-broker listener, which has no
	// gate, so the ports can answer from the start.
	n.gate = api.NewStartupGate(n.notReadyMessage)
	n.health = health.NewServer()
	n.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	// The request metrics come first, so they count (and time) refusals too.
	common := append(api.ServerOptions(), api.ConnectionOptions(n.maxIdle())...)
	common = append(common, grpc.ChainUnaryInterceptor(n.metrics.Unary))
	clientOpts := append(slices.Clone(common), api.ClientConnectionOptions()...)
	clientOpts = append(clientOpts, n.gate.Interceptors(cfg.UnaryInterceptors...)...)
	n.grpc = grpc.NewServer(clientOpts...)
	api.RegisterClient(n.grpc, deps)
	healthpb.RegisterHealthServer(n.grpc, n.health)
	n.peers = api.NewPeerFilter(n.peerHosts, lg)
	ibOpts := append(slices.Clone(common), n.peers.Interceptors()...)
	ibOpts = append(ibOpts, grpc.ChainUnaryInterceptor(cfg.UnaryInterceptors...))
	n.ibGRPC = grpc.NewServer(ibOpts...)
	api.RegisterInterBroker(n.ibGRPC, deps)
	healthpb.RegisterHealthServer(n.ibGRPC, n.health)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		_ = n.WaitReady(ctx) // opens the gate
	}()
	n.wg.Add(2)
	go func() {
		defer n.wg.Done()
		_ = n.grpc.Serve(clientConns.Wrap(ln, "client"))
	}()
	go func() {
		defer n.wg.Done()
		_ = n.ibGRPC.Serve(ibConns.Wrap(n.ibLn, "inter_broker"))
	}()
	if cfg.ExternalListen != "" {
		eln, err := net.Listen("tcp", cfg.ExternalListen)
		if err != nil {
			return nil, fmt.Errorf("external listen %s: %w", cfg.ExternalListen, err)
		}
		ext := *deps
		ext.External = true
		n.extGRPC = grpc.NewServer(clientOpts...)
		api.RegisterClient(n.extGRPC, &ext)
		healthpb.RegisterHealthServer(n.extGRPC, n.health)
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			_ = n.extGRPC.Serve(clientConns.Wrap(eln, "external"))
		}()
	}
	if cfg.MetricsListen != "" {
		if err := n.startHTTP(cfg.MetricsListen); err != nil {
			return nil, fmt.Errorf("metrics listen %s: %w", cfg.MetricsListen, err)
		}
	}
	ok = true
	lg.Info("node started", "listen", n.cfg.Advertise, "interBroker", n.cfg.InterBrokerAdvertise, "broker", cfg.Broker, "controller", cfg.Controller, "dataDir", cfg.DataDir)
	return n, nil
}

// listenInterBroker opens the inter-broker listener and settles the
// address peers dial.
func (n *Node) listenInterBroker() error {
	ln := n.cfg.InterBrokerListener
	if ln == nil {
		addr := n.cfg.InterBrokerListen
		if addr == "" {
			h, _, err := net.SplitHostPort(n.cfg.Listen)
			if err != nil && n.ln != nil {
				h, _, _ = net.SplitHostPort(n.ln.Addr().String())
			}
			addr = net.JoinHostPort(h, "0")
		}
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			return fmt.Errorf("inter-broker listen %s: %w", addr, err)
		}
	}
	n.ibLn = ln
	if n.cfg.InterBrokerAdvertise == "" {
		bound := ln.Addr().(*net.TCPAddr)
		n.cfg.InterBrokerAdvertise = ln.Addr().String()
		if bound.IP.IsUnspecified() {
			if h := api.HostOf(n.cfg.Advertise); h != "" {
				n.cfg.InterBrokerAdvertise = net.JoinHostPort(h, strconv.Itoa(bound.Port))
			}
		}
	}
	return nil
}

// peerHosts lists the hosts the inter-broker listener admits calls from
// (api.PeerFilter): every controller voter's, this node's, and every
// registered broker's, from the freshest metadata this node has; version
// is that metadata's offset.
func (n *Node) peerHosts() (int64, []string) {
	var hosts []string
	add := func(addr string) {
		if h := api.HostOf(addr); h != "" {
			hosts = append(hosts, h)
		}
	}
	for _, v := range n.cfg.Voters {
		add(v.Addr)
	}
	add(n.cfg.Advertise)
	add(n.cfg.InterBrokerAdvertise)
	add(n.cfg.ControllerAdvertise)
	img := n.metaImg.Load()
	if n.Quorum != nil {
		if fi := n.Quorum.FSM.Image(); img == nil || fi.Offset > img.Offset {
			img = fi
		}
	}
	version := int64(-1)
	if img != nil {
		version = img.Offset
		for _, b := range img.Brokers {
			add(b.Address)
			add(b.InterBrokerAddress)
		}
	}
	return version, hosts
}

// followMetadata applies committed metadata to the broker's image in order.
//
// A starting broker follows the metadata log without acting on it until the
// log holds this incarnation's own registration (its broker epoch is that
// record's offset), as a Kafka broker waits for its initial metadata
// catch-up: a node restarted with an old Raft log replays history, and
// applying it would make the broker lead partitions and coordinate
// transactions at epochs the cluster left long ago (after a full restart
// such a node wrote stale transaction markers). Once caught up, the broker
// applies the whole image at once; from then on, every batch in order.
func (n *Node) followMetadata(ctx context.Context, src metadata.Source, meta nodeMeta) {
	defer n.wg.Done()
	img := metadata.EmptyImage()
	caughtUp := false
	for ctx.Err() == nil {
		sctx, cancel := ctx, context.CancelFunc(func() {})
		if !caughtUp {
			// The registration may be answered after its record was
			// applied here: look again without waiting for a new batch.
			sctx, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
		}
		batches, err := src.Since(sctx, img.Offset)
		lookAgain := sctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err != nil && !lookAgain {
			if ctx.Err() == nil {
				n.lg.Debug("metadata follow", "err", err)
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		for _, b := range batches {
			next, d, err := metadata.Apply(img, b)
			if err != nil {
				n.lg.Warn("metadata batch refused", "offset", b.Offset, "err", err)
				continue
			}
			img = next
			n.metaImg.Store(img)
			if caughtUp {
				n.Repl.Apply(img, d)
				n.applied.Store(img.Offset)
			}
			if meta.clusterID == "" && img.ClusterID != "" {
				meta.clusterID = img.ClusterID
				meta.nodeID = n.cfg.NodeID
				cid := img.ClusterID
				n.clusterID.Store(&cid)
				if err := writeMeta(n.cfg.DataDir, meta); err != nil {
					n.lg.Error("write meta.properties", "err", err)
				}
			}
		}
		if epoch := n.Lifecycle.Epoch(); !caughtUp && epoch > 0 && img.Offset >= epoch {
			caughtUp = true
			n.lg.Info("metadata caught up with this broker's registration; acting on it", "offset", img.Offset, "brokerEpoch", epoch)
			n.Repl.Apply(img, metadata.SnapshotDelta(metadata.EmptyImage(), img))
			n.applied.Store(img.Offset)
		}
	}
}

// addressOf maps a node id to the address of its inter-broker listener,
// what this node dials for the internal RPCs.
func (n *Node) addressOf(id int32) string {
	if id == n.cfg.NodeID {
		return n.cfg.InterBrokerAdvertise
	}
	if n.Repl != nil {
		if b := n.Repl.Image().Brokers[id]; b != nil {
			return b.PeerAddress()
		}
	}
	if n.Quorum != nil {
		if b := n.Quorum.FSM.Image().Brokers[id]; b != nil {
			return b.PeerAddress()
		}
	}
	if n.Gossip != nil {
		return n.Gossip.PeerAddress(id)
	}
	return ""
}

// WaitReady blocks until the node is ready (Ready). The first time the
// node is, it starts serving clients before WaitReady returns. WaitReady
// asks again each time it is called, so after a fencing it waits for the
// node to be unfenced again.
func (n *Node) WaitReady(ctx context.Context) error {
	for {
		if n.Ready() {
			n.serveClients()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %d not ready: %w", n.cfg.NodeID, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// serveClients opens the start-up gate and turns health SERVING, the first
// time the node is ready (whoever sees it ready, the node's own watcher or
// a WaitReady caller, finds clients served). The gate first: whoever sees
// SERVING is served.
func (n *Node) serveClients() {
	n.readyOnce.Do(func() {
		n.gate.Open()
		n.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
		n.lg.Info("node ready: serving clients")
	})
}

// Ready reports whether the node can serve clients now:
//
//   - with the broker role (alone or with the controller): the broker is
//     registered with the active controller (it has a broker epoch), the
//     controller has unfenced it, and the broker has applied the metadata
//     log up to its own registration and unfencing, so its image lists it
//     as a live broker (a node with both roles needs nothing more of its
//     controller: its broker's metadata is its controller's log, and the
//     registration needed an active controller);
//   - controller-only: the quorum has a leader this node knows, and the
//     node has applied its Raft log up to the commit index it learned
//     once it knew the leader. Such a node registers no client service;
//     readiness is what its health check reports.
func (n *Node) Ready() bool {
	if n.Lifecycle == nil {
		return n.controllerReady()
	}
	epoch := n.Lifecycle.Epoch()
	if epoch <= 0 || n.Lifecycle.Fenced() || n.AppliedOffset() < epoch {
		return false
	}
	b := n.Repl.Image().Brokers[n.cfg.NodeID]
	return b != nil && b.Epoch == epoch && !b.Fenced
}

func (n *Node) controllerReady() bool {
	if n.Quorum.LeaderID() < 0 {
		return false
	}
	target := n.ctrlCatchUp.Load()
	if target == 0 {
		if target = n.Quorum.Raft.CommitIndex(); target == 0 {
			return false
		}
		n.ctrlCatchUp.Store(target)
	}
	return n.Quorum.Raft.AppliedIndex() >= target
}

// notReadyMessage is what a starting node answers client requests with
// (after BROKER_NOT_AVAILABLE): what it is and what it waits for.
func (n *Node) notReadyMessage() string {
	what := "it serves clients once its broker is registered with the controller, unfenced and caught up with the metadata log"
	if n.Lifecycle == nil {
		what = "a controller-only node is ready once it knows the active controller and has caught up with the metadata log"
	}
	return fmt.Sprintf("node %d is starting: %s; %s", n.cfg.NodeID, what, n.waitingFor())
}

func (n *Node) waitingFor() string {
	if n.Lifecycle == nil {
		if n.Quorum.LeaderID() < 0 {
			return "waiting for the controller quorum to elect a leader"
		}
		return "catching up with the metadata log"
	}
	epoch := n.Lifecycle.Epoch()
	switch {
	case epoch <= 0:
		if leader := n.Remote.LeaderHint(); leader >= 0 {
			return fmt.Sprintf("waiting to register with the active controller (node %d)", leader)
		}
		return "waiting to register with the active controller (none known yet)"
	case n.AppliedOffset() < epoch:
		return fmt.Sprintf("registered with broker epoch %d, catching up with the metadata log", epoch)
	case n.Lifecycle.Fenced():
		return fmt.Sprintf("registered with broker epoch %d and caught up, waiting for the controller to unfence it", epoch)
	default:
		return fmt.Sprintf("unfenced with broker epoch %d, applying its unfencing from the metadata log", epoch)
	}
}

// Stop shuts the node down cleanly: a controlled shutdown first (its
// partitions move), then every log closed cleanly.
func (n *Node) Stop() error { return n.shutdown(true) }

// StorageFailed is closed when an fsync of one of this broker's logs
// fails; StorageErr says which. The node's storage is then not trusted:
// like Kafka with every log directory failed, the node should stop, so
// that leadership moves and recovery re-checks the logs at the restart
// (`strand server` does). Nil without the broker role.
func (n *Node) StorageFailed() <-chan struct{} {
	if n.Parts == nil {
		return nil
	}
	return n.Parts.LogStats().StorageFailed()
}

// StorageErr is the failed fsync StorageFailed reported, or nil.
func (n *Node) StorageErr() error {
	if n.Parts == nil {
		return nil
	}
	return n.Parts.LogStats().StorageErr()
}

// Kill stops the node as a crash would: no controlled shutdown, logs left
// without a clean close (tests; the data stays like the page cache keeps it).
func (n *Node) Kill() { n.shutdown(false) }

func (n *Node) shutdown(clean bool) error {
	if !n.stopped.CompareAndSwap(false, true) {
		return nil
	}
	var errsOut []error
	if n.Lifecycle != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		n.Lifecycle.Stop(ctx, clean)
		cancel()
	}
	if n.health != nil {
		n.health.Shutdown()
	}
	n.stopHTTP()
	if n.extGRPC != nil {
		n.extGRPC.Stop()
	}
	var stops sync.WaitGroup
	for _, s := range []struct {
		srv *grpc.Server
		ln  net.Listener
	}{{n.grpc, n.ln}, {n.ibGRPC, n.ibLn}} {
		switch {
		case s.srv != nil && clean:
			stops.Add(1)
			go func() {
				defer stops.Done()
				done := make(chan struct{})
				go func() { s.srv.GracefulStop(); close(done) }()
				select {
				case <-done:
				case <-time.After(3 * time.Second):
					s.srv.Stop()
				}
			}()
		case s.srv != nil:
			s.srv.Stop()
		case s.ln != nil:
			s.ln.Close()
		}
	}
	stops.Wait()
	if n.cancel != nil {
		n.cancel()
	}
	n.suspectCancel()
	n.wg.Wait() // the metadata follower is done: nothing calls Repl.Apply now
	if n.Repl != nil {
		n.Repl.Stop()
	}
	if n.PIDs != nil {
		n.PIDs.Stop()
	}
	if n.Groups != nil {
		n.Groups.Stop()
	}
	if n.TxnCoord != nil {
		n.TxnCoord.Stop()
	}
	if n.Parts != nil {
		if clean {
			if err := n.Parts.Close(); err != nil {
				errsOut = append(errsOut, err)
			}
		} else {
			n.Parts.Abandon()
		}
	}
	if n.Controller != nil {
		n.Controller.Stop()
	}
	if n.Quorum != nil {
		if err := n.Quorum.Close(); err != nil {
			errsOut = append(errsOut, err)
		}
	}
	if n.Gossip != nil {
		if clean {
			n.Gossip.Stop()
		} else {
			n.Gossip.Kill()
		}
	}
	if n.pool != nil {
		n.pool.Close()
	}
	if n.markerPool != nil {
		n.markerPool.Close()
	}
	return errors.Join(errsOut...)
}

type peers struct{ pool *rpc.Pool }

func (p peers) Consumer(addr string) (pb.ConsumerClient, error) {
	c, err := p.pool.Get(addr)
	if err != nil {
		return nil, err
	}
	return pb.NewConsumerClient(c), nil
}

// blockSource allocates producer-id blocks through the controller quorum.
type blockSource struct{ n *Node }

func (b *blockSource) AllocateBlock(ctx context.Context) (int64, int32, error) {
	epoch := b.n.Lifecycle.Epoch()
	if epoch == 0 {
		return 0, 0, errs.New(pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS, "broker %d is not registered yet", b.n.cfg.NodeID)
	}
	resp, err := b.n.Remote.AllocateProducerIds(ctx, &pb.AllocateProducerIdsRequest{BrokerId: b.n.cfg.NodeID, BrokerEpoch: epoch})
	if err != nil {
		return 0, 0, err
	}
	if err := errs.FromCode(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return 0, 0, err
	}
	return resp.ProducerIdStart, resp.ProducerIdLen, nil
}

func newIncarnation() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Handler is the request layer this node's front doors call: client
// requests as plain Go methods (package request). Nil on a
// controller-only node. Its External is false: a front door on an
// external listener uses Handler().ForListener(true).
func (n *Node) Handler() *request.Handler { return n.handler }
