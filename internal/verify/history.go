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
}

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
}
