package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strand-io/strand/app/workload"
	"github.com/strand-io/strand/client"
)

// The second front door from the command line: produce, consume and
// verify with --protocol kafka move their records through the cluster's
// Kafka listeners (--kafka-bootstrap) with franz-go instead of the SDK.
// What asks the cluster about itself (metadata, offsets by timestamp, the
// drills) still uses the gRPC bootstrap.

// addProtocolFlags adds --protocol and --kafka-bootstrap to cmd.
func addProtocolFlags(cmd *cobra.Command) {
	cmd.Flags().String("protocol", "", "front door of the records: grpc (Strand's SDK) or kafka (franz-go on the Kafka listeners of --kafka-bootstrap) (default: $STRAND_PROTOCOL, else grpc)")
	cmd.Flags().String("kafka-bootstrap", "", "Kafka listeners, host:port[,host:port…], for --protocol kafka (default: $STRAND_KAFKA_BOOTSTRAP, else make run's three nodes "+defaultKafkaBootstrap+")")
}

// protocolOf reads --protocol (or $STRAND_PROTOCOL) and, for kafka, the
// Kafka listeners.
func protocolOf(cmd *cobra.Command) (proto string, kafkaAddrs []string, err error) {
	proto, _ = cmd.Flags().GetString("protocol")
	if proto == "" {
		proto = os.Getenv("STRAND_PROTOCOL")
	}
	switch proto {
	case "", workload.ProtocolGRPC, "strand":
		return workload.ProtocolGRPC, nil, nil
	case workload.ProtocolKafka:
	default:
		return "", nil, fmt.Errorf("--protocol %q: want grpc or kafka", proto)
	}
	v, _ := cmd.Flags().GetString("kafka-bootstrap")
	if v == "" {
		v = os.Getenv("STRAND_KAFKA_BOOTSTRAP")
	}
	if strings.TrimSpace(v) == "" {
		v = defaultKafkaBootstrap
	}
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			kafkaAddrs = append(kafkaAddrs, a)
		}
	}
	if len(kafkaAddrs) == 0 {
		return "", nil, errors.New("--protocol kafka needs the Kafka listeners: set --kafka-bootstrap or STRAND_KAFKA_BOOTSTRAP")
	}
	return proto, kafkaAddrs, nil
}

// defaultKafkaBootstrap is the Kafka listeners of the cluster
// scripts/run.sh (make run) starts.
const defaultKafkaBootstrap = "127.0.0.1:9092,127.0.0.1:9102,127.0.0.1:9112"

// lineProducer is what produce writes through: the SDK's producer or
// franz-go's.
type lineProducer interface {
	Produce(ctx context.Context, rec *client.Record, promise client.Promise)
	Flush(ctx context.Context) error
	// Begin initializes the transactional id and begins its transaction.
	Begin(ctx context.Context) error
	End(ctx context.Context, commit bool) error
	Close(ctx context.Context) error
}

type strandLineProducer struct{ *client.Producer }

func (p strandLineProducer) Begin(ctx context.Context) error { return beginTxn(ctx, p.Producer) }
func (p strandLineProducer) End(ctx context.Context, commit bool) error {
	return endTxn(ctx, p.Producer, commit)
}

type kafkaLineProducer struct{ cl *kgo.Client }

// newKafkaLineProducer is produce's franz-go producer: acks and
// idempotence as --acks says (1 and 0 without idempotence), the codec,
// the partition when one is given, the transactional id when one is.
func newKafkaLineProducer(addrs []string, acks, codec string, partition int32, txnID string) (*kafkaLineProducer, error) {
	opts := append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, security.kgoOpts()...)
	switch acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return nil, fmt.Errorf("--acks: all, -1, 1 or 0, not %q", acks)
	}
	c, err := kafkaCodec(codec)
	if err != nil {
		return nil, fmt.Errorf("--compression-codec: %w", err)
	}
	opts = append(opts, kgo.ProducerBatchCompression(c))
	if partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	if txnID != "" {
		opts = append(opts, kgo.TransactionalID(txnID))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return &kafkaLineProducer{cl: cl}, nil
}

