package metadata_test

import (
	"testing"

	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

func quotaRec(u metadata.QuotaEntity, key string, v float64, remove bool) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_ClientQuota{ClientQuota: &pb.ClientQuotaRecord{Entity: u.Entity(), Key: key, Value: v, Remove: remove}}}
}

// TestClientQuotasApplyAndSnapshot: quota records set and remove keys of
// a user or the default user, leave the image before them unchanged, say so
// in the delta, and survive a snapshot.
func TestClientQuotasApplyAndSnapshot(t *testing.T) {
	alice, def := metadata.QuotaUser("alice", false), metadata.QuotaUser("", true)
	aliceApp := metadata.QuotaEntity{User: metadata.QuotaNamed("alice"), ClientID: metadata.QuotaNamed("app")}
	defClient := metadata.QuotaEntity{ClientID: metadata.QuotaDefault}
	im0 := metadata.EmptyImage()
	im1, d, err := metadata.Apply(im0, &pb.MetadataBatch{Offset: 1, Records: []*pb.MetadataRecord{
		quotaRec(alice, "producer_byte_rate", 1024, false),
		quotaRec(alice, "consumer_byte_rate", 2048, false),
		quotaRec(def, "request_percentage", 50, false),
		quotaRec(aliceApp, "producer_byte_rate", 512, false),
		quotaRec(defClient, "consumer_byte_rate", 4096, false),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !d.ClientQuotas || im1.ClientQuotas[alice]["producer_byte_rate"] != 1024 || im1.ClientQuotas[def]["request_percentage"] != 50 ||
		im1.ClientQuotas[aliceApp]["producer_byte_rate"] != 512 || im1.ClientQuotas[defClient]["consumer_byte_rate"] != 4096 {
		t.Fatalf("delta %+v, quotas %v", d, im1.ClientQuotas)
	}
	im2, _, err := metadata.Apply(im1, &pb.MetadataBatch{Offset: 2, Records: []*pb.MetadataRecord{quotaRec(alice, "producer_byte_rate", 0, true)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := im2.ClientQuotas[alice]["producer_byte_rate"]; ok || im1.ClientQuotas[alice]["producer_byte_rate"] != 1024 {
		t.Fatalf("remove: %v (before: %v)", im2.ClientQuotas, im1.ClientQuotas)
	}
	im3, _, err := metadata.Apply(metadata.EmptyImage(), im2.SnapshotRecords())
	if err != nil {
		t.Fatal(err)
	}
	if len(im3.ClientQuotas) != 4 || im3.ClientQuotas[alice]["consumer_byte_rate"] != 2048 || im3.ClientQuotas[def]["request_percentage"] != 50 ||
		im3.ClientQuotas[aliceApp]["producer_byte_rate"] != 512 || im3.ClientQuotas[defClient]["consumer_byte_rate"] != 4096 {
		t.Fatalf("after a snapshot: %v", im3.ClientQuotas)
	}
	if got := im3.QuotaEntities(); len(got) != 4 || got[0] != defClient || got[1] != def || got[2] != alice || got[3] != aliceApp {
		t.Fatalf("QuotaEntities: %v", got)
	}
	bad := &pb.ClientQuotaRecord{Entity: &pb.QuotaEntity{Parts: []*pb.QuotaEntityPart{{EntityType: "ip", Name: "10.0.0.1"}}}, Key: "connection_creation_rate", Value: 1}
	if _, _, err := metadata.Apply(im3, &pb.MetadataBatch{Offset: 4, Records: []*pb.MetadataRecord{{Record: &pb.MetadataRecord_ClientQuota{ClientQuota: bad}}}}); err == nil {
		t.Fatal("an ip quota record applied")
	}
}
