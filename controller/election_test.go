package controller_test

import (
	"fmt"
	"reflect"
	"sort"
	"testing"

	"github.com/strand-io/strand/metadata"
	mt "github.com/strand-io/strand/metadata/metadatatest"

	"github.com/strand-io/strand/controller"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// change is the part of a PartitionChangeRecord the election rules decide.
type change struct {
	Topic     string
	Partition int32
	Leader    int32
	ISR       []int32
	LE, PE    int32
}

func changesOf(t *testing.T, rs []*pb.MetadataRecord) []change {
	t.Helper()
	var out []change
	for _, r := range rs {
		pc := r.GetPartitionChange()
		if pc == nil {
			t.Fatalf("election produced a non-PartitionChange record %v", r)
		}
		out = append(out, change{pc.Topic, pc.Partition, pc.Leader, pc.Isr, pc.LeaderEpoch, pc.PartitionEpoch})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// clusterImage registers brokers 1..n (epoch = id) with the given ones
// fenced, then applies the topic records.
func clusterImage(t *testing.T, n int32, fenced []int32, topics ...*pb.MetadataRecord) *metadata.Image {
	t.Helper()
	var batches [][]*pb.MetadataRecord
	for id := int32(1); id <= n; id++ {
		isFenced := false
		for _, f := range fenced {
			isFenced = isFenced || f == id
		}
		batches = append(batches, mt.Recs(mt.RegisterRec(id, 0, isFenced)))
	}
	batches = append(batches, topics)
	return mt.Build(t, batches...)
}

// applyAll checks that the proposed records are accepted by Apply (the
// epochs advance) after the extra records, as the controller proposes them.
func applyAll(t *testing.T, im *metadata.Image, extra []*pb.MetadataRecord, rs []*pb.MetadataRecord) *metadata.Image {
	t.Helper()
	next, _, err := metadata.Apply(im, mt.BatchAt(im.Offset+1, append(append([]*pb.MetadataRecord(nil), extra...), rs...)...))
	if err != nil {
		t.Fatalf("proposed records refused by Apply: %v", err)
	}
	return next
}

func TestFenceChanges(t *testing.T) {
	cases := []struct {
		name   string
		fenced []int32 // already fenced brokers
		topics []*pb.MetadataRecord
		fence  int32
		want   []change
	}{
		{
			name:   "leader fenced: first live ISR replica elected",
			topics: mt.Recs(mt.TopicRec("t", nil), mt.PartRec("t", 0, []int32{1, 2, 3}, []int32{1, 2, 3}, 1, 4, 7)),
			fence:  1,
			want:   []change{{"t", 0, 2, []int32{2, 3}, 5, 8}},
		},
		{
			name:   "leader fenced: replica order, not ISR order",
			topics: mt.Recs(mt.TopicRec("t", nil), mt.PartRec("t", 0, []int32{1, 3, 2}, []int32{2, 1, 3}, 1, 0, 0)),
			fence:  1,
			want:   []change{{"t", 0, 3, []int32{2, 3}, 1, 1}},
		},
		{
			name:   "leader fenced: replica out of sync skipped",
			topics: mt.Recs(mt.TopicRec("t", nil), mt.PartRec("t", 0, []int32{1, 2, 3}, []int32{1, 3}, 1, 0, 0)),
			fence:  1,
			want:   []change{{"t", 0, 3, []int32{3}, 1, 1}},
		},
		{
			name:   "leader fenced: fenced ISR member skipped",
			fenced: []int32{2},
			topics: mt.Recs(mt.TopicRec("t", nil), mt.PartRec("t", 0, []int32{1, 2, 3}, []int32{1, 2, 3}, 1, 0, 0)),
			fence:  1,
			want:   []change{{"t", 0, 3, []int32{2, 3}, 1, 1}},
		},
		{
			name:   "follower fenced: ISR shrinks, leader epoch kept",
			topics: mt.Recs(mt.TopicRec("t", nil), mt.PartRec("t", 0, []int32{1, 2, 3}, []int32{1, 2, 3}, 1, 4, 7)),
			fence:  2,
			want:   []change{{"t", 0, 1, []int32{1, 3}, 4, 8}},
		},
		{
			name:   "last ISR member fenced: stays in the ISR, partition offline",
			topics: mt.Recs(mt.TopicRec("t", nil), mt.PartRec("t", 0, []int32{1, 2}, []int32{1}, 1, 2, 3)),
			fence:  1,
			want:   []change{{"t", 0, metadata.NoLeader, []int32{1}, 3, 4}},
		},
		{
			name:   "already offline with it as last ISR member: nothing",
			topics: mt.Recs(mt.TopicRec("t", nil), mt.PartRec("t", 0, []int32{1, 2}, []int32{1}, metadata.NoLeader, 2, 3)),
			fence:  1,
		},
		{
			name: "partitions without the broker are untouched",
			topics: mt.Recs(mt.TopicRec("t", nil),
				mt.PartRec("t", 0, []int32{2, 3}, []int32{2, 3}, 2, 0, 0),
				mt.PartRec("t", 1, []int32{1, 2, 3}, []int32{2, 3}, 2, 0, 0), // replica, not in ISR
				mt.PartRec("t", 2, []int32{3, 1}, []int32{3, 1}, 3, 1, 1)),
			fence: 1,
			want:  []change{{"t", 2, 3, []int32{3}, 1, 2}},
		},
		{
			name: "every topic is considered",
			topics: mt.Recs(mt.TopicRec("x", nil), mt.PartRec("x", 0, []int32{2, 1}, []int32{2, 1}, 2, 0, 0),
				mt.TopicRec("y", nil), mt.PartRec("y", 0, []int32{2, 3}, []int32{2, 3}, 2, 9, 9), mt.PartRec("y", 1, []int32{3, 1}, []int32{3}, 3, 0, 0)),
			fence: 2,
			want:  []change{{"x", 0, 1, []int32{1}, 1, 1}, {"y", 0, 3, []int32{3}, 10, 10}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := clusterImage(t, 3, c.fenced, c.topics...)
			snap := mt.DeepCopy(img)
			rs := controller.FenceChanges(img, c.fence)
			if got := changesOf(t, rs); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("changes = %+v\nwant      %+v", got, c.want)
			}
			if !reflect.DeepEqual(img, snap) {
				t.Fatal("FenceChanges modified the image")
			}
			for _, r := range rs {
				if r.GetPartitionChange().Reason != "fence" {
					t.Fatalf("reason = %q", r.GetPartitionChange().Reason)
				}
			}
			next := applyAll(t, img, mt.Recs(mt.FenceRec(c.fence, int64(c.fence))), rs)
			// Fencing again changes nothing more.
			if again := controller.FenceChanges(next, c.fence); len(again) != 0 {
				t.Fatalf("second FenceChanges = %+v", changesOf(t, again))
			}
		})
	}
}

func TestUnfenceChanges(t *testing.T) {
	cases := []struct {
		name    string
		fenced  []int32
		topics  []*pb.MetadataRecord
		unfence int32
		want    []change
	}{
		{
			name:    "offline partition whose ISR holds it",
			fenced:  []int32{1},
			topics:  mt.Recs(mt.TopicRec("t", nil), mt.PartRec("t", 0, []int32{2, 1}, []int32{1}, metadata.NoLeader, 3, 4)),
			unfence: 1,
			want:    []change{{"t", 0, 1, []int32{1}, 4, 5}},
		},
		{
			name:    "another live ISR member first in replica order",
			fenced:  []int32{1},
			topics:  mt.Recs(mt.TopicRec("t", nil), mt.PartRec("t", 0, []int32{2, 1}, []int32{1, 2}, metadata.NoLeader, 0, 0)),
			unfence: 1,
			want:    []change{{"t", 0, 2, []int32{1, 2}, 1, 1}},
		},
		{
			name:    "fenced ISR member ahead in replica order is skipped",
			fenced:  []int32{1, 2},
			topics:  mt.Recs(mt.TopicRec("t", nil), mt.PartRec("t", 0, []int32{2, 1}, []int32{2, 1}, metadata.NoLeader, 0, 0)),
			unfence: 1,
			want:    []change{{"t", 0, 1, []int32{2, 1}, 1, 1}},
		},
		{
			name:    "ISR without it: stays offline",
			fenced:  []int32{1, 2},
			topics:  mt.Recs(mt.TopicRec("t", nil), mt.PartRec("t", 0, []int32{1, 2}, []int32{2}, metadata.NoLeader, 0, 0)),
			unfence: 1,
		},
		{
			name:    "partitions with a leader are untouched",
			fenced:  []int32{1},
			topics:  mt.Recs(mt.TopicRec("t", nil), mt.PartRec("t", 0, []int32{1, 2}, []int32{1, 2}, 2, 0, 0)),
			unfence: 1,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := clusterImage(t, 3, c.fenced, c.topics...)
			snap := mt.DeepCopy(img)
			rs := controller.UnfenceChanges(img, c.unfence)
			if got := changesOf(t, rs); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("changes = %+v\nwant      %+v", got, c.want)
			}
			if !reflect.DeepEqual(img, snap) {
				t.Fatal("UnfenceChanges modified the image")
			}
			applyAll(t, img, mt.Recs(mt.UnfenceRec(c.unfence, int64(c.unfence))), rs)
		})
	}
}

