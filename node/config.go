package node

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/memberlist"
	"google.golang.org/grpc"

	"github.com/strand-io/strand/api"
	"github.com/strand-io/strand/api/kafka"
	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/controller"
	"github.com/strand-io/strand/coordinator"
	"github.com/strand-io/strand/coordinator/group"
	"github.com/strand-io/strand/coordinator/txn"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/wire"
	"github.com/strand-io/strand/quota"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/replication"
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
	// KafkaListen / KafkaAdvertise: the Kafka wire-protocol listener
	// (api/kafka; "" = none). Brokers register KafkaAdvertise, which
	// Metadata and FindCoordinator hand out to Kafka clients; an empty one
	// is Advertise's host with the port bound when the listen host names
	// every interface, else the bound address.
	KafkaListen, KafkaAdvertise string
	// KafkaListener, if set, is used instead of listening on KafkaListen (tests).
	KafkaListener net.Listener
	// SASL: mechanisms and which client listeners require SASL (sasl.go).
	SASL SASLConfig
	// SocketRequestMaxBytes is socket.request.max.bytes for the Kafka
	// listener (0: 100 MiB).
	SocketRequestMaxBytes int32
	// MetricsListen serves /metrics and /debug/pprof over HTTP ("" = off).
	MetricsListen string
	// ControllerListen / ControllerAdvertise: the Raft transport.
	ControllerListen, ControllerAdvertise string
	// ControllerListener, if set, is the Raft listener instead of
	// listening on ControllerListen (tests, an in-memory network); Raft
	// dials then go through RaftDial.
	ControllerListener net.Listener
	// GossipListen / GossipAdvertise: memberlist; Join lists seeds.
	GossipListen, GossipAdvertise string
	Join                          []string
	DataDir                       string
	Voters                        []controller.Voter
	Dev                           bool
	Rack                          string

	// GossipTransport, if set, carries gossip instead of sockets (tests and
	// simulations: testkit/memnet's GossipNet); gossip then runs even
	// with GossipListen empty, and Join should list IP:port seeds.
	GossipTransport memberlist.Transport

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
	Dial wire.DialFunc
	// RaftDial routes outgoing Raft connections.
	RaftDial wire.DialFunc
	// MarkerDial routes the transaction coordinator's WriteTxnMarkers
	// connections (default: Dial), so a drill can hold markers alone.
	MarkerDial wire.DialFunc
	Clock      clock.Clock
	// FS holds the broker's files under DataDir: every partition's log,
	// indexes, snapshots and checkpoints, and the broker's
	// recovery-point and high-watermark checkpoints (nil: the real file
	// system; BrokerConfig.Log.FS, if set, is used when this is nil). A
	// simulation gives each node an in-memory disk that a crash can
	// empty of what was not fsynced (testkit/simdisk). The controller's
	// Raft log and snapshots and the node's meta file stay on the real
	// file system under DataDir.
	FS     storage.FS
	Logger *slog.Logger
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
	// TestAuthorizer, TEST-ONLY: when set, the request layer asks this
	// authz.Checker instead of the one Authorizer configures.
	TestAuthorizer authz.Checker
	// TestSession, TEST-ONLY: when set, every request of the client gRPC
	// listener and of the Kafka listener carries this session, as if its
	// connection had authenticated as it. It lets tests drive the
	// authorizer through both front doors before the listeners
	// authenticate connections themselves; a server never sets it.
	TestSession *auth.Session

	// --- quotas and debug endpoints (owner D) ---

	// Quotas configures the client quotas' measurement (quota.window.num,
	// quota.window.size.seconds; Clock nil: the node's clock). The quotas
	// themselves are in the metadata image (AlterClientQuotas).
	Quotas quota.Config
	// DebugEndpoints is debug.endpoints.enable: /debug/pprof is served on
	// the HTTP listener only when true, and then only to a super user or a
	// broker (Authorizer.SuperUsers).
	DebugEndpoints bool
	// DebugSession, TEST-ONLY, replaces how an HTTP request's session is
	// found (by default: its verified TLS client certificate, through
	// Security; none on plaintext, which refuses the debug endpoints).
	DebugSession func(*http.Request) (auth.Session, bool)
	// TestingKafkaSession, TEST-ONLY, gives each Kafka-listener connection
	// a session (kafka.Config.TestingSession).
	TestingKafkaSession kafka.TestingSessionFunc
	// TestingGRPCSession, TEST-ONLY, gives each call on the client gRPC
	// listener a session from its context (until the gRPC door
	// authenticates callers itself).
	TestingGRPCSession func(context.Context) (auth.Session, bool)
	// Authorizer: authorizer.class.name ("" no authorizer,
	// every request allowed; authz.StandardClassName the standard
	// authorizer over the controller's ACLs), super.users and
	// allow.everyone.if.no.acl.found.
	Authorizer AuthorizerConfig
	// Security is the security settings: listener protocols, TLS material,
	// principal mapping, broker principals (zero: every listener PLAINTEXT).
	Security SecurityConfig
}

// AuthorizerConfig is the authorizer's settings.
type AuthorizerConfig struct {
	ClassName                 string
	SuperUsers                []auth.Principal
	AllowEveryoneIfNoACLFound bool
}

// QuorumTimeouts tunes Raft (a zero keeps hashicorp/raft's default):
// Heartbeat is controller.quorum.fetch.timeout.ms (how long a follower
// waits to hear from the leader before it stands for election), Election
// is controller.quorum.election.timeout.ms.
type QuorumTimeouts struct {
	Heartbeat, Election, LeaderLease, Commit time.Duration
}

// DefaultConfig returns Kafka's defaults for a combined node.
func DefaultConfig(id int32, dataDir string) Config {
	return Config{
		NodeID: id, Broker: true, Controller: true, DataDir: dataDir,
		BrokerConfig:      broker.DefaultConfig(dataDir),
		ControllerConfig:  controller.DefaultConfig(id),
		ReplicationConfig: replication.DefaultConfig(id),
		HeartbeatInterval: 250 * time.Millisecond,
		// A follower that hears nothing from the quorum's leader for
		// 500-1000 ms stands for election (hashicorp/raft's defaults: 1-2
		// s), so a dead controller is replaced within about a second.
		// Followers learn that a record is committed with the leader's next
		// AppendEntries, sent at the latest every CommitTimeout when the
		// log is idle (hashicorp/raft's default 50 ms, taken as 50-100
		// ms): every broker but the controller's own acted on a fencing
		// that much later.
		QuorumTimeouts: QuorumTimeouts{Heartbeat: 500 * time.Millisecond, Election: 500 * time.Millisecond, LeaderLease: 500 * time.Millisecond,
			Commit: 10 * time.Millisecond},
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
