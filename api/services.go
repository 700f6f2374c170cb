package api

import (
	"time"

	"context"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/request"
)

// The gRPC services of the client-facing requests: each method is
// request.Handler's, its error mapped to a gRPC status (toStatus). Which
// listener serves which of them, and what a client listener refuses, is
// listeners.go's.

type metadataService struct {
	pb.UnimplementedMetadataServer
	h *request.Handler
}

func (s *metadataService) Metadata(ctx context.Context, req *pb.MetadataRequest) (*pb.MetadataResponse, error) {
	return answer(s.h.Metadata(ctx, req))
}

func (s *metadataService) DescribeFeatures(ctx context.Context, req *pb.DescribeFeaturesRequest) (*pb.DescribeFeaturesResponse, error) {
	return answer(s.h.DescribeFeatures(ctx, req))
}

func (s *metadataService) FindCoordinator(ctx context.Context, req *pb.FindCoordinatorRequest) (*pb.FindCoordinatorResponse, error) {
	return answer(s.h.FindCoordinator(ctx, req))
}

type adminService struct {
	pb.UnimplementedAdminServer
	h    *request.Handler
	sasl *SASLTokens
}

func (s *adminService) CreateTopics(ctx context.Context, req *pb.CreateTopicsRequest) (*pb.CreateTopicsResponse, error) {
	return answer(s.h.CreateTopics(ctx, req))
}

func (s *adminService) DeleteTopics(ctx context.Context, req *pb.DeleteTopicsRequest) (*pb.DeleteTopicsResponse, error) {
	return answer(s.h.DeleteTopics(ctx, req))
}

func (s *adminService) IncrementalAlterConfigs(ctx context.Context, req *pb.IncrementalAlterConfigsRequest) (*pb.IncrementalAlterConfigsResponse, error) {
	return answer(s.h.IncrementalAlterConfigs(ctx, req))
}

func (s *adminService) DescribeCluster(ctx context.Context, req *pb.DescribeClusterRequest) (*pb.DescribeClusterResponse, error) {
	return answer(s.h.DescribeCluster(ctx, req))
}

func (s *adminService) DescribeConfigs(ctx context.Context, req *pb.DescribeConfigsRequest) (*pb.DescribeConfigsResponse, error) {
	return answer(s.h.DescribeConfigs(ctx, req))
}

type consumerService struct {
	pb.UnimplementedConsumerServer
	h *request.Handler
	d *Deps // nil on the inter-broker listener: follower fetches are not client-quota'd
}

func (s *consumerService) Fetch(ctx context.Context, req *pb.FetchRequest) (*pb.FetchResponse, error) {
	start := time.Now()
	resp, err := s.h.Fetch(ctx, req)
	if t := s.d.fetchThrottle(ctx, req, resp, time.Since(start)); t > 0 { // quotas.go
		resp.ThrottleTimeMs = int32(min(t.Milliseconds(), 1<<31-1))
		s.d.pause(ctx, t)
	}
	return answer(resp, err)
}

func (s *consumerService) ListOffsets(ctx context.Context, req *pb.ListOffsetsRequest) (*pb.ListOffsetsResponse, error) {
	return answer(s.h.ListOffsets(ctx, req))
}

func (s *consumerService) OffsetForLeaderEpoch(ctx context.Context, req *pb.OffsetForLeaderEpochRequest) (*pb.OffsetForLeaderEpochResponse, error) {
	return answer(s.h.OffsetForLeaderEpoch(ctx, req))
}

type transactionsService struct {
	pb.UnimplementedTransactionsServer
	h *request.Handler
}

func (s *transactionsService) InitProducerId(ctx context.Context, req *pb.InitProducerIdRequest) (*pb.InitProducerIdResponse, error) {
	return answer(s.h.InitProducerId(ctx, req))
}

func (s *transactionsService) EndTxn(ctx context.Context, req *pb.EndTxnRequest) (*pb.EndTxnResponse, error) {
	return answer(s.h.EndTxn(ctx, req))
}

func (s *transactionsService) AddPartitionsToTxn(ctx context.Context, req *pb.AddPartitionsToTxnRequest) (*pb.AddPartitionsToTxnResponse, error) {
	return answer(s.h.AddPartitionsToTxn(ctx, req))
}