func TestPreferredLeaderChanges(t *testing.T) {
	cases := []struct {
		name   string
		fenced []int32
		topics []*pb.MetadataRecord
		want   []change
	}{
		{
			name:   "moves back to a live in-sync first replica",
			topics: mt.Recs(mt.TopicRec("t", nil), mt.PartRec("t", 0, []int32{1, 2, 3}, []int32{2, 3, 1}, 2, 5, 6)),
			want:   []change{{"t", 0, 1, []int32{2, 3, 1}, 6, 7}},
		},
		{
			name:   "first replica out of sync",
			topics: mt.Recs(mt.TopicRec("t", nil), mt.PartRec("t", 0, []int32{1, 2, 3}, []int32{2, 3}, 2, 0, 0)),
		},
		{
			name:   "first replica fenced",
			fenced: []int32{1},
			topics: mt.Recs(mt.TopicRec("t", nil), mt.PartRec("t", 0, []int32{1, 2, 3}, []int32{1, 2, 3}, 2, 0, 0)),
		},
		{
			name:   "already preferred",
			topics: mt.Recs(mt.TopicRec("t", nil), mt.PartRec("t", 0, []int32{1, 2, 3}, []int32{1, 2, 3}, 1, 0, 0)),
		},
		{
			name: "only the partitions that need it",
			topics: mt.Recs(mt.TopicRec("t", nil),
				mt.PartRec("t", 0, []int32{3, 1}, []int32{1, 3}, 1, 0, 0),
				mt.PartRec("t", 1, []int32{1, 3}, []int32{1, 3}, 1, 0, 0),
				mt.PartRec("t", 2, []int32{2, 3}, []int32{3, 2}, metadata.NoLeader, 0, 0)),
			want: []change{{"t", 0, 3, []int32{1, 3}, 1, 1}, {"t", 2, 2, []int32{3, 2}, 1, 1}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := clusterImage(t, 3, c.fenced, c.topics...)
			rs := controller.PreferredLeaderChanges(img)
			if got := changesOf(t, rs); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("changes = %+v\nwant      %+v", got, c.want)
			}
			next := applyAll(t, img, nil, rs)
			if again := controller.PreferredLeaderChanges(next); len(again) != 0 {
				t.Fatalf("second PreferredLeaderChanges = %+v", changesOf(t, again))
			}
		})
	}
}

