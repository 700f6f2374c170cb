package controller_test

import (
	"reflect"
	"testing"

	"github.com/strand-io/strand/controller"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	mt "github.com/strand-io/strand/metadata/metadatatest"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

func TestPreferredElection(t *testing.T) {
	cases := []struct {
		name   string
		fenced []int32
		part   *pb.MetadataRecord
		want   *change
		code   pb.ErrorCode
	}{
		{name: "moves to the live in-sync first replica",
			part: mt.PartRec("t", 0, []int32{1, 2, 3}, []int32{2, 3, 1}, 2, 5, 6),
			want: &change{"t", 0, 1, []int32{2, 3, 1}, 6, 7}},
		{name: "already leads",
			part: mt.PartRec("t", 0, []int32{1, 2, 3}, []int32{1, 2, 3}, 1, 0, 0),
			code: pb.ErrorCode_ELECTION_NOT_NEEDED},
		{name: "out of the ISR",
			part: mt.PartRec("t", 0, []int32{1, 2, 3}, []int32{2, 3}, 2, 0, 0),
			code: pb.ErrorCode_PREFERRED_LEADER_NOT_AVAILABLE},
		{name: "fenced", fenced: []int32{1},
			part: mt.PartRec("t", 0, []int32{1, 2, 3}, []int32{1, 2, 3}, 2, 0, 0),
			code: pb.ErrorCode_PREFERRED_LEADER_NOT_AVAILABLE},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := clusterImage(t, 3, c.fenced, mt.TopicRec("t", nil), c.part)
			rec, err := controller.PreferredElection(img, img.Partition("t", 0))
			checkElection(t, img, rec, err, c.want, c.code)
		})
	}
}

func TestUncleanElection(t *testing.T) {
	cases := []struct {
		name   string
		fenced []int32
		part   *pb.MetadataRecord
		want   *change
		code   pb.ErrorCode
	}{
		{name: "has a leader",
			part: mt.PartRec("t", 0, []int32{1, 2, 3}, []int32{1, 2, 3}, 2, 0, 0),
			code: pb.ErrorCode_ELECTION_NOT_NEEDED},
		{name: "live replica outside the ISR becomes the ISR", fenced: []int32{1},
			part: mt.PartRec("t", 0, []int32{1, 2, 3}, []int32{1}, metadata.NoLeader, 4, 4),
			want: &change{"t", 0, 2, []int32{2}, 5, 5}},
		{name: "a live ISR member is taken first", fenced: []int32{1},
			part: mt.PartRec("t", 0, []int32{1, 2, 3}, []int32{3}, metadata.NoLeader, 4, 4),
			want: &change{"t", 0, 3, []int32{3}, 5, 5}},
		{name: "no live replica", fenced: []int32{1, 2},
			part: mt.PartRec("t", 0, []int32{1, 2}, []int32{1}, metadata.NoLeader, 0, 0),
			code: pb.ErrorCode_ELIGIBLE_LEADERS_NOT_AVAILABLE},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := clusterImage(t, 3, c.fenced, mt.TopicRec("t", nil), c.part)
			rec, err := controller.UncleanElection(img, img.Partition("t", 0))
			checkElection(t, img, rec, err, c.want, c.code)
		})
	}
}

func checkElection(t *testing.T, img *metadata.Image, rec *pb.MetadataRecord, err error, want *change, code pb.ErrorCode) {
	t.Helper()
	if want == nil {
		if rec != nil || errs.CodeOf(err) != code {
			t.Fatalf("election = %v, %v; want error %v", rec, err, code)
		}
		return
	}
	if err != nil {
		t.Fatalf("election: %v", err)
	}
	got := changesOf(t, []*pb.MetadataRecord{rec})
	if !reflect.DeepEqual(got, []change{*want}) {
		t.Fatalf("change = %+v, want %+v", got, *want)
	}
	applyAll(t, img, nil, []*pb.MetadataRecord{rec})
}

// TestImbalanceChanges checks Kafka's leader.imbalance.per.broker.percentage
// rule: a broker's partitions move back only when more than the
// percentage of those it prefers are led elsewhere, and only to a live
// in-sync preferred replica.
func TestImbalanceChanges(t *testing.T) {
	// Broker 1 prefers 10 partitions and leads 9 of them (10% imbalance);
	// broker 2 prefers 2 partitions and leads neither (100%), but one of
	// them has it out of the ISR.
	recs := []*pb.MetadataRecord{mt.TopicRec("t", nil)}
	for p := int32(0); p < 10; p++ {
		leader := int32(1)
		if p == 9 {
			leader = 3
		}
		recs = append(recs, mt.PartRec("t", p, []int32{1, 2, 3}, []int32{1, 2, 3}, leader, 0, 0))
	}
	recs = append(recs,
		mt.PartRec("t", 10, []int32{2, 1, 3}, []int32{1, 2, 3}, 1, 0, 0),
		mt.PartRec("t", 11, []int32{2, 3, 1}, []int32{3, 1}, 3, 0, 0))
	img := clusterImage(t, 3, nil, recs...)

	imb := controller.LeaderImbalance(img)
	if imb[1] != 0.1 || imb[2] != 1 {
		t.Fatalf("imbalance = %v, want broker 1 at 0.1 and broker 2 at 1", imb)
	}
	if _, ok := imb[3]; ok {
		t.Fatalf("broker 3 prefers nothing but has imbalance %v", imb[3])
	}
	// At 10%: broker 1 is not above the threshold; broker 2 gets back t-10
	// only (t-11 has it out of the ISR).
	got := changesOf(t, controller.ImbalanceChanges(img, 10))
	if want := []change{{"t", 10, 2, []int32{1, 2, 3}, 1, 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("at 10%%: %+v, want %+v", got, want)
	}
	// Under 10% broker 1 is above the threshold too.
	got = changesOf(t, controller.ImbalanceChanges(img, 5))
	if want := []change{{"t", 9, 1, []int32{1, 2, 3}, 1, 1}, {"t", 10, 2, []int32{1, 2, 3}, 1, 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("at 5%%: %+v, want %+v", got, want)
	}
	// At 100% nothing is ever moved.
	if got := controller.ImbalanceChanges(img, 100); len(got) != 0 {
		t.Fatalf("at 100%%: %+v", changesOf(t, got))
	}
}