func (s *transactionsService) WriteTxnMarkers(ctx context.Context, req *pb.WriteTxnMarkersRequest) (*pb.WriteTxnMarkersResponse, error) {
	return answer(s.h.WriteTxnMarkers(ctx, req))
}

func (s *transactionsService) AbortTransaction(ctx context.Context, req *pb.AbortTransactionRequest) (*pb.AbortTransactionResponse, error) {
	return answer(s.h.AbortTransaction(ctx, req))
}

func (s *transactionsService) DescribeTransactions(ctx context.Context, req *pb.DescribeTransactionsRequest) (*pb.DescribeTransactionsResponse, error) {
	return answer(s.h.DescribeTransactions(ctx, req))
}

func (s *transactionsService) ListTransactions(ctx context.Context, req *pb.ListTransactionsRequest) (*pb.ListTransactionsResponse, error) {
	return answer(s.h.ListTransactions(ctx, req))
}

func (s *transactionsService) DescribeProducers(ctx context.Context, req *pb.DescribeProducersRequest) (*pb.DescribeProducersResponse, error) {
	return answer(s.h.DescribeProducers(ctx, req))
}

type groupsService struct {
	pb.UnimplementedGroupsServer
	h *request.Handler
}

func (s *groupsService) JoinGroup(ctx context.Context, req *pb.JoinGroupRequest) (*pb.JoinGroupResponse, error) {
	req.ClientHost = peerHost(ctx)
	return answer(s.h.JoinGroup(ctx, req))
}

func (s *groupsService) SyncGroup(ctx context.Context, req *pb.SyncGroupRequest) (*pb.SyncGroupResponse, error) {
	return answer(s.h.SyncGroup(ctx, req))
}

func (s *groupsService) Heartbeat(ctx context.Context, req *pb.HeartbeatRequest) (*pb.HeartbeatResponse, error) {
	return answer(s.h.Heartbeat(ctx, req))
}

func (s *groupsService) LeaveGroup(ctx context.Context, req *pb.LeaveGroupRequest) (*pb.LeaveGroupResponse, error) {
	return answer(s.h.LeaveGroup(ctx, req))
}

func (s *groupsService) OffsetCommit(ctx context.Context, req *pb.OffsetCommitRequest) (*pb.OffsetCommitResponse, error) {
	return answer(s.h.OffsetCommit(ctx, req))
}

func (s *groupsService) OffsetFetch(ctx context.Context, req *pb.OffsetFetchRequest) (*pb.OffsetFetchResponse, error) {
	return answer(s.h.OffsetFetch(ctx, req))
}

func (s *groupsService) TxnOffsetCommit(ctx context.Context, req *pb.TxnOffsetCommitRequest) (*pb.TxnOffsetCommitResponse, error) {
	return answer(s.h.TxnOffsetCommit(ctx, req))
}

func (s *groupsService) DescribeGroups(ctx context.Context, req *pb.DescribeGroupsRequest) (*pb.DescribeGroupsResponse, error) {
	return answer(s.h.DescribeGroups(ctx, req))
}

func (s *groupsService) ListGroups(ctx context.Context, req *pb.ListGroupsRequest) (*pb.ListGroupsResponse, error) {
	return answer(s.h.ListGroups(ctx, req))
}

func (s *groupsService) DeleteGroups(ctx context.Context, req *pb.DeleteGroupsRequest) (*pb.DeleteGroupsResponse, error) {
	return answer(s.h.DeleteGroups(ctx, req))
}

func (s *groupsService) OffsetDelete(ctx context.Context, req *pb.OffsetDeleteRequest) (*pb.OffsetDeleteResponse, error) {
	return answer(s.h.OffsetDelete(ctx, req))
}

func (s *adminService) CreatePartitions(ctx context.Context, req *pb.CreatePartitionsRequest) (*pb.CreatePartitionsResponse, error) {
	return answer(s.h.CreatePartitions(ctx, req))
}

// --- reassign ---

func (s *adminService) AlterPartitionReassignments(ctx context.Context, req *pb.AlterPartitionReassignmentsRequest) (*pb.AlterPartitionReassignmentsResponse, error) {
	return answer(s.h.AlterPartitionReassignments(ctx, req))
}

