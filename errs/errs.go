// Package errs is Strand's one error table: Kafka's error names and codes,
// whether a client may retry each, and which category an application must
// treat it as. Domain code returns *Error values (wrapped with %w as it
// likes); api/ maps them onto the wire, the SDK maps them back.
//
// It is also the one public way to classify an error the SDK returned:
// CategoryOf(err) puts it in exactly one Category (Retriable, Abortable,
// ApplicationRecoverable, Fatal or CommitOutcomeUnknown; NoError for nil),
// and CodeOf(err) gives the Kafka error code it carries.
package errs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Category is how an application should react to an error. Every error
// falls in exactly one (see CategoryOf).
type Category int

const (
	// Retriable errors are retried by the SDK itself.
	Retriable Category = iota
	// Abortable errors leave a transaction that must be aborted and begun again.
	Abortable
	// ApplicationRecoverable errors need the producer closed and re-created.
	ApplicationRecoverable
	// Fatal errors are configuration problems or bugs.
	Fatal
	// CommitOutcomeUnknown: a transaction's commit was sent and no answer
	// came back (a timeout, a lost connection, an unknown server error), so
	// whether it committed is not known. Kafka's producer reports this as a
	// TimeoutException from commitTransaction; here too the application
	// calls the commit again (under transaction version 2 a commit is never
	// turned into an abort), or closes the producer.
	CommitOutcomeUnknown
)

// NoError is the category of the nil error: there is nothing to handle.
const NoError Category = -1

func (c Category) String() string {
	switch c {
	case NoError:
		return "none"
	case Retriable:
		return "retriable"
	case Abortable:
		return "abortable"
	case ApplicationRecoverable:
		return "application-recoverable"
	case CommitOutcomeUnknown:
		return "commit-outcome-unknown"
	default:
		return "fatal"
	}
}

// Error is a Kafka-named error with a message saying why.
type Error struct {
	Code    pb.ErrorCode
	Message string
}

// Error prints the Kafka name and the message.
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code.String()
	}
	return e.Code.String() + ": " + e.Message
}

// Is matches any *Error with the same code, so errors.Is(err, errs.NotCoordinator) works.
func (e *Error) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) {
		return t.Code == e.Code
	}
	return false
}

// Retriable reports whether a client may simply retry the request.
func (e *Error) Retriable() bool { return info(e.Code).retriable }

// Category reports how an application should handle the error.
func (e *Error) Category() Category { return info(e.Code).category }

