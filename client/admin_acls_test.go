package client_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/testutil"
)

// TestAdminACLs: the SDK's ACL calls over gRPC. A valid binding is
// created (and again, without error); one with operation ANY is
// INVALID_REQUEST, reported for that binding only; DescribeACLs with a
// MATCH filter finds the prefixed ACL that covers a name; DeleteACLs
// answers what it removed.
func TestAdminACLs(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) {
		cfg.Authorizer = node.AuthorizerConfig{ClassName: authz.StandardClassName, SuperUsers: []auth.Principal{auth.Anonymous}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm, err := client.NewAdmin(client.Bootstrap(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	good := client.ACLBinding{ResourceType: client.ACLResourceTopic, ResourceName: "pay-", PatternType: client.ACLPatternPrefixed,
		Principal: "User:bob", Host: "*", Operation: client.ACLOpRead, Permission: client.ACLPermissionAllow}
	bad := good
	bad.Operation = client.ACLOpAny
	for i := 0; i < 2; i++ {
		res, err := adm.CreateACLs(ctx, []client.ACLBinding{good, bad})
		if err != nil {
			t.Fatal(err)
		}
		var e *errs.Error
		if res[0] != nil || !errors.As(res[1], &e) || e.Code != pb.ErrorCode_INVALID_REQUEST {
			t.Fatalf("create #%d: %v", i, res)
		}
	}
	name := "pay-in"
	f := client.AnyACL()
	f.ResourceType, f.ResourceName, f.PatternType = client.ACLResourceTopic, &name, client.ACLPatternMatch
	got, err := adm.DescribeACLs(ctx, f)
	if err != nil || len(got) != 1 || got[0] != good {
		t.Fatalf("MATCH pay-in: %+v %v", got, err)
	}
	del, err := adm.DeleteACLs(ctx, []client.ACLFilter{client.AnyACL()})
	if err != nil || len(del) != 1 || del[0].Err != nil || len(del[0].Deleted) != 1 || del[0].Deleted[0] != good {
		t.Fatalf("delete: %+v %v", del, err)
	}
	if got, err := adm.DescribeACLs(ctx, client.AnyACL()); err != nil || len(got) != 0 {
		t.Fatalf("after delete: %+v %v", got, err)
	}
}
