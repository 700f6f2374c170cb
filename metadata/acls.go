package metadata

import (
	"fmt"
	"sort"
	"strings"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// ACL is one of Kafka's ACLs as the controller stores it
// (AccessControlEntryRecord). The codes are Kafka's wire codes, as
// package authz names them (this package sits below authz and does not
// import it): ResourceType 2 topic, 3 group, 4 cluster, 5 transactional
// id…; PatternType 3 literal, 4 prefixed; Permission 2 deny, 3 allow.
type ACL struct {
	ID           string
	ResourceType int8
	ResourceName string
	PatternType  int8
	Principal    string
	Host         string
	Operation    int8
	Permission   int8
}

// SameBinding reports whether a and b are the same binding (every field
// but the id).
func (a *ACL) SameBinding(b *ACL) bool {
	return a.ResourceType == b.ResourceType && a.ResourceName == b.ResourceName && a.PatternType == b.PatternType &&
		a.Principal == b.Principal && a.Host == b.Host && a.Operation == b.Operation && a.Permission == b.Permission
}

// Binding is the ACL as the wire's binding.
func (a *ACL) Binding() *pb.AclBinding {
	return &pb.AclBinding{ResourceType: int32(a.ResourceType), ResourceName: a.ResourceName, PatternType: int32(a.PatternType),
		Principal: a.Principal, Host: a.Host, Operation: int32(a.Operation), Permission: int32(a.Permission)}
}

// ACLFromBinding is the ACL of a binding, with the id.
func ACLFromBinding(id string, b *pb.AclBinding) *ACL {
	return &ACL{ID: id, ResourceType: int8(b.GetResourceType()), ResourceName: b.GetResourceName(), PatternType: int8(b.GetPatternType()),
		Principal: b.GetPrincipal(), Host: b.GetHost(), Operation: int8(b.GetOperation()), Permission: int8(b.GetPermission())}
}

// Less orders ACLs as DescribeAcls lists them: by resource type, pattern
// type, name, then principal, host, operation, permission, id.
func (a *ACL) Less(b *ACL) bool {
	switch {
	case a.ResourceType != b.ResourceType:
		return a.ResourceType < b.ResourceType
	case a.PatternType != b.PatternType:
		return a.PatternType < b.PatternType
	case a.ResourceName != b.ResourceName:
		return a.ResourceName < b.ResourceName
	case a.Principal != b.Principal:
		return a.Principal < b.Principal
	case a.Host != b.Host:
		return a.Host < b.Host
	case a.Operation != b.Operation:
		return a.Operation < b.Operation
	case a.Permission != b.Permission:
		return a.Permission < b.Permission
	}
	return a.ID < b.ID
}

// aclTypes bounds the resource type codes kept apart (Kafka's are 0-7).
const aclTypes = 8

// ACLs is the cluster's ACLs: immutable, one map (id → ACL) per resource
// type, so a batch that changes topic ACLs copies the topic ACLs only and
// shares the rest. A new ACL set is a new *ACLs: a reader may compare
// pointers to learn whether the set changed. The zero value and nil are
// the empty set.
type ACLs struct {
	byType [aclTypes]map[string]*ACL
	n      int
}

// Len is the number of ACLs.
func (s *ACLs) Len() int {
	if s == nil {
		return 0
	}
	return s.n
}

// OfType calls fn for each ACL of the resource type, in no order, until
// fn returns false.
func (s *ACLs) OfType(t int8, fn func(*ACL) bool) {
	if s == nil || t < 0 || int(t) >= aclTypes {
		return
	}
	for _, a := range s.byType[t] {
		if !fn(a) {
			return
		}
	}
}

// All returns every ACL, in Less's order.
func (s *ACLs) All() []*ACL {
	if s == nil {
		return nil
	}
	out := make([]*ACL, 0, s.n)
	for _, m := range s.byType {
		for _, a := range m {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}

// ByID returns the ACL with the id, or nil.
func (s *ACLs) ByID(id string) *ACL {
	if s == nil {
		return nil
	}
	for _, m := range s.byType {
		if a := m[id]; a != nil {
			return a
		}
	}
	return nil
}

// Find returns the ACL with a's binding (any id), or nil.
func (s *ACLs) Find(a *ACL) *ACL {
	var found *ACL
	s.OfType(a.ResourceType, func(x *ACL) bool {
		if x.SameBinding(a) {
			found = x
			return false
		}
		return true
	})
	return found
}

// aclBuilder copies an ACL set on write, each resource type's map at most
// once.
type aclBuilder struct {
	base   *ACLs
	next   *ACLs
	copied [aclTypes]bool
}

func (b *aclBuilder) writable(t int8) map[string]*ACL {
	if b.next == nil {
		b.next = &ACLs{}
		if b.base != nil {
			*b.next = *b.base
		}
	}
	if !b.copied[t] {
		old := b.next.byType[t]
		m := make(map[string]*ACL, len(old)+1)
		for k, v := range old {
			m[k] = v
		}
		b.next.byType[t], b.copied[t] = m, true
	}
	return b.next.byType[t]
}

func (b *aclBuilder) current() *ACLs {
	if b.next != nil {
		return b.next
	}
	return b.base
}

func (b *aclBuilder) add(r *pb.AccessControlEntryRecord) error {
	if r.GetId() == "" || r.GetAcl() == nil {
		return fmt.Errorf("ACL record without an id or a binding")
	}
	a := ACLFromBinding(r.Id, r.Acl)
	if a.ResourceType < 0 || int(a.ResourceType) >= aclTypes {
		return fmt.Errorf("ACL %s: resource type %d out of range", r.Id, a.ResourceType)
	}
	if b.current().ByID(r.Id) != nil {
		return fmt.Errorf("ACL %s exists already", r.Id)
	}
	m := b.writable(a.ResourceType)
	m[a.ID] = a
	b.next.n++
	return nil
}

func (b *aclBuilder) remove(id string) error {
	a := b.current().ByID(id)
	if a == nil {
		return fmt.Errorf("remove of unknown ACL %s", id)
	}
	delete(b.writable(a.ResourceType), id)
	b.next.n--
	return nil
}

// aclRecords are the records that rebuild s, in Less's order.
func aclRecords(s *ACLs) []*pb.MetadataRecord {
	var out []*pb.MetadataRecord
	for _, a := range s.All() {
		out = append(out, &pb.MetadataRecord{Record: &pb.MetadataRecord_AccessControlEntry{
			AccessControlEntry: &pb.AccessControlEntryRecord{Id: a.ID, Acl: a.Binding()}}})
	}
	return out
}

// Kafka's codes the filter semantics need (package authz names them all).
const (
	codeAny         = 1 // ResourceType ANY, PatternType ANY, operation ANY, permission ANY
	patternMatch    = 2
	patternLiteral  = 3
	patternPrefixed = 4
	wildcardName    = "*"
)

// FilterMatches reports whether the filter selects a, as Kafka's
// AclBindingFilter.matches: resource type and pattern type ANY match
// every one; an unset name, principal or host matches every one; pattern
// type MATCH selects the literal ACL of the name, the literal wildcard
// "*" and every prefixed ACL whose prefix the name starts with (with an
// unset name, every literal and prefixed ACL); operation and permission
// ANY match every one.
func FilterMatches(f *pb.AclBindingFilter, a *ACL) bool {
	if f == nil {
		return true
	}
	if rt := f.GetResourceType(); rt != codeAny && rt != int32(a.ResourceType) {
		return false
	}
	pt := f.GetPatternType()
	if pt != codeAny && pt != patternMatch && pt != int32(a.PatternType) {
		return false
	}
	if f.ResourceName != nil {
		name := *f.ResourceName
		if pt == patternMatch {
			switch a.PatternType {
			case patternLiteral:
				if a.ResourceName != name && a.ResourceName != wildcardName {
					return false
				}
			case patternPrefixed:
				if !strings.HasPrefix(name, a.ResourceName) {
					return false
				}
			default:
				return false
			}
		} else if a.ResourceName != name {
			return false
		}
	}
	if f.Principal != nil && *f.Principal != a.Principal {
		return false
	}
	if f.Host != nil && *f.Host != a.Host {
		return false
	}
	if op := f.GetOperation(); op != codeAny && op != int32(a.Operation) {
		return false
	}
	if p := f.GetPermission(); p != codeAny && p != int32(a.Permission) {
		return false
	}
	return true
}

// FilterProblem names what makes a filter match nothing it could ever
// mean (Kafka's AclBindingFilter.findIndefiniteField): an UNKNOWN (0) or
// out-of-range resource type, pattern type, operation or permission. ""
// when the filter is sound.
func FilterProblem(f *pb.AclBindingFilter) string {
	switch {
	case f == nil:
		return "no filter"
	case f.GetResourceType() <= 0 || f.GetResourceType() >= aclTypes:
		return fmt.Sprintf("Unknown resourceType %d", f.GetResourceType())
	case f.GetPatternType() <= 0 || f.GetPatternType() > patternPrefixed:
		return fmt.Sprintf("Unknown patternType %d", f.GetPatternType())
	case f.GetOperation() <= 0 || f.GetOperation() > 14:
		return fmt.Sprintf("Unknown operation %d", f.GetOperation())
	case f.GetPermission() <= 0 || f.GetPermission() > 3:
		return fmt.Sprintf("Unknown permissionType %d", f.GetPermission())
	}
	return ""
}

// Matching returns the ACLs the filter selects, in Less's order.
func (s *ACLs) Matching(f *pb.AclBindingFilter) []*ACL {
	var out []*ACL
	for t := int8(0); t < aclTypes; t++ {
		if f != nil && f.GetResourceType() != codeAny && int32(t) != f.GetResourceType() {
			continue
		}
		s.OfType(t, func(a *ACL) bool {
			if FilterMatches(f, a) {
				out = append(out, a)
			}
			return true
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}
