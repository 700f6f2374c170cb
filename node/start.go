package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/strand-io/strand/api"
	"github.com/strand-io/strand/api/kafka"
	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/controller"
	"github.com/strand-io/strand/controller/channel"
	"github.com/strand-io/strand/coordinator"
	"github.com/strand-io/strand/coordinator/group"
	"github.com/strand-io/strand/coordinator/txn"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/gossip"
	"github.com/strand-io/strand/metadata"
	"github.com/strand-io/strand/replication"
	"github.com/strand-io/strand/request"
)

// The steps of Start (node.go), in the order it takes them. A step that
// fails returns its error; Start then shuts down what the steps before it
// started.

// startController starts this node's Raft voter and the controller logic
// on it.
func (n *Node) startController(cfg Config) error {
	raftServer, raftClient := n.raftTLS()
	var checkPeer func(tls.ConnectionState) error
	if raftServer != nil {
		checkPeer = n.sec.CheckBroker
	}
	q, err := controller.StartQuorum(controller.QuorumConfig{
		ServerTLS: raftServer, ClientTLS: raftClient, CheckPeer: checkPeer,
		NodeID: cfg.NodeID, Dir: filepath.Join(cfg.DataDir, "controller"), Bind: cfg.ControllerListen, Advertise: cfg.ControllerAdvertise,
		Listener: cfg.ControllerListener,
		Voters:   cfg.Voters, Dial: cfg.RaftDial, Logger: n.lg,
		HeartbeatTimeout: cfg.QuorumTimeouts.Heartbeat, ElectionTimeout: cfg.QuorumTimeouts.Election,
		LeaderLeaseTimeout: cfg.QuorumTimeouts.LeaderLease, CommitTimeout: cfg.QuorumTimeouts.Commit,
	})
	if err != nil {
		return err
	}
	n.Quorum = q
	cc := cfg.ControllerConfig
	cc.NodeID, cc.Logger = cfg.NodeID, n.lg
	cc.Probe = func(id int32) bool {
		g := n.gossipNow.Load()
		return g == nil || g.Probe(id) // no gossip: no early fence
	}
	n.Controller = controller.New(cc, q, cfg.Clock)
	n.Controller.Start()
	return nil
}

// startGossip joins the memberlist pool; a member seen dead makes the
// active controller (if it runs here) suspect that broker early.
func (n *Node) startGossip(cfg Config) error {
	raftAdv := cfg.ControllerAdvertise
	if raftAdv == "" {
		raftAdv = cfg.ControllerListen
		if cfg.ControllerListener != nil {
			raftAdv = cfg.ControllerListener.Addr().String()
		}
	}
	g, err := gossip.Start(gossip.Config{SecretKey: n.sec.GossipKey(),
		Meta: gossip.Meta{NodeID: cfg.NodeID, Address: n.cfg.Advertise, InterBroker: n.cfg.InterBrokerAdvertise, RaftAddr: raftAdv, Broker: cfg.Broker, Controller: cfg.Controller},
		Bind: cfg.GossipListen, Advertise: cfg.GossipAdvertise, Join: cfg.Join, Logger: n.lg,
		Transport: cfg.GossipTransport,
		OnDead: func(id int32) {
			if n.Controller != nil {
				go n.Controller.Suspect(n.suspectCtx, id, cfg.HeartbeatInterval)
			}
		},
	})
	if err != nil {
		return err
	}
	n.Gossip = g
	n.gossipNow.Store(g)
	return nil
}

