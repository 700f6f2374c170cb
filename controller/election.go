package controller

import (
	"slices"
	"sort"

	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// The election rules are pure functions of an image: they return the
// PartitionChange records to propose and never touch state.

// electLeader picks the first replica (in replica order) that is in isr and
// live, skipping exclude; NoLeader if none.
func electLeader(replicas, isr []int32, live func(int32) bool, exclude int32) int32 {
	for _, r := range replicas {
		if r != exclude && contains(isr, r) && live(r) {
			return r
		}
	}
	return metadata.NoLeader
}

func without(s []int32, v int32) []int32 {
	out := make([]int32, 0, len(s))
	for _, x := range s {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

func sameSet(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !contains(b, x) {
			return false
		}
	}
	return true
}

func changeRecord(p *metadata.Partition, leader int32, isr []int32, reason string) *pb.MetadataRecord {
	le := p.LeaderEpoch
	if leader != p.Leader {
		le++
	}
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_PartitionChange{PartitionChange: &pb.PartitionChangeRecord{
		Topic: p.Topic, Partition: p.Partition, Leader: leader, Isr: append([]int32(nil), isr...),
		LeaderEpoch: le, PartitionEpoch: p.PartitionEpoch + 1, Reason: reason,
	}}}
}

func forEachPartition(im *metadata.Image, fn func(t *metadata.Topic, p *metadata.Partition)) {
	for _, name := range im.TopicNames() {
		t := im.Topics[name]
		for _, p := range t.Partitions {
			if p != nil {
				fn(t, p)
			}
		}
	}
}

// FenceChanges moves leadership away from broker id and drops it from every
// ISR, keeping it as the last member when it is the only one (so the
// partition can come back with it, and an unclean election is a choice).
func FenceChanges(im *metadata.Image, id int32) []*pb.MetadataRecord {
	live := func(b int32) bool { return b != id && im.IsLive(b) }
	var out []*pb.MetadataRecord
	forEachPartition(im, func(_ *metadata.Topic, p *metadata.Partition) {
		if p.Leader != id && !p.InISR(id) {
			return
		}
		isr := without(p.ISR, id)
		if len(isr) == 0 {
			isr = append([]int32(nil), p.ISR...)
		}
		leader := p.Leader
		if leader == id {
			leader = electLeader(p.Replicas, isr, live, id)
		}
		if leader == p.Leader && sameSet(isr, p.ISR) {
			return
		}
		out = append(out, changeRecord(p, leader, isr, "fence"))
	})
	return out
}

// UnfenceChanges elects broker id (or another live ISR member) for the
// offline partitions whose ISR holds it.
func UnfenceChanges(im *metadata.Image, id int32) []*pb.MetadataRecord {
	live := func(b int32) bool { return b == id || im.IsLive(b) }
	var out []*pb.MetadataRecord
	forEachPartition(im, func(_ *metadata.Topic, p *metadata.Partition) {
		if p.Leader != metadata.NoLeader || !p.InISR(id) {
			return
		}
		if l := electLeader(p.Replicas, p.ISR, live, metadata.NoLeader); l != metadata.NoLeader {
			out = append(out, changeRecord(p, l, p.ISR, "unfence"))
		}
	})
	return out
}

// PreferredLeaderChanges moves leadership back to each partition's first
// replica where that replica is live and in sync, whatever the imbalance
// (auto.leader.rebalance.enable applies Kafka's threshold instead:
// ImbalanceChanges in elect.go).
func PreferredLeaderChanges(im *metadata.Image) []*pb.MetadataRecord {
	var out []*pb.MetadataRecord
	forEachPartition(im, func(_ *metadata.Topic, p *metadata.Partition) {
		if len(p.Replicas) == 0 {
			return
		}
		pref := p.Replicas[0]
		if p.Leader == pref || !p.InISR(pref) || !im.IsLive(pref) {
			return
		}
		out = append(out, changeRecord(p, pref, p.ISR, "preferred"))
	})
	return out
}

// UncleanChanges elects any live replica for offline partitions of topics
// that set unclean.leader.election.enable=true; the ISR becomes just it.
func UncleanChanges(im *metadata.Image) []*pb.MetadataRecord {
	var out []*pb.MetadataRecord
	forEachPartition(im, func(t *metadata.Topic, p *metadata.Partition) {
		if p.Leader != metadata.NoLeader || t.Configs[metadata.ConfigTopicUncleanElection] != "true" {
			return
		}
		for _, r := range p.Replicas {
			if im.IsLive(r) {
				out = append(out, changeRecord(p, r, []int32{r}, "unclean"))
				return
			}
		}
	})
	return out
}

// Assign places partitions × rf replicas on brokers (sorted by id) the way
// Kafka's rack-unaware assignment does. The leader of partition p is broker
// (start+p) mod n. Its followers sit at distances 1+(s+j) mod (n-1) from it
// (j = 0 … rf-2), where s is shift plus the number of times the partitions
// have wrapped around the brokers (p/n). So the partitions one broker leads
// get differently ordered followers, and when that broker fails, the first
// live follower of each of its partitions (its new leader) is a different
// broker, instead of one broker taking them all.
func Assign(brokers []int32, partitions, rf int, start, shift int) [][]int32 {
	b := append([]int32(nil), brokers...)
	sort.Slice(b, func(i, j int) bool { return b[i] < b[j] })
	n := len(b)
	start, shift = nonNegMod(start, n), max(shift, 0)
	out := make([][]int32, partitions)
	for p := 0; p < partitions; p++ {
		first := (start + p) % n
		reps := make([]int32, 0, rf)
		reps = append(reps, b[first])
		s := shift + p/n
		for j := 0; j < rf-1; j++ {
			dist := 1 + (s+j)%(n-1)
			reps = append(reps, b[(first+dist)%n])
		}
		out[p] = reps
	}
	return out
}

func nonNegMod(a, n int) int {
	if n <= 0 {
		return 0
	}
	return ((a % n) + n) % n
}

func contains(s []int32, v int32) bool { return slices.Contains(s, v) }
