// Package verify is the judge behind `strand verify`: it takes the history
// of what an exactly-once workload did and saw (transactions with their
// writes and outcomes, consumer reads, the final read-back of every
// partition, the stage group's committed offsets) and counts the anomalies
// in it, in the spirit of Jepsen's Kafka checker.
//
// The package is pure: Check does no I/O, starts no goroutines and reads no
// clock; the only times it looks at are the ones recorded in the History.
package verify

import (
	"fmt"
	"time"
)

// TransformRule documents how the consume-transform-produce stage derives
// an output value from an input value. OutputFor implements it; the
// workload must use OutputFor and record TransformRule in
// History.Transform.
const TransformRule = `output = "t:" + input`

// outputPrefix is the constant part of TransformRule.
const outputPrefix = "t:"

// OutputFor is the value the stage writes to the sink topic for a source
// record with value input (TransformRule). It is injective, so an output
// names its input.
func OutputFor(input string) string { return outputPrefix + input }

// Outcome is what the client learned about the end of a transaction.
type Outcome string

const (
	// Committed: CommitTransaction succeeded.
	Committed Outcome = "committed"
	// Aborted: the transaction definitely did not commit (AbortTransaction
	// succeeded, or a definite error such as fencing before commit was
	// requested).
	Aborted Outcome = "aborted"
	// Unknown: the client could not learn the outcome (for example
	// client.ErrCommitOutcomeUnknown until the retries ran out, or a crash
	// while the commit was in flight). The checker treats such a
	// transaction as committed once a read_committed read sees one of its
	// values, and as "may or may not have happened" otherwise.
	Unknown Outcome = "unknown"
)

// Valid reports whether o is one of Committed, Aborted and Unknown.
func (o Outcome) Valid() bool {
	return o == Committed || o == Aborted || o == Unknown
}

// TP names a topic-partition.
type TP struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// String is "topic/partition".
func (tp TP) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// TPOffset is an offset of one topic-partition. As a committed consumer
// offset it is, as in Kafka, the offset of the next record to consume.
type TPOffset struct {
	TP
	Offset int64 `json:"offset"`
}

// Offsets is a list of per-partition offsets. A partition should appear at
// most once; if it appears more than once the last entry wins (as a later
// SendOffsetsToTransaction or offset commit would).
type Offsets []TPOffset

// Get returns the offset of tp (the last entry for it) and whether there is
// one.
func (o Offsets) Get(tp TP) (int64, bool) {
	for i := len(o) - 1; i >= 0; i-- {
		if o[i].TP == tp {
			return o[i].Offset, true
		}
	}
	return 0, false
}

// Write is one record a transaction produced.
type Write struct {
	TP
	// Value is unique in the whole run, with one exception: the stage's
	// output for an input (OutputFor) is written again by every retry of
	// that input after an aborted or unknown stage transaction.
	Value string `json:"value"`
	// Offset is where the broker acknowledged the record, -1 when it was
	// not acknowledged.
	Offset int64 `json:"offset"`
	// ProducerSeq is the position of this write in its producer's send
	// order: per Txn.Producer, increasing across that producer's
	// transactions (never reused, also not by a new incarnation that
	// keeps the same Producer name).
	ProducerSeq int64 `json:"producer_seq"`
	// Unsent: the client failed the record with client.ErrAborted, because
	// its transaction was aborted before the record was sent. It was never
	// written anywhere, so no read may see it (a read that does is
	// Unwritten); Offset is -1 and the transaction Aborted.
	Unsent bool `json:"unsent,omitempty"`
}

// MaxProducerEpoch is the largest epoch a producer may be handed: the
// markers of transaction version 2 carry the epoch after it.
const MaxProducerEpoch = 32766

// PID is a producer id and epoch as a client held them.
type PID struct {
	ID    int64 `json:"id"`
	Epoch int16 `json:"epoch"`
}

