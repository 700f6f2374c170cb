package metadata_test

import (
	"strings"
	"testing"

	"github.com/strand-io/strand/metadata"
	mt "github.com/strand-io/strand/metadata/metadatatest"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TestBrokerFeaturesSurviveASnapshot: a broker's supported levels and the
// format stamp go through SnapshotRecords and back; a registration from
// before the field (no ranges) reads as LegacyFeatures.
func TestBrokerFeaturesSurviveASnapshot(t *testing.T) {
	reg := func(id int32, rs []*pb.SupportedFeatureRange) *pb.MetadataRecord {
		return &pb.MetadataRecord{Record: &pb.MetadataRecord_RegisterBroker{RegisterBroker: &pb.RegisterBrokerRecord{
			NodeId: id, IncarnationId: "i", BrokerEpoch: 1, Address: "a", SupportedFeatures: rs}}}
	}
	im, _, err := metadata.Apply(metadata.EmptyImage(), mt.BatchAt(1,
		reg(1, metadata.SupportedRanges()), reg(2, nil),
		&pb.MetadataRecord{Record: &pb.MetadataRecord_FeatureLevel{FeatureLevel: &pb.FeatureLevelRecord{Name: metadata.FeatureStrandVersion, Level: 1}}}))
	if err != nil {
		t.Fatal(err)
	}
	snap := im.SnapshotRecords()
	if snap.FormatVersion != 1 {
		t.Fatalf("snapshot stamped %d, want 1", snap.FormatVersion)
	}
	back, _, err := metadata.Apply(metadata.EmptyImage(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if r := back.Brokers[1].Supports(metadata.FeatureStrandVersion); r.Max != metadata.StrandVersionMax {
		t.Fatalf("broker 1 supports strand.version up to %d after a snapshot, want %d", r.Max, metadata.StrandVersionMax)
	}
	if r := back.Brokers[2].Supports(metadata.FeatureStrandVersion); r.Max != 0 {
		t.Fatalf("a legacy broker supports strand.version up to %d, want 0", r.Max)
	}
	if r := back.Brokers[2].Supports(metadata.FeatureTransactionVersion); r.Max != 2 {
		t.Fatalf("a legacy broker supports transaction.version up to %d, want 2", r.Max)
	}
	if miss := metadata.UnsupportedFinalized(back.Features, back.Brokers[2].Features); !strings.Contains(miss, "strand.version") {
		t.Fatalf("UnsupportedFinalized for a legacy broker at strand.version 1: %q", miss)
	}
	if miss := metadata.UnsupportedFinalized(back.Features, back.Brokers[1].Features); miss != "" {
		t.Fatalf("UnsupportedFinalized for this binary: %q", miss)
	}
}
