package metadata

import (
	"testing"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

func scramBatch(off int64, recs ...*pb.MetadataRecord) *pb.MetadataBatch {
	return &pb.MetadataBatch{Offset: off, Records: recs}
}

func TestScramCredentialRecords(t *testing.T) {
	up := func(user string, mech, iter int32) *pb.MetadataRecord {
		return &pb.MetadataRecord{Record: &pb.MetadataRecord_UserScramCredential{UserScramCredential: &pb.UserScramCredentialRecord{
			Name: user, Mechanism: mech, Salt: []byte("salt"), StoredKey: []byte("sk"), ServerKey: []byte("svk"), Iterations: iter}}}
	}
	rm := func(user string, mech int32) *pb.MetadataRecord {
		return &pb.MetadataRecord{Record: &pb.MetadataRecord_RemoveUserScramCredential{RemoveUserScramCredential: &pb.RemoveUserScramCredentialRecord{Name: user, Mechanism: mech}}}
	}
	im0 := EmptyImage()
	im1, _, err := Apply(im0, scramBatch(1, up("alice", 1, 4096), up("alice", 2, 8192), up("bob", 1, 4096)))
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := im1.ScramCredential("alice", 2); !ok || c.Iterations != 8192 || string(c.StoredKey) != "sk" {
		t.Fatalf("alice/2: %+v %v", c, ok)
	}
	if len(im0.Scram) != 0 {
		t.Fatal("Apply changed the old image")
	}
	im2, _, err := Apply(im1, scramBatch(2, rm("bob", 1), up("alice", 1, 10000)))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := im2.ScramCredential("bob", 1); ok || len(im2.ScramUsers()) != 1 {
		t.Fatalf("bob still there: %v", im2.ScramUsers())
	}
	if c, _ := im1.ScramCredential("alice", 1); c.Iterations != 4096 {
		t.Fatal("Apply changed the old image's user")
	}
	if _, _, err := Apply(im2, scramBatch(3, rm("bob", 1))); err == nil {
		t.Fatal("removing a missing credential applied")
	}
	// A snapshot rebuilds the credentials.
	snap, _, err := Apply(EmptyImage(), im2.SnapshotRecords())
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := snap.ScramCredential("alice", 1); !ok || c.Iterations != 10000 || string(c.ServerKey) != "svk" || string(c.Salt) != "salt" {
		t.Fatalf("snapshot: %+v %v", c, ok)
	}
}
