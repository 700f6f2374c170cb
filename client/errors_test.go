package client

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/fakebroker"
	"github.com/strand-io/strand/testkit/testutil"
)

// Every code a broker can answer has its sentinel, and each sentinel
// matches any error with its code, however wrapped, and no other.
func TestEveryCodeHasASentinel(t *testing.T) {
	sentinels := map[pb.ErrorCode]error{
		pb.ErrorCode_UNKNOWN_SERVER_ERROR:                  ErrUnknownServerError,
		pb.ErrorCode_OFFSET_OUT_OF_RANGE:                   ErrOffsetOutOfRange,
		pb.ErrorCode_CORRUPT_MESSAGE:                       ErrCorruptMessage,
		pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION:            ErrUnknownTopicOrPartition,
		pb.ErrorCode_INVALID_FETCH_SIZE:                    ErrInvalidFetchSize,
		pb.ErrorCode_LEADER_NOT_AVAILABLE:                  ErrLeaderNotAvailable,
		pb.ErrorCode_NOT_LEADER_OR_FOLLOWER:                ErrNotLeaderOrFollower,
		pb.ErrorCode_REQUEST_TIMED_OUT:                     ErrRequestTimedOut,
		pb.ErrorCode_BROKER_NOT_AVAILABLE:                  ErrBrokerNotAvailable,
		pb.ErrorCode_REPLICA_NOT_AVAILABLE:                 ErrReplicaNotAvailable,
		pb.ErrorCode_MESSAGE_TOO_LARGE:                     ErrMessageTooLarge,
		pb.ErrorCode_OFFSET_METADATA_TOO_LARGE:             ErrOffsetMetadataTooLarge,
		pb.ErrorCode_NETWORK_EXCEPTION:                     ErrNetworkException,
		pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS:          ErrCoordinatorLoadInProgress,
		pb.ErrorCode_COORDINATOR_NOT_AVAILABLE:             ErrCoordinatorNotAvailable,
		pb.ErrorCode_NOT_COORDINATOR:                       ErrNotCoordinator,
		pb.ErrorCode_INVALID_TOPIC_EXCEPTION:               ErrInvalidTopic,
		pb.ErrorCode_RECORD_LIST_TOO_LARGE:                 ErrRecordListTooLarge,
		pb.ErrorCode_NOT_ENOUGH_REPLICAS:                   ErrNotEnoughReplicas,
		pb.ErrorCode_NOT_ENOUGH_REPLICAS_AFTER_APPEND:      ErrNotEnoughReplicasAfterAppend,
		pb.ErrorCode_INVALID_REQUIRED_ACKS:                 ErrInvalidRequiredAcks,
		pb.ErrorCode_ILLEGAL_GENERATION:                    ErrIllegalGeneration,
		pb.ErrorCode_INCONSISTENT_GROUP_PROTOCOL:           ErrInconsistentGroupProtocol,
		pb.ErrorCode_INVALID_GROUP_ID:                      ErrInvalidGroupID,
		pb.ErrorCode_UNKNOWN_MEMBER_ID:                     ErrUnknownMemberID,
		pb.ErrorCode_INVALID_SESSION_TIMEOUT:               ErrInvalidSessionTimeout,
		pb.ErrorCode_REBALANCE_IN_PROGRESS:                 ErrRebalanceInProgress,
		pb.ErrorCode_INVALID_COMMIT_OFFSET_SIZE:            ErrInvalidCommitOffsetSize,
		pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED:          ErrClusterAuthorizationFailed,
		pb.ErrorCode_INVALID_TIMESTAMP:                     ErrInvalidTimestamp,
		pb.ErrorCode_UNSUPPORTED_VERSION:                   ErrUnsupportedVersion,
		pb.ErrorCode_TOPIC_ALREADY_EXISTS:                  ErrTopicAlreadyExists,
		pb.ErrorCode_INVALID_PARTITIONS:                    ErrInvalidPartitions,
		pb.ErrorCode_INVALID_REPLICATION_FACTOR:            ErrInvalidReplicationFactor,
		pb.ErrorCode_INVALID_REPLICA_ASSIGNMENT:            ErrInvalidReplicaAssignment,
		pb.ErrorCode_INVALID_CONFIG:                        ErrInvalidConfig,
		pb.ErrorCode_NOT_CONTROLLER:                        ErrNotController,
		pb.ErrorCode_INVALID_REQUEST:                       ErrInvalidRequest,
		pb.ErrorCode_POLICY_VIOLATION:                      ErrPolicyViolation,
		pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER:          ErrOutOfOrderSequenceNumber,
		pb.ErrorCode_DUPLICATE_SEQUENCE_NUMBER:             ErrDuplicateSequenceNumber,
		pb.ErrorCode_INVALID_PRODUCER_EPOCH:                ErrInvalidProducerEpoch,
		pb.ErrorCode_INVALID_TXN_STATE:                     ErrInvalidTxnState,
		pb.ErrorCode_INVALID_PRODUCER_ID_MAPPING:           ErrInvalidProducerIDMapping,
		pb.ErrorCode_INVALID_TRANSACTION_TIMEOUT:           ErrInvalidTransactionTimeout,
		pb.ErrorCode_CONCURRENT_TRANSACTIONS:               ErrConcurrentTransactions,
		pb.ErrorCode_TRANSACTION_COORDINATOR_FENCED:        ErrTransactionCoordinatorFenced,
		pb.ErrorCode_OPERATION_NOT_ATTEMPTED:               ErrOperationNotAttempted,
		pb.ErrorCode_KAFKA_STORAGE_ERROR:                   ErrKafkaStorageError,
		pb.ErrorCode_UNKNOWN_PRODUCER_ID:                   ErrUnknownProducerID,
		pb.ErrorCode_NON_EMPTY_GROUP:                       ErrNonEmptyGroup,
		pb.ErrorCode_GROUP_ID_NOT_FOUND:                    ErrGroupIDNotFound,
		pb.ErrorCode_FETCH_SESSION_ID_NOT_FOUND:            ErrFetchSessionIDNotFound,
		pb.ErrorCode_INVALID_FETCH_SESSION_EPOCH:           ErrInvalidFetchSessionEpoch,
		pb.ErrorCode_FENCED_LEADER_EPOCH:                   ErrFencedLeaderEpoch,
		pb.ErrorCode_UNKNOWN_LEADER_EPOCH:                  ErrUnknownLeaderEpoch,
		pb.ErrorCode_UNSUPPORTED_COMPRESSION_TYPE:          ErrUnsupportedCompressionType,
		pb.ErrorCode_STALE_BROKER_EPOCH:                    ErrStaleBrokerEpoch,
		pb.ErrorCode_OFFSET_NOT_AVAILABLE:                  ErrOffsetNotAvailable,
		pb.ErrorCode_MEMBER_ID_REQUIRED:                    ErrMemberIDRequired,
		pb.ErrorCode_PREFERRED_LEADER_NOT_AVAILABLE:        ErrPreferredLeaderNotAvailable,
		pb.ErrorCode_FENCED_INSTANCE_ID:                    ErrFencedInstanceID,
		pb.ErrorCode_ELIGIBLE_LEADERS_NOT_AVAILABLE:        ErrEligibleLeadersNotAvailable,
		pb.ErrorCode_ELECTION_NOT_NEEDED:                   ErrElectionNotNeeded,
		pb.ErrorCode_NO_REASSIGNMENT_IN_PROGRESS:           ErrNoReassignmentInProgress,
		pb.ErrorCode_DUPLICATE_VOTER:                       ErrDuplicateVoter,
		pb.ErrorCode_VOTER_NOT_FOUND:                       ErrVoterNotFound,
		pb.ErrorCode_INVALID_RECORD:                        ErrInvalidRecord,
		pb.ErrorCode_UNSTABLE_OFFSET_COMMIT:                ErrUnstableOffsetCommit,
		pb.ErrorCode_THROTTLING_QUOTA_EXCEEDED:             ErrThrottlingQuotaExceeded,
		pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED:            ErrTopicAuthorizationFailed,
		pb.ErrorCode_GROUP_AUTHORIZATION_FAILED:            ErrGroupAuthorizationFailed,
		pb.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED: ErrTransactionalIDAuthorizationFailed,
		pb.ErrorCode_SECURITY_DISABLED:                     ErrSecurityDisabled,
		pb.ErrorCode_SASL_AUTHENTICATION_FAILED:            ErrSaslAuthenticationFailed,
		pb.ErrorCode_UNSUPPORTED_SASL_MECHANISM:            ErrUnsupportedSaslMechanism,
		pb.ErrorCode_ILLEGAL_SASL_STATE:                    ErrIllegalSaslState,
		pb.ErrorCode_DUPLICATE_RESOURCE:                    ErrDuplicateResource,
		pb.ErrorCode_UNACCEPTABLE_CREDENTIAL:               ErrUnacceptableCredential,
		pb.ErrorCode_PRODUCER_FENCED:                       ErrProducerFenced,
		pb.ErrorCode_RESOURCE_NOT_FOUND:                    ErrResourceNotFound,
		pb.ErrorCode_INVALID_UPDATE_VERSION:                ErrInvalidUpdateVersion,
		pb.ErrorCode_FEATURE_UPDATE_FAILED:                 ErrFeatureUpdateFailed,
		pb.ErrorCode_DUPLICATE_BROKER_REGISTRATION:         ErrDuplicateBrokerRegistration,
		pb.ErrorCode_BROKER_ID_NOT_REGISTERED:              ErrBrokerIDNotRegistered,
		pb.ErrorCode_UNKNOWN_TOPIC_ID:                      ErrUnknownTopicID,
		pb.ErrorCode_INCONSISTENT_CLUSTER_ID:               ErrInconsistentClusterID,
		pb.ErrorCode_TRANSACTIONAL_ID_NOT_FOUND:            ErrTransactionalIDNotFound,
		pb.ErrorCode_INELIGIBLE_REPLICA:                    ErrIneligibleReplica,
		pb.ErrorCode_NEW_LEADER_ELECTED:                    ErrNewLeaderElected,
		pb.ErrorCode_GROUP_SUBSCRIBED_TO_TOPIC:             ErrGroupSubscribedToTopic,
		pb.ErrorCode_MISMATCHED_ENDPOINT_TYPE:              ErrMismatchedEndpointType,
		pb.ErrorCode_INVALID_REGISTRATION:                  ErrInvalidRegistration,
		pb.ErrorCode_TRANSACTION_ABORTABLE:                 ErrTransactionAbortable,
		pb.ErrorCode_TRANSACTION_TIMED_OUT:                 ErrTransactionTimedOut,
		pb.ErrorCode_LOG_DIR_NOT_FOUND:                     ErrLogDirNotFound,
		pb.ErrorCode_TOPIC_DELETION_DISABLED:               ErrTopicDeletionDisabled,
		pb.ErrorCode_GROUP_MAX_SIZE_REACHED:                ErrGroupMaxSizeReached,
		pb.ErrorCode_INCONSISTENT_TOPIC_ID:                 ErrInconsistentTopicID,
		pb.ErrorCode_FETCH_SESSION_TOPIC_ID_ERROR:          ErrFetchSessionTopicIDError,
		pb.ErrorCode_FENCED_MEMBER_EPOCH:                   ErrFencedMemberEpoch,
		pb.ErrorCode_UNRELEASED_INSTANCE_ID:                ErrUnreleasedInstanceID,
		pb.ErrorCode_UNSUPPORTED_ASSIGNOR:                  ErrUnsupportedAssignor,
		pb.ErrorCode_STALE_MEMBER_EPOCH:                    ErrStaleMemberEpoch,
		pb.ErrorCode_INVALID_REGULAR_EXPRESSION:            ErrInvalidRegularExpression,
	}
	for _, code := range allCodes() {
		s, ok := sentinels[code]
		if !ok {
			t.Errorf("%s has no sentinel", code)
			continue
		}
		err := fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", &Error{Code: code, Message: "why"}))
		if !errors.Is(err, s) {
			t.Errorf("%s does not match its sentinel", code)
		}
		for other, os := range sentinels {
			if other != code && errors.Is(err, os) {
				t.Errorf("%s matches %s's sentinel", code, other)
			}
		}
	}
}

