package errs

import (
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