// Fence kinds (Txn.Fence, Incarnation.Fence): why the workload fenced a
// producer on purpose by starting a new incarnation of its transactional
// id while a transaction of it was open.
const (
	// FenceEpochEnd: the producer's epoch had reached MaxProducerEpoch.
	FenceEpochEnd = "epoch-end"
	// FenceZombie: at a random epoch.
	FenceZombie = "zombie"
)

// Read is one record a consumer observed.
type Read struct {
	// Reader names the consumer (a live consumer, the stage, or the final
	// read-back).
	Reader string `json:"reader"`
	// ReadCommitted is the consumer's isolation level: true for
	// read_committed, false for read_uncommitted.
	ReadCommitted bool `json:"read_committed"`
	// Final marks the read-back at the end of the run, after faults have
	// stopped and every transaction has ended: every partition read from
	// the beginning to its end with both isolation levels. Final reads
	// are the ground truth of what the log holds.
	Final bool `json:"final"`
	TP
	Offset int64  `json:"offset"`
	Value  string `json:"value"`
	// Time is when the consumer received the record; required for live
	// (non-final) reads.
	Time time.Time `json:"time,omitzero"`
}

// Txn is one transaction of the workload: a producer's transaction or a
// consume-transform-produce stage transaction.
type Txn struct {
	ID       string  `json:"id"`
	Producer string  `json:"producer"`
	Outcome  Outcome `json:"outcome"`
	// Writes are the records the transaction produced, in send order.
	Writes []Write `json:"writes"`
	// Begin is when the transaction began, End when its outcome was
	// known (or the client gave up).
	Begin time.Time `json:"begin,omitzero"`
	// CommitRequested is when CommitTransaction was first called; zero if
	// commit was never attempted. A Committed transaction must have it.
	CommitRequested time.Time `json:"commit_requested,omitzero"`
	End             time.Time `json:"end,omitzero"`
	// Inputs are the records a stage transaction consumed (its
	// read_committed reads). They are reads like History.Reads and need
	// not be repeated there.
	Inputs []Read `json:"inputs,omitempty"`
	// Offsets are the consumer offsets the transaction sent with
	// SendOffsetsToTransaction (next offset to consume, per source
	// partition).
	Offsets Offsets `json:"offsets,omitempty"`
	// PID is the producer id and epoch the transaction's records were
	// sent with, when known.
	PID *PID `json:"pid,omitempty"`
	// Fence is FenceEpochEnd or FenceZombie when the workload fenced this
	// transaction's producer on purpose after its records were produced
	// (Incarnations holds the new incarnation). Its commit, attempted
	// afterwards, must fail and its records must stay invisible: the
	// workload records it Aborted when the commit failed and Committed
	// when it succeeded (an epoch anomaly).
	Fence string `json:"fence,omitempty"`
	// EarlyAbort: the transaction was aborted right after its records were
	// handed to the client, without waiting for any to be sent (some are
	// then Unsent; when all are, the abort reached the coordinator with no
	// partition in the transaction).
	EarlyAbort bool `json:"early_abort,omitempty"`
	// AbortErr is why AbortTransaction failed, when it failed for another
	// reason than the producer being fenced.
	AbortErr string `json:"abort_error,omitempty"`
}

// IsStage reports whether t is a consume-transform-produce transaction:
// it consumed inputs or sent offsets.
func (t *Txn) IsStage() bool { return len(t.Inputs) > 0 || len(t.Offsets) > 0 }