// New returns an error with the code and a formatted message.
func New(code pb.ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// FromCode returns nil for NONE and an *Error otherwise. A message that
// starts with the code's name (as one made from Error() rather than Split
// does) loses it, so the error names its code once.
func FromCode(code pb.ErrorCode, msg string) error {
	if code == pb.ErrorCode_NONE {
		return nil
	}
	return &Error{Code: code, Message: strings.TrimPrefix(msg, code.String()+": ")}
}

// CodeOf extracts the code of err: NONE for nil, UNKNOWN_SERVER_ERROR when
// err carries no code.
func CodeOf(err error) pb.ErrorCode {
	if err == nil {
		return pb.ErrorCode_NONE
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return pb.ErrorCode_UNKNOWN_SERVER_ERROR
}

// Split returns the code and message to put on the wire for err: the
// message says why, without repeating the code's name.
func Split(err error) (pb.ErrorCode, string) {
	if err == nil {
		return pb.ErrorCode_NONE, ""
	}
	var e *Error
	if !errors.As(err, &e) {
		return pb.ErrorCode_UNKNOWN_SERVER_ERROR, err.Error()
	}
	if err == error(e) {
		return e.Code, e.Message
	}
	return e.Code, strings.Replace(err.Error(), e.Code.String()+": ", "", 1)
}

// IsRetriable reports whether err carries a retriable code.
func IsRetriable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Retriable()
}

// SDK-side sentinels: errors that carry no Kafka code of their own but
// decide how an application reacts. The client wraps them (with %w) around
// the broker's error, so errors.Is finds both.
var (
	// ErrCommitOutcomeUnknown: a commit could not learn whether it
	// happened (its answer was lost). Retry the commit.
	ErrCommitOutcomeUnknown = errors.New("strand: the outcome of the commit is unknown; retry CommitTransaction")
	// ErrAbortable wraps errors after which the open transaction can only
	// be aborted.
	ErrAbortable = errors.New("strand: the transaction must be aborted")
)

// CategoryOf puts err in exactly one category, checking in this order:
//
//   - nil is NoError;
//   - an error matching ErrCommitOutcomeUnknown is CommitOutcomeUnknown;
//   - an error matching ProducerFenced (PRODUCER_FENCED) is
//     ApplicationRecoverable;
//   - an error matching ErrAbortable is Abortable;
//   - an error of a call that ran out of time or was cancelled (it matches
//     context.DeadlineExceeded or context.Canceled) is Retriable, like
//     Kafka's TimeoutException, whatever code it was retrying;
//   - an error carrying a code (an *Error in its chain) is that code's
//     category in the table;
//   - anything else is Fatal.
func CategoryOf(err error) Category {
	switch {
	case err == nil:
		return NoError
	case errors.Is(err, ErrCommitOutcomeUnknown):
		return CommitOutcomeUnknown
	case errors.Is(err, ProducerFenced):
		return ApplicationRecoverable
	case errors.Is(err, ErrAbortable):
		return Abortable
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return Retriable
	}
	return CodeCategory(CodeOf(err))
}

// CodeCategory is the category of a Kafka error code alone: NoError for
// NONE, Fatal for a code the table does not list.
func CodeCategory(code pb.ErrorCode) Category {
	if code == pb.ErrorCode_NONE {
		return NoError
	}
	return info(code).category
}

// CodeRetriable reports whether a client may retry a request answered
// with code.
func CodeRetriable(code pb.ErrorCode) bool { return info(code).retriable }

type entry struct {
	retriable bool
	category  Category
}

func info(c pb.ErrorCode) entry {
	if e, ok := table[c]; ok {
		return e
	}
	return entry{false, Fatal}
}

var (
	retry = entry{true, Retriable}
	fatal = entry{false, Fatal}
)

// table: Kafka's retriable flags (org.apache.kafka.common.protocol.Errors)
// and the KIP-1050 categories.
var table = map[pb.ErrorCode]entry{
	pb.ErrorCode_UNKNOWN_SERVER_ERROR:             fatal,
	pb.ErrorCode_OFFSET_OUT_OF_RANGE:              fatal,
	pb.ErrorCode_CORRUPT_MESSAGE:                  retry,
	pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION:       retry,
	pb.ErrorCode_INVALID_FETCH_SIZE:               fatal,
	pb.ErrorCode_LEADER_NOT_AVAILABLE:             retry,
	pb.ErrorCode_NOT_LEADER_OR_FOLLOWER:           retry,
	pb.ErrorCode_REQUEST_TIMED_OUT:                retry,
	pb.ErrorCode_BROKER_NOT_AVAILABLE:             retry,
	pb.ErrorCode_REPLICA_NOT_AVAILABLE:            retry,
	pb.ErrorCode_MESSAGE_TOO_LARGE:                fatal,
	pb.ErrorCode_OFFSET_METADATA_TOO_LARGE:        fatal,
	pb.ErrorCode_NETWORK_EXCEPTION:                retry,
	pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS:     retry,
	pb.ErrorCode_COORDINATOR_NOT_AVAILABLE:        retry,
	pb.ErrorCode_NOT_COORDINATOR:                  retry,
	pb.ErrorCode_INVALID_TOPIC_EXCEPTION:          fatal,
	pb.ErrorCode_RECORD_LIST_TOO_LARGE:            fatal,
	pb.ErrorCode_NOT_ENOUGH_REPLICAS:              retry,
	pb.ErrorCode_NOT_ENOUGH_REPLICAS_AFTER_APPEND: retry,
	pb.ErrorCode_INVALID_REQUIRED_ACKS:            fatal,
	pb.ErrorCode_ILLEGAL_GENERATION:               {false, Abortable},
	pb.ErrorCode_UNKNOWN_MEMBER_ID:                {false, Abortable},
	pb.ErrorCode_REBALANCE_IN_PROGRESS:            {true, Abortable},
	pb.ErrorCode_NOT_CONTROLLER:                   retry,
	pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER:     fatal,
	pb.ErrorCode_DUPLICATE_SEQUENCE_NUMBER:        fatal,
	pb.ErrorCode_INVALID_PRODUCER_EPOCH:           {false, Abortable},
	pb.ErrorCode_INVALID_TXN_STATE:                fatal,
	// INVALID_PRODUCER_ID_MAPPING: the coordinator no longer knows the
	// producer id (its transactional id expired); Kafka's producer aborts
	// and carries on under a new producer id (KIP-360).
	pb.ErrorCode_INVALID_PRODUCER_ID_MAPPING:    {false, Abortable},
	pb.ErrorCode_INVALID_TRANSACTION_TIMEOUT:    fatal,
	pb.ErrorCode_CONCURRENT_TRANSACTIONS:        retry,
	pb.ErrorCode_TRANSACTION_COORDINATOR_FENCED: fatal,
	pb.ErrorCode_KAFKA_STORAGE_ERROR:            retry,
	pb.ErrorCode_UNKNOWN_PRODUCER_ID:            {false, Abortable},
	pb.ErrorCode_FETCH_SESSION_ID_NOT_FOUND:     retry,
	pb.ErrorCode_INVALID_FETCH_SESSION_EPOCH:    retry,
	pb.ErrorCode_FENCED_LEADER_EPOCH:            retry,
	pb.ErrorCode_UNKNOWN_LEADER_EPOCH:           retry,
	pb.ErrorCode_STALE_BROKER_EPOCH:             retry,
	pb.ErrorCode_OFFSET_NOT_AVAILABLE:           retry,
	pb.ErrorCode_MEMBER_ID_REQUIRED:             retry,
	pb.ErrorCode_PREFERRED_LEADER_NOT_AVAILABLE: retry,
	pb.ErrorCode_ELIGIBLE_LEADERS_NOT_AVAILABLE: retry,
	pb.ErrorCode_UNSTABLE_OFFSET_COMMIT:         retry,
	// THROTTLING_QUOTA_EXCEEDED (KIP-599; here also a transaction over
	// transaction.max.open.per.principal): Kafka's exception is retriable.
	pb.ErrorCode_THROTTLING_QUOTA_EXCEEDED:  retry,
	pb.ErrorCode_PRODUCER_FENCED:            {false, ApplicationRecoverable},
	pb.ErrorCode_TRANSACTIONAL_ID_NOT_FOUND: fatal,
	pb.ErrorCode_INELIGIBLE_REPLICA:         retry,
	pb.ErrorCode_NEW_LEADER_ELECTED:         retry,
	pb.ErrorCode_TRANSACTION_ABORTABLE:      {false, Abortable},
	pb.ErrorCode_TRANSACTION_TIMED_OUT:      {false, Abortable},

	// FENCED_INSTANCE_ID: another process took over the group.instance.id
	// (KIP-345). A transaction that named the fenced member must abort, as
	// in Kafka's producer; the consumer itself stops (ErrFencedInstanceID).
	pb.ErrorCode_FENCED_INSTANCE_ID: {false, Abortable},

	// Topic ids: Kafka's exceptions for these are InvalidMetadataException
	// or RetriableException (refresh metadata, then retry).
	pb.ErrorCode_UNKNOWN_TOPIC_ID:             retry,
	pb.ErrorCode_INCONSISTENT_TOPIC_ID:        retry,
	pb.ErrorCode_FETCH_SESSION_TOPIC_ID_ERROR: retry,

	// The consumer group protocol (KIP-848). None is retriable as it stands
	// (the member heartbeats again, or rejoins, first); an offset commit in
	// a transaction that names a member the group has moved past must
	// abort, as for ILLEGAL_GENERATION.
	pb.ErrorCode_FENCED_MEMBER_EPOCH:        {false, Abortable},
	pb.ErrorCode_STALE_MEMBER_EPOCH:         {false, Abortable},
	pb.ErrorCode_UNRELEASED_INSTANCE_ID:     fatal,
	pb.ErrorCode_UNSUPPORTED_ASSIGNOR:       fatal,
	pb.ErrorCode_INVALID_REGULAR_EXPRESSION: fatal,
	pb.ErrorCode_GROUP_MAX_SIZE_REACHED:     fatal,

	pb.ErrorCode_LOG_DIR_NOT_FOUND:       fatal,
	pb.ErrorCode_TOPIC_DELETION_DISABLED: fatal,

	// CLUSTER_AUTHORIZATION_FAILED: a client asked for what only other
	// nodes may do. DUPLICATE_BROKER_REGISTRATION: the broker id is held by
	// a live session (a broker retries its registration until that session
	// expires, as Kafka's does).
	pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED: fatal,
	// The authorizer refused the principal: not retriable, as Kafka's.
	pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED:            fatal,
	pb.ErrorCode_GROUP_AUTHORIZATION_FAILED:            fatal,
	pb.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED: fatal,
	pb.ErrorCode_DUPLICATE_BROKER_REGISTRATION:         fatal,
	// SECURITY_DISABLED: an ACL request to a broker without an authorizer.
	pb.ErrorCode_SECURITY_DISABLED: fatal,

	// Controller quorum changes (KIP-853): the named node already is / is
	// not a voter.
	pb.ErrorCode_DUPLICATE_VOTER: fatal,
	pb.ErrorCode_VOTER_NOT_FOUND: fatal,

	// --- sasl --- begin
	// SASL (Kafka: none retriable): a wrong password, a mechanism not
	// enabled, a SASL message out of turn; SCRAM credential changes.
	pb.ErrorCode_SASL_AUTHENTICATION_FAILED: fatal,
	pb.ErrorCode_UNSUPPORTED_SASL_MECHANISM: fatal,
	pb.ErrorCode_ILLEGAL_SASL_STATE:         fatal,
	pb.ErrorCode_DUPLICATE_RESOURCE:         fatal,
	pb.ErrorCode_UNACCEPTABLE_CREDENTIAL:    fatal,
	// --- sasl --- end
}

// Sentinels for errors.Is.
var (
	UnknownServerError           = &Error{Code: pb.ErrorCode_UNKNOWN_SERVER_ERROR}
	OffsetOutOfRange             = &Error{Code: pb.ErrorCode_OFFSET_OUT_OF_RANGE}
	CorruptMessage               = &Error{Code: pb.ErrorCode_CORRUPT_MESSAGE}
	UnknownTopicOrPartition      = &Error{Code: pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION}
	LeaderNotAvailable           = &Error{Code: pb.ErrorCode_LEADER_NOT_AVAILABLE}
	NotLeaderOrFollower          = &Error{Code: pb.ErrorCode_NOT_LEADER_OR_FOLLOWER}
	RequestTimedOut              = &Error{Code: pb.ErrorCode_REQUEST_TIMED_OUT}
	MessageTooLarge              = &Error{Code: pb.ErrorCode_MESSAGE_TOO_LARGE}
	OffsetMetadataTooLarge       = &Error{Code: pb.ErrorCode_OFFSET_METADATA_TOO_LARGE}
	CoordinatorLoadInProgress    = &Error{Code: pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS}
	CoordinatorNotAvailable      = &Error{Code: pb.ErrorCode_COORDINATOR_NOT_AVAILABLE}
	NotCoordinator               = &Error{Code: pb.ErrorCode_NOT_COORDINATOR}
	InvalidTopic                 = &Error{Code: pb.ErrorCode_INVALID_TOPIC_EXCEPTION}
	NotEnoughReplicas            = &Error{Code: pb.ErrorCode_NOT_ENOUGH_REPLICAS}
	NotEnoughReplicasAfterAppend = &Error{Code: pb.ErrorCode_NOT_ENOUGH_REPLICAS_AFTER_APPEND}
	InvalidRequiredAcks          = &Error{Code: pb.ErrorCode_INVALID_REQUIRED_ACKS}
	NotController                = &Error{Code: pb.ErrorCode_NOT_CONTROLLER}
	InvalidRequest               = &Error{Code: pb.ErrorCode_INVALID_REQUEST}
	OutOfOrderSequenceNumber     = &Error{Code: pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER}
	InvalidProducerEpoch         = &Error{Code: pb.ErrorCode_INVALID_PRODUCER_EPOCH}
	InvalidTxnState              = &Error{Code: pb.ErrorCode_INVALID_TXN_STATE}
	InvalidProducerIDMapping     = &Error{Code: pb.ErrorCode_INVALID_PRODUCER_ID_MAPPING}
	InvalidTransactionTimeout    = &Error{Code: pb.ErrorCode_INVALID_TRANSACTION_TIMEOUT}
	ConcurrentTransactions       = &Error{Code: pb.ErrorCode_CONCURRENT_TRANSACTIONS}
	TransactionCoordinatorFenced = &Error{Code: pb.ErrorCode_TRANSACTION_COORDINATOR_FENCED}
	StorageError                 = &Error{Code: pb.ErrorCode_KAFKA_STORAGE_ERROR}
	UnknownProducerID            = &Error{Code: pb.ErrorCode_UNKNOWN_PRODUCER_ID}
	FencedLeaderEpoch            = &Error{Code: pb.ErrorCode_FENCED_LEADER_EPOCH}
	UnknownLeaderEpoch           = &Error{Code: pb.ErrorCode_UNKNOWN_LEADER_EPOCH}
	StaleBrokerEpoch             = &Error{Code: pb.ErrorCode_STALE_BROKER_EPOCH}
	InvalidRecord                = &Error{Code: pb.ErrorCode_INVALID_RECORD}
	UnstableOffsetCommit         = &Error{Code: pb.ErrorCode_UNSTABLE_OFFSET_COMMIT}
	ThrottlingQuotaExceeded      = &Error{Code: pb.ErrorCode_THROTTLING_QUOTA_EXCEEDED}
	ProducerFenced               = &Error{Code: pb.ErrorCode_PRODUCER_FENCED}
	TopicAlreadyExists           = &Error{Code: pb.ErrorCode_TOPIC_ALREADY_EXISTS}
	InvalidPartitions            = &Error{Code: pb.ErrorCode_INVALID_PARTITIONS}
	InvalidReplicationFactor     = &Error{Code: pb.ErrorCode_INVALID_REPLICATION_FACTOR}
	InvalidConfig                = &Error{Code: pb.ErrorCode_INVALID_CONFIG}
	TransactionalIDNotFound      = &Error{Code: pb.ErrorCode_TRANSACTIONAL_ID_NOT_FOUND}
	IneligibleReplica            = &Error{Code: pb.ErrorCode_INELIGIBLE_REPLICA}
	TransactionAbortable         = &Error{Code: pb.ErrorCode_TRANSACTION_ABORTABLE}
	TransactionTimedOut          = &Error{Code: pb.ErrorCode_TRANSACTION_TIMED_OUT}
	ClusterAuthorizationFailed   = &Error{Code: pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED}
	DuplicateBrokerRegistration  = &Error{Code: pb.ErrorCode_DUPLICATE_BROKER_REGISTRATION}
	InvalidUpdateVersion         = &Error{Code: pb.ErrorCode_INVALID_UPDATE_VERSION}
	IllegalGeneration            = &Error{Code: pb.ErrorCode_ILLEGAL_GENERATION}
	UnknownMemberID              = &Error{Code: pb.ErrorCode_UNKNOWN_MEMBER_ID}
	RebalanceInProgress          = &Error{Code: pb.ErrorCode_REBALANCE_IN_PROGRESS}
	MemberIDRequired             = &Error{Code: pb.ErrorCode_MEMBER_ID_REQUIRED}
	FencedInstanceID             = &Error{Code: pb.ErrorCode_FENCED_INSTANCE_ID}
	UnsupportedCompressionType   = &Error{Code: pb.ErrorCode_UNSUPPORTED_COMPRESSION_TYPE}
	UnknownTopicID               = &Error{Code: pb.ErrorCode_UNKNOWN_TOPIC_ID}
	InconsistentTopicID          = &Error{Code: pb.ErrorCode_INCONSISTENT_TOPIC_ID}
	FencedMemberEpoch            = &Error{Code: pb.ErrorCode_FENCED_MEMBER_EPOCH}
	StaleMemberEpoch             = &Error{Code: pb.ErrorCode_STALE_MEMBER_EPOCH}
	UnreleasedInstanceID         = &Error{Code: pb.ErrorCode_UNRELEASED_INSTANCE_ID}
	UnsupportedAssignor          = &Error{Code: pb.ErrorCode_UNSUPPORTED_ASSIGNOR}
	InvalidRegularExpression     = &Error{Code: pb.ErrorCode_INVALID_REGULAR_EXPRESSION}
	GroupMaxSizeReached          = &Error{Code: pb.ErrorCode_GROUP_MAX_SIZE_REACHED}
	// SASL
	SaslAuthenticationFailed = &Error{Code: pb.ErrorCode_SASL_AUTHENTICATION_FAILED}
	UnsupportedSaslMechanism = &Error{Code: pb.ErrorCode_UNSUPPORTED_SASL_MECHANISM}
)
