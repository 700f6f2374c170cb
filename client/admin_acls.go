package client

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// ACLResourceType is Kafka's ResourceType; the values are its wire codes.
type ACLResourceType int8

const (
	ACLResourceAny             ACLResourceType = 1
	ACLResourceTopic           ACLResourceType = 2
	ACLResourceGroup           ACLResourceType = 3
	ACLResourceCluster         ACLResourceType = 4
	ACLResourceTransactionalID ACLResourceType = 5
	ACLResourceDelegationToken ACLResourceType = 6
	ACLResourceUser            ACLResourceType = 7
)

// String is the name as Kafka's tools print it (TOPIC, TRANSACTIONAL_ID).
func (t ACLResourceType) String() string {
	return enumName(int8(t), "UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER")
}

// ACLPatternType is Kafka's PatternType.
type ACLPatternType int8

const (
	ACLPatternAny      ACLPatternType = 1
	ACLPatternMatch    ACLPatternType = 2
	ACLPatternLiteral  ACLPatternType = 3
	ACLPatternPrefixed ACLPatternType = 4
)

func (p ACLPatternType) String() string {
	return enumName(int8(p), "UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED")
}

// ACLOperation is Kafka's AclOperation.
type ACLOperation int8

const (
	ACLOpAny             ACLOperation = 1
	ACLOpAll             ACLOperation = 2
	ACLOpRead            ACLOperation = 3
	ACLOpWrite           ACLOperation = 4
	ACLOpCreate          ACLOperation = 5
	ACLOpDelete          ACLOperation = 6
	ACLOpAlter           ACLOperation = 7
	ACLOpDescribe        ACLOperation = 8
	ACLOpClusterAction   ACLOperation = 9
	ACLOpDescribeConfigs ACLOperation = 10
	ACLOpAlterConfigs    ACLOperation = 11
	ACLOpIdempotentWrite ACLOperation = 12
	ACLOpCreateTokens    ACLOperation = 13
	ACLOpDescribeTokens  ACLOperation = 14
)

func (o ACLOperation) String() string {
	return enumName(int8(o), "UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
		"CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS")
}

// ACLPermission is Kafka's AclPermissionType.
type ACLPermission int8

const (
	ACLPermissionAny   ACLPermission = 1
	ACLPermissionDeny  ACLPermission = 2
	ACLPermissionAllow ACLPermission = 3
)

func (p ACLPermission) String() string { return enumName(int8(p), "UNKNOWN", "ANY", "DENY", "ALLOW") }

func enumName(v int8, names ...string) string {
	if v >= 0 && int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("UNKNOWN(%d)", v)
}

// ACLBinding is one ACL: who (Principal "User:alice" or "User:*", from
// Host or "*") is allowed or denied an operation on the resources a
// pattern names (the literal name, "*" for every one, or a prefix).
type ACLBinding struct {
	ResourceType ACLResourceType
	ResourceName string
	PatternType  ACLPatternType
	Principal    string
	Host         string
	Operation    ACLOperation
	Permission   ACLPermission
}

func (b ACLBinding) pb() *pb.AclBinding {
	return &pb.AclBinding{ResourceType: int32(b.ResourceType), ResourceName: b.ResourceName, PatternType: int32(b.PatternType),
		Principal: b.Principal, Host: b.Host, Operation: int32(b.Operation), Permission: int32(b.Permission)}
}

func bindingOf(a *pb.AclBinding) ACLBinding {
	return ACLBinding{ResourceType: ACLResourceType(a.GetResourceType()), ResourceName: a.GetResourceName(), PatternType: ACLPatternType(a.GetPatternType()),
		Principal: a.GetPrincipal(), Host: a.GetHost(), Operation: ACLOperation(a.GetOperation()), Permission: ACLPermission(a.GetPermission())}
}

// ACLFilter selects ACLs as Kafka's AclBindingFilter: the Any values
// match every type, pattern, operation and permission; a nil name,
// principal or host matches every one; ACLPatternMatch with a name
// selects the ACLs that apply to that name (its literal ACLs, the
// wildcard "*" and the prefixes it starts with).
type ACLFilter struct {
	ResourceType ACLResourceType
	ResourceName *string
	PatternType  ACLPatternType
	Principal    *string
	Host         *string
	Operation    ACLOperation
	Permission   ACLPermission
}

