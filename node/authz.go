package node

import (
	"fmt"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/metadata"
)

// ValidAuthorizerClass reports whether authorizer.class.name names an
// authorizer Strand has: "" (none) or the standard one.
func ValidAuthorizerClass(name string) error {
	switch name {
	case "", authz.StandardClassName, authz.StandardShortName:
		return nil
	}
	return fmt.Errorf("authorizer.class.name %q: Strand has only %s (or none)", name, authz.StandardClassName)
}

// authorizer is the request layer's Checker: nil without
// authorizer.class.name (every request allowed), else the standard
// authorizer over this broker's metadata image.
func (n *Node) authorizer() authz.Checker {
	if n.cfg.TestAuthorizer != nil {
		return n.cfg.TestAuthorizer
	}
	ac := n.cfg.Authorizer
	if ac.ClassName == "" || n.Repl == nil {
		return nil
	}
	n.lg.Info("authorizer", "class", authz.StandardClassName, "super.users", len(ac.SuperUsers),
		"allow.everyone.if.no.acl.found", ac.AllowEveryoneIfNoACLFound)
	repl := n.Repl
	return authz.NewStandard(authz.StandardConfig{SuperUsers: ac.SuperUsers, AllowEveryoneIfNoACLFound: ac.AllowEveryoneIfNoACLFound, Logger: n.lg},
		func() *metadata.Image { return repl.Image() })
}
