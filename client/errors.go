package client

import (
	"errors"

	"github.com/strand-io/strand/internal/errs"
)

// Error is a broker error: a Kafka error name (Code) and a message saying
// why. Match with errors.Is against the Err* sentinels below.
type Error = errs.Error

// Category is how an application should handle an error (see Classify).
type Category = errs.Category

// The four categories every error falls in.
const (
	// Retriable: the SDK retries these itself; an application sees one only
	// when retries ran out (delivery.timeout.ms, max.block.ms).
	Retriable = errs.Retriable
	// Abortable: abort the transaction and begin again.
	Abortable = errs.Abortable
	// ApplicationRecoverable: close this producer and create a new one.
	ApplicationRecoverable = errs.ApplicationRecoverable
	// Fatal: a configuration problem or a bug; retrying will not help.
	Fatal = errs.Fatal
)

// Classify puts err in exactly one category. Errors without a broker code
// (a closed producer, a bad option) are Fatal, except context expiry and
// ErrCommitOutcomeUnknown, which are Retriable.
func Classify(err error) Category {
	switch {
	case err == nil:
		return Retriable
	case errors.Is(err, ErrCommitOutcomeUnknown):
		return Retriable
	case errors.Is(err, ErrProducerFenced):
		return ApplicationRecoverable
	case errors.Is(err, ErrAbortable):
		return Abortable
	}
	return errs.CategoryOf(err)
}

// Sentinels for errors.Is. Each matches any error with that Kafka code.
var (
	ErrNotLeaderOrFollower          = errs.NotLeaderOrFollower
	ErrUnknownTopicOrPartition      = errs.UnknownTopicOrPartition
	ErrNotEnoughReplicas            = errs.NotEnoughReplicas
	ErrNotEnoughReplicasAfterAppend = errs.NotEnoughReplicasAfterAppend
	ErrRequestTimedOut              = errs.RequestTimedOut
	ErrMessageTooLarge              = errs.MessageTooLarge
	ErrCorruptMessage               = errs.CorruptMessage
	ErrOutOfOrderSequenceNumber     = errs.OutOfOrderSequenceNumber
	ErrInvalidProducerEpoch         = errs.InvalidProducerEpoch
	ErrUnknownProducerID            = errs.UnknownProducerID
	ErrProducerFenced               = errs.ProducerFenced
	// ErrInvalidProducerIDMapping: the coordinator no longer knows the
	// producer id (the transactional id expired after
	// transactional.id.expiration.ms idle). Abortable: AbortTransaction
	// gets a new producer id and the producer carries on.
	ErrInvalidProducerIDMapping  = errs.InvalidProducerIDMapping
	ErrConcurrentTransactions    = errs.ConcurrentTransactions
	ErrCoordinatorLoadInProgress = errs.CoordinatorLoadInProgress
	ErrNotCoordinator            = errs.NotCoordinator
	ErrInvalidTxnState           = errs.InvalidTxnState
	ErrTransactionAbortable      = errs.TransactionAbortable
	ErrTransactionTimedOut       = errs.TransactionTimedOut
	ErrOffsetOutOfRange          = errs.OffsetOutOfRange
	ErrTopicAlreadyExists        = errs.TopicAlreadyExists
	ErrInvalidReplicationFactor  = errs.InvalidReplicationFactor
	ErrUnstableOffsetCommit      = errs.UnstableOffsetCommit
	ErrIllegalGeneration         = errs.IllegalGeneration
	ErrUnknownMemberID           = errs.UnknownMemberID
	ErrRebalanceInProgress       = errs.RebalanceInProgress
	// ErrFencedInstanceID: another consumer joined the group with this
	// consumer's GroupInstanceID. Poll returns it from then on; close the
	// consumer (two processes must not share a group.instance.id).
	ErrFencedInstanceID = errs.FencedInstanceID
)

// SDK-side errors.
var (
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("strand: client closed")
	// ErrCommitOutcomeUnknown: CommitTransaction could not learn whether the
	// commit happened (the answer was lost). Retry CommitTransaction: a
	// commit is idempotent under transaction version 2 and is never turned
	// into an abort.
	ErrCommitOutcomeUnknown = errors.New("strand: the outcome of the commit is unknown; retry CommitTransaction")
	// ErrAbortable wraps errors after which the open transaction must be aborted.
	ErrAbortable = errors.New("strand: the transaction must be aborted")
	// ErrDeliveryTimeout: a record was not acknowledged within delivery.timeout.ms.
	ErrDeliveryTimeout = errors.New("strand: delivery.timeout.ms expired before the record was acknowledged")
)

// Indefinite reports whether a produce failure may still have been written
// (a timeout, a lost answer, a leader change after sending), as opposed to a
// definite failure where the broker refused the write.
func Indefinite(err error) bool {
	var ie *indefiniteError
	return errors.As(err, &ie)
}

type indefiniteError struct{ err error }

func (e *indefiniteError) Error() string {
	return e.err.Error() + " (the write may or may not have happened)"
}
func (e *indefiniteError) Unwrap() error { return e.err }
