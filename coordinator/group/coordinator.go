// Package group is the group coordinator: consumer groups on
// __consumer_offsets (the classic join/sync/heartbeat protocol), committed
// offsets, and transactional offset commits that become visible with their
// transaction's COMMIT marker.
package group

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strand-io/strand/coordinator"
	"github.com/strand-io/strand/internal/clock"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/replication"
)

// Config tunes the group coordinator (Kafka's names).
type Config struct {
	NodeID int32
	Topic  coordinator.InternalTopic
	// GroupMinSessionTimeout / GroupMaxSessionTimeout: group.min/max.session.timeout.ms.
	GroupMinSessionTimeout, GroupMaxSessionTimeout time.Duration
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms.
	InitialRebalanceDelay time.Duration
	// OffsetsRetention is offsets.retention.minutes.
	OffsetsRetention time.Duration
	Logger           *slog.Logger
}

// DefaultConfig is Kafka's defaults.
func DefaultConfig(nodeID int32) Config {
	return Config{NodeID: nodeID, Topic: coordinator.DefaultOffsetsTopic(), GroupMinSessionTimeout: 6 * time.Second,
		GroupMaxSessionTimeout: 30 * time.Minute, InitialRebalanceDelay: 3 * time.Second, OffsetsRetention: 7 * 24 * time.Hour}
}

// TxnAdder adds a partition of __consumer_offsets to a transaction (an
// AddPartitionsToTxn to the transaction coordinator), before a
// TxnOffsetCommit is written.
type TxnAdder interface {
	AddPartition(ctx context.Context, transactionalID string, pid int64, epoch int16, topic string, partition int32) error
}

// Coordinator serves the Groups service for the __consumer_offsets
// partitions this broker leads.
type Coordinator struct {
	pb.UnimplementedGroupsServer
	cfg  Config
	repl *replication.Manager
	loc  *coordinator.Locator
	txn  TxnAdder
	clk  clock.Clock
}

// New returns a coordinator; Start registers it for leadership changes.
func New(cfg Config, repl *replication.Manager, loc *coordinator.Locator, txn TxnAdder, clk clock.Clock) *Coordinator {
	return &Coordinator{cfg: cfg, repl: repl, loc: loc, txn: txn, clk: clk}
}

// Start begins serving.
func (c *Coordinator) Start() {}

// Stop stops background work.
func (c *Coordinator) Stop() {}

// OnTxnMarker is called once a COMMIT or ABORT marker for pid is durable on
// partition of __consumer_offsets.
func (c *Coordinator) OnTxnMarker(partition int32, pid int64, committed bool) {}

var errNotYet = status.Error(codes.Unimplemented, "the group coordinator is not built yet")

var _ = errNotYet
