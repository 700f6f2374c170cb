// Package api is the gRPC front door: it validates requests, routes them
// to the role that answers them, and maps domain errors onto each
// response's Kafka error code. It holds no state of its own.
package api

import (
	"log/slog"
	"time"

	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/controller"
	"github.com/strand-io/strand/controller/channel"
	"github.com/strand-io/strand/coordinator"
	"github.com/strand-io/strand/coordinator/txn"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/replication"
)

// DefaultProduceMaxInFlight is max.in.flight.requests.per.stream's
// default: above the five requests an idempotent producer keeps in flight
// per broker, with room for a non-idempotent one that pipelines more.
const DefaultProduceMaxInFlight = 16

// Deps is what the services call into. Broker-side services need Repl;
// the Controller service needs Controller.
type Deps struct {
	NodeID int32
	// Repl is nil on a controller-only node.
	Repl *replication.Manager
	// Controller is nil on a broker-only node.
	Controller *controller.Controller
	// Remote reaches the active controller from here.
	Remote *channel.Remote
	PIDs   *coordinator.ProducerIDManager
	// MessageMaxBytes is message.max.bytes (per batch).
	MessageMaxBytes int
	// TimestampBeforeMaxMs and TimestampAfterMaxMs are
	// log.message.timestamp.before.max.ms and
	// log.message.timestamp.after.max.ms, the defaults of the topic configs
	// message.timestamp.before.max.ms and message.timestamp.after.max.ms.
	TimestampBeforeMaxMs, TimestampAfterMaxMs int64
	// Clock is what record timestamps are checked against (nil: the real clock).
	Clock clock.Clock
	// ProduceMaxInFlight is max.in.flight.requests.per.stream: how many
	// requests of one Produce stream are read and not yet answered before
	// the stream is no longer read (0: DefaultProduceMaxInFlight).
	ProduceMaxInFlight int
	// Addr maps node ids to the addresses of their inter-broker listeners.
	Addr channel.AddressBook
	// External: these services answer on the external client listener,
	// so the addresses they hand out are brokers' external addresses.
	External bool
	Logger   *slog.Logger
	// Locator answers FindCoordinator.
	Locator *coordinator.Locator
	// TxnCoord and Groups are the coordinators; TxnClient adds partitions
	// to transactions from the produce path.
	TxnCoord  *txn.Coordinator
	TxnClient *txn.Client
	Groups    pb.GroupsServer
	// Metrics counts bytes, records and requests (nil: not counted).
	Metrics *Metrics
	// OffsetMetadataMaxBytes is offset.metadata.max.bytes: a committed
	// offset with longer metadata is refused OFFSET_METADATA_TOO_LARGE.
	OffsetMetadataMaxBytes int
	// TxnMaxTimeout is transaction.max.timeout.ms: the administrator's
	// AbortTransaction ends only transactions open longer than this.
	TxnMaxTimeout time.Duration
}
