package api

import (
	"context"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// The Controller service's membership RPCs: quorum changes,
// the quorum's status, broker unregistration. Like every controller write,
// a node that is not the active controller answers the NOT_CONTROLLER
// status with the leader's id.

func (s *controllerService) AddVoter(ctx context.Context, req *pb.AddVoterRequest) (*pb.AddVoterResponse, error) {
	err := s.d.Controller.AddVoter(ctx, req)
	if rerr := s.route(err); rerr != nil {
		return nil, rerr
	}
	code, msg := errs.Split(err)
	return &pb.AddVoterResponse{ErrorCode: code, ErrorMessage: msg}, nil
}

func (s *controllerService) RemoveVoter(ctx context.Context, req *pb.RemoveVoterRequest) (*pb.RemoveVoterResponse, error) {
	err := s.d.Controller.RemoveVoter(ctx, req)
	if rerr := s.route(err); rerr != nil {
		return nil, rerr
	}
	code, msg := errs.Split(err)
	return &pb.RemoveVoterResponse{ErrorCode: code, ErrorMessage: msg}, nil
}

func (s *controllerService) UnregisterBroker(ctx context.Context, req *pb.UnregisterBrokerRequest) (*pb.UnregisterBrokerResponse, error) {
	err := s.d.Controller.UnregisterBroker(ctx, req)
	if rerr := s.route(err); rerr != nil {
		return nil, rerr
	}
	code, msg := errs.Split(err)
	return &pb.UnregisterBrokerResponse{ErrorCode: code, ErrorMessage: msg}, nil
}

func (s *controllerService) QuorumStatus(ctx context.Context, _ *pb.QuorumStatusRequest) (*pb.QuorumStatusResponse, error) {
	resp, err := s.d.Controller.QuorumStatus(ctx)
	if rerr := s.route(err); rerr != nil {
		return nil, rerr
	}
	if err != nil {
		code, msg := errs.Split(err)
		return &pb.QuorumStatusResponse{ErrorCode: code, ErrorMessage: msg, LeaderId: -1}, nil
	}
	return resp, nil
}