// startBroker opens the partitions and starts the broker's roles:
// replication, the producer-id manager, the coordinators, the request
// layer, the metadata follower and the lifecycle (registration and
// heartbeats). Their goroutines stop with ctx and n.wg.
func (n *Node) startBroker(ctx context.Context, cfg Config, meta nodeMeta, deps *api.Deps) error {
	bc := cfg.BrokerConfig
	bc.DataDir, bc.Logger = cfg.DataDir, n.lg
	if cfg.FS != nil {
		bc.Log.FS = cfg.FS
	}
	parts, err := broker.Open(bc, cfg.Clock)
	if err != nil {
		return err
	}
	n.Parts = parts
	n.Lifecycle = &channel.Lifecycle{NodeID: cfg.NodeID, IncarnationID: newIncarnation(), Address: n.cfg.Advertise, ExternalAddress: cfg.ExternalAdvertise,
		InterBrokerAddress: n.cfg.InterBrokerAdvertise, KafkaAddress: n.cfg.KafkaAdvertise, Rack: cfg.Rack,
		ClusterID: func() string { return *n.clusterID.Load() }, Interval: cfg.HeartbeatInterval, Remote: n.Remote, Applied: n.applied.Load, Logger: n.lg}
	n.applied.Store(-1)
	rc := cfg.ReplicationConfig
	rc.NodeID, rc.Logger = cfg.NodeID, n.lg
	n.Repl = replication.New(rc, parts, n.Remote, peers{n.pool}, n.Lifecycle.Epoch, cfg.Clock)
	n.Repl.Start()
	n.PIDs = coordinator.NewProducerIDManager(&blockSource{n: n}, n.lg)
	txnTopic, offTopic := cfg.TxnTopic, cfg.OffsetsTopic
	if cfg.Dev {
		txnTopic.ReplicationFactor, txnTopic.MinISR = 1, 1
		offTopic.ReplicationFactor, offTopic.MinISR = 1, 1
	}
	n.Locator = coordinator.NewLocator(n.Repl, n.Remote, txnTopic, offTopic, n.lg)
	n.TxnClient = txn.NewClient(n.Locator, n.pool)
	gc := cfg.GroupConfig
	gc.NodeID, gc.Topic, gc.Logger = cfg.NodeID, offTopic, n.lg
	n.Groups = group.New(gc, n.Repl, n.Locator, n.TxnClient, cfg.Clock)
	n.Groups.Start()
	tc := cfg.TxnConfig
	tc.NodeID, tc.Topic, tc.Logger = cfg.NodeID, txnTopic, n.lg
	markerPool := n.pool
	if cfg.MarkerDial != nil {
		n.markerPool = n.newPool(cfg.MarkerDial, auth.ListenerInterBroker)
		markerPool = n.markerPool
	}
	n.TxnCoord = txn.New(tc, n.Repl, n.PIDs, markerPool, cfg.Clock)
	n.TxnCoord.Start()
	// The one request layer both front doors call (package request).
	n.handler = &request.Handler{NodeID: cfg.NodeID, Repl: n.Repl, Remote: n.Remote, PIDs: n.PIDs, MessageMaxBytes: cfg.MessageMaxBytes,
		TimestampBeforeMaxMs: cfg.TimestampBeforeMaxMs, TimestampAfterMaxMs: cfg.TimestampAfterMaxMs, Clock: cfg.Clock,
		Locator: n.Locator, TxnCoord: n.TxnCoord, TxnClient: n.TxnClient, Groups: n.Groups, Metrics: n.metrics,
		OffsetMetadataMaxBytes: cfg.OffsetMetadataMaxBytes, TxnMaxTimeout: cfg.TxnConfig.MaxTimeout, ReadBuffer: api.ReadBuffer,
		Authorizer: n.authorizer()}
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
	return nil
}

