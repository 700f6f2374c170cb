package request

import (
	"context"
	"fmt"
	"testing"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TestAddPartitionAnswer: what a transactional batch is answered when its
// partition could not be added to the transaction, as Kafka translates it:
// a coordinator busy or away makes the batch retriable and not written
// (NOT_ENOUGH_REPLICAS), a fence is an epoch refused, the rest pass as is.
func TestAddPartitionAnswer(t *testing.T) {
	for _, c := range []struct {
		in   error
		want pb.ErrorCode
	}{
		{nil, pb.ErrorCode_NONE},
		{errs.New(pb.ErrorCode_PRODUCER_FENCED, "x"), pb.ErrorCode_INVALID_PRODUCER_EPOCH},
		{errs.New(pb.ErrorCode_CONCURRENT_TRANSACTIONS, "x"), pb.ErrorCode_NOT_ENOUGH_REPLICAS},
		{errs.New(pb.ErrorCode_NOT_COORDINATOR, "x"), pb.ErrorCode_NOT_ENOUGH_REPLICAS},
		{errs.New(pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS, "x"), pb.ErrorCode_NOT_ENOUGH_REPLICAS},
		{errs.New(pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, "x"), pb.ErrorCode_NOT_ENOUGH_REPLICAS},
		{errs.New(pb.ErrorCode_REQUEST_TIMED_OUT, "x"), pb.ErrorCode_NOT_ENOUGH_REPLICAS},
		{fmt.Errorf("add: %w", context.DeadlineExceeded), pb.ErrorCode_NOT_ENOUGH_REPLICAS},
		{errs.New(pb.ErrorCode_TRANSACTION_TIMED_OUT, "x"), pb.ErrorCode_TRANSACTION_TIMED_OUT},
		{errs.New(pb.ErrorCode_INVALID_PRODUCER_ID_MAPPING, "x"), pb.ErrorCode_INVALID_PRODUCER_ID_MAPPING},
		{errs.New(pb.ErrorCode_UNKNOWN_SERVER_ERROR, "x"), pb.ErrorCode_UNKNOWN_SERVER_ERROR},
	} {
		if got := errs.CodeOf(addPartitionAnswer(c.in, "tx", "t", 0)); got != c.want {
			t.Errorf("%v → %v, want %v", c.in, got, c.want)
		}
	}
}
