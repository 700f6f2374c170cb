package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/clock"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// Opt configures a Producer, Consumer or Admin. Options are named after
// the Kafka setting they mirror.
type Opt func(*config)

// Acks is how many replicas must have a write before it is acknowledged (acks).
type Acks int32

const (
	// AllISRAcks waits for the whole in-sync replica set (acks=all, -1). The default.
	AllISRAcks Acks = -1
	// LeaderAck waits for the leader only (acks=1).
	LeaderAck Acks = 1
	// NoAck does not wait at all (acks=0).
	NoAck Acks = 0
)

// Idempotence is enable.idempotence.
type Idempotence int

const (
	idempotenceDefault Idempotence = iota
	// IdempotenceOn: every batch carries producer id, epoch and sequence (the default).
	IdempotenceOn
	// IdempotenceOff: plain retries, which may duplicate.
	IdempotenceOff
)

// IsolationLevel is isolation.level.
type IsolationLevel int

const (
	// ReadUncommitted returns everything up to the high watermark (the default).
	ReadUncommitted IsolationLevel = iota
	// ReadCommitted returns committed records only, up to the last stable offset.
	ReadCommitted
)

// OffsetReset is auto.offset.reset.
type OffsetReset int

const (
	// ResetLatest starts at the end (the default, like Kafka).
	ResetLatest OffsetReset = iota
	// ResetEarliest starts at the log start.
	ResetEarliest
	// ResetNone fails with ErrOffsetOutOfRange.
	ResetNone
)

type config struct {
	bootstrap      []string
	scram          *scramLogin // WithSCRAM (sasl.go)
	clientID       string
	dialOpts       []grpc.DialOption
	logger         *slog.Logger
	requestTimeout time.Duration
	retryBackoff   time.Duration
	retryBackoffMx time.Duration
	metadataMaxAge time.Duration

	// producer
	acks             Acks
	acksSet          bool
	idempotence      Idempotence
	linger           time.Duration
	batchSize        int
	batchMaxSize     int
	maxInFlight      int
	deliveryTimeout  time.Duration
	retries          int
	retriesSet       bool
	compression      record.Compression
	bufferMemory     int
	maxBlock         time.Duration
	maxRequestSize   int
	transactionalID  string
	txnTimeout       time.Duration
	partitioner      Partitioner
	ignoreKeys       bool
	requestTimeoutMs int32

	// consumer
	isolation         IsolationLevel
	fetchMinBytes     int32
	fetchMaxBytes     int32
	fetchMaxWait      time.Duration
	maxPartitionBytes int32
	maxPollRecords    int
	offsetReset       OffsetReset
	groupID           string
	sessionTimeout    time.Duration
	rebalanceTimeout  time.Duration
	heartbeatInterval time.Duration
	autoCommit        bool
	autoCommitEvery   time.Duration
	assignors         []string
	topics            []string
	instanceID        string
	onAssigned        func([]TopicPartition)
	onRevoked         func([]TopicPartition)
	onLost            func([]TopicPartition)
	onFetchError      func(TopicPartition, error)

	// clock times the client's protocol waits (see WithClock).
	clock clock.Clock

	// tls, when set, makes every connection a TLS one (WithTLS).
	tls *tls.Config
}

// defaultCfg holds every default in one place. Where the Java client has
// the same setting the value is its default (request.timeout.ms 30 s,
// linger.ms 5, batch.size 16384, max.in.flight 5, fetch.max.wait.ms 500,
// ...); batchMaxSize, a batch's hard ceiling, is Strand's own.
func defaultCfg() config {
	return config{
		clientID:       "strand-go",
		clock:          clock.Real,
		requestTimeout: 30 * time.Second,
		retryBackoff:   100 * time.Millisecond,
		retryBackoffMx: time.Second,
		metadataMaxAge: 5 * time.Minute,

		acks:            AllISRAcks,
		linger:          5 * time.Millisecond,
		batchSize:       16384,
		batchMaxSize:    256 << 10,
		maxInFlight:     5,
		deliveryTimeout: 120 * time.Second,
		retries:         1<<31 - 1,
		compression:     record.None,
		bufferMemory:    32 << 20,
		maxBlock:        60 * time.Second,
		maxRequestSize:  1 << 20,
		txnTimeout:      60 * time.Second,

		isolation:         ReadUncommitted,
		fetchMinBytes:     1,
		fetchMaxBytes:     50 << 20,
		fetchMaxWait:      500 * time.Millisecond,
		maxPartitionBytes: 1 << 20,
		maxPollRecords:    500,
		offsetReset:       ResetLatest,
		sessionTimeout:    45 * time.Second,
		rebalanceTimeout:  60 * time.Second,
		heartbeatInterval: 3 * time.Second,
		autoCommit:        true,
		autoCommitEvery:   5 * time.Second,
		assignors:         []string{"cooperative-sticky", "range"},
	}
}

