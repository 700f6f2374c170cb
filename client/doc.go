// Package client is the Go SDK of Strand, a replicated commit log that
// speaks Kafka's semantics over gRPC: a Producer, a Consumer (on its own or
// in a consumer group), an Admin client, and TransactSession, which runs a
// consume-transform-produce loop exactly once.
//
// Every client is made from options (Opt) named after the Kafka setting
// they mirror, with Kafka's defaults: Bootstrap (bootstrap.servers),
// RequiredAcks (acks), Linger (linger.ms), DeliveryTimeout
// (delivery.timeout.ms), Isolation (isolation.level), AutoOffsetReset
// (auto.offset.reset), … A contradiction between options is refused by the
// constructor with a sentence saying why. Every call that waits for the
// network takes a context.Context.
//
// # Producer
//
// Produce buffers a record and calls its Promise with the outcome; records
// are batched per partition (batch.size, linger.ms) and sent on one gRPC
// stream per broker. ProduceSync sends at once and waits for its records;
// Flush waits for everything produced so far; Close flushes and releases
// the connections. Records with a key go to the partition its murmur2 hash
// picks (as Kafka's Java client does); records without one stick to a
// partition until its batch is full. Compression takes NoCompression, Gzip,
// Snappy, LZ4 or Zstd.
//
// # Idempotence
//
// A producer is idempotent unless told otherwise: acks=all, and every
// batch carries the producer id, its epoch and a per-partition sequence
// number, assigned when the batch is first sent and kept on every retry,
// so the broker writes a retried batch once and never out of order. At
// most five batches per partition are in flight (the broker remembers the
// last five of each producer). Setting RequiredAcks other than AllISRAcks,
// MaxInFlight above 5 or Retries(0) without EnableIdempotence turns it off;
// asking for both is refused.
//
// # Transactions
//
// With TransactionalID, a producer writes atomically across partitions:
// InitTransactions once (it fences any older producer with the same id),
// then for each transaction BeginTransaction, Produce,
// SendOffsetsToTransaction to commit a consumer group's offsets with it,
// and CommitTransaction or AbortTransaction. A transaction that stays open
// past TransactionTimeout is aborted by its coordinator.
//
// # Consumers and groups
//
// A Consumer reads the partitions given to Assign, each from an offset of
// its choice, or, with GroupID and Topics, joins a consumer group and is
// given partitions by it (range or cooperative-sticky assignment; the
// OnPartitions… callbacks run from Poll). A group member starts each new
// partition at the group's committed offset; where there is none, at
// auto.offset.reset, which is ResetLatest by default, as in Kafka: a new
// group reads only what is written after it is first given the partition. Use
// AutoOffsetReset(ResetEarliest) to read a topic from its start. Offsets
// are committed every five seconds by default (AutoCommit), or by
// CommitOffsets and CommitPolled. GroupInstanceID makes a member static.
//
// # Isolation levels
//
// ReadUncommitted (the default) returns every record up to the partition's
// high watermark, including those of open and aborted transactions.
// ReadCommitted returns records up to the last stable offset only, skips
// the records of aborted transactions, and never returns transaction
// markers; positions still move past them.
//
// # Consume-transform-produce
//
// NewTransactSession builds a read_committed group consumer and a
// transactional producer from one set of options. Each transaction
// (Begin … End) commits what was produced together with the consumer's
// positions as the group's offsets, so every input is processed exactly
// once; End aborts instead when the group took partitions away meanwhile,
// and after any abort rewinds the consumer to the committed offsets.
//
// # Admin
//
// Admin creates and deletes topics, reads and changes their configs, reads
// metadata, offsets (ListOffsets reports both the high watermark and the
// last stable offset) and group offsets, and inspects and repairs
// transactions (ListTransactions, DescribeTransaction, DescribeProducers,
// AbortTransaction for a hanging one).
//
// # Errors
//
// Every error the SDK returns that carries a broker's error code (a Kafka
// error name such as NOT_LEADER_OR_FOLLOWER) has an *Error in its chain:
// errors.As(err, &e) gives the code, errors.Is(err, ErrNotLeaderOrFollower)
// matches it (each code has its Err… sentinel, which matches any error
// with that code), and the message names the code once. Each method's
// documentation lists the errors it returns.
//
// The SDK retries retriable answers itself, within a bound: Produce's
// records until delivery.timeout.ms, transactional calls until
// max.block.ms, everything until its ctx ends. A call that ends because its
// ctx or one of those timeouts ran out returns an error that matches
// context.DeadlineExceeded (or context.Canceled, when ctx was cancelled;
// ErrDeliveryTimeout also matches context.DeadlineExceeded) and still
// carries the broker error it was retrying, if any.
//
// Classify (the same as errs.CategoryOf, the public package errs holding
// the error table, CodeOf and the categories) puts every error in one
// category, as Kafka's clients do:
//
//   - Retriable: retrying may succeed (a leader moved, a call ran out of
//     time);
//   - CommitOutcomeUnknown: CommitTransaction was sent and its answer lost
//     (ErrCommitOutcomeUnknown): call CommitTransaction again;
//   - Abortable: the open transaction can only be aborted
//     (AbortTransaction, then begin again);
//   - ApplicationRecoverable: another producer took over the transactional
//     id (ErrProducerFenced): close this producer and create a new one;
//   - Fatal: a configuration problem or a bug (MESSAGE_TOO_LARGE,
//     INVALID_CONFIG, a closed client); retrying will not help;
//
// and Classify(nil) is NoError. Indefinite reports whether a failed write
// may still have happened (it was sent and no definite answer came back).
//
// # Examples
//
// The examples run against a one-node server (`strand server --dev
// --data-dir /tmp/s1 --listen 127.0.0.1:9097`, with the topics they name
// created); bootstrap is its gRPC address.
package client