// AnyACL is the filter that matches every ACL.
func AnyACL() ACLFilter {
	return ACLFilter{ResourceType: ACLResourceAny, PatternType: ACLPatternAny, Operation: ACLOpAny, Permission: ACLPermissionAny}
}

func (f ACLFilter) pb() *pb.AclBindingFilter {
	return &pb.AclBindingFilter{ResourceType: int32(f.ResourceType), ResourceName: f.ResourceName, PatternType: int32(f.PatternType),
		Principal: f.Principal, Host: f.Host, Operation: int32(f.Operation), Permission: int32(f.Permission)}
}

// CreateACLs adds ACLs (through the active controller) and returns one
// error per binding, in order: nil when it was created or existed
// already, INVALID_REQUEST for a binding Kafka refuses (ANY or UNKNOWN
// types, an operation ANY, a principal not Type:Name, an empty host…),
// CLUSTER_AUTHORIZATION_FAILED without Alter on the cluster. The error
// returned is for the call as a whole.
func (a *Admin) CreateACLs(ctx context.Context, acls []ACLBinding) ([]error, error) {
	req := &pb.CreateAclsRequest{}
	for _, b := range acls {
		req.Creations = append(req.Creations, b.pb())
	}
	var resp *pb.CreateAclsResponse
	err := a.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewAdminClient(cc).CreateAcls(ctx, req)
		if err == nil {
			// Creating is idempotent: a retry of one that went through is
			// a success.
			for _, r := range resp.Results {
				if controllerRoutingError(r.ErrorCode) {
					return errs.FromCode(r.ErrorCode, r.ErrorMessage)
				}
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(resp.Results) != len(acls) {
		return nil, fmt.Errorf("strand: CreateAcls answered %d results for %d ACLs", len(resp.Results), len(acls))
	}
	out := make([]error, len(acls))
	for i, r := range resp.Results {
		out[i] = errs.FromCode(r.ErrorCode, r.ErrorMessage)
	}
	return out, nil
}

// DeleteACLsResult is what one filter deleted, or why it deleted nothing.
type DeleteACLsResult struct {
	Deleted []ACLBinding
	Err     error
}

// DeleteACLs removes the ACLs each filter matches (through the active
// controller) and returns, per filter in order, those it removed.
func (a *Admin) DeleteACLs(ctx context.Context, filters []ACLFilter) ([]DeleteACLsResult, error) {
	req := &pb.DeleteAclsRequest{}
	for _, f := range filters {
		req.Filters = append(req.Filters, f.pb())
	}
	var resp *pb.DeleteAclsResponse
	err := a.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewAdminClient(cc).DeleteAcls(ctx, req)
		if err == nil {
			// Not REQUEST_TIMED_OUT: a delete that went through would be
			// answered with nothing matched.
			for _, r := range resp.FilterResults {
				if r.ErrorCode == pb.ErrorCode_NOT_CONTROLLER || r.ErrorCode == pb.ErrorCode_BROKER_NOT_AVAILABLE {
					return errs.FromCode(r.ErrorCode, r.ErrorMessage)
				}
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(resp.FilterResults) != len(filters) {
		return nil, fmt.Errorf("strand: DeleteAcls answered %d results for %d filters", len(resp.FilterResults), len(filters))
	}
	out := make([]DeleteACLsResult, len(filters))
	for i, r := range resp.FilterResults {
		out[i].Err = errs.FromCode(r.ErrorCode, r.ErrorMessage)
		for _, m := range r.MatchingAcls {
			if m.ErrorCode == pb.ErrorCode_NONE {
				out[i].Deleted = append(out[i].Deleted, bindingOf(m.Acl))
			} else if out[i].Err == nil {
				out[i].Err = errs.FromCode(m.ErrorCode, m.ErrorMessage)
			}
		}
	}
	return out, nil
}

// DescribeACLs lists the ACLs the filter matches, ordered by resource
// (type, pattern type, name), then principal, host, operation,
// permission.
func (a *Admin) DescribeACLs(ctx context.Context, f ACLFilter) ([]ACLBinding, error) {
	var resp *pb.DescribeAclsResponse
	err := a.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewAdminClient(cc).DescribeAcls(ctx, &pb.DescribeAclsRequest{Filter: f.pb()})
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := errs.FromCode(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return nil, err
	}
	out := make([]ACLBinding, 0, len(resp.Acls))
	for _, a := range resp.Acls {
		out = append(out, bindingOf(a))
	}
	return out, nil
}
