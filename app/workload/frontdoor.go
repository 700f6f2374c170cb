package workload

import (
	"context"
	"sort"
	"time"

	"github.com/strand-io/strand/client"
)

// The workload's data path (the transactional producers, the stage, the
// live and final readers) goes through one of two front doors: Strand's
// gRPC API through the SDK (ProtocolGRPC), or Kafka's wire protocol
// through franz-go (ProtocolKafka, kafka.go). The administration, the
// drills and the protocol-level reader use the SDK either way: they ask
// the cluster about itself, which is not what is being judged.
const (
	ProtocolGRPC  = "grpc"
	ProtocolKafka = "kafka"
)

// txnProducer is one incarnation of a transactional id, initialized
// (InitProducerId done) when it is handed out. *client.Producer is one.
type txnProducer interface {
	BeginTransaction() error
	Produce(ctx context.Context, rec *client.Record, promise client.Promise)
	ProduceSync(ctx context.Context, recs ...*client.Record) client.ProduceResults
	CommitTransaction(ctx context.Context) error
	AbortTransaction(ctx context.Context) error
	ProducerID() (int64, int16)
	Close(ctx context.Context) error
}

// stageSession is a consume-transform-produce session: a group consumer
// (read_committed) and a transactional producer whose transactions commit
// the consumer's offsets.
type stageSession interface {
	Poll(ctx context.Context) ([]*client.Record, error)
	Begin() error
	Produce(ctx context.Context, rec *client.Record, promise client.Promise)
	// End commits (client.TryCommit) or aborts the transaction with the
	// positions Positions gives; committed says which happened.
	End(ctx context.Context, action client.EndAction) (committed bool, err error)
	ProducerID() (int64, int16)
	// Positions are the offsets End would commit: the next offset of every
	// assigned partition that has one.
	Positions() map[client.TopicPartition]int64
	Close(ctx context.Context) error
}

// recordReader reads assigned partitions from given offsets (no group).
// *client.Consumer is one.
type recordReader interface {
	Assign(parts map[client.TopicPartition]int64)
	Poll(ctx context.Context) ([]*client.Record, error)
	// Position is the offset of the next record Poll would return for tp,
	// past any transaction markers read (-1 when not known yet).
	Position(tp client.TopicPartition) int64
	Close(ctx context.Context) error
}

// strandSession is a client.TransactSession as a stageSession.
type strandSession struct{ *client.TransactSession }

func (s strandSession) ProducerID() (int64, int16) { return s.Producer().ProducerID() }

func (s strandSession) Positions() map[client.TopicPartition]int64 {
	out := map[client.TopicPartition]int64{}
	for _, tp := range s.Consumer().Assignment() {
		if pos := s.Consumer().Position(tp); pos >= 0 {
			out[tp] = pos
		}
	}
	return out
}

// kafka reports whether the data path goes through the Kafka listeners.
func (r *run) kafka() bool { return r.cfg.Protocol == ProtocolKafka }

// newProducer starts (and initializes) an incarnation of transactional id
// id through the configured front door.
func (r *run) newProducer(ctx context.Context, id string) (txnProducer, error) {
	if r.kafka() {
		return r.newKafkaProducer(ctx, id)
	}
	p, err := client.NewProducer(r.opts(client.TransactionalID(id), client.TransactionTimeout(r.cfg.TransactionTimeout),
		client.WithPartitioner(client.ManualPartitioner{}), client.Linger(2*time.Millisecond), client.DeliveryTimeout(opTimeout))...)
	if err != nil {
		return nil, err
	}
	if err := p.InitTransactions(ctx); err != nil {
		p.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return p, nil
}

// newStageSession starts stage worker name's session in the stage group.
func (r *run) newStageSession(ctx context.Context, name string) (stageSession, error) {
	if r.kafka() {
		return r.newKafkaSession(ctx, name)
	}
	s, err := client.NewTransactSession(ctx, r.opts(client.GroupID(r.group), client.Topics(r.src), client.TransactionalID(name),
		client.TransactionTimeout(r.cfg.TransactionTimeout), client.AutoOffsetReset(client.ResetEarliest),
		client.SessionTimeout(10*time.Second), client.HeartbeatInterval(500*time.Millisecond),
		client.FetchMaxWait(200*time.Millisecond), client.MaxPollRecords(64), client.DeliveryTimeout(opTimeout),
		client.WithPartitioner(client.ManualPartitioner{}), client.Linger(2*time.Millisecond))...)
	if err != nil {
		return nil, err
	}
	return strandSession{s}, nil
}

// newReader starts a reader with isolation iso and fetch.max.wait maxWait.
func (r *run) newReader(iso client.IsolationLevel, maxWait time.Duration) (recordReader, error) {
	if r.kafka() {
		return r.newKafkaReader(iso, maxWait)
	}
	return client.NewConsumer(r.opts(client.Isolation(iso), client.FetchMaxWait(maxWait))...)
}

// sortedTPs lists m's partitions in order.
func sortedTPs(m map[client.TopicPartition]int64) []client.TopicPartition {
	out := make([]client.TopicPartition, 0, len(m))
	for tp := range m {
		out = append(out, tp)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}