func newConfig(opts []Opt) config {
	c := defaultCfg()
	for _, o := range opts {
		o(&c)
	}
	return c
}

// validateProducer refuses contradictions, each with a sentence.
func (c *config) validateProducer() error {
	if len(c.bootstrap) == 0 {
		return errors.New("strand: no bootstrap servers (use client.Bootstrap)")
	}
	if c.transactionalID != "" {
		if c.idempotence == IdempotenceOff {
			return errors.New("strand: a transactional.id needs enable.idempotence=true")
		}
		c.idempotence = IdempotenceOn
	}
	if c.idempotence == idempotenceDefault {
		// Like Kafka 3.0+: on unless a conflicting setting was chosen.
		if (c.acksSet && c.acks != AllISRAcks) || c.maxInFlight > 5 || (c.retriesSet && c.retries == 0) {
			c.idempotence = IdempotenceOff
		} else {
			c.idempotence = IdempotenceOn
		}
	}
	if c.idempotence == IdempotenceOn {
		switch {
		case c.acks != AllISRAcks:
			return fmt.Errorf("strand: enable.idempotence requires acks=all, got acks=%d", c.acks)
		case c.maxInFlight > 5:
			return fmt.Errorf("strand: enable.idempotence requires max.in.flight.requests.per.connection <= 5 (the broker keeps the last 5 batches per producer), got %d", c.maxInFlight)
		case c.retries == 0:
			return errors.New("strand: enable.idempotence requires retries > 0")
		}
	}
	if c.maxInFlight < 1 {
		return fmt.Errorf("strand: max.in.flight.requests.per.connection must be at least 1, got %d", c.maxInFlight)
	}
	if c.deliveryTimeout < c.linger+c.requestTimeout {
		return fmt.Errorf("strand: delivery.timeout.ms (%v) should be at least linger.ms + request.timeout.ms (%v)", c.deliveryTimeout, c.linger+c.requestTimeout)
	}
	if c.batchSize < 0 || c.batchSize > c.maxRequestSize {
		return fmt.Errorf("strand: batch.size %d must be between 0 and max.request.size %d", c.batchSize, c.maxRequestSize)
	}
	if c.batchMaxSize < 0 {
		return fmt.Errorf("strand: batch.max.size must not be negative, got %d", c.batchMaxSize)
	}
	if !c.compression.Valid() {
		return fmt.Errorf("strand: unknown compression.type %d (use NoCompression, Gzip, Snappy, LZ4 or Zstd)", c.compression)
	}
	if c.txnTimeout <= 0 {
		return errors.New("strand: transaction.timeout.ms must be positive")
	}
	return nil
}

func (c *config) validateConsumer() error {
	if len(c.bootstrap) == 0 {
		return errors.New("strand: no bootstrap servers (use client.Bootstrap)")
	}
	if c.maxPollRecords < 1 {
		return errors.New("strand: max.poll.records must be at least 1")
	}
	if c.groupID != "" && c.heartbeatInterval >= c.sessionTimeout {
		return fmt.Errorf("strand: heartbeat.interval.ms (%v) must be lower than session.timeout.ms (%v)", c.heartbeatInterval, c.sessionTimeout)
	}
	if len(c.topics) > 0 && c.groupID == "" {
		return errors.New("strand: Topics subscribes through a consumer group; set GroupID too (or use Assign)")
	}
	if c.groupID != "" && len(c.topics) > 0 {
		if len(c.assignors) == 0 {
			return errors.New("strand: partition.assignment.strategy is empty")
		}
		for _, a := range c.assignors {
			if _, ok := assignorByName(a); !ok {
				return fmt.Errorf("strand: unknown partition.assignment.strategy %q (built in: range, cooperative-sticky)", a)
			}
		}
	}
	return nil
}

// Bootstrap lists brokers to start from (bootstrap.servers).
func Bootstrap(addrs ...string) Opt {
	return func(c *config) { c.bootstrap = append(c.bootstrap, addrs...) }
}

// ClientID names the client (client.id, default "strand-go"): in broker
// logs and group descriptions, and for client quotas (entities client-id
// and user + client-id). Every call carries it.
func ClientID(id string) Opt { return func(c *config) { c.clientID = id } }

