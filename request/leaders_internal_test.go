package request

import (
	"testing"

	"github.com/strand-io/strand/metadata/metadatatest"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TestElectionsVisible: ElectLeaders waits until this broker's image shows
// each successful election as a higher leader epoch; a partition this
// broker's image does not have (and did not have when the request came:
// its image lags the controller's) does not hold the answer for the whole
// timeout.
func TestElectionsVisible(t *testing.T) {
	mt := metadatatest.RegisterRec
	before := metadatatest.Build(t, metadatatest.Recs(mt(1, 1, false), mt(2, 1, false),
		metadatatest.TopicRec("a", nil), metadatatest.PartRec("a", 0, []int32{1, 2}, []int32{1, 2}, 2, 4, 4)))
	after := metadatatest.Build(t, metadatatest.Recs(mt(1, 1, false), mt(2, 1, false),
		metadatatest.TopicRec("a", nil), metadatatest.PartRec("a", 0, []int32{1, 2}, []int32{1, 2}, 1, 5, 5)))
	ok := &pb.ElectLeadersResult{Topic: "a", Partition: 0}
	missing := &pb.ElectLeadersResult{Topic: "b", Partition: 0}
	failed := &pb.ElectLeadersResult{Topic: "a", Partition: 0, ErrorCode: pb.ErrorCode_ELECTION_NOT_NEEDED}
	for _, c := range []struct {
		name    string
		img     bool // after, not before
		results []*pb.ElectLeadersResult
		want    bool
	}{
		{"epoch not moved yet", false, []*pb.ElectLeadersResult{ok}, false},
		{"epoch moved", true, []*pb.ElectLeadersResult{ok}, true},
		{"failed election", false, []*pb.ElectLeadersResult{failed}, true},
		{"partition this broker never had", true, []*pb.ElectLeadersResult{ok, missing}, true},
		{"partition missing, another not moved", false, []*pb.ElectLeadersResult{ok, missing}, false},
	} {
		img := before
		if c.img {
			img = after
		}
		if got := electionsVisible(before, img, c.results); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