func TestUncleanChanges(t *testing.T) {
	unclean := map[string]string{metadata.ConfigTopicUncleanElection: "true"}
	cases := []struct {
		name   string
		fenced []int32
		topics []*pb.MetadataRecord
		want   []change
	}{
		{
			name:   "enabled: first live replica, ISR just it",
			fenced: []int32{1, 2},
			topics: mt.Recs(mt.TopicRec("t", unclean), mt.PartRec("t", 0, []int32{1, 2, 3}, []int32{1}, metadata.NoLeader, 2, 3)),
			want:   []change{{"t", 0, 3, []int32{3}, 3, 4}},
		},
		{
			name:   "not set: stays offline",
			fenced: []int32{1},
			topics: mt.Recs(mt.TopicRec("t", nil), mt.PartRec("t", 0, []int32{1, 2, 3}, []int32{1}, metadata.NoLeader, 0, 0)),
		},
		{
			name:   "false: stays offline",
			fenced: []int32{1},
			topics: mt.Recs(mt.TopicRec("t", map[string]string{metadata.ConfigTopicUncleanElection: "false"}), mt.PartRec("t", 0, []int32{1, 2}, []int32{1}, metadata.NoLeader, 0, 0)),
		},
		{
			name:   "no live replica",
			fenced: []int32{1, 2},
			topics: mt.Recs(mt.TopicRec("t", unclean), mt.PartRec("t", 0, []int32{1, 2}, []int32{1}, metadata.NoLeader, 0, 0)),
		},
		{
			name:   "partitions with a leader untouched",
			fenced: []int32{1},
			topics: mt.Recs(mt.TopicRec("t", unclean), mt.PartRec("t", 0, []int32{1, 2}, []int32{2}, 2, 0, 0)),
		},
		{
			name:   "only the enabled topic",
			fenced: []int32{1},
			topics: mt.Recs(mt.TopicRec("a", nil), mt.PartRec("a", 0, []int32{1, 2}, []int32{1}, metadata.NoLeader, 0, 0),
				mt.TopicRec("b", unclean), mt.PartRec("b", 0, []int32{1, 2}, []int32{1}, metadata.NoLeader, 0, 0)),
			want: []change{{"b", 0, 2, []int32{2}, 1, 1}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := clusterImage(t, 3, c.fenced, c.topics...)
			rs := controller.UncleanChanges(img)
			if got := changesOf(t, rs); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("changes = %+v\nwant      %+v", got, c.want)
			}
			next := applyAll(t, img, nil, rs)
			if again := controller.UncleanChanges(next); len(again) != 0 {
				t.Fatalf("second UncleanChanges = %+v", changesOf(t, again))
			}
		})
	}
}

