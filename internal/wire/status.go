package wire

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// ErrorDomain is the errdetails.ErrorInfo domain of a gRPC status that
// carries a Kafka error code (StatusError).
const ErrorDomain = "strand.io"

// StatusError is a gRPC status error for a call refused before any service
// answered it (a response message, which carries error codes field by
// field, is never made). The status has gRPC code c, the message
// "CODE_NAME: message" (what a plain gRPC client prints), and an
// errdetails.ErrorInfo detail whose reason is the Kafka error name, so a
// Strand client reads the Kafka error back with FromStatus.
func StatusError(c codes.Code, e *errs.Error) error {
	st := status.New(c, e.Error())
	if withInfo, err := st.WithDetails(&errdetails.ErrorInfo{Reason: e.Code.String(), Domain: ErrorDomain}); err == nil {
		st = withInfo
	}
	return &codedStatus{e: e, st: st}
}

// codedStatus is a status error that is also the *errs.Error it carries,
// so errors.As finds either.
type codedStatus struct {
	e  *errs.Error
	st *status.Status
}

func (c *codedStatus) Error() string              { return c.e.Error() }
func (c *codedStatus) Unwrap() error              { return c.e }
func (c *codedStatus) GRPCStatus() *status.Status { return c.st }

// FromStatus returns the Kafka error a gRPC status error carries (made by
// StatusError on the other end) as an error that is both the *errs.Error
// (errs.IsRetriable, errs.CodeOf and errors.Is work on it) and the gRPC
// status (status.FromError still works). Any other error is returned as
// it is.
func FromStatus(err error) error {
	if err == nil {
		return nil
	}
	var cs *codedStatus
	if errors.As(err, &cs) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.Domain != ErrorDomain {
			continue
		}
		code, ok := pb.ErrorCode_value[info.Reason]
		if !ok {
			continue
		}
		msg := strings.TrimPrefix(st.Message(), info.Reason+": ")
		return &codedStatus{e: &errs.Error{Code: pb.ErrorCode(code), Message: msg}, st: st}
	}
	return err
}

// ErrorCodeDialOptions make a client connection's calls return FromStatus
// errors: a call (or a stream's receive) refused with a Kafka error code
// fails with that *errs.Error.
func ErrorCodeDialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return FromStatus(invoker(ctx, method, req, reply, cc, opts...))
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, FromStatus(err)
			}
			return codedStream{s}, nil
		}),
	}
}

type codedStream struct{ grpc.ClientStream }

func (s codedStream) RecvMsg(m any) error { return FromStatus(s.ClientStream.RecvMsg(m)) }
func (s codedStream) SendMsg(m any) error { return FromStatus(s.ClientStream.SendMsg(m)) }
