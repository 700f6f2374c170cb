package client

import (
	"context"
	"sort"
	"time"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Reassignment is a partition reassignment in progress (KIP-455): Replicas
// holds the target and the original replicas together, Adding the ones
// still catching up, Removing the ones that leave once they have.
type Reassignment struct {
	TopicPartition
	Replicas, Adding, Removing []int32
}

// AlterPartitionReassignments moves each partition to its target replica
// list (a nil list cancels the partition's reassignment in progress). The
// map holds each partition's answer: nil once the reassignment started (it
// completes later, when the new replicas have caught up), or
// UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT,
// NO_REASSIGNMENT_IN_PROGRESS, …. A request that did not reach the active
// controller is retried until ctx ends.
func (a *Admin) AlterPartitionReassignments(ctx context.Context, targets map[TopicPartition][]int32) (map[TopicPartition]error, error) {
	req := &pb.AlterPartitionReassignmentsRequest{TimeoutMs: int32(a.cfg.requestTimeout / time.Millisecond)}
	byTopic := map[string]*pb.ReassignableTopic{}
	tps := make([]TopicPartition, 0, len(targets))
	for tp := range targets {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	for _, tp := range tps {
		t := byTopic[tp.Topic]
		if t == nil {
			t = &pb.ReassignableTopic{Name: tp.Topic}
			byTopic[tp.Topic] = t
			req.Topics = append(req.Topics, t)
		}
		reps := targets[tp]
		t.Partitions = append(t.Partitions, &pb.ReassignablePartition{PartitionIndex: tp.Partition, Replicas: reps, Cancel: reps == nil})
	}
	var resp *pb.AlterPartitionReassignmentsResponse
	err := a.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewAdminClient(cc).AlterPartitionReassignments(ctx, req)
		if err == nil && controllerRoutingError(resp.ErrorCode) {
			return errs.FromCode(resp.ErrorCode, resp.ErrorMessage)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if resp.ErrorCode != pb.ErrorCode_NONE {
		return nil, errs.FromCode(resp.ErrorCode, resp.ErrorMessage)
	}
	out := make(map[TopicPartition]error, len(targets))
	for _, t := range resp.Responses {
		for _, p := range t.Partitions {
			out[TopicPartition{t.Name, p.PartitionIndex}] = errs.FromCode(p.ErrorCode, p.ErrorMessage)
		}
	}
	return out, nil
}

// ListPartitionReassignments lists the reassignments in progress: of the
// given partitions, or all when none is given. A partition with none in
// progress is left out.
func (a *Admin) ListPartitionReassignments(ctx context.Context, tps ...TopicPartition) ([]Reassignment, error) {
	req := &pb.ListPartitionReassignmentsRequest{TimeoutMs: int32(a.cfg.requestTimeout / time.Millisecond)}
	byTopic := map[string]*pb.ListPartitionReassignmentsTopic{}
	for _, tp := range tps {
		t := byTopic[tp.Topic]
		if t == nil {
			t = &pb.ListPartitionReassignmentsTopic{Name: tp.Topic}
			byTopic[tp.Topic] = t
			req.Topics = append(req.Topics, t)
		}
		t.PartitionIndexes = append(t.PartitionIndexes, tp.Partition)
	}
	var resp *pb.ListPartitionReassignmentsResponse
	err := a.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewAdminClient(cc).ListPartitionReassignments(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	if resp.ErrorCode != pb.ErrorCode_NONE {
		return nil, errs.FromCode(resp.ErrorCode, resp.ErrorMessage)
	}
	var out []Reassignment
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, Reassignment{TopicPartition: TopicPartition{t.Name, p.PartitionIndex}, Replicas: p.Replicas, Adding: p.AddingReplicas, Removing: p.RemovingReplicas})
		}
	}
	return out, nil
}

// PlanRemoveBroker plans moving every replica of broker id elsewhere: each
// partition holding it gets, in its place, the live broker (other than id)
// holding the fewest replicas that is not already one of the partition's,
// counting the moves planned so far.
// Partitions with no such broker are left out.
func PlanRemoveBroker(md *pb.MetadataResponse, id int32) map[TopicPartition][]int32 {
	load := map[int32]int{}
	for _, b := range md.Brokers {
		if b.NodeId != id {
			load[b.NodeId] = 0
		}
	}
	type part struct {
		tp   TopicPartition
		reps []int32
	}
	var parts []part
	for _, t := range md.Topics {
		for _, p := range t.Partitions {
			for _, r := range p.Replicas {
				if _, ok := load[r]; ok {
					load[r]++
				}
			}
			for _, r := range p.Replicas {
				if r == id {
					parts = append(parts, part{TopicPartition{t.Name, p.Partition}, p.Replicas})
					break
				}
			}
		}
	}
	sort.Slice(parts, func(i, j int) bool {
		if parts[i].tp.Topic != parts[j].tp.Topic {
			return parts[i].tp.Topic < parts[j].tp.Topic
		}
		return parts[i].tp.Partition < parts[j].tp.Partition
	})
	ids := make([]int32, 0, len(load))
	for b := range load {
		ids = append(ids, b)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	out := map[TopicPartition][]int32{}
	for _, p := range parts {
		best := int32(-1)
		for _, b := range ids {
			if containsInt32(p.reps, b) {
				continue
			}
			if best < 0 || load[b] < load[best] {
				best = b
			}
		}
		if best < 0 {
			continue
		}
		load[best]++
		target := make([]int32, len(p.reps))
		for i, r := range p.reps {
			if r == id {
				r = best
			}
			target[i] = r
		}
		out[p.tp] = target
	}
	return out
}

func containsInt32(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// MoveReplicasOff moves every replica of broker id elsewhere: it plans
// with PlanRemoveBroker on the current metadata (internal topics too) and
// starts the reassignments. It returns the plan and each partition's
// answer; a partition the plan could not place (no other live broker
// without a replica of it) is left out of both.
func (a *Admin) MoveReplicasOff(ctx context.Context, id int32) (map[TopicPartition][]int32, map[TopicPartition]error, error) {
	md, err := a.Metadata(ctx, true)
	if err != nil {
		return nil, nil, err
	}
	plan := PlanRemoveBroker(md, id)
	if len(plan) == 0 {
		return plan, map[TopicPartition]error{}, nil
	}
	res, err := a.AlterPartitionReassignments(ctx, plan)
	return plan, res, err
}

// WaitReassignments polls until none of tps has a reassignment in
// progress, or ctx ends.
func (a *Admin) WaitReassignments(ctx context.Context, tps ...TopicPartition) error {
	for {
		ongoing, err := a.ListPartitionReassignments(ctx, tps...)
		if err != nil {
			return err
		}
		if len(ongoing) == 0 {
			return nil
		}
		t := time.NewTimer(200 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
