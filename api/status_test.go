package api

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strand-io/strand/coordinator/group"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/wire"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TestToStatus: what a gRPC caller gets for an error of the request
// layer: its context ending as CANCELLED or DEADLINE_EXCEEDED (not
// UNKNOWN), a Kafka error as a status the SDK reads the code back from.
func TestToStatus(t *testing.T) {
	if toStatus(nil) != nil {
		t.Fatal("toStatus(nil) is not nil")
	}
	for _, c := range []struct {
		err  error
		want codes.Code
	}{
		{context.Canceled, codes.Canceled},
		{fmt.Errorf("join: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{errs.New(pb.ErrorCode_NOT_COORDINATOR, "moved"), codes.Unknown},
		{errors.New("plain"), codes.Unknown},
	} {
		if got := status.Code(toStatus(c.err)); got != c.want {
			t.Errorf("%v → %v, want %v", c.err, got, c.want)
		}
	}
	back := wire.FromStatus(status.Convert(toStatus(errs.New(pb.ErrorCode_NOT_COORDINATOR, "moved"))).Err())
	if errs.CodeOf(back) != pb.ErrorCode_NOT_COORDINATOR {
		t.Errorf("a Kafka error through gRPC reads back as %v, want NOT_COORDINATOR", errs.CodeOf(back))
	}
	if r, err := answer(&pb.HeartbeatResponse{}, context.Canceled); r != nil || status.Code(err) != codes.Canceled {
		t.Errorf("answer with an error: %v %v, want no response and CANCELLED", r, err)
	}
}

// TestGroupCoordinatorIsNoGRPCServer: the group coordinator is reached
// only through the request layer (groupsService calls request.Handler,
// which calls it), so it can never be registered as a gRPC server itself.
func TestGroupCoordinatorIsNoGRPCServer(t *testing.T) {
	if _, ok := any((*group.Coordinator)(nil)).(pb.GroupsServer); ok {
		t.Fatal("group.Coordinator implements pb.GroupsServer: it could be registered around the request layer's checks")
	}
	if _, ok := any(&groupsService{}).(pb.GroupsServer); !ok {
		t.Fatal("groupsService is not a pb.GroupsServer")
	}
}
