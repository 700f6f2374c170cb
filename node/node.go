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
	"github.com/strand-io/strand/internal/wire"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/replication"
	"github.com/strand-io/strand/request"
)

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
	pool    *wire.Pool
	// markerPool is the transaction coordinator's own pool when MarkerDial is set.
	markerPool *wire.Pool
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
	n.pool = wire.NewPool(cfg.Dial)
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
			n.markerPool = wire.NewPool(cfg.MarkerDial)
			markerPool = n.markerPool
		}
		n.TxnCoord = txn.New(tc, n.Repl, n.PIDs, markerPool, cfg.Clock)
		n.TxnCoord.Start()
		// The one request layer both front doors call (package request).
		n.handler = &request.Handler{NodeID: cfg.NodeID, Repl: n.Repl, Remote: n.Remote, PIDs: n.PIDs, MessageMaxBytes: cfg.MessageMaxBytes,
			TimestampBeforeMaxMs: cfg.TimestampBeforeMaxMs, TimestampAfterMaxMs: cfg.TimestampAfterMaxMs, Clock: cfg.Clock,
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

type peers struct{ pool *wire.Pool }

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
