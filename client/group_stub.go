package client

import "context"

// groupMember is a consumer's membership in a group (see group.go).
type groupMember struct{ c *Consumer }

func newGroupMember(c *Consumer) *groupMember          { return &groupMember{c: c} }
func (g *groupMember) poll(ctx context.Context) error  { return nil }
func (g *groupMember) consumed([]*Record)              {}
func (g *groupMember) close(ctx context.Context) error { return nil }

// GroupMetadata identifies a consumer's group membership, for
// SendOffsetsToTransaction (KIP-447 fencing by generation).
type GroupMetadata struct {
	GroupID         string
	GenerationID    int32
	MemberID        string
	GroupInstanceID string
}
