package errs

import (
	"context"
	"errors"
	"fmt"
	"testing"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

func TestIsMatchesByCodeThroughWrapping(t *testing.T) {
	err := fmt.Errorf("append: %w", New(pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, "leader is 2"))
	if !errors.Is(err, NotLeaderOrFollower) {
		t.Fatalf("errors.Is failed for %v", err)
	}
	if errors.Is(err, NotCoordinator) {
		t.Fatalf("matched the wrong code")
	}
	if got := CodeOf(err); got != pb.ErrorCode_NOT_LEADER_OR_FOLLOWER {
		t.Fatalf("CodeOf = %v", got)
	}
	if CodeOf(errors.New("plain")) != pb.ErrorCode_UNKNOWN_SERVER_ERROR {
		t.Fatal("plain error should map to UNKNOWN_SERVER_ERROR")
	}
	if CodeOf(nil) != pb.ErrorCode_NONE || FromCode(pb.ErrorCode_NONE, "x") != nil {
		t.Fatal("nil/NONE mapping")
	}
}

func TestCategories(t *testing.T) {
	cases := []struct {
		code      pb.ErrorCode
		retriable bool
		cat       Category
	}{
		{pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, true, Retriable},
		{pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS, true, Retriable},
		{pb.ErrorCode_CONCURRENT_TRANSACTIONS, true, Retriable},
		{pb.ErrorCode_TRANSACTION_ABORTABLE, false, Abortable},
		{pb.ErrorCode_PRODUCER_FENCED, false, ApplicationRecoverable},
		{pb.ErrorCode_INVALID_TXN_STATE, false, Fatal},
		{pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER, false, Fatal},
	}
	for _, c := range cases {
		e := &Error{Code: c.code}
		if e.Retriable() != c.retriable || e.Category() != c.cat {
			t.Errorf("%v: retriable=%v category=%v, want %v %v", c.code, e.Retriable(), e.Category(), c.retriable, c.cat)
		}
	}
}

// A message made from an error's Error() (which starts with the code's
// name) does not name the code twice once it is an error again.
func TestFromCodeNamesTheCodeOnce(t *testing.T) {
	sent := New(pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "topic %q does not exist", "x")
	got := FromCode(sent.Code, sent.Error())
	if want := `UNKNOWN_TOPIC_OR_PARTITION: topic "x" does not exist`; got.Error() != want {
		t.Fatalf("FromCode(code, Error()) = %q, want %q", got, want)
	}
	if got := FromCode(pb.ErrorCode_NOT_COORDINATOR, "node 2 is"); got.Error() != "NOT_COORDINATOR: node 2 is" {
		t.Fatalf("FromCode changed a plain message: %q", got)
	}
}

// The nil error is in no category.
func TestCategoryOfNil(t *testing.T) {
	if got := CategoryOf(nil); got != NoError || got.String() != "none" {
		t.Fatalf("CategoryOf(nil) = %v", got)
	}
}

// CategoryOf is the one classification of every error an application can
// get: each case is one class, the commit whose outcome is unknown its own.
func TestCategoryOfEveryClass(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want Category
	}{
		{"nil", nil, NoError},
		{"retriable code", fmt.Errorf("x: %w", NotLeaderOrFollower), Retriable},
		{"deadline", context.DeadlineExceeded, Retriable},
		{"cancelled", fmt.Errorf("poll: %w", context.Canceled), Retriable},
		{"deadline retrying a fatal code", fmt.Errorf("%w (last error: %w)", context.DeadlineExceeded, OutOfOrderSequenceNumber), Retriable},
		{"abortable code", New(pb.ErrorCode_TRANSACTION_ABORTABLE, "x"), Abortable},
		{"abortable sentinel", fmt.Errorf("%w: %w", ErrAbortable, New(pb.ErrorCode_MESSAGE_TOO_LARGE, "big")), Abortable},
		{"abortable after a timeout", fmt.Errorf("%w: %w", ErrAbortable, context.DeadlineExceeded), Abortable},
		{"fenced", fmt.Errorf("end: %w", ProducerFenced), ApplicationRecoverable},
		{"fatal code", New(pb.ErrorCode_INVALID_TXN_STATE, "x"), Fatal},
		{"no code", errors.New("closed"), Fatal},
		{"commit outcome unknown", fmt.Errorf("%w: %w", ErrCommitOutcomeUnknown, RequestTimedOut), CommitOutcomeUnknown},
		{"commit outcome unknown after a timeout", fmt.Errorf("%w: %w", ErrCommitOutcomeUnknown, context.DeadlineExceeded), CommitOutcomeUnknown},
	}
	for _, c := range cases {
		if got := CategoryOf(c.err); got != c.want {
			t.Errorf("%s: CategoryOf(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
	names := map[Category]string{NoError: "none", Retriable: "retriable", Abortable: "abortable",
		ApplicationRecoverable: "application-recoverable", Fatal: "fatal", CommitOutcomeUnknown: "commit-outcome-unknown"}
	for c, n := range names {
		if c.String() != n {
			t.Errorf("%d.String() = %q, want %q", c, c.String(), n)
		}
	}
}

// A code alone has the table's category and retriability; NONE has none.
func TestCodeCategory(t *testing.T) {
	if CodeCategory(pb.ErrorCode_NONE) != NoError {
		t.Error("NONE is not NoError")
	}
	if CodeCategory(pb.ErrorCode_NOT_COORDINATOR) != Retriable || !CodeRetriable(pb.ErrorCode_NOT_COORDINATOR) {
		t.Error("NOT_COORDINATOR is not retriable")
	}
	if CodeCategory(pb.ErrorCode_PRODUCER_FENCED) != ApplicationRecoverable || CodeRetriable(pb.ErrorCode_PRODUCER_FENCED) {
		t.Error("PRODUCER_FENCED")
	}
	if CodeCategory(pb.ErrorCode(9999)) != Fatal {
		t.Error("an unlisted code is not fatal")
	}
}
