package controller

import (
	"context"
	"fmt"
	"slices"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Partition reassignment (KIP-455). A reassignment writes the partition's
// replicas as target ∪ original (the target's order first), with
// adding = target − original and removing = original − target. The new
// replicas fetch from the leader and join the ISR through the ordinary ISR
// expansion (AlterPartition); once every adding replica is in the ISR the
// controller completes it: replicas = target, ISR ∩ target, the lists
// cleared, and a new leader from target ∩ ISR if the leader was removed.
// Completion is checked after each ISR change and on the controller's tick.

// AlterPartitionReassignments starts or cancels reassignments, one
// partition at a time, and answers per partition.
func (c *Controller) AlterPartitionReassignments(ctx context.Context, req *pb.AlterPartitionReassignmentsRequest) ([]*pb.ReassignableTopicResponse, error) {
	if err := c.lockActive(); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	var out []*pb.ReassignableTopicResponse
	for _, t := range req.Topics {
		tr := &pb.ReassignableTopicResponse{Name: t.Name}
		out = append(out, tr)
		for _, rp := range t.Partitions {
			res := &pb.ReassignablePartitionResponse{PartitionIndex: rp.PartitionIndex}
			tr.Partitions = append(tr.Partitions, res)
			img := c.Q.FSM.Image()
			rec, err := ReassignRecord(img, t.Name, rp.PartitionIndex, rp.Replicas, rp.Cancel)
			if err == nil && rec != nil {
				_, err = c.proposeLocked(ctx, rec)
				if errs.CodeOf(err) == pb.ErrorCode_NOT_CONTROLLER {
					return nil, err
				}
			}
			if err != nil {
				res.ErrorCode, res.ErrorMessage = errs.Split(err)
				continue
			}
			if rec != nil {
				pc := rec.GetPartitionChange()
				c.lg.Info("partition reassignment", "partition", fmt.Sprintf("%s-%d", t.Name, rp.PartitionIndex), "reason", pc.Reason,
					"replicas", pc.Assignment.GetReplicas(), "adding", pc.Assignment.GetAddingReplicas(), "removing", pc.Assignment.GetRemovingReplicas())
			}
		}
	}
	return out, nil
}

// ListPartitionReassignments answers from the active controller's image,
// which every accepted change is in (a broker's image may trail it): every
// partition with a reassignment in progress, or those of the named
// partitions that have one (Kafka leaves the others out).
func (c *Controller) ListPartitionReassignments(req *pb.ListPartitionReassignmentsRequest) (*pb.ListPartitionReassignmentsResponse, error) {
	if err := c.lockActive(); err != nil {
		return nil, err
	}
	img := c.Q.FSM.Image()
	c.mu.Unlock()
	return ListReassignments(img, req), nil
}

// ListReassignments is ListPartitionReassignments' answer from img.
func ListReassignments(img *metadata.Image, req *pb.ListPartitionReassignmentsRequest) *pb.ListPartitionReassignmentsResponse {
	out := &pb.ListPartitionReassignmentsResponse{}
	add := func(p *metadata.Partition) {
		if p == nil || !p.Reassigning() {
			return
		}
		var ot *pb.OngoingTopicReassignment
		for _, t := range out.Topics {
			if t.Name == p.Topic {
				ot = t
			}
		}
		if ot == nil {
			ot = &pb.OngoingTopicReassignment{Name: p.Topic}
			out.Topics = append(out.Topics, ot)
		}
		ot.Partitions = append(ot.Partitions, &pb.OngoingPartitionReassignment{PartitionIndex: p.Partition,
			Replicas: append([]int32(nil), p.Replicas...), AddingReplicas: append([]int32{}, p.AddingReplicas...), RemovingReplicas: append([]int32{}, p.RemovingReplicas...)})
	}
	if len(req.Topics) == 0 {
		for _, name := range img.TopicNames() {
			for _, p := range img.Topics[name].Partitions {
				add(p)
			}
		}
		return out
	}
	for _, t := range req.Topics {
		idx := slices.Clone(t.PartitionIndexes)
		slices.Sort(idx)
		for _, i := range idx {
			add(img.Partition(t.Name, i))
		}
	}
	return out
}

// completeReassignmentsLocked writes the completion of every reassignment
// whose adding replicas have all joined the ISR (c.mu held).
func (c *Controller) completeReassignmentsLocked(ctx context.Context) {
	recs := ReassignCompletions(c.Q.FSM.Image())
	if len(recs) == 0 {
		return
	}
	if _, err := c.proposeLocked(ctx, recs...); err != nil {
		c.lg.Warn("complete partition reassignments", "err", err)
		return
	}
	for _, r := range recs {
		pc := r.GetPartitionChange()
		c.lg.Info("partition reassignment completed", "partition", fmt.Sprintf("%s-%d", pc.Topic, pc.Partition), "replicas", pc.Assignment.GetReplicas(), "leader", pc.Leader, "isr", pc.Isr)
	}
}

// ReassignRecord is the record that moves topic-partition to target, or,
// with cancel, back to its original replicas. A reassignment that needs no
// replica to catch up (a reorder, or only removals of replicas whose
// remaining ones are in the ISR) completes in the same record. A nil
// record with a nil error means nothing changes.
func ReassignRecord(img *metadata.Image, topic string, partition int32, target []int32, cancel bool) (*pb.MetadataRecord, error) {
	p := img.Partition(topic, partition)
	if p == nil {
		return nil, errs.New(pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "partition %s-%d does not exist", topic, partition)
	}
	original := originalReplicas(p)
	if cancel {
		if !p.Reassigning() {
			return nil, errs.New(pb.ErrorCode_NO_REASSIGNMENT_IN_PROGRESS, "no reassignment of %s-%d is in progress", topic, partition)
		}
		if err := checkKeepsISR(img, p, original, "cancelling"); err != nil {
			return nil, err
		}
		return finishRecord(img, p, original, "reassign-cancel"), nil
	}
	if err := checkTarget(img, target); err != nil {
		return nil, errs.New(pb.ErrorCode_INVALID_REPLICA_ASSIGNMENT, "reassignment of %s-%d: %v", topic, partition, err)
	}
	if !p.Reassigning() && slices.Equal(target, p.Replicas) {
		return nil, nil // already there
	}
	adding := minus(target, original)
	removing := minus(original, target)
	replicas := append(append([]int32(nil), target...), removing...)
	if err := checkKeepsISR(img, p, replicas, "changing"); err != nil {
		return nil, err
	}
	q := p.Clone()
	q.Replicas, q.AddingReplicas, q.RemovingReplicas = replicas, adding, removing
	q.ISR = intersect(p.ISR, replicas)
	if completable(img, q) {
		return finishRecord(img, p, target, "reassign"), nil
	}
	leader := p.Leader
	if !contains(replicas, leader) {
		leader = electLeader(replicas, q.ISR, img.IsLive, metadata.NoLeader)
	}
	if slices.Equal(replicas, p.Replicas) && slices.Equal(adding, p.AddingReplicas) && slices.Equal(removing, p.RemovingReplicas) {
		return nil, nil // the same reassignment again
	}
	return assignmentRecord(p, leader, q.ISR, replicas, adding, removing, "reassign"), nil
}

// ReassignCompletions are the records completing every reassignment whose
// adding replicas are all in the ISR.
func ReassignCompletions(img *metadata.Image) []*pb.MetadataRecord {
	var out []*pb.MetadataRecord
	forEachPartition(img, func(_ *metadata.Topic, p *metadata.Partition) {
		if p.Reassigning() && completable(img, p) {
			out = append(out, finishRecord(img, p, minus(p.Replicas, p.RemovingReplicas), "reassign-complete"))
		}
	})
	return out
}

// completable: every adding replica is in the ISR, some target replica is,
// and the leader is a target replica or one can be elected from target ∩ ISR.
func completable(img *metadata.Image, p *metadata.Partition) bool {
	target := minus(p.Replicas, p.RemovingReplicas)
	for _, r := range p.AddingReplicas {
		if !p.InISR(r) {
			return false
		}
	}
	isr := intersect(p.ISR, target)
	if len(isr) == 0 {
		return false
	}
	if contains(target, p.Leader) {
		return true
	}
	return electLeader(target, isr, img.IsLive, metadata.NoLeader) != metadata.NoLeader
}

// checkKeepsISR refuses a replica set that keeps no member of the ISR: a
// cancel (or a new target) dropping the adding replicas when they are all
// that is left in sync would delete the only copies of acknowledged
// records and elect a stale replica, an unclean election in disguise.
// Kafka refuses it with INVALID_REPLICA_ASSIGNMENT unless the topic allows
// unclean leader election.
func checkKeepsISR(img *metadata.Image, p *metadata.Partition, replicas []int32, what string) error {
	if len(p.ISR) == 0 || len(intersect(p.ISR, replicas)) > 0 {
		return nil
	}
	if t := img.Topic(p.Topic); t != nil && t.Configs[metadata.ConfigTopicUncleanElection] == "true" {
		return nil
	}
	return errs.New(pb.ErrorCode_INVALID_REPLICA_ASSIGNMENT,
		"%s the reassignment of %s-%d to %v would leave none of the in-sync replicas %v and require an unclean leader election (unclean.leader.election.enable is false)",
		what, p.Topic, p.Partition, replicas, p.ISR)
}

// finishRecord sets replicas to final with no reassignment in progress:
// ISR ∩ final, and a leader from final ∩ ISR (the first of final that is
// live) when the current one is not in final.
func finishRecord(img *metadata.Image, p *metadata.Partition, final []int32, reason string) *pb.MetadataRecord {
	isr := intersect(p.ISR, final)
	leader := p.Leader
	if !contains(final, leader) || !contains(isr, leader) {
		leader = electLeader(final, isr, img.IsLive, metadata.NoLeader)
	}
	if len(isr) == 0 {
		// Nothing of final is in sync (a cancel after the original
		// replicas all fell out): keep the last ISR member of final's
		// choice so the partition can come back with it.
		isr = []int32{final[0]}
		leader = metadata.NoLeader
	}
	return assignmentRecord(p, leader, isr, final, nil, nil, reason)
}

// assignmentRecord changes the replica set. A set that drops any current
// replica bumps the leader epoch even when the leader stays, as Kafka's
// PartitionChangeBuilder does: a removed replica's fetches still in flight
// (or a re-added replica's stale ones) then carry an old epoch and are
// fenced, never taken for the new replica's progress.
func assignmentRecord(p *metadata.Partition, leader int32, isr, replicas, adding, removing []int32, reason string) *pb.MetadataRecord {
	rec := changeRecord(p, leader, isr, reason)
	if pc := rec.GetPartitionChange(); pc.LeaderEpoch == p.LeaderEpoch && len(minus(p.Replicas, replicas)) > 0 {
		pc.LeaderEpoch++
	}
	rec.GetPartitionChange().Assignment = &pb.PartitionReplicaSet{
		Replicas: append([]int32(nil), replicas...), AddingReplicas: adding, RemovingReplicas: removing,
	}
	return rec
}

// originalReplicas are the replicas before the reassignment in progress
// (all of them if none is).
func originalReplicas(p *metadata.Partition) []int32 {
	return minus(p.Replicas, p.AddingReplicas)
}

// checkTarget: a non-empty list of distinct registered brokers.
func checkTarget(img *metadata.Image, target []int32) error {
	if len(target) == 0 {
		return fmt.Errorf("the replica list is empty")
	}
	seen := map[int32]bool{}
	for _, id := range target {
		if seen[id] {
			return fmt.Errorf("broker %d is listed twice in %v", id, target)
		}
		seen[id] = true
		if img.Brokers[id] == nil {
			return fmt.Errorf("broker %d is not registered", id)
		}
	}
	return nil
}

// minus is a − b, in a's order.
func minus(a, b []int32) []int32 {
	var out []int32
	for _, x := range a {
		if !contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// intersect is a ∩ b, in a's order.
func intersect(a, b []int32) []int32 {
	out := []int32{}
	for _, x := range a {
		if contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
