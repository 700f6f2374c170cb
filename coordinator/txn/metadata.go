package txn

import (
	"sort"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TopicPartition names a partition of a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// abort reasons recorded with an epoch bump the producer did not ask for,
// so its next request is told why.
const (
	reasonNone    = ""
	reasonTimeout = "timeout"
	reasonFenced  = "fenced"
)

// Metadata is one transactional id's state (Kafka's TransactionMetadata).
// It changes only in apply, after the transition it applies is durable in
// the transaction log.
type Metadata struct {
	TransactionalID   string
	ProducerID        int64
	PrevProducerID    int64
	NextProducerID    int64
	ProducerEpoch     int16
	LastProducerEpoch int16
	TimeoutMs         int32
	State             State
	Partitions        map[TopicPartition]bool
	StartTimeMs       int64
	LastUpdateMs      int64
	// Reason says why the last epoch bump happened when the producer did not
	// ask for it (a timeout abort, a fence); persisted so a new coordinator
	// answers the same.
	Reason string
	// TxnVersion is the transaction version of the producer's last
	// transaction (its markers follow that version's epoch rule).
	TxnVersion int16
	// Principal is who was answered the id's last InitProducerId (the cap
	// of open_cap.go counts by it); kept in memory only.
	Principal string

	pending *transition
	waiters chan struct{} // closed when pending clears
	settled chan struct{} // made by a waiter; closed when the state leaves Prepare*
}

// abortedEpoch is the epoch of the producer whose transaction the
// coordinator aborted on its own account (Reason set), or -1. A timeout
// abort keeps it as the last epoch. A fence, as Kafka's, leaves the last
// epoch at -1, so the fenced producer is never taken for a retry: its
// epoch is the one below the current (a fence bumps it once). Records
// Strand wrote before that kept it as the last epoch, which still counts.
func (m *Metadata) abortedEpoch() int16 {
	switch {
	case m.Reason == reasonNone:
		return -1
	case m.Reason == reasonFenced && m.LastProducerEpoch < 0 && m.ProducerEpoch > 0:
		return m.ProducerEpoch - 1
	}
	return m.LastProducerEpoch
}

// preparing reports whether a commit or abort is being completed (the
// markers are being written).
func (m *Metadata) preparing() bool {
	switch m.State {
	case PrepareCommit, PrepareAbort, PrepareEpochFence:
		return true
	}
	return false
}

// transition is a state change in flight: what will be written and applied.
type transition struct {
	state        State
	producerID   int64
	prevPID      int64
	nextPID      int64
	epoch        int16
	lastEpoch    int16
	timeoutMs    int32
	partitions   map[TopicPartition]bool
	startTimeMs  int64
	updateTimeMs int64
	reason       string
	txnVersion   int16
}

func newMetadata(id string, pid int64, timeoutMs int32, now int64) *Metadata {
	return &Metadata{TransactionalID: id, ProducerID: pid, PrevProducerID: -1, NextProducerID: -1, ProducerEpoch: -1, LastProducerEpoch: -1,
		TimeoutMs: timeoutMs, State: Empty, Partitions: map[TopicPartition]bool{}, StartTimeMs: -1, LastUpdateMs: now, TxnVersion: 2}
}

// base starts a transition from the current state.
func (m *Metadata) base(to State, now int64) *transition {
	parts := make(map[TopicPartition]bool, len(m.Partitions))
	for tp := range m.Partitions {
		parts[tp] = true
	}
	return &transition{state: to, producerID: m.ProducerID, prevPID: m.PrevProducerID, nextPID: m.NextProducerID, epoch: m.ProducerEpoch,
		lastEpoch: m.LastProducerEpoch, timeoutMs: m.TimeoutMs, partitions: parts, startTimeMs: m.StartTimeMs, updateTimeMs: now, reason: m.Reason, txnVersion: m.TxnVersion}
}

// begin marks t in flight; it refuses an illegal transition (a bug, since
// callers check the state first).
func (m *Metadata) begin(t *transition) bool {
	if m.pending != nil || (!CanTransition(m.State, t.state) && !(m.State == t.state && t.state == Empty)) {
		return false
	}
	m.pending = t
	m.waiters = make(chan struct{})
	return true
}

// apply makes the pending transition the state.
func (m *Metadata) apply() {
	t := m.pending
	m.State, m.ProducerID, m.PrevProducerID, m.NextProducerID = t.state, t.producerID, t.prevPID, t.nextPID
	m.ProducerEpoch, m.LastProducerEpoch, m.TimeoutMs = t.epoch, t.lastEpoch, t.timeoutMs
	m.Partitions, m.StartTimeMs, m.LastUpdateMs, m.Reason, m.TxnVersion = t.partitions, t.startTimeMs, t.updateTimeMs, t.reason, t.txnVersion
	m.finish()
}

// finish clears the pending transition without applying it.
func (m *Metadata) finish() {
	m.pending = nil
	if m.waiters != nil {
		close(m.waiters)
		m.waiters = nil
	}
	if m.settled != nil && !m.preparing() {
		close(m.settled)
		m.settled = nil
	}
}

// sortedPartitions lists the partitions in order.
func sortedPartitions(set map[TopicPartition]bool) []TopicPartition {
	out := make([]TopicPartition, 0, len(set))
	for tp := range set {
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

// value encodes a transition as the transaction log value.
func (t *transition) value() *pb.TransactionLogValue {
	v := &pb.TransactionLogValue{ProducerId: t.producerID, ProducerEpoch: int32(t.epoch), TransactionTimeoutMs: t.timeoutMs,
		TransactionStatus: int32(t.state), TransactionLastUpdateTimestampMs: t.updateTimeMs, TransactionStartTimestampMs: t.startTimeMs,
		PreviousProducerId: t.prevPID, NextProducerId: t.nextPID, ClientTransactionVersion: int32(t.txnVersion), LastProducerEpoch: int32(t.lastEpoch), Reason: t.reason}
	byTopic := map[string]*pb.TxnLogPartitions{}
	for _, tp := range sortedPartitions(t.partitions) {
		tl := byTopic[tp.Topic]
		if tl == nil {
			tl = &pb.TxnLogPartitions{Topic: tp.Topic}
			byTopic[tp.Topic] = tl
			v.TransactionPartitions = append(v.TransactionPartitions, tl)
		}
		tl.PartitionIds = append(tl.PartitionIds, tp.Partition)
	}
	return v
}

// fromValue rebuilds metadata from a log value (loading a partition).
func fromValue(id string, v *pb.TransactionLogValue) *Metadata {
	m := &Metadata{TransactionalID: id, ProducerID: v.ProducerId, PrevProducerID: v.PreviousProducerId, NextProducerID: v.NextProducerId,
		ProducerEpoch: int16(v.ProducerEpoch), LastProducerEpoch: int16(v.LastProducerEpoch), TimeoutMs: v.TransactionTimeoutMs,
		State: State(v.TransactionStatus), Partitions: map[TopicPartition]bool{}, StartTimeMs: v.TransactionStartTimestampMs,
		LastUpdateMs: v.TransactionLastUpdateTimestampMs, Reason: v.Reason, TxnVersion: int16(v.ClientTransactionVersion)}
	if m.TxnVersion == 0 {
		m.TxnVersion = 2 // every record Strand wrote before it kept the version was version 2
	}
	for _, tl := range v.TransactionPartitions {
		for _, p := range tl.PartitionIds {
			m.Partitions[TopicPartition{tl.Topic, p}] = true
		}
	}
	return m
}
