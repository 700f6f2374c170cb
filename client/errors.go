package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Error is a broker error: a Kafka error name (Code) and a message saying
// why. Every error the SDK returns that carries a broker's code has an
// *Error in its chain, so errors.As(err, &e) gives the code, and
// errors.Is(err, ErrX) matches the sentinel of that code (a sentinel
// matches any *Error with its code, whatever the message).
type Error = errs.Error

// Category is how an application should handle an error (see Classify).
type Category = errs.Category

// The five categories every error falls in, and the nil error's.
const (
	// Retriable: the SDK retries these itself; an application sees one only
	// when retries ran out (delivery.timeout.ms, max.block.ms, its ctx).
	// Trying the call again may succeed.
	Retriable = errs.Retriable
	// Abortable: abort the transaction and begin again.
	Abortable = errs.Abortable
	// ApplicationRecoverable: close this producer and create a new one.
	ApplicationRecoverable = errs.ApplicationRecoverable
	// Fatal: a configuration problem or a bug; retrying will not help.
	Fatal = errs.Fatal
	// CommitOutcomeUnknown: CommitTransaction was sent and its answer lost
	// (ErrCommitOutcomeUnknown); call CommitTransaction again, or close the
	// producer.
	CommitOutcomeUnknown = errs.CommitOutcomeUnknown
	// NoError is Classify(nil): there is nothing to handle.
	NoError = errs.NoError
)

// Classify puts err in exactly one category, as Kafka's clients class
// their exceptions (KIP-1050). It is errs.CategoryOf, which checks in this
// order:
//
//   - nil is NoError;
//   - ErrCommitOutcomeUnknown is CommitOutcomeUnknown (call
//     CommitTransaction again);
//   - an error matching ErrProducerFenced is ApplicationRecoverable;
//   - an error matching ErrAbortable (the open transaction can only be
//     aborted) is Abortable;
//   - an error of a call that ran out of time (its ctx or one of the
//     client's timeouts: context.DeadlineExceeded, context.Canceled,
//     ErrDeliveryTimeout) is Retriable, like Kafka's TimeoutException,
//     whatever broker error it was retrying;
//   - an error carrying a broker code is that code's category (the error
//     table: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, … are
//     Retriable; MESSAGE_TOO_LARGE, INVALID_CONFIG, … are Fatal);
//   - anything else (a closed client, a refused option, a call the
//     transaction state does not allow, a broken connection) is Fatal.
func Classify(err error) Category { return errs.CategoryOf(err) }

// codeCategory is the category of the broker code err carries alone
// (Fatal for UNKNOWN_SERVER_ERROR and for errors without a code), whatever
// SDK sentinel or timeout wraps it.
func codeCategory(err error) Category { return errs.CodeCategory(errs.CodeOf(err)) }

