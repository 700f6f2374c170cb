package controller

import (
	"testing"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TestValidateACL: Kafka's AclControlManager refuses, INVALID_REQUEST, a
// binding with an UNKNOWN or ANY resource type, a pattern type other than
// LITERAL and PREFIXED, an UNKNOWN or ANY operation, a permission other
// than ALLOW and DENY, an empty resource name, a cluster resource not
// named kafka-cluster, a principal that is not Type:Name, an empty host.
func TestValidateACL(t *testing.T) {
	good := func() *pb.AclBinding {
		return &pb.AclBinding{ResourceType: 2, ResourceName: "orders", PatternType: 3, Principal: "User:alice", Host: "*", Operation: 4, Permission: 3}
	}
	for _, c := range []struct {
		name string
		edit func(*pb.AclBinding)
		ok   bool
	}{
		{"good literal", func(*pb.AclBinding) {}, true},
		{"good prefixed deny", func(b *pb.AclBinding) { b.PatternType, b.Permission = 4, 2 }, true},
		{"good cluster", func(b *pb.AclBinding) { b.ResourceType, b.ResourceName, b.Operation = 4, "kafka-cluster", 9 }, true},
		{"good wildcard topic, host", func(b *pb.AclBinding) { b.ResourceName, b.Host, b.Principal = "*", "10.0.0.7", "User:*" }, true},
		{"unknown type", func(b *pb.AclBinding) { b.ResourceType = 0 }, false},
		{"any type", func(b *pb.AclBinding) { b.ResourceType = 1 }, false},
		{"type out of range", func(b *pb.AclBinding) { b.ResourceType = 9 }, false},
		{"unknown pattern", func(b *pb.AclBinding) { b.PatternType = 0 }, false},
		{"any pattern", func(b *pb.AclBinding) { b.PatternType = 1 }, false},
		{"match pattern", func(b *pb.AclBinding) { b.PatternType = 2 }, false},
		{"unknown operation", func(b *pb.AclBinding) { b.Operation = 0 }, false},
		{"any operation", func(b *pb.AclBinding) { b.Operation = 1 }, false},
		{"operation out of range", func(b *pb.AclBinding) { b.Operation = 15 }, false},
		{"any permission", func(b *pb.AclBinding) { b.Permission = 1 }, false},
		{"unknown permission", func(b *pb.AclBinding) { b.Permission = 0 }, false},
		{"empty name", func(b *pb.AclBinding) { b.ResourceName = "" }, false},
		{"cluster misnamed", func(b *pb.AclBinding) { b.ResourceType, b.ResourceName = 4, "my-cluster" }, false},
		{"empty principal", func(b *pb.AclBinding) { b.Principal = "" }, false},
		{"principal without type", func(b *pb.AclBinding) { b.Principal = "alice" }, false},
		{"principal without name", func(b *pb.AclBinding) { b.Principal = "User:" }, false},
		{"empty host", func(b *pb.AclBinding) { b.Host = "" }, false},
	} {
		b := good()
		c.edit(b)
		err := ValidateACL(b)
		if c.ok && err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if !c.ok && errs.CodeOf(err) != pb.ErrorCode_INVALID_REQUEST {
			t.Errorf("%s: got %v, want INVALID_REQUEST", c.name, err)
		}
	}
}
