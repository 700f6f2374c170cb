package request_test

import (
	"context"
	"testing"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/internal/auth"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/request"
)

// TestDescribeAclsRefusesUnknownFilter: a DescribeAcls filter with an
// UNKNOWN resource type, pattern type, operation or permission is
// INVALID_REQUEST, as Kafka's; the ANY filter is answered.
func TestDescribeAclsRefusesUnknownFilter(t *testing.T) {
	h := &request.Handler{Authorizer: allowAll{}}
	ctx := context.Background()
	anyF := func() *pb.AclBindingFilter {
		return &pb.AclBindingFilter{ResourceType: 1, PatternType: 1, Operation: 1, Permission: 1}
	}
	for name, edit := range map[string]func(*pb.AclBindingFilter){
		"resource type": func(f *pb.AclBindingFilter) { f.ResourceType = 0 },
		"pattern type":  func(f *pb.AclBindingFilter) { f.PatternType = 0 },
		"operation":     func(f *pb.AclBindingFilter) { f.Operation = 0 },
		"permission":    func(f *pb.AclBindingFilter) { f.Permission = 0 },
	} {
		f := anyF()
		edit(f)
		resp, err := h.DescribeAcls(ctx, &pb.DescribeAclsRequest{Filter: f})
		if err != nil || resp.ErrorCode != pb.ErrorCode_INVALID_REQUEST {
			t.Errorf("UNKNOWN %s: %v %v, want INVALID_REQUEST", name, resp, err)
		}
	}
	resp, err := h.DescribeAcls(ctx, &pb.DescribeAclsRequest{Filter: anyF()})
	if err != nil || resp.ErrorCode != pb.ErrorCode_NONE || len(resp.Acls) != 0 {
		t.Fatalf("ANY filter: %v %v", resp, err)
	}
}

type allowAll struct{}

func (allowAll) Authorize(context.Context, auth.Session, authz.Action) bool { return true }
func (allowAll) AuthorizeAny(context.Context, auth.Session, authz.Operation, authz.ResourceType, string) bool {
	return true
}

// TestAclsSecurityDisabled: without an authorizer (authorizer.class.name
// unset) every ACL request is answered SECURITY_DISABLED, as Kafka's
// brokers answer it, and nothing goes to the controller.
func TestAclsSecurityDisabled(t *testing.T) {
	h := &request.Handler{}
	ctx := context.Background()
	cr, err := h.CreateAcls(ctx, &pb.CreateAclsRequest{Creations: []*pb.AclBinding{{ResourceType: 2, ResourceName: "t", PatternType: 3,
		Principal: "User:a", Host: "*", Operation: 3, Permission: 3}}})
	if err != nil || len(cr.Results) != 1 || cr.Results[0].ErrorCode != pb.ErrorCode_SECURITY_DISABLED {
		t.Errorf("CreateAcls: %v %v", cr, err)
	}
	dr, err := h.DeleteAcls(ctx, &pb.DeleteAclsRequest{Filters: []*pb.AclBindingFilter{{ResourceType: 1, PatternType: 1, Operation: 1, Permission: 1}}})
	if err != nil || len(dr.FilterResults) != 1 || dr.FilterResults[0].ErrorCode != pb.ErrorCode_SECURITY_DISABLED {
		t.Errorf("DeleteAcls: %v %v", dr, err)
	}
	ds, err := h.DescribeAcls(ctx, &pb.DescribeAclsRequest{Filter: &pb.AclBindingFilter{ResourceType: 1, PatternType: 1, Operation: 1, Permission: 1}})
	if err != nil || ds.ErrorCode != pb.ErrorCode_SECURITY_DISABLED {
		t.Errorf("DescribeAcls: %v %v", ds, err)
	}
}
