package main

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strand-io/strand/client"
)

// perfSink is what perf produce sends through: Strand's SDK over gRPC, or
// franz-go over the Kafka listener (--protocol kafka), with the same
// producer properties, so the two front doors can be compared.
type perfSink interface {
	Produce(ctx context.Context, topic string, key, value []byte, done func(error))
	Flush(ctx context.Context) error
	InitTransactions(ctx context.Context) error
	BeginTransaction() error
	CommitTransaction(ctx context.Context) error
	Close()
}

// sdkSink is the SDK's producer.
type sdkSink struct{ p *client.Producer }

func (s sdkSink) Produce(ctx context.Context, topic string, key, value []byte, done func(error)) {
	s.p.Produce(ctx, &client.Record{Topic: topic, Key: key, Value: value}, func(_ *client.Record, err error) { done(err) })
}
func (s sdkSink) Flush(ctx context.Context) error            { return s.p.Flush(ctx) }
func (s sdkSink) InitTransactions(ctx context.Context) error { return s.p.InitTransactions(ctx) }
func (s sdkSink) BeginTransaction() error                    { return s.p.BeginTransaction() }
func (s sdkSink) CommitTransaction(ctx context.Context) error {
	return s.p.CommitTransaction(ctx)
}
func (s sdkSink) Close() { s.p.Close(context.Background()) }

// kafkaSink is a franz-go client on the Kafka listener.
type kafkaSink struct{ cl *kgo.Client }

func (s kafkaSink) Produce(ctx context.Context, topic string, key, value []byte, done func(error)) {
	s.cl.Produce(ctx, &kgo.Record{Topic: topic, Key: key, Value: value}, func(_ *kgo.Record, err error) { done(err) })
}
func (s kafkaSink) Flush(ctx context.Context) error        { return s.cl.Flush(ctx) }
func (s kafkaSink) InitTransactions(context.Context) error { return nil } // franz-go initialises on first use
func (s kafkaSink) BeginTransaction() error                { return s.cl.BeginTransaction() }
func (s kafkaSink) CommitTransaction(ctx context.Context) error {
	return s.cl.EndTransaction(ctx, kgo.TryCommit)
}
func (s kafkaSink) Close() { s.cl.Close() }

// kafkaProducerOpts maps perf produce's producer properties to franz-go's
// options. franz-go's batches grow while requests are in flight up to one
// bound, as the SDK's grow from batch.size to batch.max.size: that bound
// is batch.max.size (the SDK's default when not given, or batch.size if
// larger), so both producers send batches of the same size.
func kafkaProducerOpts(bootstrap []string, props []string, acks, txnID string) ([]kgo.Opt, error) {
	opts := append([]kgo.Opt{kgo.SeedBrokers(bootstrap...)}, security.kgoOpts()...)
	idempotent := true
	switch acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
		idempotent = false
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
		idempotent = false
	default:
		return nil, fmt.Errorf("--acks: all, -1, 1 or 0, not %q", acks)
	}
	p, err := parseProducerProps(props)
	if err != nil {
		return nil, err
	}
	idempotent = idempotent && p.idempotent
	if p.linger >= 0 {
		opts = append(opts, kgo.ProducerLinger(p.linger))
	}
	if p.buffer > 0 {
		opts = append(opts, kgo.MaxBufferedBytes(p.buffer))
	}
	// franz-go compresses with snappy unless told; the SDK, like Kafka's
	// producers (compression.type=none), does not.
	codec := kgo.NoCompression()
	if p.compression != "" {
		if codec, err = kafkaCodec(p.compression); err != nil {
			return nil, err
		}
	}
	opts = append(opts, kgo.ProducerBatchCompression(codec))
	batch, batchMax, inflight := p.batch, p.batchMax, p.inflight
	if batchMax == 0 {
		batchMax = max(batch, sdkBatchMaxSize)
	}
	opts = append(opts, kgo.ProducerBatchMaxBytes(int32(batchMax)))
	if txnID != "" {
		opts = append(opts, kgo.TransactionalID(txnID))
	} else if !idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	switch {
	case inflight == 0:
	case idempotent || txnID != "":
		// franz-go keeps up to 5 requests in flight per broker for an
		// idempotent producer (Kafka's bound) and takes no setting for it.
		if inflight > 5 {
			return nil, fmt.Errorf("max.in.flight.requests.per.connection=%d: an idempotent producer keeps at most 5", inflight)
		}
	default:
		opts = append(opts, kgo.MaxProduceRequestsInflightPerBroker(inflight))
	}
	return opts, nil
}

func kafkaCodec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("compression.type %q: none, gzip, snappy, lz4 or zstd", name)
}

// sdkBatchMaxSize is the SDK's default batch.max.size (client.BatchMaxSize).
const sdkBatchMaxSize = 256 << 10
