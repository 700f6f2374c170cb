package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Error codes on the Kafka listener. The request layer answers in Kafka's
// codes, plus the ones only Strand has (strandOnly), which its own SDK
// reads over gRPC and a Kafka client cannot (librdkafka prints
// "Err-10001?", franz-go reads UNKNOWN_SERVER_ERROR). Every code this
// listener sends goes through code or answerCode, which give Kafka's
// answer in their place; codes_test.go holds every code the request layer
// has, at every version of every API served, to Kafka's table, and the
// listener's source to converting codes nowhere else.

// strandOnly maps each code only Strand has to the code Kafka answers in
// its place.
var strandOnly = map[pb.ErrorCode]pb.ErrorCode{
	// The coordinator aborted the transaction at transaction.timeout.ms.
	// Kafka's timeout abort is a fence (prepareFenceProducerEpoch): the
	// producer's next request finds its epoch gone, PRODUCER_FENCED
	// (answerCode: INVALID_PRODUCER_EPOCH where that is Kafka's answer).
	// The message still says what happened.
	pb.ErrorCode_TRANSACTION_TIMED_OUT: pb.ErrorCode_PRODUCER_FENCED,
}

// code is an error code as Kafka's wire carries it (Strand's codes are
// Kafka's numbers; a code only Strand has is answered as Kafka answers in
// its place).
func code(c pb.ErrorCode) int16 {
	if k, ok := strandOnly[c]; ok {
		c = k
	}
	return int16(c)
}

// The first versions that know an error code, per API; older versions are
// answered the code Kafka answered them before it existed.
const (
	// PRODUCER_FENCED (KIP-588): before it, INVALID_PRODUCER_EPOCH.
	fencedSinceInitProducerID   = 4
	fencedSinceAddPartitionsTxn = 2
	fencedSinceAddOffsetsToTxn  = 2
	fencedSinceEndTxn           = 2
	// TRANSACTION_ABORTABLE (KIP-890): a partition the transaction does
	// not hold, as the coordinator's verification finds it; before it,
	// INVALID_TXN_STATE (Kafka's AddPartitionsToTxnManager).
	abortableSinceProduce         = 11
	abortableSinceTxnOffsetCommit = 4
	// OFFSET_NOT_AVAILABLE (KIP-207): a new leader whose HW lags the
	// start of its epoch; before it, LEADER_NOT_AVAILABLE.
	offsetNotAvailableSinceListOffsets = 5
)

// fencedSince is the first version of key that knows PRODUCER_FENCED.
func fencedSince(key kmsg.Key) int16 {
	switch key {
	case kmsg.InitProducerID:
		return fencedSinceInitProducerID
	case kmsg.AddPartitionsToTxn:
		return fencedSinceAddPartitionsTxn
	case kmsg.AddOffsetsToTxn:
		return fencedSinceAddOffsetsToTxn
	}
	return fencedSinceEndTxn
}

// answerCode is code for an answer of API key at version, with Kafka's
// conversions for that API and version:
//
//   - InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn:
//     PRODUCER_FENCED is INVALID_PRODUCER_EPOCH to a version older than
//     KIP-588 (KafkaApis).
//   - Produce, TxnOffsetCommit: the partition leader (the group
//     coordinator) asked the transaction coordinator, and answers a fence
//     INVALID_PRODUCER_EPOCH, which producers abort on, at every version;
//     TRANSACTION_ABORTABLE is INVALID_TXN_STATE to a version older than
//     the one that knows it (AddPartitionsToTxnManager).
func answerCode(key kmsg.Key, version int16, c pb.ErrorCode) int16 {
	if k, ok := strandOnly[c]; ok {
		c = k
	}
	switch key {
	case kmsg.InitProducerID, kmsg.AddPartitionsToTxn, kmsg.AddOffsetsToTxn, kmsg.EndTxn:
		if c == pb.ErrorCode_PRODUCER_FENCED && version < fencedSince(key) {
			c = pb.ErrorCode_INVALID_PRODUCER_EPOCH
		}
	case kmsg.ListOffsets:
		if c == pb.ErrorCode_OFFSET_NOT_AVAILABLE && version < offsetNotAvailableSinceListOffsets {
			c = pb.ErrorCode_LEADER_NOT_AVAILABLE
		}
	case kmsg.Produce, kmsg.TxnOffsetCommit:
		since := int16(abortableSinceProduce)
		if key == kmsg.TxnOffsetCommit {
			since = abortableSinceTxnOffsetCommit
		}
		switch {
		case c == pb.ErrorCode_PRODUCER_FENCED:
			c = pb.ErrorCode_INVALID_PRODUCER_EPOCH
		case c == pb.ErrorCode_TRANSACTION_ABORTABLE && version < since:
			c = pb.ErrorCode_INVALID_TXN_STATE
		}
	}
	return int16(c)
}