// serve builds the gRPC servers (client, inter-broker and, if configured,
// external) and serves them on their listeners.
func (n *Node) serve(ctx context.Context, cfg Config, deps *api.Deps, ln net.Listener, clientConns, ibConns *api.ConnLimiter) error {
	// Client requests wait behind the gate until the node is ready; what
	// other nodes send arrives on the inter-broker listener, which has no
	// gate, so the ports can answer from the start.
	n.gate = api.NewStartupGate(n.notReadyMessage)
	n.health = health.NewServer()
	n.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	// The request metrics come first, so they count (and time) refusals too.
	common := append(api.ServerOptions(), api.ConnectionOptions(n.maxIdle())...)
	common = append(common, grpc.ChainUnaryInterceptor(n.metrics.Unary))
	// Each listener: its TLS credentials (if SSL), then the session of
	// every request (api.SessionInterceptors; a test's fixed session
	// replaces it).
	clientOpts := func(listener string) []grpc.ServerOption {
		o := append(slices.Clone(common), api.ClientConnectionOptions()...)
		o = append(o, n.serverCreds(listener)...)
		o = append(o, api.SessionInterceptors(n.sec, listener)...)
		if cfg.TestSession != nil {
			o = append(o, api.TestSessionOptions(*cfg.TestSession)...)
		}
		o = append(o, n.gate.Interceptors(cfg.UnaryInterceptors...)...)
		// SASL: a valid session token replaces the session's principal.
		o = append(o, deps.SASL.Interceptors(n.listenerProtocol(cfg, listener), listener)...)
		o = append(o, testingSessionOptions(cfg.TestingGRPCSession)...) // quotas.go; TEST-ONLY
		// The quotas last: they charge the session's principal.
		return append(o, grpc.ChainUnaryInterceptor(deps.QuotaUnary()))
	}
	n.grpc = grpc.NewServer(clientOpts(auth.ListenerClient)...)
	api.RegisterClient(n.grpc, deps)
	healthpb.RegisterHealthServer(n.grpc, n.health)
	n.peers = api.NewPeerFilter(n.peerHosts, n.lg)
	ibOpts := append(slices.Clone(common), n.serverCreds(auth.ListenerInterBroker)...)
	ibOpts = append(ibOpts, api.SessionInterceptors(n.sec, auth.ListenerInterBroker)...)
	ibOpts = append(ibOpts, n.peers.Interceptors()...)
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
	if n.kafkaLn != nil && n.handler != nil {
		kh := n.handler.ForListener(request.ListenerKafka)
		if kh.Metrics == nil && deps.Metrics != nil {
			kh.Metrics = deps.Metrics
		}
		n.kafka = kafka.NewServer(kafka.Config{Handler: kh, Logger: n.lg, MaxRequestBytes: cfg.SocketRequestMaxBytes,
			IdleTimeout: n.maxIdle(), Metrics: n.kafkaMetrics, Security: n.sec, TestSession: cfg.TestSession,
			SecurityProtocol: n.listenerProtocol(cfg, auth.ListenerKafka), SASLMechanisms: cfg.SASL.EnabledMechanisms,
			FailedAuthenticationDelay: cfg.SASL.kafkaFailedAuthDelay(),
			Quotas:                    n.quotas, Clock: cfg.Quotas.Clock, TestingSession: cfg.TestingKafkaSession})
		// Wrapped now, with the other listeners: wrapping it later could
		// race the limiter's last listener closing at shutdown.
		kln := clientConns.Wrap(n.kafkaLn, "kafka")
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			// Like the gRPC client listener's gate: Kafka clients are
			// served once the node is ready (connections wait in the
			// accept queue until then).
			if n.WaitReady(ctx) != nil {
				kln.Close()
				return
			}
			_ = n.kafka.Serve(kln) // closes kln when it returns
		}()
	}
	if cfg.ExternalListen != "" {
		eln, err := net.Listen("tcp", cfg.ExternalListen)
		if err != nil {
			return fmt.Errorf("external listen %s: %w", cfg.ExternalListen, err)
		}
		ext := *deps
		ext.External = true
		n.extGRPC = grpc.NewServer(clientOpts(auth.ListenerExternal)...)
		api.RegisterClient(n.extGRPC, &ext)
		healthpb.RegisterHealthServer(n.extGRPC, n.health)
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			_ = n.extGRPC.Serve(clientConns.Wrap(eln, "external"))
		}()
	}
	return nil
}