// DialOptions adds gRPC dial options (interceptors, a custom dialer).
func DialOptions(opts ...grpc.DialOption) Opt {
	return func(c *config) { c.dialOpts = append(c.dialOpts, opts...) }
}

// Logger sets the logger (default: slog.Default at warn level for retries).
func Logger(l *slog.Logger) Opt { return func(c *config) { c.logger = l } }

// RequestTimeout is request.timeout.ms.
func RequestTimeout(d time.Duration) Opt { return func(c *config) { c.requestTimeout = d } }

// RetryBackoff is retry.backoff.ms and retry.backoff.max.ms.
func RetryBackoff(base, max time.Duration) Opt {
	return func(c *config) { c.retryBackoff, c.retryBackoffMx = base, max }
}

// RequiredAcks is acks.
func RequiredAcks(a Acks) Opt { return func(c *config) { c.acks, c.acksSet = a, true } }

// EnableIdempotence is enable.idempotence.
func EnableIdempotence(i Idempotence) Opt { return func(c *config) { c.idempotence = i } }

// Linger is linger.ms.
func Linger(d time.Duration) Opt { return func(c *config) { c.linger = d } }

// BatchSize is batch.size in bytes.
func BatchSize(n int) Opt { return func(c *config) { c.batchSize = n } }

// BatchMaxSize is batch.max.size in bytes (default 256 KiB; KIP-782's
// proposal, which Kafka never adopted): how far a partition's batch may
// grow past batch.size while it could not be sent anyway, because the
// partition already has max.in.flight batches out or others queued. A
// batch is sent once it reaches batch.size and the window has room, so a
// producer that keeps up sends batch.size batches as before; one that does
// not (five batches in flight hold only 80 KiB at the default batch.size)
// sends fewer, bigger batches instead of queueing many small ones. The
// growth also stays within 90 % of the topic's max.message.bytes (from
// metadata) and max.request.size. batch.max.size <= batch.size turns it
// off.
func BatchMaxSize(n int) Opt { return func(c *config) { c.batchMaxSize = n } }

// MaxInFlight is max.in.flight.requests.per.connection.
func MaxInFlight(n int) Opt { return func(c *config) { c.maxInFlight = n } }

// DeliveryTimeout is delivery.timeout.ms.
func DeliveryTimeout(d time.Duration) Opt { return func(c *config) { c.deliveryTimeout = d } }

// WithClock sets the clock the client times its protocol waits by: linger.ms,
// retry.backoff.ms between attempts, delivery.timeout.ms, the age of
// metadata, request.timeout.ms of produce requests in flight, the consumer's
// waits, heartbeats and auto-commits, and records' default timestamps. The
// default is clock.Real. A clock.Fake makes those waits deterministic in
// tests: nothing lingers out, backs off or times out until the test advances
// it. The deadlines of individual RPCs and of max.block.ms are contexts, and
// stay on the wall clock.
func WithClock(c clock.Clock) Opt {
	return func(cfg *config) {
		if c == nil {
			c = clock.Real
		}
		cfg.clock = c
	}
}

