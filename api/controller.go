package api

import (
	"context"
	"strconv"

	"github.com/strand-io/strand/controller/channel"
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// controllerService serves the quorum's internal RPCs on controller nodes.
// Writes on a node that is not the active controller fail with the
// NOT_CONTROLLER status carrying the leader's id.
type controllerService struct {
	pb.UnimplementedControllerServer
	d *Deps
}

func (s *controllerService) route(err error) error {
	if errs.CodeOf(err) == pb.ErrorCode_NOT_CONTROLLER {
		return channel.NotControllerStatus(s.d.Controller.LeaderID())
	}
	return nil
}

func (s *controllerService) RegisterBroker(ctx context.Context, req *pb.RegisterBrokerRequest) (*pb.RegisterBrokerResponse, error) {
	epoch, err := s.d.Controller.RegisterBroker(ctx, req)
	if rerr := s.route(err); rerr != nil {
		return nil, rerr
	}
	code, msg := errs.Split(err)
	return &pb.RegisterBrokerResponse{ErrorCode: code, ErrorMessage: msg, BrokerEpoch: epoch}, nil
}

func (s *controllerService) BrokerHeartbeat(ctx context.Context, req *pb.BrokerHeartbeatRequest) (*pb.BrokerHeartbeatResponse, error) {
	res, err := s.d.Controller.BrokerHeartbeat(ctx, req)
	if rerr := s.route(err); rerr != nil {
		return nil, rerr
	}
	code, msg := errs.Split(err)
	return &pb.BrokerHeartbeatResponse{ErrorCode: code, ErrorMessage: msg, IsFenced: res.Fenced, IsCaughtUp: res.CaughtUp}, nil
}

func (s *controllerService) AlterPartition(ctx context.Context, req *pb.AlterPartitionRequest) (*pb.AlterPartitionResponse, error) {
	res, err := s.d.Controller.AlterPartition(ctx, req)
	if rerr := s.route(err); rerr != nil {
		return nil, rerr
	}
	code, msg := errs.Split(err)
	return &pb.AlterPartitionResponse{ErrorCode: code, ErrorMessage: msg, Partitions: res}, nil
}

func (s *controllerService) AllocateProducerIds(ctx context.Context, req *pb.AllocateProducerIdsRequest) (*pb.AllocateProducerIdsResponse, error) {
	start, n, err := s.d.Controller.AllocateProducerIds(ctx, req)
	if rerr := s.route(err); rerr != nil {
		return nil, rerr
	}
	code, msg := errs.Split(err)
	return &pb.AllocateProducerIdsResponse{ErrorCode: code, ErrorMessage: msg, ProducerIdStart: start, ProducerIdLen: n}, nil
}

func (s *controllerService) CreateTopics(ctx context.Context, req *pb.CreateTopicsRequest) (*pb.CreateTopicsResponse, error) {
	res, err := s.d.Controller.CreateTopics(ctx, req)
	if rerr := s.route(err); rerr != nil {
		return nil, rerr
	}
	if err != nil {
		return nil, err
	}
	return &pb.CreateTopicsResponse{Topics: res}, nil
}

func (s *controllerService) DeleteTopics(ctx context.Context, req *pb.DeleteTopicsRequest) (*pb.DeleteTopicsResponse, error) {
	res, err := s.d.Controller.DeleteTopics(ctx, req)
	if rerr := s.route(err); rerr != nil {
		return nil, rerr
	}
	if err != nil {
		return nil, err
	}
	return &pb.DeleteTopicsResponse{Topics: res}, nil
}

func (s *controllerService) CreatePartitions(ctx context.Context, req *pb.CreatePartitionsRequest) (*pb.CreatePartitionsResponse, error) {
	res, err := s.d.Controller.CreatePartitions(ctx, req)
	if rerr := s.route(err); rerr != nil {
		return nil, rerr
	}
	if err != nil {
		return nil, err
	}
	return &pb.CreatePartitionsResponse{Topics: res}, nil
}

func (s *controllerService) IncrementalAlterConfigs(ctx context.Context, req *pb.IncrementalAlterConfigsRequest) (*pb.IncrementalAlterConfigsResponse, error) {
	err := s.d.Controller.IncrementalAlterConfigs(ctx, req)
	if rerr := s.route(err); rerr != nil {
		return nil, rerr
	}
	code, msg := errs.Split(err)
	return &pb.IncrementalAlterConfigsResponse{ErrorCode: code, ErrorMessage: msg}, nil
}

// ElectLeaders as forwarded by a broker.
func (s *controllerService) ElectLeaders(ctx context.Context, req *pb.ElectLeadersRequest) (*pb.ElectLeadersResponse, error) {
	res, err := s.d.Controller.ElectLeaders(ctx, req)
	if rerr := s.route(err); rerr != nil {
		return nil, rerr
	}
	if err != nil {
		return nil, err
	}
	return &pb.ElectLeadersResponse{Results: res}, nil
}

// DescribeQuorum answers from this voter's Raft state.
func (s *controllerService) DescribeQuorum(ctx context.Context, _ *pb.DescribeQuorumRequest) (*pb.DescribeQuorumResponse, error) {
	q := s.d.Controller.Q
	leader := q.LeaderID()
	st := q.Stats()
	commit, _ := strconv.ParseInt(st["commit_index"], 10, 64)
	applied, _ := strconv.ParseInt(st["applied_index"], 10, 64)
	term, _ := strconv.ParseUint(st["term"], 10, 64)
	resp := &pb.DescribeQuorumResponse{LeaderId: leader, CommitIndex: commit, LastApplied: applied, Term: term}
	for _, v := range q.Voters() {
		ci := &pb.ControllerInfo{NodeId: v.ID, RaftAddress: v.Addr, Active: v.ID == leader, Voter: true, LastAppliedOffset: -1}
		if v.ID == s.d.NodeID {
			ci.LastAppliedOffset = q.FSM.Image().Offset
		}
		resp.Voters = append(resp.Voters, ci)
	}
	return resp, nil
}

// FetchMetadata streams committed batches after from_offset-1.
func (s *controllerService) FetchMetadata(req *pb.FetchMetadataRequest, stream pb.Controller_FetchMetadataServer) error {
	offset := req.FromOffset - 1
	for {
		batches, err := s.d.Controller.Q.FSM.Since(stream.Context(), offset)
		if err != nil {
			return nil
		}
		for _, b := range batches {
			if err := stream.Send(b); err != nil {
				return err
			}
			offset = b.Offset
		}
	}
}

// --- reassign ---

func (s *controllerService) AlterPartitionReassignments(ctx context.Context, req *pb.AlterPartitionReassignmentsRequest) (*pb.AlterPartitionReassignmentsResponse, error) {
	res, err := s.d.Controller.AlterPartitionReassignments(ctx, req)
	if rerr := s.route(err); rerr != nil {
		return nil, rerr
	}
	if err != nil {
		return nil, err
	}
	return &pb.AlterPartitionReassignmentsResponse{Responses: res}, nil
}

func (s *controllerService) ListPartitionReassignments(ctx context.Context, req *pb.ListPartitionReassignmentsRequest) (*pb.ListPartitionReassignmentsResponse, error) {
	resp, err := s.d.Controller.ListPartitionReassignments(req)
	if rerr := s.route(err); rerr != nil {
		return nil, rerr
	}
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// CreateAcls and DeleteAcls as forwarded by a broker.
func (s *controllerService) CreateAcls(ctx context.Context, req *pb.CreateAclsRequest) (*pb.CreateAclsResponse, error) {
	resp, err := s.d.Controller.CreateAcls(ctx, req)
	if rerr := s.route(err); rerr != nil {
		return nil, rerr
	}
	return resp, err
}

func (s *controllerService) DeleteAcls(ctx context.Context, req *pb.DeleteAclsRequest) (*pb.DeleteAclsResponse, error) {
	resp, err := s.d.Controller.DeleteAcls(ctx, req)
	if rerr := s.route(err); rerr != nil {
		return nil, rerr
	}
	return resp, err
}

// AlterUserScramCredentials as forwarded by a broker.
func (s *controllerService) AlterUserScramCredentials(ctx context.Context, req *pb.AlterUserScramCredentialsRequest) (*pb.AlterUserScramCredentialsResponse, error) {
	res, err := s.d.Controller.AlterUserScramCredentials(ctx, req)
	if rerr := s.route(err); rerr != nil {
		return nil, rerr
	}
	if err != nil {
		return nil, err
	}
	return &pb.AlterUserScramCredentialsResponse{Results: res}, nil
}

// AlterClientQuotas as forwarded by a broker.
func (s *controllerService) AlterClientQuotas(ctx context.Context, req *pb.AlterClientQuotasRequest) (*pb.AlterClientQuotasResponse, error) {
	res, err := s.d.Controller.AlterClientQuotas(ctx, req)
	if rerr := s.route(err); rerr != nil {
		return nil, rerr
	}
	if err != nil {
		return nil, err
	}
	return &pb.AlterClientQuotasResponse{Entries: res}, nil
}

// UpdateFeatures as forwarded by a broker.
func (s *controllerService) UpdateFeatures(ctx context.Context, req *pb.UpdateFeaturesRequest) (*pb.UpdateFeaturesResponse, error) {
	res, err := s.d.Controller.UpdateFeatures(ctx, req)
	if rerr := s.route(err); rerr != nil {
		return nil, rerr
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}