func (s *adminService) ListPartitionReassignments(ctx context.Context, req *pb.ListPartitionReassignmentsRequest) (*pb.ListPartitionReassignmentsResponse, error) {
	return answer(s.h.ListPartitionReassignments(ctx, req))
}

// --- members ---

func (s *adminService) AddVoter(ctx context.Context, req *pb.AddVoterRequest) (*pb.AddVoterResponse, error) {
	return answer(s.h.AddVoter(ctx, req))
}

func (s *adminService) RemoveVoter(ctx context.Context, req *pb.RemoveVoterRequest) (*pb.RemoveVoterResponse, error) {
	return answer(s.h.RemoveVoter(ctx, req))
}

func (s *adminService) DescribeQuorum(ctx context.Context, req *pb.QuorumStatusRequest) (*pb.QuorumStatusResponse, error) {
	return answer(s.h.DescribeQuorum(ctx, req))
}

func (s *adminService) UnregisterBroker(ctx context.Context, req *pb.UnregisterBrokerRequest) (*pb.UnregisterBrokerResponse, error) {
	return answer(s.h.UnregisterBroker(ctx, req))
}

// --- leaders ---

func (s *adminService) ElectLeaders(ctx context.Context, req *pb.ElectLeadersRequest) (*pb.ElectLeadersResponse, error) {
	return answer(s.h.ElectLeaders(ctx, req))
}

func (s *adminService) DeleteRecords(ctx context.Context, req *pb.DeleteRecordsRequest) (*pb.DeleteRecordsResponse, error) {
	return answer(s.h.DeleteRecords(ctx, req))
}

// --- acls ---

func (s *adminService) CreateAcls(ctx context.Context, req *pb.CreateAclsRequest) (*pb.CreateAclsResponse, error) {
	return answer(s.h.CreateAcls(ctx, req))
}

func (s *adminService) DeleteAcls(ctx context.Context, req *pb.DeleteAclsRequest) (*pb.DeleteAclsResponse, error) {
	return answer(s.h.DeleteAcls(ctx, req))
}

func (s *adminService) DescribeAcls(ctx context.Context, req *pb.DescribeAclsRequest) (*pb.DescribeAclsResponse, error) {
	return answer(s.h.DescribeAcls(ctx, req))
}

// SASL: users' SCRAM credentials and the SCRAM exchange (sasl.go).

func (s *adminService) AlterUserScramCredentials(ctx context.Context, req *pb.AlterUserScramCredentialsRequest) (*pb.AlterUserScramCredentialsResponse, error) {
	return answer(s.h.AlterUserScramCredentials(ctx, req))
}

func (s *adminService) DescribeUserScramCredentials(ctx context.Context, req *pb.DescribeUserScramCredentialsRequest) (*pb.DescribeUserScramCredentialsResponse, error) {
	return answer(s.h.DescribeUserScramCredentials(ctx, req))
}

func (s *adminService) SaslAuthenticate(st pb.Admin_SaslAuthenticateServer) error {
	return s.saslAuthenticate(st)
}

// AlterClientQuotas and DescribeClientQuotas.
func (s *adminService) AlterClientQuotas(ctx context.Context, req *pb.AlterClientQuotasRequest) (*pb.AlterClientQuotasResponse, error) {
	return answer(s.h.AlterClientQuotas(ctx, req))
}

func (s *adminService) DescribeClientQuotas(ctx context.Context, req *pb.DescribeClientQuotasRequest) (*pb.DescribeClientQuotasResponse, error) {
	return answer(s.h.DescribeClientQuotas(ctx, req))
}

func (s *adminService) DescribeLogDirs(ctx context.Context, req *pb.DescribeLogDirsRequest) (*pb.DescribeLogDirsResponse, error) {
	return answer(s.h.DescribeLogDirs(ctx, req))
}

func (s *adminService) UpdateFeatures(ctx context.Context, req *pb.UpdateFeaturesRequest) (*pb.UpdateFeaturesResponse, error) {
	return answer(s.h.UpdateFeatures(ctx, req))
}
