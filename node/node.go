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
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"

	"github.com/strand-io/strand/api"
	"github.com/strand-io/strand/api/kafka"
	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/controller"
	"github.com/strand-io/strand/controller/channel"
	"github.com/strand-io/strand/coordinator"
	"github.com/strand-io/strand/coordinator/group"
	"github.com/strand-io/strand/coordinator/txn"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/gossip"
	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/internal/tlsconf"
	"github.com/strand-io/strand/internal/wire"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/quota"
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
	kafkaLn net.Listener  // the Kafka listener's (nil: none)
	kafka   *kafka.Server // serves kafkaLn once the node is ready
	// kafkaMetrics are the Kafka listener's (registered even without one).
	kafkaMetrics *kafka.Metrics
	// quotas enforces the client quotas, set from the image.
	quotas *quota.Manager
	// saslTokens are the gRPC SASL session tokens (Close at shutdown).
	saslTokens *api.SASLTokens
	// peers admits the inter-broker listener's callers (api.PeerFilter).
	peers *api.PeerFilter
	// metaImg is the newest metadata image the broker's follower built,
	// acted on or not yet (the peer filter reads its brokers).
	metaImg atomic.Pointer[metadata.Image]
	pool    *wire.Pool
	// markerPool is the transaction coordinator's own pool when MarkerDial is set.
	markerPool *wire.Pool
	// clientPool reaches other brokers' client listeners (the console)
	// when they speak another protocol than the inter-broker ones; nil:
	// pool reaches both.
	clientPool *wire.Pool
	// sec is the node's transport security (listener protocols, TLS
	// material, the sessions certificates prove).
	sec *tlsconf.Security
	// gate refuses client requests until the node is ready (api.StartupGate).
	gate *api.StartupGate
	// ctrlCatchUp is, on a controller-only node, the Raft commit index it
	// must apply before it is ready (0: not known yet).
	ctrlCatchUp atomic.Uint64
	readyOnce   sync.Once

	Quorum     *controller.Quorum
	Controller *controller.Controller
	Gossip     *gossip.Gossip
	// gossipNow is Gossip for goroutines started before it (the
	// controller's probes).
	gossipNow atomic.Pointer[gossip.Gossip]
	Remote    *channel.Remote
	Lifecycle *channel.Lifecycle
	Parts     *broker.Manager
	Repl      *replication.Manager
	PIDs      *coordinator.ProducerIDManager
	Locator   *coordinator.Locator
	TxnClient *txn.Client
	Groups    *group.Coordinator
	TxnCoord  *txn.Coordinator

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
	if err := cfg.SASL.checkFailedAuthDelay(maxIdle(cfg)); err != nil {
		return nil, err
	}
	applyFDBudget(&cfg, lg)
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	if cfg.Quotas.Clock == nil {
		cfg.Quotas.Clock = cfg.Clock
	}
	n := &Node{cfg: cfg, lg: lg, kafkaMetrics: kafka.NewMetrics(), quotas: quota.New(cfg.Quotas)}
	sec, err := tlsconf.New(cfg.Security.Config, lg)
	if err != nil {
		return nil, err
	}
	n.sec = sec
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
	if err := n.listenKafka(); err != nil {
		return nil, err
	}
	meta, err := readMeta(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if meta.nodeID >= 0 && meta.nodeID != cfg.NodeID {
		return nil, fmt.Errorf("data directory %s belongs to node %d, not %d", cfg.DataDir, meta.nodeID, cfg.NodeID)
	}
	n.pool = n.newPool(cfg.Dial, auth.ListenerInterBroker)
	if !n.sameWire() {
		n.clientPool = n.newPool(cfg.Dial, auth.ListenerClient)
	}
	cid := meta.clusterID
	n.clusterID.Store(&cid)

	if cfg.Controller {
		if err := n.startController(cfg); err != nil {
			return nil, err
		}
	}
	if cfg.GossipListen != "" || cfg.GossipTransport != nil {
		if err := n.startGossip(cfg); err != nil {
			return nil, err
		}
	}
	var localLeader func() int32
	if n.Quorum != nil {
		localLeader = n.Quorum.LeaderID
	}
	voters := make([]int32, 0, len(cfg.Voters))
	for _, v := range cfg.Voters {
		voters = append(voters, v.ID)
	}
	// Where to look for the active controller when no hint names it: on a
	// controller node the quorum's current voters (they change with
	// AddVoter and RemoveVoter), else the configured ones; then any node
	// gossip reports with the controller role (a broker started before a
	// voter change still finds the new voters).
	voterIDs := func() []int32 {
		out := voters
		if n.Quorum != nil {
			if cur := n.Quorum.Voters(); len(cur) > 0 {
				out = make([]int32, 0, len(cur))
				for _, v := range cur {
					out = append(out, v.ID)
				}
			}
		}
		if n.Gossip != nil {
			var extra []int32
			for id, m := range n.Gossip.Members() {
				if m.Controller && !slices.Contains(out, id) {
					extra = append(extra, id)
				}
			}
			if len(extra) > 0 {
				slices.Sort(extra)
				out = append(slices.Clone(out), extra...)
			}
		}
		return out
	}
	n.Remote = channel.NewRemote(n.pool, n.addressOf, voterIDs, localLeader)

	n.metrics = api.NewMetrics()
	n.connMetrics = api.NewConnMetrics()
	clientLimits, ibLimits, err := n.connectionLimits()
	if err != nil {
		return nil, err
	}
	clientConns := api.NewConnLimiter(clientLimits, n.connMetrics, lg)
	ibConns := api.NewConnLimiter(ibLimits, n.connMetrics, lg)
	deps := &api.Deps{NodeID: cfg.NodeID, Controller: n.Controller, ProduceMaxInFlight: cfg.ProduceMaxInFlight, Logger: lg, Metrics: n.metrics,
		SASL: cfg.SASL.tokens(), Quotas: n.quotas, QuotaClock: cfg.Quotas.Clock}
	n.saslTokens = deps.SASL
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	if cfg.Broker {
		if err := n.startBroker(ctx, cfg, meta, deps); err != nil {
			return nil, err
		}
	}
	if err := n.serve(ctx, cfg, deps, ln, clientConns, ibConns); err != nil {
		return nil, err
	}
	if cfg.MetricsListen != "" {
		if err := n.startHTTP(cfg.MetricsListen); err != nil {
			return nil, fmt.Errorf("metrics listen %s: %w", cfg.MetricsListen, err)
		}
	}
	ok = true
	lg.Info("node started", "listen", n.cfg.Advertise, "interBroker", n.cfg.InterBrokerAdvertise, "kafka", n.cfg.KafkaAdvertise, "broker", cfg.Broker, "controller", cfg.Controller, "dataDir", cfg.DataDir)
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
		n.cfg.InterBrokerAdvertise = ln.Addr().String()
		if bound, ok := ln.Addr().(*net.TCPAddr); ok && bound.IP.IsUnspecified() {
			if h := api.HostOf(n.cfg.Advertise); h != "" {
				n.cfg.InterBrokerAdvertise = net.JoinHostPort(h, strconv.Itoa(bound.Port))
			}
		}
	}
	return nil
}

