package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/strand-io/strand/controller/channel"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/config"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/replication"
)

// InternalTopic configures one of the two internal topics: what the
// cluster creates it with (offsets.topic.num.partitions,
// offsets.topic.replication.factor, offsets.topic.segment.bytes;
// transaction.state.log.num.partitions, .replication.factor, .min.isr,
// .segment.bytes). Once it exists, the topic as it is in the metadata
// image decides where a key goes (PartitionOf), whatever the configuration
// says now.
type InternalTopic struct {
	Name              string
	Partitions        int32
	ReplicationFactor int32
	MinISR            int
	SegmentBytes      int64
}

// PartitionCount is the number of partitions the topic has in img, or the
// configured number while it does not exist or there is no image (Kafka's
// coordinators read the metadata cache the same way).
func (it InternalTopic) PartitionCount(img *metadata.Image) int32 {
	if img != nil {
		if t := img.Topic(it.Name); t != nil && len(t.Partitions) > 0 {
			return int32(len(t.Partitions))
		}
	}
	if it.Partitions > 0 {
		return it.Partitions
	}
	return 50
}

// PartitionOf is the partition of the topic, as it exists in img, that
// coordinates key (a group id or transactional id).
func (it InternalTopic) PartitionOf(img *metadata.Image, key string) int32 {
	return PartitionFor(key, it.PartitionCount(img))
}

// DefaultTransactionTopic is __transaction_state with Kafka's defaults
// (transaction.state.log.num.partitions 50, replication factor 3, min ISR 2,
// 100 MiB segments).
func DefaultTransactionTopic() InternalTopic {
	return InternalTopic{Name: metadata.InternalTransactionTopic, Partitions: 50, ReplicationFactor: 3, MinISR: 2, SegmentBytes: 100 << 20}
}

// DefaultOffsetsTopic is __consumer_offsets with Kafka's defaults.
func DefaultOffsetsTopic() InternalTopic {
	return InternalTopic{Name: metadata.InternalOffsetsTopic, Partitions: 50, ReplicationFactor: 3, MinISR: 2, SegmentBytes: 100 << 20}
}

// InternalTopicConfigs are the topic configs an internal topic is created
// with. Both are compacted, as in Kafka: a transactional id's or a group's
// latest record is its state, so the cleaner may drop everything older, and
// load time follows the number of live ids and groups, not the history.
// retention.ms=-1 stays: deleting whole old segments would lose the state
// of ids and groups that have not written since (it only matters if an
// operator adds delete to cleanup.policy).
func InternalTopicConfigs(it InternalTopic) map[string]string {
	return map[string]string{
		config.CleanupPolicy:     "compact",
		config.RetentionMs:       "-1",
		config.MinInsyncReplicas: strconv.Itoa(it.MinISR),
		config.SegmentBytes:      strconv.FormatInt(it.SegmentBytes, 10),
	}
}

