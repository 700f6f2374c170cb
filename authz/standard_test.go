package authz

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// acl is a test ACL: "Topic LITERAL orders User:alice * Write Allow".
type acl struct {
	t         ResourceType
	pt        PatternType
	name      string
	principal string
	host      string
	op        Operation
	perm      Permission
}

// imageWith is an image holding the ACLs.
func imageWith(t testing.TB, acls ...acl) *metadata.Image {
	t.Helper()
	batch := &pb.MetadataBatch{Offset: 1}
	for i, a := range acls {
		batch.Records = append(batch.Records, &pb.MetadataRecord{Record: &pb.MetadataRecord_AccessControlEntry{AccessControlEntry: &pb.AccessControlEntryRecord{
			Id: fmt.Sprintf("acl-%d", i), Acl: &pb.AclBinding{ResourceType: int32(a.t), ResourceName: a.name, PatternType: int32(a.pt),
				Principal: a.principal, Host: a.host, Operation: int32(a.op), Permission: int32(a.perm)}}}})
	}
	img, _, err := metadata.Apply(metadata.EmptyImage(), batch)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func standard(t testing.TB, cfg StandardConfig, acls ...acl) *Standard {
	img := imageWith(t, acls...)
	return NewStandard(cfg, func() *metadata.Image { return img })
}

func sess(principal, host string) auth.Session {
	p, err := auth.ParsePrincipal(principal)
	if err != nil {
		panic(err)
	}
	return auth.Session{Principal: p, Host: host}
}

func topic(op Operation, name string) Action {
	return Action{Op: op, Type: ResourceTopic, Name: name, Request: "Test"}
}

var ctx = context.Background()

func TestStandardAllowAndDenyWins(t *testing.T) {
	for _, p := range denyWinsProblems(t) {
		t.Error(p)
	}
}

// TestStandardDenyWinsCatchesPlantedBug: with DENY ACLs skipped
// (planted.AuthzDenyIgnored), the deny-wins check fails.
func TestStandardDenyWinsCatchesPlantedBug(t *testing.T) {
	defer planted.Set(planted.AuthzDenyIgnored)()
	if len(denyWinsProblems(t)) == 0 {
		t.Fatal("the deny-wins check passes with DENY ACLs ignored")
	}
}

func denyWinsProblems(t *testing.T) []string {
	var out []string
	a := standard(t, StandardConfig{},
		acl{ResourceTopic, PatternLiteral, "orders", "User:alice", "*", OpWrite, PermissionAllow},
		acl{ResourceTopic, PatternLiteral, "orders", "User:bob", "*", OpWrite, PermissionAllow},
		acl{ResourceTopic, PatternLiteral, "orders", "User:bob", "*", OpWrite, PermissionDeny},
	)
	alice, bob, carol := sess("User:alice", "10.0.0.1"), sess("User:bob", "10.0.0.1"), sess("User:carol", "10.0.0.1")
	if !a.Authorize(ctx, alice, topic(OpWrite, "orders")) {
		out = append(out, "alice: Write allowed by her ACL was denied")
	}
	if a.Authorize(ctx, bob, topic(OpWrite, "orders")) {
		out = append(out, "bob: the DENY did not win over the ALLOW")
	}
	if a.Authorize(ctx, carol, topic(OpWrite, "orders")) {
		out = append(out, "carol: no ACL of hers, yet allowed")
	}
	if a.Authorize(ctx, alice, topic(OpRead, "orders")) {
		out = append(out, "alice: Read allowed by a Write ACL")
	}
	if a.Authorize(ctx, alice, topic(OpWrite, "orders2")) {
		out = append(out, "alice: a literal ACL matched another name")
	}
	return out
}

func TestStandardDenyAllAndDenyWildcardResource(t *testing.T) {
	a := standard(t, StandardConfig{},
		acl{ResourceTopic, PatternLiteral, "orders", "User:alice", "*", OpAll, PermissionAllow},
		acl{ResourceTopic, PatternLiteral, "*", "User:alice", "*", OpDelete, PermissionDeny},
	)
	alice := sess("User:alice", "h")
	if !a.Authorize(ctx, alice, topic(OpCreate, "orders")) {
		t.Error("All did not imply Create")
	}
	if a.Authorize(ctx, alice, topic(OpDelete, "orders")) {
		t.Error("a DENY on the wildcard resource did not cover orders")
	}
	// DENY does not take implied operations: denying Delete leaves Describe.
	if !a.Authorize(ctx, alice, topic(OpDescribe, "orders")) {
		t.Error("a DENY of Delete denied Describe")
	}
}

func TestStandardPrefixed(t *testing.T) {
	a := standard(t, StandardConfig{},
		acl{ResourceTopic, PatternPrefixed, "pay-", "User:alice", "*", OpRead, PermissionAllow},
		acl{ResourceTopic, PatternPrefixed, "pay-secret", "User:alice", "*", OpRead, PermissionDeny},
	)
	alice := sess("User:alice", "h")
	for name, want := range map[string]bool{"pay-in": true, "pay-": true, "pay": false, "pa": false, "pay-secret-1": false, "xpay-in": false} {
		if got := a.Authorize(ctx, alice, topic(OpRead, name)); got != want {
			t.Errorf("Read %q: got %v, want %v", name, got, want)
		}
	}
}

func TestStandardWildcardResourceAndPrincipal(t *testing.T) {
	a := standard(t, StandardConfig{},
		acl{ResourceTopic, PatternLiteral, "*", "User:*", "*", OpDescribe, PermissionAllow},
		acl{ResourceGroup, PatternLiteral, "g1", "User:*", "*", OpRead, PermissionAllow},
	)
	if !a.Authorize(ctx, sess("User:anyone", "h"), topic(OpDescribe, "whatever")) {
		t.Error("User:* on topic * did not allow Describe")
	}
	if !a.Authorize(ctx, sess("User:zed", "h"), Action{Op: OpRead, Type: ResourceGroup, Name: "g1"}) {
		t.Error("User:* did not match User:zed")
	}
	if a.Authorize(ctx, sess("User:zed", "h"), Action{Op: OpRead, Type: ResourceGroup, Name: "g2"}) {
		t.Error("a literal group ACL matched another group")
	}
	// The resource type matters: the topic wildcard is no group ACL.
	if a.Authorize(ctx, sess("User:zed", "h"), Action{Op: OpDescribe, Type: ResourceGroup, Name: "g9"}) {
		t.Error("a topic ACL matched a group")
	}
}

func TestStandardHost(t *testing.T) {
	a := standard(t, StandardConfig{},
		acl{ResourceTopic, PatternLiteral, "orders", "User:alice", "10.0.0.7", OpWrite, PermissionAllow},
		acl{ResourceTopic, PatternLiteral, "orders", "User:alice", "10.0.0.9", OpWrite, PermissionDeny},
	)
	if !a.Authorize(ctx, sess("User:alice", "10.0.0.7"), topic(OpWrite, "orders")) {
		t.Error("allowed host denied")
	}
	if a.Authorize(ctx, sess("User:alice", "10.0.0.8"), topic(OpWrite, "orders")) {
		t.Error("other host allowed")
	}
	if a.Authorize(ctx, sess("User:alice", "10.0.0.9"), topic(OpWrite, "orders")) {
		t.Error("denied host allowed")
	}
}

func TestStandardImpliedOperations(t *testing.T) {
	for _, c := range []struct {
		acl, op Operation
		want    bool
	}{
		{OpRead, OpDescribe, true}, {OpWrite, OpDescribe, true}, {OpDelete, OpDescribe, true}, {OpAlter, OpDescribe, true},
		{OpCreate, OpDescribe, false}, {OpAlterConfigs, OpDescribeConfigs, true}, {OpAlterConfigs, OpDescribe, false},
		{OpDescribe, OpRead, false}, {OpAll, OpIdempotentWrite, true}, {OpDescribeConfigs, OpAlterConfigs, false},
	} {
		a := standard(t, StandardConfig{}, acl{ResourceTopic, PatternLiteral, "t", "User:u", "*", c.acl, PermissionAllow})
		if got := a.Authorize(ctx, sess("User:u", "h"), topic(c.op, "t")); got != c.want {
			t.Errorf("ACL %v, asked %v: got %v, want %v", c.acl, c.op, got, c.want)
		}
	}
}

func TestStandardSuperUsersAndBrokers(t *testing.T) {
	a := standard(t, StandardConfig{SuperUsers: []auth.Principal{auth.User("admin")}},
		acl{ResourceTopic, PatternLiteral, "*", "User:*", "*", OpAll, PermissionDeny},
	)
	if !a.Authorize(ctx, sess("User:admin", "h"), topic(OpWrite, "orders")) {
		t.Error("super user denied")
	}
	b := sess("User:CN=broker", "h")
	b.Broker = true
	if !a.Authorize(ctx, b, Action{Op: OpClusterAction, Type: ResourceCluster, Name: ClusterName}) {
		t.Error("broker denied")
	}
	if a.Authorize(ctx, sess("User:alice", "h"), topic(OpWrite, "orders")) {
		t.Error("a plain user got past DENY All")
	}
	if !a.AuthorizeAny(ctx, sess("User:admin", "h"), OpWrite, ResourceTopic, "InitProducerId") {
		t.Error("AuthorizeAny: super user denied")
	}
}

func TestStandardNoACLFound(t *testing.T) {
	acls := []acl{{ResourceTopic, PatternLiteral, "guarded", "User:bob", "*", OpRead, PermissionAllow}}
	closed := standard(t, StandardConfig{}, acls...)
	open := standard(t, StandardConfig{AllowEveryoneIfNoACLFound: true}, acls...)
	alice := sess("User:alice", "h")
	if closed.Authorize(ctx, alice, topic(OpRead, "free")) {
		t.Error("allow.everyone.if.no.acl.found=false: a resource without ACLs was allowed")
	}
	if !open.Authorize(ctx, alice, topic(OpRead, "free")) {
		t.Error("allow.everyone.if.no.acl.found=true: a resource without ACLs was denied")
	}
	// A resource that has ACLs (of someone else) is not open.
	if open.Authorize(ctx, alice, topic(OpRead, "guarded")) {
		t.Error("allow.everyone.if.no.acl.found=true opened a resource that has ACLs")
	}
	if !open.AuthorizeAny(ctx, alice, OpWrite, ResourceTopic, "InitProducerId") {
		t.Error("AuthorizeAny: no ACL found and allow.everyone should allow")
	}
}

func TestStandardAuthorizeAny(t *testing.T) {
	w := func(pt PatternType, name string, perm Permission) acl {
		return acl{ResourceTopic, pt, name, "User:alice", "*", OpWrite, perm}
	}
	alice := sess("User:alice", "h")
	for _, c := range []struct {
		name string
		acls []acl
		want bool
	}{
		{"none", nil, false},
		{"literal allow", []acl{w(PatternLiteral, "orders", PermissionAllow)}, true},
		{"literal allow, same literal deny", []acl{w(PatternLiteral, "orders", PermissionAllow), w(PatternLiteral, "orders", PermissionDeny)}, false},
		{"literal allow, other literal deny", []acl{w(PatternLiteral, "orders", PermissionAllow), w(PatternLiteral, "x", PermissionDeny)}, true},
		{"literal allow, covering prefix deny", []acl{w(PatternLiteral, "orders", PermissionAllow), w(PatternPrefixed, "ord", PermissionDeny)}, false},
		{"prefixed allow, longer prefix deny", []acl{w(PatternPrefixed, "ord", PermissionAllow), w(PatternPrefixed, "orders", PermissionDeny)}, true},
		{"wildcard allow", []acl{w(PatternLiteral, "*", PermissionAllow)}, true},
		{"wildcard allow, wildcard deny", []acl{w(PatternLiteral, "*", PermissionAllow), w(PatternLiteral, "*", PermissionDeny)}, false},
		{"other principal's allow", []acl{{ResourceTopic, PatternLiteral, "orders", "User:bob", "*", OpWrite, PermissionAllow}}, false},
		{"All allow", []acl{{ResourceTopic, PatternLiteral, "orders", "User:alice", "*", OpAll, PermissionAllow}}, true},
		{"other host", []acl{{ResourceTopic, PatternLiteral, "orders", "User:alice", "10.9.9.9", OpWrite, PermissionAllow}}, false},
	} {
		a := standard(t, StandardConfig{}, c.acls...)
		if got := a.AuthorizeAny(ctx, alice, OpWrite, ResourceTopic, "InitProducerId"); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

func TestStandardAuditLine(t *testing.T) {
	var buf bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	a := standard(t, StandardConfig{Logger: lg}, acl{ResourceTopic, PatternLiteral, "orders", "User:bob", "*", OpWrite, PermissionAllow})
	s := sess("User:alice", "10.0.0.7")
	a.Authorize(ctx, s, Action{Op: OpWrite, Type: ResourceTopic, Name: "orders", Request: "Produce"})
	out := buf.String()
	want := "Principal = User:alice is Denied operation = Write from host = 10.0.0.7 on resource = Topic:LITERAL:orders for request = Produce"
	if !strings.Contains(out, want) || !strings.Contains(out, "logger=authorizer") || strings.Count(out, "\n") != 1 {
		t.Fatalf("audit: %q\nwant one line with %q", out, want)
	}
	buf.Reset()
	a.Authorize(ctx, sess("User:bob", "h"), Action{Op: OpWrite, Type: ResourceTopic, Name: "orders", Request: "Produce"})
	if buf.Len() != 0 {
		t.Fatalf("an allowed action logged at info: %q", buf.String())
	}
}

// TestStandardFollowsImage: a new ACL set in the image is seen by the next
// check.
func TestStandardFollowsImage(t *testing.T) {
	var cur atomic.Pointer[metadata.Image]
	cur.Store(imageWith(t))
	a := NewStandard(StandardConfig{}, cur.Load)
	alice := sess("User:alice", "h")
	if a.Authorize(ctx, alice, topic(OpRead, "t")) {
		t.Fatal("allowed with no ACLs")
	}
	cur.Store(imageWith(t, acl{ResourceTopic, PatternLiteral, "t", "User:alice", "*", OpRead, PermissionAllow}))
	if !a.Authorize(ctx, alice, topic(OpRead, "t")) {
		t.Fatal("the new ACL was not seen")
	}
}

func TestParseSuperUsers(t *testing.T) {
	ps, err := ParseSuperUsers("User:admin; User:CN=ops,O=x;")
	if err != nil || len(ps) != 2 || ps[0] != auth.User("admin") || ps[1] != auth.User("CN=ops,O=x") {
		t.Fatalf("%v %v", ps, err)
	}
	if _, err := ParseSuperUsers("admin"); err == nil {
		t.Fatal("no error for a principal without a type")
	}
}

// BenchmarkAuthorize: one check among 1000 ACLs (literal and prefixed,
// several principals) is a handful of map lookups.
func BenchmarkAuthorize(b *testing.B) {
	var acls []acl
	for i := 0; i < 1000; i++ {
		pt := PatternLiteral
		if i%10 == 0 {
			pt = PatternPrefixed
		}
		acls = append(acls, acl{ResourceTopic, pt, fmt.Sprintf("topic-%d", i), fmt.Sprintf("User:u%d", i%50), "*", OpWrite, PermissionAllow})
	}
	a := standard(b, StandardConfig{Logger: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))}, acls...)
	s := sess("User:u7", "10.0.0.1")
	act := topic(OpWrite, "topic-507")
	if !a.Authorize(ctx, s, act) {
		b.Fatal("denied")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a.Authorize(ctx, s, act)
	}
}
