package authz

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/metadata"
)

// StandardClassName is authorizer.class.name for the standard
// authorizer, as Kafka's KRaft brokers spell it; StandardShortName is
// accepted too.
const (
	StandardClassName = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
	StandardShortName = "StandardAuthorizer"
)

// StandardConfig is the standard authorizer's settings.
type StandardConfig struct {
	// SuperUsers (super.users) may do everything, whatever the ACLs say.
	SuperUsers []auth.Principal
	// AllowEveryoneIfNoACLFound (allow.everyone.if.no.acl.found): a
	// resource no ACL names is open to everyone; false (the default) it
	// is closed to all but super users.
	AllowEveryoneIfNoACLFound bool
	// Logger gets the audit lines (nil: slog.Default()).
	Logger *slog.Logger
}

// Standard is Kafka's StandardAuthorizer over the ACLs of the metadata
// image: super users and brokers (auth.Session.Broker) may do everything;
// otherwise an ACL that denies wins over one that allows; an ACL applies
// when its principal is the session's or User:*, its host the session's
// or *, and its resource pattern the literal name, the literal wildcard
// "*" or a prefix of the name; Read, Write, Delete and Alter imply
// Describe, AlterConfigs implies DescribeConfigs, All implies every
// operation; when no ACL names the resource at all,
// AllowEveryoneIfNoACLFound decides.
//
// Reads are lock-free: an index of the ACLs, rebuilt when the image's
// ACL set changes (a new *metadata.ACLs), sits behind an atomic pointer.
type Standard struct {
	cfg   StandardConfig
	super map[auth.Principal]bool
	image func() *metadata.Image
	lg    *slog.Logger

	idx     atomic.Pointer[aclIndex]
	rebuild sync.Mutex
}

// NewStandard is a standard authorizer reading the ACLs of the images
// image returns (the node's current one; nil is no ACLs).
func NewStandard(cfg StandardConfig, image func() *metadata.Image) *Standard {
	s := &Standard{cfg: cfg, super: map[auth.Principal]bool{}, image: image, lg: cfg.Logger}
	for _, p := range cfg.SuperUsers {
		s.super[p] = true
	}
	if s.lg == nil {
		s.lg = slog.Default()
	}
	s.lg = s.lg.With("logger", "authorizer")
	return s
}

