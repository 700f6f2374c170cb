// Package request is Strand's one request layer: every request a client
// sends is a plain Go method of Handler, taking a context and the request
// message of proto/strand/v1 (whose messages mirror Kafka's request
// schemas) and returning its response message. A front door decodes a
// request off its wire, calls the method, and encodes the answer: api
// does so for gRPC, and a Kafka wire-protocol listener translates its
// codec's messages to and from the same structs. Nothing here knows a
// transport: the package imports no gRPC (TestNoGRPC holds it to that).
//
// Where each request goes:
//
//   - Produce (produce.go): validated (acks, record.ValidateClient,
//     timestamps, max.message.bytes), a transactional batch's partition
//     added to its transaction (coordinator/txn.Client), appended by
//     replication.Manager.AppendLeader; acks=all waits are handed back
//     (ProduceWait) so the front door decides how many are in flight.
//   - Fetch, ListOffsets, OffsetForLeaderEpoch (consumer.go): the
//     partitions of replication.Manager (broker.Partition).
//   - Metadata, DescribeFeatures, FindCoordinator (metadata.go): this
//     broker's metadata image and coordinator.Locator.
//   - InitProducerId, EndTxn, AddPartitionsToTxn, DescribeTransactions,
//     ListTransactions (transactions.go): coordinator/txn.Coordinator;
//     without a transactional id InitProducerId takes an id from this
//     broker's block (coordinator.ProducerIDManager). AbortTransaction,
//     DescribeProducers and WriteTxnMarkers: the partitions led here.
//   - JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
//     OffsetFetch, TxnOffsetCommit, DescribeGroups (groups.go), ListGroups,
//     DeleteGroups, OffsetDelete (groups_admin.go):
//     coordinator/group.Coordinator.
//   - CreateTopics, DeleteTopics, IncrementalAlterConfigs,
//     DescribeCluster (admin.go), CreatePartitions (admin_partitions.go):
//     forwarded to the active controller (controller/channel.Remote);
//     DescribeConfigs and a validate-only IncrementalAlterConfigs answer
//     from the image (admin_validate.go).
//   - AlterPartitionReassignments (reassign.go): forwarded to the active
//     controller; ListPartitionReassignments answers from the image.
//   - CreateAcls, DeleteAcls (acls.go): forwarded to the active
//     controller; DescribeAcls answers from the image (Kafka's
//     AclBindingFilter semantics, metadata.FilterMatches).
//
// What a request may carry is checked here, once for every front door
// (edge.go): strings over Kafka's 32767-byte limit, integers that do not
// fit Kafka's INT16 or INT8 fields and isolation levels outside the enum
// are INVALID_REQUEST; offset metadata over offset.metadata.max.bytes is
// OFFSET_METADATA_TOO_LARGE.
//
// Errors: as in Kafka, a request's failures are answered in its response,
// per partition, per group or per transaction as the schema has it, as an
// errs code and message (errs.Split). A method returns a non-nil error
// only when it has no answer at all: the caller's context ended (the
// context's error, as is) or a coordinator returned an error it could not
// place in a response (an *errs.Error). Never a transport status: the
// front door maps what it gets to its own (api/status.go for gRPC).
//
// Authorization (authorize.go): each method asks
// Handler.Authorizer what Kafka's KafkaApis asks its authorizer for the
// same request, for the principal of the auth.Session in the context,
// and answers a refusal with Kafka's code where Kafka puts it. No
// Authorizer, or no session (a call from inside the process), allows
// everything.
//
// Which listener a request came in on matters in one way: the addresses
// handed out (Metadata, FindCoordinator, DescribeCluster) are brokers'
// external ones on an external listener and their Kafka listeners' on
// the Kafka one. That is Handler.Listener, set
// per listener by the front door; nothing is read from the connection.
package request

import (
	"time"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/controller/channel"
	"github.com/strand-io/strand/coordinator"
	"github.com/strand-io/strand/coordinator/group"
	"github.com/strand-io/strand/coordinator/txn"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/replication"
)

// Handler answers client requests. Its fields are what the methods call
// into; a Handler is not changed once requests are served (a front door
// that needs Listener set copies it: Handler.ForListener).
type Handler struct {
	NodeID int32
	// Repl is the node's partitions and metadata image (nil on a
	// controller-only node, which serves no client).
	Repl *replication.Manager
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
	// Listener is the kind of listener the requests came in on: it picks
	// which of a broker's addresses are handed out.
	Listener Listener
	// Locator answers FindCoordinator.
	Locator *coordinator.Locator
	// TxnCoord and Groups are the coordinators (nil: this node runs
	// none); TxnClient adds partitions to transactions from the produce
	// path.
	TxnCoord  *txn.Coordinator
	TxnClient *txn.Client
	Groups    *group.Coordinator
	// Metrics counts produced and fetched bytes (nil: not counted).
	Metrics Metrics
	// ReadBuffer, when set, gives Fetch the buffers its reads fill (the
	// gRPC front door pools them; nil: fresh ones).
	ReadBuffer func(n int) []byte
	// OffsetMetadataMaxBytes is offset.metadata.max.bytes: a committed
	// offset with longer metadata is refused OFFSET_METADATA_TOO_LARGE.
	OffsetMetadataMaxBytes int
	// TxnMaxTimeout is transaction.max.timeout.ms: the administrator's
	// AbortTransaction ends only transactions open longer than this.
	TxnMaxTimeout time.Duration
	// Authorizer decides what each request's principal may do
	// (authorize.go). nil: everything is allowed, as Kafka
	// without authorizer.class.name.
	Authorizer authz.Checker
}

// Listener is a kind of client listener.
type Listener int

const (
	// ListenerClient is the gRPC client listener (--listen): brokers'
	// Address is handed out.
	ListenerClient Listener = iota
	// ListenerExternal is the second gRPC client listener
	// (--external-listen): brokers' ExternalAddress (Address when they
	// have none).
	ListenerExternal
	// ListenerKafka is the Kafka wire-protocol listener (--kafka-listen):
	// brokers' KafkaAddress; a broker without one is left out.
	ListenerKafka
)

// ForListener is a copy of h answering on a listener of kind l.
func (h *Handler) ForListener(l Listener) *Handler {
	c := *h
	c.Listener = l
	return &c
}

// Metrics is what the request paths count; a front door implements it.
type Metrics interface {
	// Produced counts a client's batches appended to a partition led here.
	Produced(topic string, batches []byte)
	// Fetched counts the bytes of a fetch answer, for consumers or followers.
	Fetched(resp *pb.FetchResponse, follower bool)
}

func (h *Handler) produced(topic string, batches []byte) {
	if h.Metrics != nil {
		h.Metrics.Produced(topic, batches)
	}
}

func (h *Handler) fetched(resp *pb.FetchResponse, follower bool) {
	if h.Metrics != nil {
		h.Metrics.Fetched(resp, follower)
	}
}

func (h *Handler) readBuffer(n int) []byte {
	if h.ReadBuffer != nil {
		return h.ReadBuffer(n)
	}
	return make([]byte, n)
}
