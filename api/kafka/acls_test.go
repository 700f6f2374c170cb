package kafka_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"io"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/wait"
)

// aclKey names a described ACL: "TOPIC/LITERAL/orders User:alice * WRITE ALLOW".
func aclKey(typ kmsg.ACLResourceType, pattern kadm.ACLPattern, name, principal, host string, op kadm.ACLOperation, perm kmsg.ACLPermissionType) string {
	return strings.Join([]string{typ.String() + "/" + pattern.String() + "/" + name, principal, host, op.String(), perm.String()}, " ")
}

// withAuthorizer runs the standard authorizer (the ACL requests are
// SECURITY_DISABLED without one) with the tests' unauthenticated client
// as a super user.
func withAuthorizer(_ int32, cfg *node.Config) {
	cfg.Authorizer = node.AuthorizerConfig{ClassName: authz.StandardClassName, SuperUsers: []auth.Principal{auth.Anonymous}}
}

// everyACL is the filter that matches every ACL.
func everyACL() *kadm.ACLBuilder {
	return kadm.NewACLs().AnyResource().Allow().AllowHosts().Deny().DenyHosts().Operations().ResourcePatternType(kadm.ACLPatternAny)
}

func describeKeys(t *testing.T, ctx context.Context, adm *kadm.Client, b *kadm.ACLBuilder) []string {
	t.Helper()
	res, err := adm.DescribeACLs(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("describe: %v %s", r.Err, r.ErrMessage)
		}
		for _, d := range r.Described {
			out = append(out, aclKey(d.Type, d.Pattern, d.Name, d.Principal, d.Host, d.Operation, d.Permission))
		}
	}
	sort.Strings(out)
	return out
}

// TestKafkaACLsSecurityDisabled: without authorizer.class.name the ACL
// requests are answered SECURITY_DISABLED, as by Kafka's brokers.
func TestKafkaACLsSecurityDisabled(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 1})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Err != kerr.SecurityDisabled {
		t.Fatalf("create: %+v, want SECURITY_DISABLED", res)
	}
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("describe: %+v %v, want SECURITY_DISABLED", resp, err)
	}
}

