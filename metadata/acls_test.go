package metadata

import (
	"testing"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

func aclRec(id string, rt int32, name string, pt int32, principal string, op, perm int32) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_AccessControlEntry{AccessControlEntry: &pb.AccessControlEntryRecord{
		Id: id, Acl: &pb.AclBinding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: "*", Operation: op, Permission: perm}}}}
}

func rmACL(id string) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_RemoveAccessControlEntry{RemoveAccessControlEntry: &pb.RemoveAccessControlEntryRecord{Id: id}}}
}

func TestImageACLsApplyAndRemove(t *testing.T) {
	im := EmptyImage()
	next, d, err := Apply(im, &pb.MetadataBatch{Offset: 1, Records: []*pb.MetadataRecord{
		aclRec("a", 2, "orders", 3, "User:alice", 4, 3),
		aclRec("b", 3, "g1", 3, "User:alice", 3, 3),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !d.ACLs || next.ACLs.Len() != 2 || next.ACLs.ByID("a") == nil || next.ACLs.ByID("b").ResourceName != "g1" {
		t.Fatalf("after adds: delta %v, %d ACLs", d.ACLs, next.ACLs.Len())
	}
	if im.ACLs.Len() != 0 {
		t.Fatal("Apply changed the old image")
	}
	// A batch that touches only topic ACLs shares the group ACLs.
	third, _, err := Apply(next, &pb.MetadataBatch{Offset: 2, Records: []*pb.MetadataRecord{rmACL("a"), aclRec("c", 2, "pay-", 4, "User:*", 3, 2)}})
	if err != nil {
		t.Fatal(err)
	}
	if third.ACLs.Len() != 2 || third.ACLs.ByID("a") != nil || third.ACLs.ByID("c") == nil || next.ACLs.ByID("a") == nil {
		t.Fatalf("after remove: %d ACLs", third.ACLs.Len())
	}
	if third.ACLs.byType[3]["b"] != next.ACLs.byType[3]["b"] || &third.ACLs.byType[3] == &next.ACLs.byType[3] {
		t.Fatal("group ACLs not shared")
	}
	// A batch without ACL records keeps the same set (pointer), so the
	// authorizer does not rebuild its index.
	fourth, d4, err := Apply(third, &pb.MetadataBatch{Offset: 3, Records: []*pb.MetadataRecord{{Record: &pb.MetadataRecord_Cluster{Cluster: &pb.ClusterRecord{ClusterId: "x"}}}}})
	if err != nil || fourth.ACLs != third.ACLs || d4.ACLs {
		t.Fatalf("a batch without ACLs changed the set: %v", err)
	}
	// Errors: a duplicate id, a removal of an unknown id.
	if _, _, err := Apply(third, &pb.MetadataBatch{Offset: 4, Records: []*pb.MetadataRecord{aclRec("b", 3, "g2", 3, "User:x", 3, 3)}}); err == nil {
		t.Fatal("a duplicate id was accepted")
	}
	if _, _, err := Apply(third, &pb.MetadataBatch{Offset: 4, Records: []*pb.MetadataRecord{rmACL("nope")}}); err == nil {
		t.Fatal("removal of an unknown ACL was accepted")
	}
	// A snapshot rebuilds the same ACLs.
	snap, _, err := Apply(EmptyImage(), third.SnapshotRecords())
	if err != nil {
		t.Fatal(err)
	}
	all, want := snap.ACLs.All(), third.ACLs.All()
	if len(all) != len(want) {
		t.Fatalf("snapshot: %d ACLs, want %d", len(all), len(want))
	}
	for i := range all {
		if *all[i] != *want[i] {
			t.Fatalf("snapshot ACL %d: %+v, want %+v", i, all[i], want[i])
		}
	}
}

func str(s string) *string { return &s }

func TestFilterMatches(t *testing.T) {
	lit := &ACL{ID: "1", ResourceType: 2, ResourceName: "orders", PatternType: 3, Principal: "User:alice", Host: "*", Operation: 4, Permission: 3}
	wild := &ACL{ID: "2", ResourceType: 2, ResourceName: "*", PatternType: 3, Principal: "User:bob", Host: "*", Operation: 3, Permission: 3}
	pre := &ACL{ID: "3", ResourceType: 2, ResourceName: "ord", PatternType: 4, Principal: "User:alice", Host: "10.0.0.1", Operation: 3, Permission: 2}
	otherPre := &ACL{ID: "4", ResourceType: 2, ResourceName: "pay", PatternType: 4, Principal: "User:alice", Host: "*", Operation: 3, Permission: 3}
	grp := &ACL{ID: "5", ResourceType: 3, ResourceName: "orders", PatternType: 3, Principal: "User:alice", Host: "*", Operation: 3, Permission: 3}
	acls := []*ACL{lit, wild, pre, otherPre, grp}
	anyF := func() *pb.AclBindingFilter {
		return &pb.AclBindingFilter{ResourceType: 1, PatternType: 1, Operation: 1, Permission: 1}
	}
	for _, c := range []struct {
		name string
		f    func(*pb.AclBindingFilter)
		want []*ACL
	}{
		{"any", func(*pb.AclBindingFilter) {}, acls},
		{"topic", func(f *pb.AclBindingFilter) { f.ResourceType = 2 }, []*ACL{lit, wild, pre, otherPre}},
		{"any pattern, name orders", func(f *pb.AclBindingFilter) { f.ResourceName = str("orders") }, []*ACL{lit, grp}},
		{"literal *", func(f *pb.AclBindingFilter) { f.PatternType = 3; f.ResourceName = str("*") }, []*ACL{wild}},
		{"prefixed", func(f *pb.AclBindingFilter) { f.PatternType = 4 }, []*ACL{pre, otherPre}},
		{"match topic orders", func(f *pb.AclBindingFilter) { f.ResourceType = 2; f.PatternType = 2; f.ResourceName = str("orders") }, []*ACL{lit, wild, pre}},
		{"match without name", func(f *pb.AclBindingFilter) { f.PatternType = 2 }, acls},
		{"principal", func(f *pb.AclBindingFilter) { f.Principal = str("User:bob") }, []*ACL{wild}},
		{"host", func(f *pb.AclBindingFilter) { f.Host = str("10.0.0.1") }, []*ACL{pre}},
		{"operation read", func(f *pb.AclBindingFilter) { f.Operation = 3 }, []*ACL{wild, pre, otherPre, grp}},
		{"deny", func(f *pb.AclBindingFilter) { f.Permission = 2 }, []*ACL{pre}},
	} {
		f := anyF()
		c.f(f)
		var got []*ACL
		for _, a := range acls {
			if FilterMatches(f, a) {
				got = append(got, a)
			}
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: matched %d, want %d", c.name, len(got), len(c.want))
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: matched %s, want %s", c.name, got[i].ID, c.want[i].ID)
			}
		}
	}
	for _, bad := range []*pb.AclBindingFilter{
		{ResourceType: 0, PatternType: 1, Operation: 1, Permission: 1},
		{ResourceType: 1, PatternType: 0, Operation: 1, Permission: 1},
		{ResourceType: 1, PatternType: 1, Operation: 0, Permission: 1},
		{ResourceType: 1, PatternType: 1, Operation: 1, Permission: 0},
	} {
		if FilterProblem(bad) == "" {
			t.Errorf("filter %v: no problem found", bad)
		}
	}
	if p := FilterProblem(anyF()); p != "" {
		t.Errorf("the ANY filter: %s", p)
	}
}
