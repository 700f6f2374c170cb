package controller_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/strand-io/strand/clock"
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

// TestControllerElectLeaders: the active controller's ElectLeaders commits
// the elections it decides in one batch and answers each partition:
// preferred and unclean elections, their errors, unknown partitions, and
// all partitions (where partitions needing no election are left out).
func TestControllerElectLeaders(t *testing.T) {
	addr := freeAddr(t)
	q := startLeader(t, quorumConfig(t.TempDir(), addr, []controller.Voter{{ID: 1, Addr: addr}}))
	t.Cleanup(func() { q.Close() })
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	c := activeController(t, q, clk)
	ctx := context.Background()
	for id := int32(1); id <= 3; id++ {
		e, code := register(c, id, fmt.Sprint("inc", id), fmt.Sprintf("10.0.0.%d:9096", id))
		if code != pb.ErrorCode_NONE {
			t.Fatalf("register %d: %v", id, code)
		}
		if _, err := c.BrokerHeartbeat(ctx, &pb.BrokerHeartbeatRequest{NodeId: id, BrokerEpoch: e, CurrentMetadataOffset: 1 << 40}); err != nil {
			t.Fatal(err)
		}
	}
	// Broker 3 goes away (fenced) below.
	if _, err := q.Propose(ctx, mt.TopicRec("t", nil),
		mt.PartRec("t", 0, []int32{1, 2, 3}, []int32{1, 2, 3}, 2, 0, 0), // preferred 1 can lead
		mt.PartRec("t", 1, []int32{2, 1, 3}, []int32{2, 1, 3}, 2, 0, 0), // preferred already leads
		mt.PartRec("t", 2, []int32{3, 1, 2}, []int32{1, 2, 3}, 1, 0, 0), // preferred 3 will be fenced
		mt.PartRec("t", 3, []int32{1, 2, 3}, []int32{3}, 3, 0, 0),       // leader 3 will be fenced, ISR only 3
	); err != nil {
		t.Fatal(err)
	}
	b3 := q.FSM.Image().Brokers[3]
	if _, err := c.BrokerHeartbeat(ctx, &pb.BrokerHeartbeatRequest{NodeId: 3, BrokerEpoch: b3.Epoch, WantFence: true}); err != nil {
		t.Fatal(err)
	}
	if p := q.FSM.Image().Partition("t", 3); p.Leader != metadata.NoLeader {
		t.Fatalf("t-3 after fencing its only ISR member: %+v, want no leader", p)
	}
	codes := func(res []*pb.ElectLeadersResult) map[int32]pb.ErrorCode {
		out := map[int32]pb.ErrorCode{}
		for _, r := range res {
			out[r.Partition] = r.ErrorCode
		}
		return out
	}
	res, err := c.ElectLeaders(ctx, &pb.ElectLeadersRequest{ElectionType: pb.ElectionType_ELECTION_TYPE_PREFERRED,
		Topics: []*pb.ElectLeadersTopic{{Topic: "t", Partitions: []int32{0, 1, 2, 9}}}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]pb.ErrorCode{0: pb.ErrorCode_NONE, 1: pb.ErrorCode_ELECTION_NOT_NEEDED, 2: pb.ErrorCode_PREFERRED_LEADER_NOT_AVAILABLE, 9: pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION}
	if got := codes(res); !reflect.DeepEqual(got, want) {
		t.Fatalf("preferred: %v, want %v", got, want)
	}
	if p := q.FSM.Image().Partition("t", 0); p.Leader != 1 || p.LeaderEpoch != 1 {
		t.Fatalf("t-0 after the preferred election: %+v", p)
	}
	// Unclean: t-3 has no leader and no live ISR member: broker 1 (first
	// live replica) leads with an ISR of itself; t-0 has a leader.
	res, err = c.ElectLeaders(ctx, &pb.ElectLeadersRequest{ElectionType: pb.ElectionType_ELECTION_TYPE_UNCLEAN,
		Topics: []*pb.ElectLeadersTopic{{Topic: "t", Partitions: []int32{0, 3}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := codes(res), map[int32]pb.ErrorCode{0: pb.ErrorCode_ELECTION_NOT_NEEDED, 3: pb.ErrorCode_NONE}; !reflect.DeepEqual(got, want) {
		t.Fatalf("unclean: %v, want %v", got, want)
	}
	if p := q.FSM.Image().Partition("t", 3); p.Leader != 1 || !reflect.DeepEqual(p.ISR, []int32{1}) {
		t.Fatalf("t-3 after the unclean election: %+v", p)
	}
	// All partitions: only t-2 (preferred replica fenced) is reported.
	res, err = c.ElectLeaders(ctx, &pb.ElectLeadersRequest{ElectionType: pb.ElectionType_ELECTION_TYPE_PREFERRED, AllPartitions: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := codes(res), map[int32]pb.ErrorCode{2: pb.ErrorCode_PREFERRED_LEADER_NOT_AVAILABLE}; !reflect.DeepEqual(got, want) {
		t.Fatalf("all partitions: %v, want %v", got, want)
	}
}