// Sentinels for errors.Is, one per Kafka error code a broker can answer.
// Each matches any error carrying that code.
var (
	ErrUnknownServerError           = &Error{Code: pb.ErrorCode_UNKNOWN_SERVER_ERROR}
	ErrOffsetOutOfRange             = &Error{Code: pb.ErrorCode_OFFSET_OUT_OF_RANGE}
	ErrCorruptMessage               = &Error{Code: pb.ErrorCode_CORRUPT_MESSAGE}
	ErrUnknownTopicOrPartition      = &Error{Code: pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION}
	ErrInvalidFetchSize             = &Error{Code: pb.ErrorCode_INVALID_FETCH_SIZE}
	ErrLeaderNotAvailable           = &Error{Code: pb.ErrorCode_LEADER_NOT_AVAILABLE}
	ErrNotLeaderOrFollower          = &Error{Code: pb.ErrorCode_NOT_LEADER_OR_FOLLOWER}
	ErrRequestTimedOut              = &Error{Code: pb.ErrorCode_REQUEST_TIMED_OUT}
	ErrBrokerNotAvailable           = &Error{Code: pb.ErrorCode_BROKER_NOT_AVAILABLE}
	ErrReplicaNotAvailable          = &Error{Code: pb.ErrorCode_REPLICA_NOT_AVAILABLE}
	ErrMessageTooLarge              = &Error{Code: pb.ErrorCode_MESSAGE_TOO_LARGE}
	ErrOffsetMetadataTooLarge       = &Error{Code: pb.ErrorCode_OFFSET_METADATA_TOO_LARGE}
	ErrNetworkException             = &Error{Code: pb.ErrorCode_NETWORK_EXCEPTION}
	ErrCoordinatorLoadInProgress    = &Error{Code: pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS}
	ErrCoordinatorNotAvailable      = &Error{Code: pb.ErrorCode_COORDINATOR_NOT_AVAILABLE}
	ErrNotCoordinator               = &Error{Code: pb.ErrorCode_NOT_COORDINATOR}
	ErrInvalidTopic                 = &Error{Code: pb.ErrorCode_INVALID_TOPIC_EXCEPTION}
	ErrRecordListTooLarge           = &Error{Code: pb.ErrorCode_RECORD_LIST_TOO_LARGE}
	ErrNotEnoughReplicas            = &Error{Code: pb.ErrorCode_NOT_ENOUGH_REPLICAS}
	ErrNotEnoughReplicasAfterAppend = &Error{Code: pb.ErrorCode_NOT_ENOUGH_REPLICAS_AFTER_APPEND}
	ErrInvalidRequiredAcks          = &Error{Code: pb.ErrorCode_INVALID_REQUIRED_ACKS}
	ErrIllegalGeneration            = &Error{Code: pb.ErrorCode_ILLEGAL_GENERATION}
	ErrInconsistentGroupProtocol    = &Error{Code: pb.ErrorCode_INCONSISTENT_GROUP_PROTOCOL}
	ErrInvalidGroupID               = &Error{Code: pb.ErrorCode_INVALID_GROUP_ID}
	ErrUnknownMemberID              = &Error{Code: pb.ErrorCode_UNKNOWN_MEMBER_ID}
	ErrInvalidSessionTimeout        = &Error{Code: pb.ErrorCode_INVALID_SESSION_TIMEOUT}
	ErrRebalanceInProgress          = &Error{Code: pb.ErrorCode_REBALANCE_IN_PROGRESS}
	ErrInvalidCommitOffsetSize      = &Error{Code: pb.ErrorCode_INVALID_COMMIT_OFFSET_SIZE}
	// ErrClusterAuthorizationFailed: the request is one only other nodes
	// may send (a follower's Fetch, replica_id >= 0).
	ErrClusterAuthorizationFailed   = &Error{Code: pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED}
	ErrInvalidTimestamp             = &Error{Code: pb.ErrorCode_INVALID_TIMESTAMP}
	ErrUnsupportedVersion           = &Error{Code: pb.ErrorCode_UNSUPPORTED_VERSION}
	ErrTopicAlreadyExists           = &Error{Code: pb.ErrorCode_TOPIC_ALREADY_EXISTS}
	ErrInvalidPartitions            = &Error{Code: pb.ErrorCode_INVALID_PARTITIONS}
	ErrInvalidReplicationFactor     = &Error{Code: pb.ErrorCode_INVALID_REPLICATION_FACTOR}
	ErrInvalidReplicaAssignment     = &Error{Code: pb.ErrorCode_INVALID_REPLICA_ASSIGNMENT}
	ErrInvalidConfig                = &Error{Code: pb.ErrorCode_INVALID_CONFIG}
	ErrNotController                = &Error{Code: pb.ErrorCode_NOT_CONTROLLER}
	ErrInvalidRequest               = &Error{Code: pb.ErrorCode_INVALID_REQUEST}
	ErrPolicyViolation              = &Error{Code: pb.ErrorCode_POLICY_VIOLATION}
	ErrOutOfOrderSequenceNumber     = &Error{Code: pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER}
	ErrDuplicateSequenceNumber      = &Error{Code: pb.ErrorCode_DUPLICATE_SEQUENCE_NUMBER}
	ErrInvalidProducerEpoch         = &Error{Code: pb.ErrorCode_INVALID_PRODUCER_EPOCH}
	ErrInvalidTxnState              = &Error{Code: pb.ErrorCode_INVALID_TXN_STATE}
	ErrInvalidProducerIDMapping     = &Error{Code: pb.ErrorCode_INVALID_PRODUCER_ID_MAPPING}
	ErrInvalidTransactionTimeout    = &Error{Code: pb.ErrorCode_INVALID_TRANSACTION_TIMEOUT}
	ErrConcurrentTransactions       = &Error{Code: pb.ErrorCode_CONCURRENT_TRANSACTIONS}
	ErrTransactionCoordinatorFenced = &Error{Code: pb.ErrorCode_TRANSACTION_COORDINATOR_FENCED}
	ErrOperationNotAttempted        = &Error{Code: pb.ErrorCode_OPERATION_NOT_ATTEMPTED}
	ErrKafkaStorageError            = &Error{Code: pb.ErrorCode_KAFKA_STORAGE_ERROR}
	ErrUnknownProducerID            = &Error{Code: pb.ErrorCode_UNKNOWN_PRODUCER_ID}
	ErrNonEmptyGroup                = &Error{Code: pb.ErrorCode_NON_EMPTY_GROUP}
	ErrGroupIDNotFound              = &Error{Code: pb.ErrorCode_GROUP_ID_NOT_FOUND}
	ErrFetchSessionIDNotFound       = &Error{Code: pb.ErrorCode_FETCH_SESSION_ID_NOT_FOUND}
	ErrInvalidFetchSessionEpoch     = &Error{Code: pb.ErrorCode_INVALID_FETCH_SESSION_EPOCH}
	ErrFencedLeaderEpoch            = &Error{Code: pb.ErrorCode_FENCED_LEADER_EPOCH}
	ErrUnknownLeaderEpoch           = &Error{Code: pb.ErrorCode_UNKNOWN_LEADER_EPOCH}
	ErrUnsupportedCompressionType   = &Error{Code: pb.ErrorCode_UNSUPPORTED_COMPRESSION_TYPE}
	ErrStaleBrokerEpoch             = &Error{Code: pb.ErrorCode_STALE_BROKER_EPOCH}
	ErrOffsetNotAvailable           = &Error{Code: pb.ErrorCode_OFFSET_NOT_AVAILABLE}
	ErrMemberIDRequired             = &Error{Code: pb.ErrorCode_MEMBER_ID_REQUIRED}
	ErrPreferredLeaderNotAvailable  = &Error{Code: pb.ErrorCode_PREFERRED_LEADER_NOT_AVAILABLE}
	// ErrFencedInstanceID: another consumer joined the group with this
	// consumer's GroupInstanceID. Poll returns it from then on; close the
	// consumer (two processes must not share a group.instance.id).
	ErrFencedInstanceID            = &Error{Code: pb.ErrorCode_FENCED_INSTANCE_ID}
	ErrEligibleLeadersNotAvailable = &Error{Code: pb.ErrorCode_ELIGIBLE_LEADERS_NOT_AVAILABLE}
	ErrElectionNotNeeded           = &Error{Code: pb.ErrorCode_ELECTION_NOT_NEEDED}
	ErrNoReassignmentInProgress    = &Error{Code: pb.ErrorCode_NO_REASSIGNMENT_IN_PROGRESS}
	// ErrDuplicateVoter / ErrVoterNotFound: a controller quorum change
	// names a node that already is / is not a voter (AddVoter, RemoveVoter).
	ErrDuplicateVoter         = &Error{Code: pb.ErrorCode_DUPLICATE_VOTER}
	ErrVoterNotFound          = &Error{Code: pb.ErrorCode_VOTER_NOT_FOUND}
	ErrGroupSubscribedToTopic = &Error{Code: pb.ErrorCode_GROUP_SUBSCRIBED_TO_TOPIC}
	ErrInvalidRecord          = &Error{Code: pb.ErrorCode_INVALID_RECORD}
	ErrUnstableOffsetCommit   = &Error{Code: pb.ErrorCode_UNSTABLE_OFFSET_COMMIT}
	// ErrThrottlingQuotaExceeded: a transaction over
	// transaction.max.open.per.principal; retriable.
	ErrThrottlingQuotaExceeded = &Error{Code: pb.ErrorCode_THROTTLING_QUOTA_EXCEEDED}
	// Authorization: the principal may not do the request to
	// the topic, group or transactional id; not retriable.
	ErrTopicAuthorizationFailed           = &Error{Code: pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED}
	ErrGroupAuthorizationFailed           = &Error{Code: pb.ErrorCode_GROUP_AUTHORIZATION_FAILED}
	ErrTransactionalIDAuthorizationFailed = &Error{Code: pb.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
	// ErrSecurityDisabled: an ACL request to a cluster without an
	// authorizer (authorizer.class.name unset).
	ErrSecurityDisabled = &Error{Code: pb.ErrorCode_SECURITY_DISABLED}
	// Authentication: a wrong password or unknown user, a
	// mechanism the listener does not offer, a SASL step out of order.
	ErrSaslAuthenticationFailed = &Error{Code: pb.ErrorCode_SASL_AUTHENTICATION_FAILED}
	ErrUnsupportedSaslMechanism = &Error{Code: pb.ErrorCode_UNSUPPORTED_SASL_MECHANISM}
	ErrIllegalSaslState         = &Error{Code: pb.ErrorCode_ILLEGAL_SASL_STATE}
	ErrDuplicateResource        = &Error{Code: pb.ErrorCode_DUPLICATE_RESOURCE}
	ErrUnacceptableCredential   = &Error{Code: pb.ErrorCode_UNACCEPTABLE_CREDENTIAL}
	ErrProducerFenced           = &Error{Code: pb.ErrorCode_PRODUCER_FENCED}
	ErrResourceNotFound         = &Error{Code: pb.ErrorCode_RESOURCE_NOT_FOUND}
	ErrInvalidUpdateVersion     = &Error{Code: pb.ErrorCode_INVALID_UPDATE_VERSION}
	ErrFeatureUpdateFailed      = &Error{Code: pb.ErrorCode_FEATURE_UPDATE_FAILED}
	// ErrDuplicateBrokerRegistration: a broker id is registered by a live
	// session of another incarnation (brokers see it, clients do not).
	ErrDuplicateBrokerRegistration = &Error{Code: pb.ErrorCode_DUPLICATE_BROKER_REGISTRATION}
	ErrBrokerIDNotRegistered       = &Error{Code: pb.ErrorCode_BROKER_ID_NOT_REGISTERED}
	ErrUnknownTopicID              = &Error{Code: pb.ErrorCode_UNKNOWN_TOPIC_ID}
	ErrInconsistentClusterID       = &Error{Code: pb.ErrorCode_INCONSISTENT_CLUSTER_ID}
	ErrTransactionalIDNotFound     = &Error{Code: pb.ErrorCode_TRANSACTIONAL_ID_NOT_FOUND}
	ErrIneligibleReplica           = &Error{Code: pb.ErrorCode_INELIGIBLE_REPLICA}
	ErrNewLeaderElected            = &Error{Code: pb.ErrorCode_NEW_LEADER_ELECTED}
	ErrMismatchedEndpointType      = &Error{Code: pb.ErrorCode_MISMATCHED_ENDPOINT_TYPE}
	ErrInvalidRegistration         = &Error{Code: pb.ErrorCode_INVALID_REGISTRATION}
	ErrTransactionAbortable        = &Error{Code: pb.ErrorCode_TRANSACTION_ABORTABLE}
	// ErrTransactionTimedOut: the coordinator aborted the transaction
	// because it was open past transaction.timeout.ms; abort it and go on.
	ErrTransactionTimedOut = &Error{Code: pb.ErrorCode_TRANSACTION_TIMED_OUT}

	ErrLogDirNotFound           = &Error{Code: pb.ErrorCode_LOG_DIR_NOT_FOUND}
	ErrTopicDeletionDisabled    = &Error{Code: pb.ErrorCode_TOPIC_DELETION_DISABLED}
	ErrGroupMaxSizeReached      = &Error{Code: pb.ErrorCode_GROUP_MAX_SIZE_REACHED}
	ErrInconsistentTopicID      = &Error{Code: pb.ErrorCode_INCONSISTENT_TOPIC_ID}
	ErrFetchSessionTopicIDError = &Error{Code: pb.ErrorCode_FETCH_SESSION_TOPIC_ID_ERROR}
	ErrFencedMemberEpoch        = &Error{Code: pb.ErrorCode_FENCED_MEMBER_EPOCH}
	ErrUnreleasedInstanceID     = &Error{Code: pb.ErrorCode_UNRELEASED_INSTANCE_ID}
	ErrUnsupportedAssignor      = &Error{Code: pb.ErrorCode_UNSUPPORTED_ASSIGNOR}
	ErrStaleMemberEpoch         = &Error{Code: pb.ErrorCode_STALE_MEMBER_EPOCH}
	ErrInvalidRegularExpression = &Error{Code: pb.ErrorCode_INVALID_REGULAR_EXPRESSION}
)

// SDK-side errors.
var (
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("strand: client closed")
	// ErrCommitOutcomeUnknown (errs.ErrCommitOutcomeUnknown, category
	// CommitOutcomeUnknown): CommitTransaction could not learn whether the
	// commit happened (the answer was lost). Retry CommitTransaction: a
	// commit is idempotent under transaction version 2 and is never turned
	// into an abort.
	ErrCommitOutcomeUnknown = errs.ErrCommitOutcomeUnknown
	// ErrAbortable (errs.ErrAbortable, category Abortable) wraps errors
	// after which the open transaction must be aborted.
	ErrAbortable = errs.ErrAbortable
	// ErrDeliveryTimeout: a record was not acknowledged within
	// delivery.timeout.ms. It matches context.DeadlineExceeded too; the
	// error a record fails with also carries the last broker error it was
	// retrying, if any.
	ErrDeliveryTimeout error = &timeoutError{"strand: delivery.timeout.ms expired before the record was acknowledged"}
)

// timeoutError is one of the client's own timeouts running out; it
// matches context.DeadlineExceeded, as a ctx deadline would.
type timeoutError struct{ msg string }

func (e *timeoutError) Error() string        { return e.msg }
func (e *timeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// Timeout reports true, as a net.Error's does.
func (e *timeoutError) Timeout() bool { return true }

// maxBlockExpired is the cause of a ctx bounded by max.block.ms.
func maxBlockExpired(d time.Duration) error {
	return &timeoutError{fmt.Sprintf("strand: max.block.ms (%v) expired", d)}
}

// expired is the error of a call that ran out of time while retrying:
// ctx's cause (context.DeadlineExceeded, context.Canceled, or the client
// timeout that ended it) wrapped together with last, the last error it was
// retrying (if any), so that both errors.Is(err, context.DeadlineExceeded)
// and errors.Is / errors.As on the broker's code work.
func expired(ctx context.Context, last error) error {
	cause := context.Cause(ctx)
	if cause == nil {
		cause = context.DeadlineExceeded // the call's own deadline, not ctx's
	}
	switch {
	case last == nil:
		return cause
	case errors.Is(last, cause):
		return last // it says so already (an inner call ran out of the same time)
	case ctxOnly(last):
		return cause
	}
	return fmt.Errorf("%w (last error: %w)", cause, last)
}

// ctxOnly reports whether err says only that a context ended (a context
// error, or an RPC's gRPC status DEADLINE_EXCEEDED or CANCELLED) and
// carries no broker error.
func ctxOnly(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Canceled:
		return true
	}
	return false
}

// keepLast is the error a retry loop keeps as the last one after an
// attempt failed with err: err, unless it says only that a context ended
// and an earlier attempt said more (what the broker answered).
func keepLast(last, err error) error {
	if last != nil && ctxOnly(err) {
		return last
	}
	return err
}

// rpcErr is the error of a single RPC made with ctx: once ctx has ended,
// it also matches ctx's error (and names its cause).
func rpcErr(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return expired(ctx, err)
	}
	return err
}

