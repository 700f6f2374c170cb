package controller

import (
	"bytes"
	"testing"

	"github.com/strand-io/strand/internal/scram"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

func TestPlanScramCredentials(t *testing.T) {
	salt := []byte("0123456789abcdef")
	salted := scram.SHA256.SaltedPassword("alice-secret", salt, 4096)
	img, _, err := metadata.Apply(metadata.EmptyImage(), &pb.MetadataBatch{Offset: 1, Records: []*pb.MetadataRecord{
		{Record: &pb.MetadataRecord_UserScramCredential{UserScramCredential: &pb.UserScramCredentialRecord{Name: "carol", Mechanism: 1, Salt: salt, StoredKey: []byte("k"), ServerKey: []byte("k"), Iterations: 4096}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	up := func(name string, mech, iter int32) *pb.ScramCredentialUpsertion {
		return &pb.ScramCredentialUpsertion{Name: name, Mechanism: mech, Iterations: iter, Salt: salt, SaltedPassword: salted}
	}
	req := &pb.AlterUserScramCredentialsRequest{
		Deletions: []*pb.ScramCredentialDeletion{
			{Name: "carol", Mechanism: 1}, // exists: accepted
			{Name: "dave", Mechanism: 1},  // RESOURCE_NOT_FOUND
			{Name: "erin", Mechanism: 3},  // UNSUPPORTED_SASL_MECHANISM
		},
		Upsertions: []*pb.ScramCredentialUpsertion{
			up("alice", 1, 8192),
			up("", 1, 8192),       // UNACCEPTABLE_CREDENTIAL
			up("frank", 1, 4095),  // too few
			up("grace", 1, 16385), // too many
			up("heidi", 1, 4096),  // named twice:
			up("heidi", 2, 4096),  // DUPLICATE_RESOURCE, whatever the mechanism
			up("ivan", 2, 4096),   // a SHA-256 length salted password for SHA-512
			up("carol", 2, 4096),  // carol deleted above: DUPLICATE_RESOURCE
		},
	}
	req.Upsertions[6].SaltedPassword = salted
	results, recs := PlanScramCredentials(img, req)
	want := map[string]pb.ErrorCode{
		"carol": pb.ErrorCode_DUPLICATE_RESOURCE, "dave": pb.ErrorCode_RESOURCE_NOT_FOUND, "erin": pb.ErrorCode_UNSUPPORTED_SASL_MECHANISM,
		"alice": pb.ErrorCode_NONE, "": pb.ErrorCode_UNACCEPTABLE_CREDENTIAL, "frank": pb.ErrorCode_UNACCEPTABLE_CREDENTIAL,
		"grace": pb.ErrorCode_UNACCEPTABLE_CREDENTIAL, "heidi": pb.ErrorCode_DUPLICATE_RESOURCE, "ivan": pb.ErrorCode_UNACCEPTABLE_CREDENTIAL,
	}
	if len(results) != len(want) {
		t.Fatalf("%d results, want %d: %v", len(results), len(want), results)
	}
	for _, r := range results {
		if w, ok := want[r.User]; !ok || r.ErrorCode != w {
			t.Errorf("user %q: %v (%s), want %v", r.User, r.ErrorCode, r.ErrorMessage, w)
		}
	}
	if len(recs) != 1 {
		t.Fatalf("records %v, want alice's only", recs)
	}
	c := recs[0].GetUserScramCredential()
	exp := scram.SHA256.FromSalted(salted, salt, 8192)
	if c.Name != "alice" || c.Iterations != 8192 || !bytes.Equal(c.StoredKey, exp.StoredKey) || !bytes.Equal(c.ServerKey, exp.ServerKey) {
		t.Fatalf("alice's record %+v", c)
	}
	if bytes.Contains(c.StoredKey, salted) || bytes.Equal(c.ServerKey, salted) {
		t.Fatal("the salted password is stored")
	}
	// The stored credential proves the password it was made from.
	if !scram.SHA256.VerifyPlain(scram.Credential{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: 4096}, "alice-secret") {
		t.Fatal("the stored credential does not verify the password")
	}
}
