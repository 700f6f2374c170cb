package request_test

import (
	"context"
	"testing"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/request"
)

// TestDescribeAclsRefusesUnknownFilter: a DescribeAcls filter with an
// UNKNOWN resource type, pattern type, operation or permission is
// INVALID_REQUEST, as Kafka's; the ANY filter is answered.
func TestDescribeAclsRefusesUnknownFilter(t *testing.T) {
	h := &request.Handler{}
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