// JavaStringHash is Java's String.hashCode over UTF-16 code units.
func JavaStringHash(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// PartitionFor maps a transactional id or group id to its internal-topic
// partition exactly as Kafka does: Utils.abs(key.hashCode()) % n.
func PartitionFor(key string, n int32) int32 {
	h := JavaStringHash(key)
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % n
}

// Locator answers FindCoordinator: the leader of the key's partition of
// the internal topic, creating the topic on first need.
type Locator struct {
	repl   *replication.Manager
	remote *channel.Remote
	topics map[pb.CoordinatorType]InternalTopic
	lg     *slog.Logger

	// creating holds a token while one creation runs: one at a time, and
	// the others wait on a channel with their request's context rather
	// than on a mutex held across a call to the controller, so a waiter
	// whose client gave up leaves (and a simulation on virtual time sees
	// every waiter durably blocked).
	creating chan struct{}
	warned   sync.Map // topic name -> true: its shape was checked (checkShape)
}

// NewLocator returns a locator for the two internal topics; lg (nil: the
// default logger) is told of an internal topic shaped unlike its
// configuration.
func NewLocator(repl *replication.Manager, remote *channel.Remote, txn, offsets InternalTopic, lg *slog.Logger) *Locator {
	if lg == nil {
		lg = slog.Default()
	}
	return &Locator{repl: repl, remote: remote, lg: lg.With("component", "locator"), creating: make(chan struct{}, 1),
		topics: map[pb.CoordinatorType]InternalTopic{pb.CoordinatorType_TRANSACTION: txn, pb.CoordinatorType_GROUP: offsets}}
}

// Topic returns the internal topic for a coordinator type.
func (l *Locator) Topic(t pb.CoordinatorType) InternalTopic { return l.topics[t] }

// Find locates the coordinator of key.
func (l *Locator) Find(ctx context.Context, typ pb.CoordinatorType, key string) *pb.Coordinator {
	out := &pb.Coordinator{Key: key, NodeId: -1}
	it, ok := l.topics[typ]
	if !ok {
		out.ErrorCode, out.ErrorMessage = pb.ErrorCode_INVALID_REQUEST, fmt.Sprintf("unknown coordinator type %v", typ)
		return out
	}
	if key == "" {
		out.ErrorCode, out.ErrorMessage = pb.ErrorCode_INVALID_REQUEST, "an empty key has no coordinator"
		return out
	}
	if err := l.ensure(ctx, it); err != nil {
		out.ErrorCode, out.ErrorMessage = pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, err.Error()
		return out
	}
	img := l.repl.Image()
	l.checkShape(img, it)
	out.Partition = it.PartitionOf(img, key)
	p := img.Partition(it.Name, out.Partition)
	if p == nil || p.Leader < 0 {
		out.ErrorCode, out.ErrorMessage = pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, fmt.Sprintf("%s-%d has no leader", it.Name, out.Partition)
		return out
	}
	b := img.Brokers[p.Leader]
	if b == nil {
		out.ErrorCode, out.ErrorMessage = pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, fmt.Sprintf("leader %d of %s-%d is not registered", p.Leader, it.Name, out.Partition)
		return out
	}
	out.NodeId, out.Address = b.ID, b.Address
	return out
}

// PeerAddress is the address of broker id's inter-broker listener, which
// other nodes dial ("" when the broker is not registered). Find answers
// with the client listener's, what clients dial.
// Fenced reports whether this node's metadata shows broker id fenced
// (or unknown).
func (l *Locator) Fenced(id int32) bool {
	b := l.repl.Image().Brokers[id]
	return b == nil || b.Fenced
}

func (l *Locator) PeerAddress(id int32) string {
	if b := l.repl.Image().Brokers[id]; b != nil {
		return b.PeerAddress()
	}
	return ""
}

// ensure creates the internal topic if it does not exist yet.
func (l *Locator) ensure(ctx context.Context, it InternalTopic) error {
	if l.repl.Image().Topic(it.Name) != nil {
		return nil
	}
	select {
	case l.creating <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-l.creating }()
	if l.repl.Image().Topic(it.Name) != nil {
		return nil
	}
	req := &pb.CreateTopicsRequest{TimeoutMs: 10000, InternalTopics: true, Topics: []*pb.CreatableTopic{{
		Name: it.Name, NumPartitions: it.Partitions, ReplicationFactor: it.ReplicationFactor,
		Configs: InternalTopicConfigs(it),
	}}}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var resp *pb.CreateTopicsResponse
	err := l.remote.Call(cctx, func(ctx context.Context, c pb.ControllerClient) error {
		var err error
		resp, err = c.CreateTopics(ctx, req)
		return err
	})
	if err != nil {
		return fmt.Errorf("creating %s: %w", it.Name, err)
	}
	r := resp.Topics[0]
	if r.ErrorCode != pb.ErrorCode_NONE && r.ErrorCode != pb.ErrorCode_TOPIC_ALREADY_EXISTS {
		return errs.New(r.ErrorCode, "%s", r.ErrorMessage)
	}
	// Wait (briefly) until this broker's image has it.
	for i := 0; i < 200 && l.repl.Image().Topic(it.Name) == nil; i++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// checkShape says once per process, at WARN, when an internal topic
// differs from what this node would create: another partition count or
// replication factor, or a config other than InternalTopicConfigs'. A
// cluster whose internal topic a client created before the names were
// reserved runs on with it (every key maps onto the partitions it has),
// but the operator should know: the partition count of an internal topic
// cannot change (its keys would move away from their state), its
// replication factor can be raised by reassignment, and its configs set
// with AlterConfigs.
func (l *Locator) checkShape(img *metadata.Image, it InternalTopic) {
	t := img.Topic(it.Name)
	if t == nil || len(t.Partitions) == 0 {
		return
	}
	if _, done := l.warned.LoadOrStore(it.Name, true); done {
		return
	}
	var diffs []any
	if n := int32(len(t.Partitions)); n != it.Partitions {
		diffs = append(diffs, "partitions", n, "configuredPartitions", it.Partitions)
	}
	if p := t.Partitions[0]; p != nil && int32(len(p.Replicas)) != it.ReplicationFactor {
		diffs = append(diffs, "replicationFactor", len(p.Replicas), "configuredReplicationFactor", it.ReplicationFactor)
	}
	want := InternalTopicConfigs(it)
	keys := make([]string, 0, len(want)+len(t.Configs))
	for k := range want {
		keys = append(keys, k)
	}
	for k := range t.Configs {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if got, ok := t.Configs[k]; !ok || got != want[k] {
			diffs = append(diffs, "config."+k, t.Configs[k], "configured."+k, want[k])
		}
	}
	if len(diffs) == 0 {
		return
	}
	l.lg.Warn("internal topic differs from this node's configuration (it may have been created by a client before internal topic names were reserved); coordinators use it as it is: its partition count cannot change, raise its replication factor by reassignment and fix its configs with AlterConfigs",
		append([]any{"topic", it.Name}, diffs...)...)
}