// ParseSuperUsers reads super.users: principals separated by semicolons
// ("User:admin;User:CN=ops").
func ParseSuperUsers(s string) ([]auth.Principal, error) {
	var out []auth.Principal
	for _, f := range strings.Split(s, ";") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		p, err := auth.ParsePrincipal(f)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// aclIndex is the ACLs of one set, by resource type: literal ones by
// name (the wildcard "*" among them), prefixed ones by prefix with the
// prefix lengths there are, so a check looks up a handful of map keys.
type aclIndex struct {
	src   *metadata.ACLs
	types [resourceTypes]typeIndex
}

const resourceTypes = 8

type typeIndex struct {
	literal    map[string][]*metadata.ACL
	prefixed   map[string][]*metadata.ACL
	prefixLens []int
	all        []*metadata.ACL
}

func buildIndex(src *metadata.ACLs) *aclIndex {
	ix := &aclIndex{src: src}
	for t := range ix.types {
		ti := &ix.types[t]
		lens := map[int]bool{}
		src.OfType(int8(t), func(a *metadata.ACL) bool {
			ti.all = append(ti.all, a)
			switch PatternType(a.PatternType) {
			case PatternLiteral:
				if ti.literal == nil {
					ti.literal = map[string][]*metadata.ACL{}
				}
				ti.literal[a.ResourceName] = append(ti.literal[a.ResourceName], a)
			case PatternPrefixed:
				if ti.prefixed == nil {
					ti.prefixed = map[string][]*metadata.ACL{}
				}
				ti.prefixed[a.ResourceName] = append(ti.prefixed[a.ResourceName], a)
				lens[len(a.ResourceName)] = true
			}
			return true
		})
		for l := range lens {
			ti.prefixLens = append(ti.prefixLens, l)
		}
		sort.Ints(ti.prefixLens)
	}
	return ix
}

// index is the index of the current image's ACLs.
func (s *Standard) index() *aclIndex {
	var src *metadata.ACLs
	if s.image != nil {
		if img := s.image(); img != nil {
			src = img.ACLs
		}
	}
	if ix := s.idx.Load(); ix != nil && ix.src == src {
		return ix
	}
	s.rebuild.Lock()
	defer s.rebuild.Unlock()
	if ix := s.idx.Load(); ix != nil && ix.src == src {
		return ix
	}
	ix := buildIndex(src)
	s.idx.Store(ix)
	return ix
}

// superUser: a super user or a broker.
func (s *Standard) superUser(sess auth.Session) bool {
	return sess.Broker || s.super[sess.Principal]
}

// implies reports whether an ALLOW ACL for aclOp allows op (Kafka's
// implied operations).
func implies(aclOp, op Operation) bool {
	if aclOp == op || aclOp == OpAll {
		return true
	}
	switch op {
	case OpDescribe:
		return aclOp == OpRead || aclOp == OpWrite || aclOp == OpDelete || aclOp == OpAlter
	case OpDescribeConfigs:
		return aclOp == OpAlterConfigs
	}
	return false
}

// principalMatches reports whether an ACL's principal ("Type:Name", or
// the wildcard User:*) applies to p, without building p's string.
func principalMatches(acl string, p auth.Principal) bool {
	if acl == WildcardPrincipal {
		return true
	}
	return len(acl) == len(p.Type)+1+len(p.Name) && acl[:len(p.Type)] == p.Type && acl[len(p.Type)] == ':' && acl[len(p.Type)+1:] == p.Name
}

type verdict struct {
	allowed  bool
	resource bool // some ACL names the resource
	rule     *metadata.ACL
}

// decide is the verdict on one action for a principal from a host.
func (ix *aclIndex) decide(principal auth.Principal, host string, a Action) verdict {
	var v verdict
	if a.Type < 0 || int(a.Type) >= resourceTypes {
		return v
	}
	ti := &ix.types[a.Type]
	check := func(list []*metadata.ACL) bool {
		for _, acl := range list {
			v.resource = true
			if !principalMatches(acl.Principal, principal) {
				continue
			}
			if acl.Host != host && acl.Host != WildcardHost {
				continue
			}
			op := Operation(acl.Operation)
			switch Permission(acl.Permission) {
			case PermissionDeny:
				if planted.On(planted.AuthzDenyIgnored) {
					continue
				}
				if op == a.Op || op == OpAll {
					v.allowed, v.rule = false, acl
					return false
				}
			case PermissionAllow:
				if !v.allowed && implies(op, a.Op) {
					v.allowed, v.rule = true, acl
				}
			}
		}
		return true
	}
	if !check(ti.literal[a.Name]) {
		return v
	}
	if a.Name != WildcardResource && !check(ti.literal[WildcardResource]) {
		return v
	}
	for _, l := range ti.prefixLens {
		if l > len(a.Name) {
			break
		}
		if !check(ti.prefixed[a.Name[:l]]) {
			return v
		}
	}
	return v
}

// Authorize implements Checker.
func (s *Standard) Authorize(ctx context.Context, sess auth.Session, a Action) bool {
	return s.authorize(ctx, sess, a, true)
}

func (s *Standard) authorize(ctx context.Context, sess auth.Session, a Action, logDenied bool) bool {
	if s.superUser(sess) {
		s.audit(ctx, sess, a, true, "super user")
		return true
	}
	v := s.index().decide(sess.Principal, sess.Host, a)
	allowed, rule := v.allowed, ""
	switch {
	case v.rule != nil:
		rule = "ACL"
	case !v.resource:
		allowed, rule = s.cfg.AllowEveryoneIfNoACLFound, "no ACL found (allow.everyone.if.no.acl.found)"
	default:
		rule = "no matching ALLOW ACL"
	}
	if allowed || logDenied {
		s.audit(ctx, sess, a, allowed, rule, v.rule)
	}
	return allowed
}

// AuthorizeAny implements Checker as Kafka's authorizeByResourceType:
// allowed when the session may do op on a resource of the type no ACL
// names (super users; allow.everyone.if.no.acl.found without ACLs), or
// some ALLOW ACL for op (or All) on the type applies to the principal
// and host and is not covered by a DENY: a DENY on the literal wildcard
// covers everything, a literal DENY the same literal name, a prefixed
// DENY every name that starts with its prefix.
func (s *Standard) AuthorizeAny(ctx context.Context, sess auth.Session, op Operation, t ResourceType, request string) bool {
	probe := Action{Op: op, Type: t, Name: "hardcode", Request: request}
	if s.authorize(ctx, sess, probe, false) {
		return true
	}
	allowed := s.index().any(sess.Principal.String(), sess.Host, op, t)
	a := Action{Op: op, Type: t, Name: WildcardResource, Request: request}
	if allowed {
		s.audit(ctx, sess, a, true, "an ALLOW ACL on some resource of the type")
	} else {
		s.audit(ctx, sess, a, false, "no ALLOW ACL on any resource of the type that no DENY covers")
	}
	return allowed
}

func (ix *aclIndex) any(principal, host string, op Operation, t ResourceType) bool {
	if t < 0 || int(t) >= resourceTypes {
		return false
	}
	denyLiteral, denyPrefix := map[string]bool{}, map[string]bool{}
	var allowLiteral, allowPrefix []string
	wildcardAllow := false
	for _, acl := range ix.types[t].all {
		if acl.Host != host && acl.Host != WildcardHost {
			continue
		}
		if acl.Principal != principal && acl.Principal != WildcardPrincipal {
			continue
		}
		if o := Operation(acl.Operation); o != op && o != OpAll {
			continue
		}
		pt := PatternType(acl.PatternType)
		switch Permission(acl.Permission) {
		case PermissionDeny:
			switch {
			case pt == PatternLiteral && acl.ResourceName == WildcardResource:
				return false
			case pt == PatternLiteral:
				denyLiteral[acl.ResourceName] = true
			case pt == PatternPrefixed:
				denyPrefix[acl.ResourceName] = true
			}
		case PermissionAllow:
			switch {
			case pt == PatternLiteral && acl.ResourceName == WildcardResource:
				wildcardAllow = true // allowed, unless a wildcard DENY comes later
			case pt == PatternLiteral:
				allowLiteral = append(allowLiteral, acl.ResourceName)
			case pt == PatternPrefixed:
				allowPrefix = append(allowPrefix, acl.ResourceName)
			}
		}
	}
	if wildcardAllow {
		return true
	}
	dominated := func(name string) bool {
		for i := 1; i <= len(name); i++ {
			if denyPrefix[name[:i]] {
				return true
			}
		}
		return false
	}
	for _, n := range allowLiteral {
		if !denyLiteral[n] && !dominated(n) {
			return true
		}
	}
	for _, n := range allowPrefix {
		if !dominated(n) {
			return true
		}
	}
	return false
}

// audit writes Kafka's authorizer log line: a denial at info, an
// allowed action at debug.
func (s *Standard) audit(ctx context.Context, sess auth.Session, a Action, allowed bool, rule string, acl ...*metadata.ACL) {
	level, verb := slog.LevelInfo, "Denied"
	if allowed {
		level, verb = slog.LevelDebug, "Allowed"
	} else if IsQuiet(ctx) {
		level = slog.LevelDebug // an expected denial (Quietly)
	}
	if !s.lg.Enabled(ctx, level) {
		return
	}
	pattern := "LITERAL"
	s.lg.Log(ctx, level, "Principal = "+sess.Principal.String()+" is "+verb+" operation = "+a.Op.String()+
		" from host = "+sess.Host+" on resource = "+a.Type.String()+":"+pattern+":"+a.Name+" for request = "+a.Request,
		"rule", ruleText(rule, acl))
}

// ruleText is the rule an audit line names: the ACL that decided (its id
// and binding), or why none did.
func ruleText(rule string, acl []*metadata.ACL) string {
	if len(acl) == 0 || acl[0] == nil {
		return rule
	}
	a := acl[0]
	return fmt.Sprintf("ACL %s (%s %s %s:%s %s from %s)", a.ID, Permission(a.Permission), Operation(a.Operation),
		ResourceType(a.ResourceType), strings.ToUpper(PatternType(a.PatternType).String())+":"+a.ResourceName, a.Principal, a.Host)
}
