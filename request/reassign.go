package request

import (
	"context"
	"slices"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// AlterPartitionReassignments forwards to the active controller (KIP-455),
// then waits (within the request timeout) until this broker's image shows
// each accepted change, so a ListPartitionReassignments or Metadata that
// follows on this broker sees it.
func (h *Handler) AlterPartitionReassignments(ctx context.Context, req *pb.AlterPartitionReassignmentsRequest) (*pb.AlterPartitionReassignmentsResponse, error) {
	// Kafka: Alter on the cluster.
	if err := h.authorizeCluster(ctx, "AlterPartitionReassignments", authz.OpAlter); err != nil {
		code, msg := errs.Split(err)
		return &pb.AlterPartitionReassignmentsResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	for _, t := range req.Topics {
		if err := checkString("topic name", t.Name); err != nil {
			code, msg := errs.Split(err)
			return &pb.AlterPartitionReassignmentsResponse{ErrorCode: code, ErrorMessage: msg}, nil
		}
	}
	resp, err := toController(ctx, h, func(ctx context.Context, c pb.ControllerClient) (*pb.AlterPartitionReassignmentsResponse, error) {
		return c.AlterPartitionReassignments(ctx, req)
	})
	if err != nil {
		code, msg := timedOutIfUnknown(errs.Split(err))
		return &pb.AlterPartitionReassignmentsResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	// Bounded as ElectLeaders' wait is (maxLeadersWait), and ended by ctx.
	waitUntil(ctx, leadersWait(req.TimeoutMs), func() bool { return reassignVisible(h.Repl.Image(), req, resp) })
	return resp, nil
}

// reassignVisible reports whether img shows every accepted change of resp:
// a cancelled partition has no reassignment, a started one has its target
// as the replicas that stay.
func reassignVisible(img *metadata.Image, req *pb.AlterPartitionReassignmentsRequest, resp *pb.AlterPartitionReassignmentsResponse) bool {
	for i, tr := range resp.Responses {
		if i >= len(req.Topics) {
			break
		}
		for j, pr := range tr.Partitions {
			if pr.ErrorCode != pb.ErrorCode_NONE || j >= len(req.Topics[i].Partitions) {
				continue
			}
			rp := req.Topics[i].Partitions[j]
			p := img.Partition(tr.Name, pr.PartitionIndex)
			if p == nil {
				return false
			}
			if rp.Cancel {
				if p.Reassigning() {
					return false
				}
				continue
			}
			var target []int32
			for _, r := range p.Replicas {
				if !slices.Contains(p.RemovingReplicas, r) {
					target = append(target, r)
				}
			}
			if !sameIDSet(target, rp.Replicas) {
				return false
			}
		}
	}
	return true
}

// ListPartitionReassignments forwards to the active controller, as Kafka's
// brokers do: a broker's own image may not show a change another broker
// just accepted, and a tool polling for completion (--verify, --wait)
// must not take "none in progress" from a broker that has not seen it start.
func (h *Handler) ListPartitionReassignments(ctx context.Context, req *pb.ListPartitionReassignmentsRequest) (*pb.ListPartitionReassignmentsResponse, error) {
	// Kafka: Describe on the cluster.
	if err := h.authorizeCluster(ctx, "ListPartitionReassignments", authz.OpDescribe); err != nil {
		code, msg := errs.Split(err)
		return &pb.ListPartitionReassignmentsResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	for _, t := range req.Topics {
		if err := checkString("topic name", t.Name); err != nil {
			code, msg := errs.Split(err)
			return &pb.ListPartitionReassignmentsResponse{ErrorCode: code, ErrorMessage: msg}, nil
		}
	}
	resp, err := toController(ctx, h, func(ctx context.Context, c pb.ControllerClient) (*pb.ListPartitionReassignmentsResponse, error) {
		return c.ListPartitionReassignments(ctx, req)
	})
	if err != nil {
		code, msg := timedOutIfUnknown(errs.Split(err))
		return &pb.ListPartitionReassignmentsResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	return resp, nil
}

func sameIDSet(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
