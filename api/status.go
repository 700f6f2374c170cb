package api

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/wire"
)

// toStatus is what a gRPC service returns for an error of package
// request (which answers failures inside its responses and returns an
// error only when it has no answer): the caller's context ending is
// CANCELLED or DEADLINE_EXCEEDED, a Kafka error is a status that carries
// its code (wire.StatusError: the SDK reads it back with wire.FromStatus),
// anything else passes as it is (gRPC answers UNKNOWN).
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return wire.StatusError(codes.Unknown, e)
	}
	return err
}

// answer is a request method's result as a gRPC handler returns it.
func answer[R any](resp R, err error) (R, error) {
	if err != nil {
		var zero R
		return zero, toStatus(err)
	}
	return resp, nil
}
