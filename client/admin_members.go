package client

import (
	"context"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Cluster membership: the controller quorum (KIP-853) and broker
// registrations. Each call goes to any broker, which forwards it to the
// active controller.

// DescribeQuorum reports the controller quorum: the leader, its epoch,
// the high watermark, and each voter's and observer's log end offset and
// last fetch and caught-up times (what kafka-metadata-quorum describe
// shows). A refusal (NOT_CONTROLLER, REQUEST_TIMED_OUT) is returned as err.
func (a *Admin) DescribeQuorum(ctx context.Context) (*pb.QuorumStatusResponse, error) {
	var resp *pb.QuorumStatusResponse
	err := a.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewAdminClient(cc).DescribeQuorum(ctx, &pb.QuorumStatusRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, errs.FromCode(resp.ErrorCode, resp.ErrorMessage)
}

// AddVoter makes node id, whose controller (Raft) listener is at addr, a
// voter of the controller quorum. The node must be running with the
// controller role. DUPLICATE_VOTER: it already is one.
func (a *Admin) AddVoter(ctx context.Context, id int32, addr string) error {
	var resp *pb.AddVoterResponse
	err := a.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewAdminClient(cc).AddVoter(ctx, &pb.AddVoterRequest{NodeId: id, Address: addr})
		return err
	})
	if err != nil {
		return err
	}
	return errs.FromCode(resp.ErrorCode, resp.ErrorMessage)
}

// RemoveVoter takes node id out of the controller quorum. VOTER_NOT_FOUND:
// it is not a voter; INVALID_REQUEST: it is the last one.
func (a *Admin) RemoveVoter(ctx context.Context, id int32) error {
	var resp *pb.RemoveVoterResponse
	err := a.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewAdminClient(cc).RemoveVoter(ctx, &pb.RemoveVoterRequest{NodeId: id})
		return err
	})
	if err != nil {
		return err
	}
	return errs.FromCode(resp.ErrorCode, resp.ErrorMessage)
}

// UnregisterBroker removes broker id's registration (fencing it first).
// BROKER_ID_NOT_REGISTERED: no such broker. A broker still running
// registers again at its next heartbeat.
func (a *Admin) UnregisterBroker(ctx context.Context, id int32) error {
	var resp *pb.UnregisterBrokerResponse
	err := a.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewAdminClient(cc).UnregisterBroker(ctx, &pb.UnregisterBrokerRequest{BrokerId: id})
		return err
	})
	if err != nil {
		return err
	}
	return errs.FromCode(resp.ErrorCode, resp.ErrorMessage)
}