// TestKafkaACLs: kadm's CreateACLs, DescribeACLs and DeleteACLs against
// the Kafka listener. Created ACLs are described on every broker; a
// binding created twice is one ACL (and no error); a binding with
// operation ANY or a principal without a type is INVALID_REQUEST; a MATCH
// filter on a topic name lists the literal, wildcard and prefixed ACLs
// that apply to it and no others; a delete by filter answers the ACLs it
// removed and leaves the rest.
func TestKafkaACLs(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Mutate: withAuthorizer})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	create := func(b *kadm.ACLBuilder) {
		t.Helper()
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("create %s %s %v: %v %s", r.Principal, r.Name, r.Operation, r.Err, r.ErrMessage)
			}
		}
	}
	create(kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpWrite, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
	create(kadm.NewACLs().Allow("User:bob").AllowHosts("10.0.0.7").Topics("pay-").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternPrefixed))
	create(kadm.NewACLs().Allow("User:*").Topics("*").Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
	create(kadm.NewACLs().Deny("User:mallory").Groups("g1").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	// The same binding again: a success, still one ACL.
	create(kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral))

	want := []string{
		aclKey(kmsg.ACLResourceTypeGroup, kadm.ACLPatternLiteral, "g1", "User:mallory", "*", kadm.OpRead, kmsg.ACLPermissionTypeDeny),
		aclKey(kmsg.ACLResourceTypeTopic, kadm.ACLPatternLiteral, "*", "User:*", "*", kadm.OpDescribe, kmsg.ACLPermissionTypeAllow),
		aclKey(kmsg.ACLResourceTypeTopic, kadm.ACLPatternLiteral, "orders", "User:alice", "*", kadm.OpDescribe, kmsg.ACLPermissionTypeAllow),
		aclKey(kmsg.ACLResourceTypeTopic, kadm.ACLPatternLiteral, "orders", "User:alice", "*", kadm.OpWrite, kmsg.ACLPermissionTypeAllow),
		aclKey(kmsg.ACLResourceTypeTopic, kadm.ACLPatternPrefixed, "pay-", "User:bob", "10.0.0.7", kadm.OpRead, kmsg.ACLPermissionTypeAllow),
	}
	sort.Strings(want)
	// A describe may reach a broker whose image is a moment behind the one
	// that forwarded the last create.
	var got []string
	_ = wait.Until(10*time.Second, "the described ACLs to match", func() bool {
		got = describeKeys(t, ctx, adm, everyACL())
		return strings.Join(got, "\n") == strings.Join(want, "\n")
	})
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("described\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	// Every broker's image shows them (DescribeAcls answers from it).
	for _, m := range c.Members() {
		id := m.ID
		c.Eventually(10*time.Second, "broker's DescribeAcls lists the 5 ACLs", func() bool {
			req := kmsg.NewPtrDescribeACLsRequest()
			req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
			req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
			if err != nil || resp.ErrorCode != 0 {
				return false
			}
			n := 0
			for _, r := range resp.Resources {
				n += len(r.ACLs)
			}
			return n == 5
		})
	}

	// The standard authorizer over a broker's image decides by them.
	az := authz.NewStandard(authz.StandardConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, c.Member(1).Node.Repl.Image)
	sess := func(p, host string) auth.Session { return auth.Session{Principal: auth.User(p), Host: host} }
	for _, chk := range []struct {
		who, host string
		a         authz.Action
		want      bool
	}{
		{"alice", "10.0.0.1", authz.Action{Op: authz.OpWrite, Type: authz.ResourceTopic, Name: "orders"}, true},
		{"alice", "10.0.0.1", authz.Action{Op: authz.OpRead, Type: authz.ResourceTopic, Name: "orders"}, false},
		{"bob", "10.0.0.7", authz.Action{Op: authz.OpRead, Type: authz.ResourceTopic, Name: "pay-in"}, true},
		{"bob", "10.0.0.8", authz.Action{Op: authz.OpRead, Type: authz.ResourceTopic, Name: "pay-in"}, false},
		{"carol", "10.0.0.1", authz.Action{Op: authz.OpDescribe, Type: authz.ResourceTopic, Name: "anything"}, true},
		{"mallory", "10.0.0.1", authz.Action{Op: authz.OpRead, Type: authz.ResourceGroup, Name: "g1"}, false},
	} {
		if got := az.Authorize(ctx, sess(chk.who, chk.host), chk.a); got != chk.want {
			t.Errorf("authorizer: %s from %s %v: %v, want %v", chk.who, chk.host, chk.a, got, chk.want)
		}
	}

	// Kafka's validation: INVALID_REQUEST.
	for name, edit := range map[string]func(*kmsg.CreateACLsRequestCreation){
		"operation ANY":          func(c *kmsg.CreateACLsRequestCreation) { c.Operation = kmsg.ACLOperationAny },
		"principal without type": func(c *kmsg.CreateACLsRequestCreation) { c.Principal = "alice" },
		"pattern MATCH":          func(c *kmsg.CreateACLsRequestCreation) { c.ResourcePatternType = kmsg.ACLResourcePatternTypeMatch },
		"resource type ANY":      func(c *kmsg.CreateACLsRequestCreation) { c.ResourceType = kmsg.ACLResourceTypeAny },
		"empty host":             func(c *kmsg.CreateACLsRequestCreation) { c.Host = "" },
	} {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeLiteral
		cr.Principal, cr.Host, cr.Operation, cr.PermissionType = "User:x", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		edit(&cr)
		req := kmsg.NewPtrCreateACLsRequest()
		req.Creations = append(req.Creations, cr)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Results) != 1 || resp.Results[0].ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("%s: answered %+v, want INVALID_REQUEST", name, resp.Results)
		}
	}

	// MATCH on topic pay-in: bob's prefix and the wildcard, not alice's orders.
	match := kadm.NewACLs().Topics("pay-in").Allow().AllowHosts().Deny().DenyHosts().Operations().ResourcePatternType(kadm.ACLPatternMatch)
	wantMatch := []string{want[1], want[4]}
	if got := describeKeys(t, ctx, adm, match); strings.Join(got, "\n") != strings.Join(wantMatch, "\n") {
		t.Fatalf("MATCH pay-in described\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(wantMatch, "\n  "))
	}

	// Delete alice's ACLs on orders (any operation).
	del, err := adm.DeleteACLs(ctx, kadm.NewACLs().Topics("orders").Allow("User:alice").AllowHosts().Operations().ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for _, r := range del {
		if r.Err != nil {
			t.Fatalf("delete: %v %s", r.Err, r.ErrMessage)
		}
		for _, d := range r.Deleted {
			deleted = append(deleted, aclKey(d.Type, d.Pattern, d.Name, d.Principal, d.Host, d.Operation, d.Permission))
		}
	}
	sort.Strings(deleted)
	if strings.Join(deleted, "\n") != strings.Join(want[2:4], "\n") {
		t.Fatalf("deleted\n  %s\nwant\n  %s", strings.Join(deleted, "\n  "), strings.Join(want[2:4], "\n  "))
	}
	left := []string{want[0], want[1], want[4]}
	c.Eventually(10*time.Second, "the deleted ACLs gone", func() bool {
		return strings.Join(describeKeys(t, ctx, adm, everyACL()), "\n") == strings.Join(left, "\n")
	})
	c.Eventually(10*time.Second, "broker 1's authorizer no longer lets alice write orders", func() bool {
		return !az.Authorize(ctx, sess("alice", "10.0.0.1"), authz.Action{Op: authz.OpWrite, Type: authz.ResourceTopic, Name: "orders"})
	})
}
