package client

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/wire"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TestSCRAMRetryOnRefusedToken: a unary call whose token the node refuses
// drops the token and is retried once (the retry authenticates afresh);
// any other error, and a call made without a token, is not retried.
func TestSCRAMRetryOnRefusedToken(t *testing.T) {
	refused := wire.StatusError(codes.Unauthenticated, errs.New(pb.ErrorCode_SASL_AUTHENTICATION_FAILED, "token unknown"))
	other := wire.StatusError(codes.InvalidArgument, errs.New(pb.ErrorCode_INVALID_REQUEST, "no"))
	for _, tc := range []struct {
		name      string
		token     bool
		first     error
		wantCalls int
		wantDrop  bool
	}{
		{"refused token", true, refused, 2, true},
		{"other error", true, other, 1, false},
		{"no token held", false, refused, 1, false},
		{"success", true, nil, 1, false},
	} {
		sc := &scramCreds{login: &scramLogin{}}
		if tc.token {
			sc.token, sc.renewAt = []byte("tok"), time.Now().Add(time.Hour)
		}
		calls := 0
		invoker := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
			calls++
			if calls == 1 {
				return tc.first
			}
			return nil
		}
		_ = sc.retryUnary(context.Background(), "/strand.v1.Metadata/Metadata", nil, nil, nil, invoker)
		if calls != tc.wantCalls || (sc.token == nil) != (tc.wantDrop || !tc.token) {
			t.Errorf("%s: %d calls, token %q", tc.name, calls, sc.token)
		}
	}
	// The exchange itself is never retried this way.
	sc := &scramCreds{login: &scramLogin{}, token: []byte("tok"), renewAt: time.Now().Add(time.Hour)}
	calls := 0
	_ = sc.retryUnary(context.Background(), saslMethod, nil, nil, nil, func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
		calls++
		return refused
	})
	if calls != 1 {
		t.Fatalf("the exchange was retried: %d calls", calls)
	}
}
