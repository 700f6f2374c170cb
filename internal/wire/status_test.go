package wire

import (
	"errors"
	"io"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TestStatusErrorRoundTrip: a refusal made by StatusError reads back, from
// the status on the wire, as the same Kafka error, and stays a gRPC status.
func TestStatusErrorRoundTrip(t *testing.T) {
	e := errs.New(pb.ErrorCode_BROKER_NOT_AVAILABLE, "node 1 is starting")
	sent := StatusError(codes.Unavailable, e)
	if !errors.Is(sent, errs.New(pb.ErrorCode_BROKER_NOT_AVAILABLE, "")) || status.Code(sent) != codes.Unavailable {
		t.Fatalf("StatusError: %v (gRPC %v)", sent, status.Code(sent))
	}
	// The client sees a status rebuilt from the wire's proto.
	wire := status.FromProto(status.Convert(sent).Proto()).Err()
	if wire.Error() == sent.Error() {
		t.Fatalf("the wire's error should be a plain status error: %v", wire)
	}
	got := FromStatus(wire)
	var ke *errs.Error
	if !errors.As(got, &ke) || ke.Code != pb.ErrorCode_BROKER_NOT_AVAILABLE || ke.Message != "node 1 is starting" {
		t.Fatalf("FromStatus: %v (%#v)", got, ke)
	}
	if !errs.IsRetriable(got) || status.Code(got) != codes.Unavailable || got.Error() != "BROKER_NOT_AVAILABLE: node 1 is starting" {
		t.Fatalf("FromStatus: %v retriable=%v gRPC %v", got, errs.IsRetriable(got), status.Code(got))
	}
	// Anything else passes unchanged.
	for _, err := range []error{nil, io.EOF, status.Error(codes.Unavailable, "connection refused"), errors.New("x")} {
		if back := FromStatus(err); back != err {
			t.Fatalf("FromStatus(%v) = %v", err, back)
		}
	}
}
