package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Kafka's ACL admin APIs (kafka-acls, kadm), answered by the
// request layer: CreateAcls and DeleteAcls go to the active controller,
// DescribeAcls reads this broker's image.

func init() {
	register(kmsg.DescribeACLs, 0, 3, handleDescribeACLs)
	register(kmsg.CreateACLs, 0, 3, handleCreateACLs)
	register(kmsg.DeleteACLs, 0, 3, handleDeleteACLs)
}

// patternOf is the pattern type of a request at version v: version 0
// carries none and means LITERAL, as Kafka's.
func patternOf(v int16, pt kmsg.ACLResourcePatternType) int32 {
	if v == 0 {
		return int32(kmsg.ACLResourcePatternTypeLiteral)
	}
	return int32(pt)
}

func handleCreateACLs(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.CreateACLsRequest)
	preq := &pb.CreateAclsRequest{}
	for _, cr := range req.Creations {
		preq.Creations = append(preq.Creations, &pb.AclBinding{ResourceType: int32(cr.ResourceType), ResourceName: cr.ResourceName,
			PatternType: patternOf(req.Version, cr.ResourcePatternType), Principal: cr.Principal, Host: cr.Host,
			Operation: int32(cr.Operation), Permission: int32(cr.PermissionType)})
	}
	resp := kmsg.NewPtrCreateACLsResponse()
	presp, err := c.H.CreateAcls(ctx, preq)
	for i := range req.Creations {
		res := kmsg.NewCreateACLsResponseResult()
		switch {
		case err != nil:
			res.ErrorCode, res.ErrorMessage = splitCode(err)
		case i < len(presp.Results):
			res.ErrorCode, res.ErrorMessage = code(presp.Results[i].ErrorCode), errMsg(presp.Results[i].ErrorMessage)
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

func handleDeleteACLs(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.DeleteACLsRequest)
	preq := &pb.DeleteAclsRequest{}
	for _, f := range req.Filters {
		preq.Filters = append(preq.Filters, &pb.AclBindingFilter{ResourceType: int32(f.ResourceType), ResourceName: f.ResourceName,
			PatternType: patternOf(req.Version, f.ResourcePatternType), Principal: f.Principal, Host: f.Host,
			Operation: int32(f.Operation), Permission: int32(f.PermissionType)})
	}
	resp := kmsg.NewPtrDeleteACLsResponse()
	presp, err := c.H.DeleteAcls(ctx, preq)
	for i := range req.Filters {
		res := kmsg.NewDeleteACLsResponseResult()
		switch {
		case err != nil:
			res.ErrorCode, res.ErrorMessage = splitCode(err)
		case i < len(presp.FilterResults):
			fr := presp.FilterResults[i]
			res.ErrorCode, res.ErrorMessage = code(fr.ErrorCode), errMsg(fr.ErrorMessage)
			for _, m := range fr.MatchingAcls {
				ma := kmsg.NewDeleteACLsResponseResultMatchingACL()
				ma.ErrorCode, ma.ErrorMessage = code(m.ErrorCode), errMsg(m.ErrorMessage)
				a := m.GetAcl()
				ma.ResourceType, ma.ResourceName = kmsg.ACLResourceType(a.GetResourceType()), a.GetResourceName()
				ma.ResourcePatternType = kmsg.ACLResourcePatternType(a.GetPatternType())
				ma.Principal, ma.Host = a.GetPrincipal(), a.GetHost()
				ma.Operation, ma.PermissionType = kmsg.ACLOperation(a.GetOperation()), kmsg.ACLPermissionType(a.GetPermission())
				res.MatchingACLs = append(res.MatchingACLs, ma)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

// handleDescribeACLs lists the matching ACLs grouped by resource pattern,
// as Kafka's response has them.
func handleDescribeACLs(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.DescribeACLsRequest)
	resp := kmsg.NewPtrDescribeACLsResponse()
	presp, err := c.H.DescribeAcls(ctx, &pb.DescribeAclsRequest{Filter: &pb.AclBindingFilter{
		ResourceType: int32(req.ResourceType), ResourceName: req.ResourceName, PatternType: patternOf(req.Version, req.ResourcePatternType),
		Principal: req.Principal, Host: req.Host, Operation: int32(req.Operation), Permission: int32(req.PermissionType)}})
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = splitCode(err)
		return resp, nil
	}
	resp.ErrorCode, resp.ErrorMessage = code(presp.ErrorCode), errMsg(presp.ErrorMessage)
	// The request layer lists them ordered by resource, so each resource's
	// ACLs are together.
	for _, a := range presp.Acls {
		if req.Version == 0 && a.PatternType != int32(kmsg.ACLResourcePatternTypeLiteral) {
			continue // version 0 has no pattern type: only literal ACLs
		}
		n := len(resp.Resources)
		if n == 0 || int32(resp.Resources[n-1].ResourceType) != a.ResourceType || resp.Resources[n-1].ResourceName != a.ResourceName ||
			int32(resp.Resources[n-1].ResourcePatternType) != a.PatternType {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName = kmsg.ACLResourceType(a.ResourceType), a.ResourceName
			res.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
			resp.Resources = append(resp.Resources, res)
			n++
		}
		acl := kmsg.NewDescribeACLsResponseResourceACL()
		acl.Principal, acl.Host = a.Principal, a.Host
		acl.Operation, acl.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
		resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, acl)
	}
	return resp, nil
}