// sleep waits d on the client's clock, or until ctx ends (its error then).
func (c *config) sleep(ctx context.Context, d time.Duration) error {
	t := c.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// Retries is retries.
func Retries(n int) Opt { return func(c *config) { c.retries, c.retriesSet = n, true } }

// Compression is compression.type: the codec every batch is compressed
// with (NoCompression, the default, Gzip, Snappy, LZ4 or Zstd).
func Compression(codec CompressionCodec) Opt {
	return func(c *config) { c.compression = codec }
}

// BufferMemory is buffer.memory.
func BufferMemory(n int) Opt { return func(c *config) { c.bufferMemory = n } }

// MaxBlock is max.block.ms.
func MaxBlock(d time.Duration) Opt { return func(c *config) { c.maxBlock = d } }

// MaxRequestSize is max.request.size.
func MaxRequestSize(n int) Opt { return func(c *config) { c.maxRequestSize = n } }

// TransactionalID is transactional.id; it implies idempotence.
func TransactionalID(id string) Opt { return func(c *config) { c.transactionalID = id } }

// TransactionTimeout is transaction.timeout.ms.
func TransactionTimeout(d time.Duration) Opt { return func(c *config) { c.txnTimeout = d } }

// WithPartitioner replaces the default partitioner.
func WithPartitioner(p Partitioner) Opt { return func(c *config) { c.partitioner = p } }

// Isolation is isolation.level.
func Isolation(l IsolationLevel) Opt { return func(c *config) { c.isolation = l } }

// FetchMinBytes is fetch.min.bytes.
func FetchMinBytes(n int32) Opt { return func(c *config) { c.fetchMinBytes = n } }

// FetchMaxBytes is fetch.max.bytes.
func FetchMaxBytes(n int32) Opt { return func(c *config) { c.fetchMaxBytes = n } }

// FetchMaxWait is fetch.max.wait.ms.
func FetchMaxWait(d time.Duration) Opt { return func(c *config) { c.fetchMaxWait = d } }

// MaxPartitionFetchBytes is max.partition.fetch.bytes.
func MaxPartitionFetchBytes(n int32) Opt { return func(c *config) { c.maxPartitionBytes = n } }

// MaxPollRecords is max.poll.records.
func MaxPollRecords(n int) Opt { return func(c *config) { c.maxPollRecords = n } }

// AutoOffsetReset is auto.offset.reset.
func AutoOffsetReset(r OffsetReset) Opt { return func(c *config) { c.offsetReset = r } }

// GroupID is group.id: the consumer joins the group and is assigned partitions.
func GroupID(id string) Opt { return func(c *config) { c.groupID = id } }

// Topics subscribes a group consumer to topics.
func Topics(names ...string) Opt { return func(c *config) { c.topics = append(c.topics, names...) } }

// SessionTimeout is session.timeout.ms.
func SessionTimeout(d time.Duration) Opt { return func(c *config) { c.sessionTimeout = d } }

// RebalanceTimeout is max.poll.interval.ms as the rebalance timeout.
func RebalanceTimeout(d time.Duration) Opt { return func(c *config) { c.rebalanceTimeout = d } }

// HeartbeatInterval is heartbeat.interval.ms.
func HeartbeatInterval(d time.Duration) Opt { return func(c *config) { c.heartbeatInterval = d } }

// AutoCommit is enable.auto.commit and auto.commit.interval.ms (0 disables).
func AutoCommit(every time.Duration) Opt {
	return func(c *config) { c.autoCommit, c.autoCommitEvery = every > 0, every }
}

// Assignors is partition.assignment.strategy, in preference order
// ("cooperative-sticky", "range").
func Assignors(names ...string) Opt { return func(c *config) { c.assignors = names } }

// GroupInstanceID is group.instance.id (static membership, KIP-345): a
// name for this consumer that outlives its process. Close does not leave
// the group, so its partitions stay assigned to it until
// session.timeout.ms passes without a heartbeat; a consumer started with
// the same id within that time takes over the membership and the
// assignment without the other members rebalancing. The id must be
// unique among running consumers: a consumer whose id another one took
// over gets ErrFencedInstanceID from Poll and must be closed.
func GroupInstanceID(id string) Opt { return func(c *config) { c.instanceID = id } }

// OnPartitionsAssigned is called (from Poll) after each rebalance with the
// partitions newly assigned to this consumer, possibly none; their
// positions are set (committed offset, else auto.offset.reset).
func OnPartitionsAssigned(f func([]TopicPartition)) Opt { return func(c *config) { c.onAssigned = f } }

// OnPartitionsRevoked is called (from Poll, and from Close) with the
// partitions this consumer gives up, after their positions were committed
// when auto-commit is on and before another member can be assigned them:
// the place to commit or flush work of those partitions.
func OnPartitionsRevoked(f func([]TopicPartition)) Opt { return func(c *config) { c.onRevoked = f } }

// OnPartitionsLost is called (from Poll) with partitions taken away without
// a revocation (this member's session expired or its generation is gone):
// another member may own them already, so do not commit them. Without it
// OnPartitionsRevoked is called instead, like Kafka's default.
func OnPartitionsLost(f func([]TopicPartition)) Opt { return func(c *config) { c.onLost = f } }

// OnFetchError is called (from Poll) with each partition error a fetch
// answered that the consumer retries by itself instead of returning from
// Poll (KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER,
// UNKNOWN_TOPIC_OR_PARTITION, …; errs.IsRetriable), as franz-go's
// KeepRetryableFetchErrors shows them, and with a nil error once a
// partition so reported fetches cleanly again. Each call is one answer of
// one partition: a partition failing for a while is reported on every
// fetch of it.
func OnFetchError(f func(tp TopicPartition, err error)) Opt {
	return func(c *config) { c.onFetchError = f }
}

func (a Acks) wire() int32 { return int32(a) }

var _ = pb.IsolationLevel_READ_COMMITTED
