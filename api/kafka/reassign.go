package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Partition reassignment (KIP-455), forwarded by the request layer to the
// active controller; the list is answered from this broker's image.
//
// Versions: AlterPartitionReassignments 0 (v1's
// allow_replication_factor_change is not served: a reassignment may always
// change the replication factor), ListPartitionReassignments 0. A null
// replica list cancels the partition's reassignment.
func init() {
	register(kmsg.AlterPartitionAssignments, 0, 0, handleAlterPartitionAssignments)
	register(kmsg.ListPartitionReassignments, 0, 0, handleListPartitionReassignments)
}

func handleAlterPartitionAssignments(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := kmsg.NewPtrAlterPartitionAssignmentsResponse()
	preq := &pb.AlterPartitionReassignmentsRequest{TimeoutMs: req.TimeoutMillis}
	for _, t := range req.Topics {
		pt := &pb.ReassignableTopic{Name: t.Topic}
		for _, p := range t.Partitions {
			pt.Partitions = append(pt.Partitions, &pb.ReassignablePartition{PartitionIndex: p.Partition, Replicas: p.Replicas, Cancel: p.Replicas == nil})
		}
		preq.Topics = append(preq.Topics, pt)
	}
	presp, err := c.H.AlterPartitionReassignments(ctx, preq)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = splitCode(err)
		return resp, nil
	}
	if presp.ErrorCode != pb.ErrorCode_NONE {
		resp.ErrorCode, resp.ErrorMessage = code(presp.ErrorCode), errMsg(presp.ErrorMessage)
	}
	for i, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = p.Partition
			switch {
			case presp.ErrorCode != pb.ErrorCode_NONE:
				rp.ErrorCode, rp.ErrorMessage = code(presp.ErrorCode), errMsg(presp.ErrorMessage)
			case i < len(presp.Responses) && j < len(presp.Responses[i].Partitions):
				pr := presp.Responses[i].Partitions[j]
				rp.ErrorCode, rp.ErrorMessage = code(pr.ErrorCode), errMsg(pr.ErrorMessage)
			default:
				rp.ErrorCode = code(pb.ErrorCode_UNKNOWN_SERVER_ERROR)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func handleListPartitionReassignments(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.ListPartitionReassignmentsRequest)
	resp := kmsg.NewPtrListPartitionReassignmentsResponse()
	preq := &pb.ListPartitionReassignmentsRequest{TimeoutMs: req.TimeoutMillis}
	for _, t := range req.Topics {
		preq.Topics = append(preq.Topics, &pb.ListPartitionReassignmentsTopic{Name: t.Topic, PartitionIndexes: t.Partitions})
	}
	presp, err := c.H.ListPartitionReassignments(ctx, preq)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = splitCode(err)
		return resp, nil
	}
	resp.ErrorCode, resp.ErrorMessage = code(presp.ErrorCode), errMsg(presp.ErrorMessage)
	for _, t := range presp.Topics {
		rt := kmsg.NewListPartitionReassignmentsResponseTopic()
		rt.Topic = t.Name
		for _, p := range t.Partitions {
			rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			rp.Partition, rp.Replicas, rp.AddingReplicas, rp.RemovingReplicas = p.PartitionIndex, p.Replicas, p.AddingReplicas, p.RemovingReplicas
			if rp.AddingReplicas == nil {
				rp.AddingReplicas = []int32{}
			}
			if rp.RemovingReplicas == nil {
				rp.RemovingReplicas = []int32{}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
