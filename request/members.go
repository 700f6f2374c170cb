package request

import (
	"context"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Cluster membership: each request is forwarded to the active
// controller over the inter-broker Controller service, as the other
// controller writes are. A controller that cannot be reached answers
// REQUEST_TIMED_OUT (retriable). As Kafka's controller: AddRaftVoter,
// RemoveRaftVoter and UnregisterBroker need Alter on the cluster,
// DescribeQuorum Describe.

// AddVoter adds a controller quorum voter (Kafka's AddRaftVoter).
func (h *Handler) AddVoter(ctx context.Context, req *pb.AddVoterRequest) (*pb.AddVoterResponse, error) {
	if err := h.authorizeCluster(ctx, "AddRaftVoter", authz.OpAlter); err != nil {
		code, msg := errs.Split(err)
		return &pb.AddVoterResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	resp, err := toController(ctx, h, func(ctx context.Context, c pb.ControllerClient) (*pb.AddVoterResponse, error) {
		return c.AddVoter(ctx, req)
	})
	if err != nil {
		code, msg := timedOutIfUnknown(errs.Split(err))
		return &pb.AddVoterResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	return resp, nil
}

// RemoveVoter removes a controller quorum voter (Kafka's RemoveRaftVoter).
func (h *Handler) RemoveVoter(ctx context.Context, req *pb.RemoveVoterRequest) (*pb.RemoveVoterResponse, error) {
	if err := h.authorizeCluster(ctx, "RemoveRaftVoter", authz.OpAlter); err != nil {
		code, msg := errs.Split(err)
		return &pb.RemoveVoterResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	resp, err := toController(ctx, h, func(ctx context.Context, c pb.ControllerClient) (*pb.RemoveVoterResponse, error) {
		return c.RemoveVoter(ctx, req)
	})
	if err != nil {
		code, msg := timedOutIfUnknown(errs.Split(err))
		return &pb.RemoveVoterResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	return resp, nil
}

// DescribeQuorum reports the controller quorum as the active controller
// sees it (Kafka's DescribeQuorum).
func (h *Handler) DescribeQuorum(ctx context.Context, req *pb.QuorumStatusRequest) (*pb.QuorumStatusResponse, error) {
	if err := h.authorizeCluster(ctx, "DescribeQuorum", authz.OpDescribe); err != nil {
		code, msg := errs.Split(err)
		return &pb.QuorumStatusResponse{ErrorCode: code, ErrorMessage: msg, LeaderId: -1}, nil
	}
	resp, err := toController(ctx, h, func(ctx context.Context, c pb.ControllerClient) (*pb.QuorumStatusResponse, error) {
		return c.QuorumStatus(ctx, req)
	})
	if err != nil {
		code, msg := timedOutIfUnknown(errs.Split(err))
		return &pb.QuorumStatusResponse{ErrorCode: code, ErrorMessage: msg, LeaderId: -1}, nil
	}
	return resp, nil
}

// UnregisterBroker removes a broker's registration (Kafka's
// UnregisterBroker). It does not wait for this broker's image: a broker
// still running registers again at its next heartbeat.
func (h *Handler) UnregisterBroker(ctx context.Context, req *pb.UnregisterBrokerRequest) (*pb.UnregisterBrokerResponse, error) {
	if err := h.authorizeCluster(ctx, "UnregisterBroker", authz.OpAlter); err != nil {
		code, msg := errs.Split(err)
		return &pb.UnregisterBrokerResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	resp, err := toController(ctx, h, func(ctx context.Context, c pb.ControllerClient) (*pb.UnregisterBrokerResponse, error) {
		return c.UnregisterBroker(ctx, req)
	})
	if err != nil {
		code, msg := timedOutIfUnknown(errs.Split(err))
		return &pb.UnregisterBrokerResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	return resp, nil
}
