package controller

import (
	"context"
	"fmt"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Kafka's codes ValidateACL checks (package authz names them; it sits
// above the controller).
const (
	aclTypeAny     = 1
	aclTypeCluster = 4
	aclTypeMax     = 7
	aclPatLiteral  = 3
	aclPatPrefixed = 4
	aclOpAny       = 1
	aclOpMax       = 14
	aclPermDeny    = 2
	aclPermAllow   = 3
	aclClusterName = "kafka-cluster"
)

// ValidateACL checks a binding to create as Kafka's AclControlManager and
// the brokers' ACL API do: the resource type must be a concrete one (not
// UNKNOWN or ANY), the pattern LITERAL or PREFIXED, the operation
// concrete (not UNKNOWN or ANY), the permission ALLOW or DENY, the name
// not empty (and "kafka-cluster" for the cluster), the principal
// Type:Name, the host not empty. A failure is INVALID_REQUEST.
func ValidateACL(b *pb.AclBinding) error {
	bad := func(format string, a ...any) error { return errs.New(pb.ErrorCode_INVALID_REQUEST, format, a...) }
	switch rt := b.GetResourceType(); {
	case rt <= aclTypeAny || rt > aclTypeMax:
		return bad("Invalid resourceType %d", rt)
	}
	if pt := b.GetPatternType(); pt != aclPatLiteral && pt != aclPatPrefixed {
		return bad("Invalid patternType %d", pt)
	}
	if op := b.GetOperation(); op <= aclOpAny || op > aclOpMax {
		return bad("Invalid operation %d", op)
	}
	if p := b.GetPermission(); p != aclPermDeny && p != aclPermAllow {
		return bad("Invalid permissionType %d", p)
	}
	if b.GetResourceName() == "" {
		return bad("Resource name should not be empty")
	}
	if b.GetResourceType() == aclTypeCluster && b.GetResourceName() != aclClusterName {
		return bad("The only valid name for the CLUSTER resource is %s", aclClusterName)
	}
	if _, err := auth.ParsePrincipal(b.GetPrincipal()); err != nil {
		return bad("Could not parse principal from `%s` (want Type:Name, such as User:alice)", b.GetPrincipal())
	}
	if b.GetHost() == "" {
		return bad("Invalid host: the host should not be empty (use * for every host)")
	}
	return nil
}

// CreateAcls validates each binding and writes the new ones in one batch,
// each with a new id. A binding that exists already (or comes twice) is a
// success that writes nothing, as Kafka's.
func (c *Controller) CreateAcls(ctx context.Context, req *pb.CreateAclsRequest) (*pb.CreateAclsResponse, error) {
	if err := c.lockActive(); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	img := c.Q.FSM.Image()
	out := &pb.CreateAclsResponse{Results: make([]*pb.AclCreationResult, len(req.Creations))}
	var recs []*pb.MetadataRecord
	var pending []*metadata.ACL
	var written []int
	for i, b := range req.Creations {
		res := &pb.AclCreationResult{}
		out.Results[i] = res
		if err := ValidateACL(b); err != nil {
			res.ErrorCode, res.ErrorMessage = errs.Split(err)
			continue
		}
		a := metadata.ACLFromBinding(newID(), b)
		if img.ACLs.Find(a) != nil || containsBinding(pending, a) {
			continue
		}
		pending = append(pending, a)
		written = append(written, i)
		recs = append(recs, &pb.MetadataRecord{Record: &pb.MetadataRecord_AccessControlEntry{
			AccessControlEntry: &pb.AccessControlEntryRecord{Id: a.ID, Acl: a.Binding()}}})
	}
	if len(recs) == 0 {
		return out, nil
	}
	if _, err := c.proposeLocked(ctx, recs...); err != nil {
		if errs.CodeOf(err) == pb.ErrorCode_NOT_CONTROLLER {
			return nil, err
		}
		code, msg := errs.Split(err)
		for _, i := range written {
			out.Results[i].ErrorCode, out.Results[i].ErrorMessage = code, msg
		}
		return out, nil
	}
	for _, a := range pending {
		c.lg.Info("ACL created", "acl", a.ID, "resource", fmt.Sprintf("%d:%d:%s", a.ResourceType, a.PatternType, a.ResourceName),
			"principal", a.Principal, "host", a.Host, "operation", a.Operation, "permission", a.Permission)
	}
	return out, nil
}

func containsBinding(list []*metadata.ACL, a *metadata.ACL) bool {
	for _, x := range list {
		if x.SameBinding(a) {
			return true
		}
	}
	return false
}

// DeleteAcls removes the ACLs each filter matches (Kafka's
// AclBindingFilter semantics, metadata.FilterMatches) in one batch and
// answers, per filter, the bindings it matched. A filter with an UNKNOWN
// field is INVALID_REQUEST and deletes nothing. An ACL two filters match
// is listed under both and removed once.
func (c *Controller) DeleteAcls(ctx context.Context, req *pb.DeleteAclsRequest) (*pb.DeleteAclsResponse, error) {
	if err := c.lockActive(); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	img := c.Q.FSM.Image()
	out := &pb.DeleteAclsResponse{FilterResults: make([]*pb.DeleteAclsFilterResult, len(req.Filters))}
	removed := map[string]bool{}
	var recs []*pb.MetadataRecord
	var gone []*metadata.ACL
	for i, f := range req.Filters {
		res := &pb.DeleteAclsFilterResult{}
		out.FilterResults[i] = res
		if p := metadata.FilterProblem(f); p != "" {
			res.ErrorCode, res.ErrorMessage = pb.ErrorCode_INVALID_REQUEST, p
			continue
		}
		for _, a := range img.ACLs.Matching(f) {
			res.MatchingAcls = append(res.MatchingAcls, &pb.DeleteAclsMatchingAcl{Acl: a.Binding()})
			if !removed[a.ID] {
				removed[a.ID] = true
				gone = append(gone, a)
				recs = append(recs, &pb.MetadataRecord{Record: &pb.MetadataRecord_RemoveAccessControlEntry{
					RemoveAccessControlEntry: &pb.RemoveAccessControlEntryRecord{Id: a.ID}}})
			}
		}
	}
	if len(recs) == 0 {
		return out, nil
	}
	if _, err := c.proposeLocked(ctx, recs...); err != nil {
		if errs.CodeOf(err) == pb.ErrorCode_NOT_CONTROLLER {
			return nil, err
		}
		code, msg := errs.Split(err)
		for _, res := range out.FilterResults {
			if res.ErrorCode == pb.ErrorCode_NONE && len(res.MatchingAcls) > 0 {
				res.ErrorCode, res.ErrorMessage, res.MatchingAcls = code, msg, nil
			}
		}
		return out, nil
	}
	for _, a := range gone {
		c.lg.Info("ACL deleted", "acl", a.ID, "resource", fmt.Sprintf("%d:%d:%s", a.ResourceType, a.PatternType, a.ResourceName),
			"principal", a.Principal, "host", a.Host, "operation", a.Operation, "permission", a.Permission)
	}
	return out, nil
}