// History is everything an exactly-once workload did and saw. It is what
// `strand verify --json` writes and what Check judges.
type History struct {
	// SourceTopic is the topic the producers write and the stage consumes;
	// SinkTopic the topic the stage writes. Either may be empty when the
	// run had no stage.
	SourceTopic string `json:"source_topic,omitempty"`
	SinkTopic   string `json:"sink_topic,omitempty"`
	// Transform is the stage's rule (TransformRule); empty means
	// TransformRule.
	Transform string `json:"transform,omitempty"`
	Txns      []Txn  `json:"txns"`
	// Reads are the live reads (Final false) and the final read-back
	// (Final true). Stage inputs live in Txn.Inputs.
	Reads []Read `json:"reads"`
	// GroupOffsets are the stage group's committed offsets at the end of
	// the run, per source partition; a partition without an entry has no
	// committed offset (nothing was consumed from it).
	GroupOffsets Offsets `json:"group_offsets,omitempty"`
	// Incarnations are the InitTransactions answers of the transactional
	// producers, in time order per producer.
	Incarnations []Incarnation `json:"incarnations,omitempty"`
	// Spans are the transactions a protocol-level read_committed reader
	// followed, one per producer transaction and partition.
	Spans []TxnSpan `json:"spans,omitempty"`
	// OpenAtEnd are the partitions whose last stable offset was still
	// below their high watermark at the end of the run, after the
	// producers and the stage had stopped, the cluster had settled, and a
	// grace period for open transactions to end had passed.
	OpenAtEnd []OpenPartition `json:"open_at_end,omitempty"`
	// Drills names the drills that ran (not those skipped), in order.
	Drills []string `json:"drills,omitempty"`
}

// Incarnation is one InitTransactions of a transactional producer.
type Incarnation struct {
	Producer string    `json:"producer"`
	PID      PID       `json:"pid"`
	Time     time.Time `json:"time,omitzero"`
	// Fence is FenceEpochEnd or FenceZombie when this incarnation was
	// started to fence the previous one, whose id and epoch were Fenced.
	Fence  string `json:"fence,omitempty"`
	Fenced *PID   `json:"fenced,omitempty"`
}

// TxnSpan is one transaction of one producer in one partition, as a
// protocol-level read_committed reader (Fetch, isolation READ_COMMITTED)
// saw it: from its first data batch to its marker. Batches the reader
// dropped as aborted (the response's aborted-transaction list) are part of
// it but not delivered.
type TxnSpan struct {
	TP
	Reader      string `json:"reader"`
	ProducerID  int64  `json:"producer_id"`
	Epoch       int16  `json:"epoch"`
	FirstOffset int64  `json:"first_offset"`
	// Delivered is the offset of its first data batch the reader delivered,
	// -1 when it delivered none. DeliveredHW is the high watermark of the
	// Fetch response that delivered it (the larger of its high watermark
	// and last stable offset: the LSO is never above the HW, so this is
	// the HW at some moment while the response was built).
	Delivered   int64 `json:"delivered"`
	DeliveredHW int64 `json:"delivered_hw"`
	// LeaderHW is the highest high watermark the leader that delivered
	// them reported from then on, while it led at the same leader epoch
	// (including the response that carried the marker, when it came from
	// that leader). A leader releases a transaction for read_committed
	// readers as it computes a HW past the marker, which its responses
	// report a moment later: a marker at or above DeliveredHW but below
	// LeaderHW was replicated, just not reported yet.
	LeaderHW int64 `json:"leader_hw"`
	// Marker is the offset of the COMMIT (Commit) or ABORT marker that
	// ended it, -1 when the reader read none (the run ended first, or
	// Orphaned).
	Marker int64 `json:"marker"`
	Commit bool  `json:"commit,omitempty"`
	// Orphaned is the offset of a data batch of the same producer at a
	// newer epoch that came while this transaction had no marker (-1:
	// none): its own marker never came, so it hung until a later
	// transaction's marker ended it with that one's outcome.
	Orphaned int64 `json:"orphaned"`
	// Time is when the reader read its first batch.
	Time time.Time `json:"time,omitzero"`
}

// OpenPartition is a partition whose last stable offset stayed below its
// high watermark at the end of the run.
type OpenPartition struct {
	TP
	HighWatermark    int64 `json:"high_watermark"`
	LastStableOffset int64 `json:"last_stable_offset"`
	// Waited is how long the workload waited for it to close, seconds.
	Waited float64 `json:"waited_seconds"`
	// Blocking describes the open transaction at the LSO: producer id,
	// epoch and start offset from the leader's producer state, and the
	// transactional id with its coordinator's state when one is found.
	Blocking string `json:"blocking,omitempty"`
}