// statusContextError is a gRPC status error of a call that ran out of
// time (DEADLINE_EXCEEDED) or was cancelled (CANCELLED): it also matches
// context.DeadlineExceeded or context.Canceled, which a status error does
// not, while status.FromError still finds the status.
type statusContextError struct {
	st     error
	ctxErr error
}

func (e *statusContextError) Error() string   { return e.st.Error() }
func (e *statusContextError) Unwrap() []error { return []error{e.ctxErr, e.st} }

// withContextError turns a DEADLINE_EXCEEDED or CANCELLED status error
// into a statusContextError.
func withContextError(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return err
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded:
		return &statusContextError{st: err, ctxErr: context.DeadlineExceeded}
	case codes.Canceled:
		return &statusContextError{st: err, ctxErr: context.Canceled}
	}
	return err
}

// contextErrorsUnary and contextErrorsStream make every call of the
// client's connections fail with withContextError's errors.
func contextErrorsUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return withContextError(invoker(ctx, method, req, reply, cc, opts...))
}

func contextErrorsStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, withContextError(err)
	}
	return contextErrorsClientStream{s}, nil
}

type contextErrorsClientStream struct{ grpc.ClientStream }

func (s contextErrorsClientStream) RecvMsg(m any) error {
	return withContextError(s.ClientStream.RecvMsg(m))
}

func (s contextErrorsClientStream) SendMsg(m any) error {
	return withContextError(s.ClientStream.SendMsg(m))
}

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
