// Package authz is Kafka's authorization model: operations, resource
// types, pattern types and permissions with Kafka's wire codes, the
// action a request asks for, and the Checker the request layer asks.
// The standard authorizer over the controller's ACLs lives here too.
package authz

import (
	"context"
	"fmt"
	"strings"

	"github.com/strand-io/strand/internal/auth"
)

// Operation is Kafka's AclOperation; the values are its wire codes.
type Operation int8

const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
)

var opNames = map[Operation]string{
	OpUnknown: "Unknown", OpAny: "Any", OpAll: "All", OpRead: "Read", OpWrite: "Write", OpCreate: "Create",
	OpDelete: "Delete", OpAlter: "Alter", OpDescribe: "Describe", OpClusterAction: "ClusterAction",
	OpDescribeConfigs: "DescribeConfigs", OpAlterConfigs: "AlterConfigs", OpIdempotentWrite: "IdempotentWrite",
	OpCreateTokens: "CreateTokens", OpDescribeTokens: "DescribeTokens",
}

func (o Operation) String() string {
	if s, ok := opNames[o]; ok {
		return s
	}
	return fmt.Sprintf("Operation(%d)", int8(o))
}

// ParseOperation reads an operation's name in any case ("read",
// "IdempotentWrite", "describe-configs" and "DESCRIBE_CONFIGS" too).
func ParseOperation(s string) (Operation, error) {
	k := normalize(s)
	for o, n := range opNames {
		if normalize(n) == k && o != OpUnknown {
			return o, nil
		}
	}
	return OpUnknown, fmt.Errorf("unknown operation %q", s)
}

// ResourceType is Kafka's ResourceType; the values are its wire codes.
type ResourceType int8

const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

var resNames = map[ResourceType]string{
	ResourceUnknown: "Unknown", ResourceAny: "Any", ResourceTopic: "Topic", ResourceGroup: "Group",
	ResourceCluster: "Cluster", ResourceTransactionalID: "TransactionalId", ResourceDelegationToken: "DelegationToken",
	ResourceUser: "User",
}

func (r ResourceType) String() string {
	if s, ok := resNames[r]; ok {
		return s
	}
	return fmt.Sprintf("ResourceType(%d)", int8(r))
}

// ParseResourceType reads a resource type's name in any case.
func ParseResourceType(s string) (ResourceType, error) {
	k := normalize(s)
	for r, n := range resNames {
		if normalize(n) == k && r != ResourceUnknown {
			return r, nil
		}
	}
	return ResourceUnknown, fmt.Errorf("unknown resource type %q", s)
}

// ClusterName is the one cluster resource's name, as Kafka's.
const ClusterName = "kafka-cluster"

// PatternType is Kafka's PatternType; the values are its wire codes.
type PatternType int8

const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1
	PatternMatch    PatternType = 2
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

var patNames = map[PatternType]string{
	PatternUnknown: "Unknown", PatternAny: "Any", PatternMatch: "Match", PatternLiteral: "Literal", PatternPrefixed: "Prefixed",
}

func (p PatternType) String() string {
	if s, ok := patNames[p]; ok {
		return s
	}
	return fmt.Sprintf("PatternType(%d)", int8(p))
}

// ParsePatternType reads a pattern type's name in any case.
func ParsePatternType(s string) (PatternType, error) {
	k := normalize(s)
	for p, n := range patNames {
		if normalize(n) == k && p != PatternUnknown {
			return p, nil
		}
	}
	return PatternUnknown, fmt.Errorf("unknown pattern type %q", s)
}

// Permission is Kafka's AclPermissionType; the values are its wire codes.
type Permission int8

const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1
	PermissionDeny    Permission = 2
	PermissionAllow   Permission = 3
)

func (p Permission) String() string {
	switch p {
	case PermissionAny:
		return "Any"
	case PermissionDeny:
		return "Deny"
	case PermissionAllow:
		return "Allow"
	}
	return "Unknown"
}

// WildcardResource is the literal resource name that matches every
// resource of its type; WildcardPrincipal and WildcardHost match every
// principal and every host.
const (
	WildcardResource  = "*"
	WildcardPrincipal = "User:*"
	WildcardHost      = "*"
)

// Action is what a request asks to do to one resource. Request names
// the request for the audit log ("Produce", "InitProducerId", …).
type Action struct {
	Op      Operation
	Type    ResourceType
	Name    string
	Request string
}

func (a Action) String() string {
	return fmt.Sprintf("%s on %s:%s", a.Op, a.Type, a.Name)
}

// Checker is what the request layer asks. A nil Checker allows
// everything (no authorizer configured, as Kafka without
// authorizer.class.name).
type Checker interface {
	// Authorize reports whether the session may do the action. A denial
	// is logged by the Checker (the audit line), once per call.
	Authorize(ctx context.Context, s auth.Session, a Action) bool
	// AuthorizeAny reports whether the session may do op on at least one
	// resource of the type (Kafka's authorizeByResourceType: an idempotent
	// producer with Write on any topic). request names the request for
	// the audit log.
	AuthorizeAny(ctx context.Context, s auth.Session, op Operation, t ResourceType, request string) bool
}

type quietKey struct{}

// Quietly marks the checks made with the returned context as ones whose
// denial is expected and not audited at info (Kafka's logIfDenied=false):
// a listing filtered down to what the principal may see, or a first check
// with a fallback (Create on the cluster before Create on the topic). A
// Checker logs such a denial at debug.
func Quietly(ctx context.Context) context.Context {
	return context.WithValue(ctx, quietKey{}, true)
}

// IsQuiet reports whether ctx was made by Quietly.
func IsQuiet(ctx context.Context) bool {
	q, _ := ctx.Value(quietKey{}).(bool)
	return q
}

func normalize(s string) string {
	return strings.ToLower(strings.NewReplacer("_", "", "-", "", " ", "").Replace(s))
}