// The nil error is no error: Classify says so, not "retriable".
func TestClassifyNil(t *testing.T) {
	if got := Classify(nil); got != NoError || got.String() != "none" {
		t.Fatalf("Classify(nil) = %v", got)
	}
}

// The SDK's own timeouts and sentinels classify as Kafka's clients do.
func TestClassifySDKErrors(t *testing.T) {
	cases := []struct {
		err  error
		want Category
	}{
		{context.DeadlineExceeded, Retriable},
		{fmt.Errorf("x: %w", context.Canceled), Retriable},
		{fmt.Errorf("%w: t-0 (last error: %w)", ErrDeliveryTimeout, &Error{Code: pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER}), Retriable},
		{fmt.Errorf("%w: %w", ErrCommitOutcomeUnknown, &Error{Code: pb.ErrorCode_UNKNOWN_SERVER_ERROR}), CommitOutcomeUnknown},
		{fmt.Errorf("%w: %w", ErrAbortable, &Error{Code: pb.ErrorCode_MESSAGE_TOO_LARGE}), Abortable},
		{fmt.Errorf("%w: %w", ErrAbortable, ErrDeliveryTimeout), Abortable},
		{&Error{Code: pb.ErrorCode_PRODUCER_FENCED}, ApplicationRecoverable},
		{&Error{Code: pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION}, Retriable},
		{&Error{Code: pb.ErrorCode_MESSAGE_TOO_LARGE}, Fatal},
		{ErrClosed, Fatal},
	}
	for _, c := range cases {
		if got := Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if !errors.Is(ErrDeliveryTimeout, context.DeadlineExceeded) {
		t.Error("ErrDeliveryTimeout does not match context.DeadlineExceeded")
	}
}

// A call whose ctx is cancelled while it retries a retriable code ends
// with an error that matches context.Canceled and the code it was
// retrying, and classifies as retriable.
func TestCancelledCallsMatchContextCanceled(t *testing.T) {
	cases := []struct {
		name string
		fail string
		code pb.ErrorCode
		run  func(ctx context.Context, opts []Opt) error
		// noCode: the call returns when ctx ends without waiting for the
		// broker's answer (ProduceSync: the record is still on its way).
		noCode bool
	}{
		{name: "Producer.InitTransactions", fail: "FindCoordinator", code: pb.ErrorCode_COORDINATOR_NOT_AVAILABLE,
			run: func(ctx context.Context, opts []Opt) error {
				return withTxn(ctx, opts, func(*Producer) error { return nil })
			}},
		{name: "Producer.ProduceSync", fail: "Produce", code: pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, noCode: true,
			run: func(ctx context.Context, opts []Opt) error {
				p, err := NewProducer(opts...)
				if err != nil {
					return err
				}
				defer closeNow(p)
				return produceOne(ctx, p)
			}},
		{name: "Producer.Flush", fail: "Produce", code: pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, noCode: true,
			run: func(ctx context.Context, opts []Opt) error {
				p, err := NewProducer(opts...)
				if err != nil {
					return err
				}
				defer closeNow(p)
				p.Produce(ctx, &Record{Topic: "t", Value: []byte("v")}, nil)
				return p.Flush(ctx)
			}},
		{name: "Producer.Produce/topic metadata", fail: "Metadata", code: pb.ErrorCode_LEADER_NOT_AVAILABLE,
			run: func(ctx context.Context, opts []Opt) error {
				p, err := NewProducer(opts...)
				if err != nil {
					return err
				}
				defer closeProducer(p)
				done := make(chan error, 1)
				p.Produce(ctx, &Record{Topic: "t", Value: []byte("v")}, func(_ *Record, err error) { done <- err })
				return <-done
			}},
		{name: "Consumer.Poll", fail: "Fetch", code: pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, noCode: true,
			run: func(ctx context.Context, opts []Opt) error {
				return withConsumer(opts, func(c *Consumer) error {
					c.Assign(map[TopicPartition]int64{tp0: 0})
					return pollUntilError(ctx, c)
				})
			}},
		{name: "Consumer.CommitOffsets", fail: "OffsetCommit", code: pb.ErrorCode_NOT_COORDINATOR,
			run: func(ctx context.Context, opts []Opt) error {
				return withConsumer(append(opts, GroupID("g")), func(c *Consumer) error {
					return c.CommitOffsets(ctx, map[TopicPartition]int64{tp0: 1})
				})
			}},
		{name: "Admin.CreateTopic", fail: "CreateTopics", code: pb.ErrorCode_NOT_CONTROLLER,
			run: func(ctx context.Context, opts []Opt) error {
				return withAdmin(opts, func(a *Admin) error {
					return a.CreateTopic(ctx, TopicSpec{Name: "n", Partitions: 1, ReplicationFactor: 1})
				})
			}},
		{name: "Admin.ListOffsets", fail: "ListOffsets", code: pb.ErrorCode_NOT_LEADER_OR_FOLLOWER,
			run: func(ctx context.Context, opts []Opt) error {
				return withAdmin(opts, func(a *Admin) error {
					_, err := a.ListOffsets(ctx, []TopicPartition{tp0}, OffsetLatest, ReadUncommitted)
					return err
				})
			}},
		{name: "Admin.CommittedOffsets", fail: "OffsetFetch", code: pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS,
			run: func(ctx context.Context, opts []Opt) error {
				return withAdmin(opts, func(a *Admin) error {
					_, err := a.CommittedOffsets(ctx, "g", []TopicPartition{tp0})
					return err
				})
			}},
		{name: "Admin.ListTransactions", fail: "ListTransactions", code: pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS,
			run: func(ctx context.Context, opts []Opt) error {
				return withAdmin(opts, func(a *Admin) error {
					_, err := a.ListTransactions(ctx, ListTransactionsFilter{})
					return err
				})
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// Cancel once the call has had the code twice (so it has seen
			// it at least once).
			b := fakebroker.Start(t, codeTopic)
			b.Refuse(c.fail, c.code)
			b.OnRefusal(func(n int64) {
				if n == 2 {
					cancel()
				}
			})
			opts := []Opt{Bootstrap(b.Addr()), Logger(testutil.Logger()), RetryBackoff(5*time.Millisecond, 20*time.Millisecond),
				MaxBlock(time.Minute), DeliveryTimeout(time.Minute), FetchMaxWait(20 * time.Millisecond)}
			err := c.run(ctx, opts)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("errors.Is(err, context.Canceled) = false: %v", err)
			}
			if Classify(err) != Retriable {
				t.Errorf("Classify = %v, want retriable: %v", Classify(err), err)
			}
			if c.noCode {
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != c.code || !errors.Is(err, &Error{Code: c.code}) {
				t.Errorf("the error does not carry %s: %v", c.code, err)
			}
			if !namesCodeOnce(err.Error(), c.code) {
				t.Errorf("the message does not name %s once: %v", c.code, err)
			}
		})
	}
}