func (p *kafkaLineProducer) Produce(ctx context.Context, rec *client.Record, promise client.Promise) {
	kr := &kgo.Record{Topic: rec.Topic, Partition: rec.Partition, Key: rec.Key, Value: rec.Value}
	for _, h := range rec.Headers {
		kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	p.cl.Produce(ctx, kr, func(got *kgo.Record, err error) {
		if err != nil {
			promise(rec, err)
			return
		}
		out := *rec
		out.Partition, out.Offset = got.Partition, got.Offset
		promise(&out, nil)
	})
}

func (p *kafkaLineProducer) Flush(ctx context.Context) error { return p.cl.Flush(ctx) }

func (p *kafkaLineProducer) Begin(ctx context.Context) error {
	// franz-go initializes the transactional id on first use; do it now,
	// so a producer the cluster cannot give an id fails before any input.
	id, _, err := p.cl.ProducerID(ctx)
	if err == nil && id < 0 {
		err = errors.New("the Kafka listener handed out no producer id (InitProducerId)")
	}
	if err != nil {
		return err
	}
	return p.cl.BeginTransaction()
}

func (p *kafkaLineProducer) End(ctx context.Context, commit bool) error {
	if !commit {
		if err := p.cl.AbortBufferedRecords(ctx); err != nil {
			return err
		}
	}
	return p.cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
}

func (p *kafkaLineProducer) Close(context.Context) error {
	p.cl.Close()
	return nil
}

// consumeKafka is consume through the Kafka listeners: without a group it
// reads the partitions startPositions gives; with one it joins it with
// franz-go, starts at the group's offsets (else the end, or the beginning
// with --from-beginning), and commits what it printed after each batch and
// at exit. It exits after maxRecords, or when nothing arrived for timeout.
func consumeKafka(ctx context.Context, cmd *cobra.Command, addrs []string, topic, group string, start startSpec, iso client.IsolationLevel,
	fromBeginning bool, maxRecords int, timeout time.Duration, format *recordFormat) error {
	// KeepRetryableFetchErrors: franz-go retries KAFKA_STORAGE_ERROR and
	// its kind by itself; kept, they reach stderr (once per change) as the
	// SDK's OnFetchError does on gRPC.
	opts := append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.FetchMaxWait(500 * time.Millisecond), kgo.KeepRetryableFetchErrors()}, security.kgoOpts()...)
	fetchErrs := newFetchErrorReport(os.Stderr)
	if iso == client.ReadCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	var joined atomic.Bool
	var last atomic.Int64 // unix nanos of the last record or assignment
	last.Store(time.Now().UnixNano())
	if group != "" {
		reset := kgo.NewOffset().AtEnd()
		if fromBeginning {
			reset = kgo.NewOffset().AtStart()
		}
		opts = append(opts, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(reset), kgo.DisableAutoCommit(),
			kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
				joined.Store(true)
				last.Store(time.Now().UnixNano())
			}),
			kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
				if err := cl.CommitUncommittedOffsets(ctx); err != nil {
					fmt.Fprintf(os.Stderr, "strand: committing the positions of revoked partitions of group %s: %v\n", group, err)
				}
			}))
	} else {
		joined.Store(true)
		assign, err := startPositions(ctx, cmd, topic, start, iso)
		if err != nil {
			return err
		}
		parts := map[int32]kgo.Offset{}
		for tp, off := range assign {
			switch off {
			case client.OffsetEarliest:
				parts[tp.Partition] = kgo.NewOffset().AtStart()
			case client.OffsetLatest:
				parts[tp.Partition] = kgo.NewOffset().AtEnd()
			default:
				parts[tp.Partition] = kgo.NewOffset().At(off)
			}
		}
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	count := 0
	for (maxRecords <= 0 || count < maxRecords) && ctx.Err() == nil {
		want := 10000
		if maxRecords > 0 {
			want = maxRecords - count // never take more than will be printed
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollRecords(pctx, want)
		cancel()
		var firstErr error
		failed := map[string]bool{}
		fs.EachError(func(t string, p int32, err error) {
			switch {
			case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
			case kerr.IsRetriable(err):
				name := client.TopicPartition{Topic: t, Partition: p}.String()
				failed[name] = true
				fetchErrs.report(name, err)
			case firstErr == nil:
				firstErr = fmt.Errorf("%s[%d]: %w", t, p, err)
			}
		})
		if firstErr != nil {
			return firstErr
		}
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if name := (client.TopicPartition{Topic: p.Topic, Partition: p.Partition}).String(); p.Err == nil && !failed[name] {
				fetchErrs.report(name, nil)
			}
		})
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			rec := &client.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Offset: r.Offset}
			for _, h := range r.Headers {
				rec.Headers = append(rec.Headers, client.Header{Key: h.Key, Value: h.Value})
			}
			format.write(out, rec)
			n++
		})
		if n == 0 {
			if timeout > 0 && joined.Load() && time.Since(time.Unix(0, last.Load())) > timeout {
				break
			}
			continue
		}
		count += n
		last.Store(time.Now().UnixNano())
		out.Flush()
		if group != "" {
			if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "strand: commit of group %s failed, will retry: %v\n", group, err)
			}
		}
	}
	out.Flush()
	if group != "" {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := cl.CommitUncommittedOffsets(cctx)
		cancel()
		if err != nil {
			return fmt.Errorf("commit offsets of group %s: %w", group, err)
		}
	}
	if maxRecords > 0 && count < maxRecords && ctx.Err() == nil {
		return fmt.Errorf("got %d of %d records before --timeout %v", count, maxRecords, timeout)
	}
	return nil
}
