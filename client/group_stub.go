package client

import "context"

// groupMember is a consumer's membership in a group (see group.go).
type groupMember struct{ c *Consumer }

func newGroupMember(c *Consumer) *groupMember          { return &groupMember{c: c} }
func (g *groupMember) poll(ctx context.Context) error  { return nil }
func (g *groupMember) consumed([]*Record)              {}
func (g *groupMember) close(ctx context.Context) error { return nil }