func TestAssign(t *testing.T) {
	cases := []struct {
		brokers        []int32
		partitions, rf int
		start, shift   int
		want           [][]int32 // nil: check properties only
	}{
		// The fourth partition wraps around: its follower shift grows.
		{brokers: []int32{3, 1, 2}, partitions: 4, rf: 2, start: 0, want: [][]int32{{1, 2}, {2, 3}, {3, 1}, {1, 3}}},
		{brokers: []int32{1, 2, 3}, partitions: 3, rf: 3, start: 1, want: [][]int32{{2, 3, 1}, {3, 1, 2}, {1, 2, 3}}},
		// Kafka's example shape: 6 partitions, RF 3, 3 brokers.
		{brokers: []int32{1, 2, 3}, partitions: 6, rf: 3, start: 0, want: [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}, {1, 3, 2}, {2, 1, 3}, {3, 2, 1}}},
		{brokers: []int32{1, 2, 3}, partitions: 6, rf: 3, start: 2, shift: 1, want: [][]int32{{3, 2, 1}, {1, 3, 2}, {2, 1, 3}, {3, 1, 2}, {1, 2, 3}, {2, 3, 1}}},
		{brokers: []int32{5}, partitions: 2, rf: 1, start: 7, want: [][]int32{{5}, {5}}},
		{brokers: []int32{10, 4, 7, 1, 9}, partitions: 17, rf: 3, start: 3, shift: 2},
		{brokers: []int32{10, 4, 7, 1, 9}, partitions: 20, rf: 2, start: 4, shift: 9},
		{brokers: []int32{2, 4, 6, 8}, partitions: 8, rf: 4, start: 0},
		{brokers: []int32{2, 4, 6, 8}, partitions: 12, rf: 3, start: 1, shift: 3},
		{brokers: []int32{1, 2, 3, 4, 5, 6}, partitions: 1, rf: 6, start: 100},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v_p%d_rf%d_s%d_sh%d", c.brokers, c.partitions, c.rf, c.start, c.shift), func(t *testing.T) {
			in := append([]int32(nil), c.brokers...)
			got := controller.Assign(in, c.partitions, c.rf, c.start, c.shift)
			if !reflect.DeepEqual(in, c.brokers) {
				t.Fatalf("Assign reordered its input: %v", in)
			}
			if c.want != nil && !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Assign = %v, want %v", got, c.want)
			}
			if len(got) != c.partitions {
				t.Fatalf("%d partitions, want %d", len(got), c.partitions)
			}
			sorted := append([]int32(nil), c.brokers...)
			sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
			leaders := map[int32]int{}
			for p, reps := range got {
				if len(reps) != c.rf {
					t.Fatalf("partition %d: %d replicas, want %d", p, len(reps), c.rf)
				}
				seen := map[int32]bool{}
				for _, r := range reps {
					if seen[r] {
						t.Fatalf("partition %d: broker %d twice in %v", p, r, reps)
					}
					seen[r] = true
					if !contains32(sorted, r) {
						t.Fatalf("partition %d: unknown broker %d", p, r)
					}
				}
				if want := sorted[(c.start+p)%len(sorted)]; reps[0] != want {
					t.Fatalf("partition %d: leader %d, want %d (round robin from %d)", p, reps[0], want, c.start)
				}
				leaders[reps[0]]++
			}
			lo, hi := c.partitions, 0
			for _, b := range sorted {
				n := leaders[b]
				lo, hi = min(lo, n), max(hi, n)
			}
			if hi-lo > 1 {
				t.Fatalf("leaders unbalanced: %v", leaders)
			}
			if c.partitions%len(sorted) == 0 {
				checkSpread(t, sorted, got)
			}
		})
	}
}

func contains32(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
