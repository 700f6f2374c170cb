package request

import (
	"context"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// The authorization helpers the ACL, SCRAM and quota handlers call,
// for the external tests.

func AuthorizeACLAdminForTest(h *Handler, ctx context.Context, request string) error {
	return h.authorizeACLAdmin(ctx, request)
}

func AuthorizeScramAdminForTest(h *Handler, ctx context.Context, request string) error {
	return h.authorizeScramAdmin(ctx, request)
}

func AuthorizeClientQuotasForTest(h *Handler, ctx context.Context, request string) error {
	return h.authorizeClientQuotas(ctx, request)
}

// CodeOf is err's code (NONE for nil).
func CodeOf(err error) pb.ErrorCode { return errs.CodeOf(err) }