// listenKafka opens the Kafka listener, if configured, and settles the
// address Kafka clients are handed.
func (n *Node) listenKafka() error {
	ln := n.cfg.KafkaListener
	if ln == nil {
		if n.cfg.KafkaListen == "" || !n.cfg.Broker {
			return nil
		}
		var err error
		if ln, err = net.Listen("tcp", n.cfg.KafkaListen); err != nil {
			return fmt.Errorf("kafka listen %s: %w", n.cfg.KafkaListen, err)
		}
	}
	n.kafkaLn = ln
	if n.cfg.KafkaAdvertise == "" {
		n.cfg.KafkaAdvertise = ln.Addr().String()
		if bound, ok := ln.Addr().(*net.TCPAddr); ok && bound.IP.IsUnspecified() {
			if h := api.HostOf(n.cfg.Advertise); h != "" {
				n.cfg.KafkaAdvertise = net.JoinHostPort(h, strconv.Itoa(bound.Port))
			}
		}
	}
	return nil
}

// KafkaAddr is the Kafka listener's advertised address ("" = none).
func (n *Node) KafkaAddr() string { return n.cfg.KafkaAdvertise }

// KafkaMetrics are the Kafka listener's metrics (also on /metrics).
func (n *Node) KafkaMetrics() *kafka.Metrics { return n.kafkaMetrics }

// Quotas is the node's client-quota manager.
func (n *Node) Quotas() *quota.Manager { return n.quotas }

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
// controller-only node. It answers as the gRPC client listener: a front
// door on another listener uses Handler().ForListener.
func (n *Node) Handler() *request.Handler { return n.handler }
