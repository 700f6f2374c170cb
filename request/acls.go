package request

import (
	"context"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// securityDisabled is Kafka's answer to an ACL request on a broker
// without an authorizer: SECURITY_DISABLED, and nothing stored or listed.
func (h *Handler) securityDisabled() error {
	if h.Authorizer == nil {
		return errs.New(pb.ErrorCode_SECURITY_DISABLED, "No Authorizer is configured on the broker (authorizer.class.name)")
	}
	return nil
}

// aclWait bounds how long CreateAcls and DeleteAcls wait for this
// broker's image to show what the controller wrote.
var aclWait = leadersWait(0)

// The ACL requests on a broker without an authorizer are SECURITY_DISABLED,
// as Kafka's.

// CreateAcls forwards to the active controller, then waits (bounded)
// until this broker's image holds each binding created, so a DescribeAcls
// that follows here lists it.
// Alter on the cluster is asked first (Kafka: CLUSTER_AUTHORIZATION_FAILED
// for every creation otherwise).
func (h *Handler) CreateAcls(ctx context.Context, req *pb.CreateAclsRequest) (*pb.CreateAclsResponse, error) {
	fail := func(err error) *pb.CreateAclsResponse {
		code, msg := timedOutIfUnknown(errs.Split(err))
		out := &pb.CreateAclsResponse{}
		for range req.Creations {
			out.Results = append(out.Results, &pb.AclCreationResult{ErrorCode: code, ErrorMessage: msg})
		}
		return out
	}
	if err := h.securityDisabled(); err != nil {
		return fail(err), nil
	}
	if err := h.authorizeACLAdmin(ctx, "CreateAcls"); err != nil {
		return fail(err), nil
	}
	for _, b := range req.Creations {
		for _, f := range []struct{ what, v string }{{"resource name", b.GetResourceName()}, {"principal", b.GetPrincipal()}, {"host", b.GetHost()}} {
			if err := checkString(f.what, f.v); err != nil {
				return fail(err), nil
			}
		}
	}
	resp, err := toController(ctx, h, func(ctx context.Context, c pb.ControllerClient) (*pb.CreateAclsResponse, error) {
		return c.CreateAcls(ctx, req)
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return fail(err), nil
	}
	if h.Repl != nil {
		waitUntil(ctx, aclWait, func() bool {
			acls := h.Repl.Image().ACLs
			for i, b := range req.Creations {
				if i < len(resp.Results) && resp.Results[i].ErrorCode == pb.ErrorCode_NONE && acls.Find(metadata.ACLFromBinding("", b)) == nil {
					return false
				}
			}
			return true
		})
	}
	return resp, nil
}

// DeleteAcls forwards to the active controller, then waits (bounded)
// until this broker's image no longer holds the ACLs deleted.
// Alter on the cluster is asked first.
func (h *Handler) DeleteAcls(ctx context.Context, req *pb.DeleteAclsRequest) (*pb.DeleteAclsResponse, error) {
	err := h.securityDisabled()
	if err == nil {
		err = h.authorizeACLAdmin(ctx, "DeleteAcls")
	}
	if err != nil {
		code, msg := errs.Split(err)
		out := &pb.DeleteAclsResponse{}
		for range req.Filters {
			out.FilterResults = append(out.FilterResults, &pb.DeleteAclsFilterResult{ErrorCode: code, ErrorMessage: msg})
		}
		return out, nil
	}
	resp, err := toController(ctx, h, func(ctx context.Context, c pb.ControllerClient) (*pb.DeleteAclsResponse, error) {
		return c.DeleteAcls(ctx, req)
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		code, msg := timedOutIfUnknown(errs.Split(err))
		out := &pb.DeleteAclsResponse{}
		for range req.Filters {
			out.FilterResults = append(out.FilterResults, &pb.DeleteAclsFilterResult{ErrorCode: code, ErrorMessage: msg})
		}
		return out, nil
	}
	if h.Repl != nil {
		waitUntil(ctx, aclWait, func() bool {
			acls := h.Repl.Image().ACLs
			for _, fr := range resp.FilterResults {
				for _, m := range fr.MatchingAcls {
					if m.ErrorCode == pb.ErrorCode_NONE && acls.Find(metadata.ACLFromBinding("", m.Acl)) != nil {
						return false
					}
				}
			}
			return true
		})
	}
	return resp, nil
}

// DescribeAcls lists the ACLs in this broker's image the filter matches,
// with Kafka's filter semantics (metadata.FilterMatches). A filter with
// an UNKNOWN field is INVALID_REQUEST.
// Describe on the cluster is asked first.
func (h *Handler) DescribeAcls(ctx context.Context, req *pb.DescribeAclsRequest) (*pb.DescribeAclsResponse, error) {
	err := h.securityDisabled()
	if err == nil {
		err = h.authorizeACLAdmin(ctx, "DescribeAcls")
	}
	if err != nil {
		code, msg := errs.Split(err)
		return &pb.DescribeAclsResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	if p := metadata.FilterProblem(req.Filter); p != "" {
		return &pb.DescribeAclsResponse{ErrorCode: pb.ErrorCode_INVALID_REQUEST, ErrorMessage: p}, nil
	}
	if h.Repl == nil {
		return &pb.DescribeAclsResponse{}, nil
	}
	out := &pb.DescribeAclsResponse{}
	for _, a := range h.Repl.Image().ACLs.Matching(req.Filter) {
		out.Acls = append(out.Acls, a.Binding())
	}
	return out, nil
}
