package request

import (
	"context"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/planted"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// The group requests: the group coordinator (coordinator/group) behind
// the edge checks (edge.go). Ids and protocol strings over Kafka's string
// limit are refused INVALID_REQUEST before the coordinator sees them (the
// group id is part of every __consumer_offsets key). An offset commit,
// transactional or not, is answered per partition as in Kafka: a
// partition that does not exist in this broker's metadata
// UNKNOWN_TOPIC_OR_PARTITION, one whose metadata is longer than
// offset.metadata.max.bytes OFFSET_METADATA_TOO_LARGE; the rest are
// committed. A front door calls these only when Groups is set (a node
// with no group coordinator serves no group request).

// JoinGroup joins a member to a group, answering once the group's join
// phase completes (or the context ends: then the context's error).
func (h *Handler) JoinGroup(ctx context.Context, req *pb.JoinGroupRequest) (*pb.JoinGroupResponse, error) {
	err := checkStrings("group id", req.GroupId, "member id", req.MemberId, "group instance id", req.GroupInstanceId,
		"client id", req.ClientId, "client host", req.ClientHost, "protocol type", req.ProtocolType)
	for _, p := range req.Protocols {
		if err == nil {
			err = checkString("protocol name", p.Name)
		}
	}
	if err != nil {
		code, msg := errs.Split(err)
		return &pb.JoinGroupResponse{ErrorCode: code, ErrorMessage: msg, GenerationId: -1, MemberId: shortID(req.MemberId)}, nil
	}
	if err := h.groupRead(ctx, "JoinGroup", req.GroupId); err != nil {
		code, msg := errs.Split(err)
		return &pb.JoinGroupResponse{ErrorCode: code, ErrorMessage: msg, GenerationId: -1, MemberId: req.MemberId}, nil
	}
	return h.Groups.JoinGroup(ctx, req)
}

// SyncGroup hands each member its assignment once the leader has sent
// them (or the context ends: then the context's error).
func (h *Handler) SyncGroup(ctx context.Context, req *pb.SyncGroupRequest) (*pb.SyncGroupResponse, error) {
	err := checkStrings("group id", req.GroupId, "member id", req.MemberId, "group instance id", req.GroupInstanceId)
	for _, a := range req.Assignments {
		if err == nil {
			err = checkString("assignment's member id", a.MemberId)
		}
	}
	if err != nil {
		code, msg := errs.Split(err)
		return &pb.SyncGroupResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	if err := h.groupRead(ctx, "SyncGroup", req.GroupId); err != nil {
		code, msg := errs.Split(err)
		return &pb.SyncGroupResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	return h.Groups.SyncGroup(ctx, req)
}

// Heartbeat keeps a member's session and tells it of a rebalance.
func (h *Handler) Heartbeat(ctx context.Context, req *pb.HeartbeatRequest) (*pb.HeartbeatResponse, error) {
	if err := checkStrings("group id", req.GroupId, "member id", req.MemberId, "group instance id", req.GroupInstanceId); err != nil {
		code, msg := errs.Split(err)
		return &pb.HeartbeatResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	if err := h.groupRead(ctx, "Heartbeat", req.GroupId); err != nil {
		code, msg := errs.Split(err)
		return &pb.HeartbeatResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	return h.Groups.Heartbeat(ctx, req)
}

// LeaveGroup removes members from a group.
func (h *Handler) LeaveGroup(ctx context.Context, req *pb.LeaveGroupRequest) (*pb.LeaveGroupResponse, error) {
	if err := checkStrings("group id", req.GroupId, "member id", req.MemberId, "group instance id", req.GroupInstanceId); err != nil {
		code, msg := errs.Split(err)
		return &pb.LeaveGroupResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	if err := h.groupRead(ctx, "LeaveGroup", req.GroupId); err != nil {
		code, msg := errs.Split(err)
		return &pb.LeaveGroupResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	return h.Groups.LeaveGroup(ctx, req)
}

// OffsetFetch reads a group's committed offsets.
func (h *Handler) OffsetFetch(ctx context.Context, req *pb.OffsetFetchRequest) (*pb.OffsetFetchResponse, error) {
	if err := checkString("group id", req.GroupId); err != nil {
		code, msg := errs.Split(err)
		return &pb.OffsetFetchResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	// Kafka: Describe on the group, else the request's error; Describe on
	// each topic, else a partition named is answered
	// TOPIC_AUTHORIZATION_FAILED and, asked for all, the topic is left out.
	az := h.authz(ctx, "OffsetFetch")
	if !az.group(authz.OpDescribe, req.GroupId) {
		code, msg := errs.Split(groupDenied(authz.OpDescribe, req.GroupId))
		return &pb.OffsetFetchResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	if az.open() {
		return h.Groups.OffsetFetch(ctx, req)
	}
	if len(req.Partitions) == 0 {
		resp, err := h.Groups.OffsetFetch(ctx, req)
		if err != nil || resp == nil {
			return resp, err
		}
		kept := resp.Partitions[:0:0]
		quiet := az.quietly()
		for _, p := range resp.Partitions {
			if quiet.topic(authz.OpDescribe, p.Topic) {
				kept = append(kept, p)
			}
		}
		resp.Partitions = kept
		return resp, nil
	}
	var ok []*pb.TopicPartition
	denied := make([]bool, len(req.Partitions))
	for i, p := range req.Partitions {
		if az.topic(authz.OpDescribe, p.Topic) {
			ok = append(ok, p)
		} else {
			denied[i] = true
		}
	}
	if len(ok) == len(req.Partitions) {
		return h.Groups.OffsetFetch(ctx, req)
	}
	inner := &pb.OffsetFetchResponse{}
	if len(ok) > 0 {
		var err error
		sub := &pb.OffsetFetchRequest{GroupId: req.GroupId, Partitions: ok, RequireStable: req.RequireStable}
		if inner, err = h.Groups.OffsetFetch(ctx, sub); err != nil {
			return nil, err
		}
	}
	out := &pb.OffsetFetchResponse{ErrorCode: inner.ErrorCode, ErrorMessage: inner.ErrorMessage}
	byKey := map[tpKey]*pb.OffsetFetchPartition{}
	for _, p := range inner.Partitions {
		byKey[tpKey{p.Topic, p.Partition}] = p
	}
	for i, p := range req.Partitions {
		if denied[i] {
			code, msg := errs.Split(topicDenied(authz.OpDescribe, p.Topic))
			out.Partitions = append(out.Partitions, &pb.OffsetFetchPartition{Topic: p.Topic, Partition: p.Partition, Offset: -1, LeaderEpoch: -1,
				ErrorCode: code, ErrorMessage: msg})
			continue
		}
		if r := byKey[tpKey{p.Topic, p.Partition}]; r != nil {
			out.Partitions = append(out.Partitions, r)
		}
	}
	return out, nil
}

// AuthorizeOffsetFetch is OffsetFetch's first check alone, Describe on
// the group, for a front door that answers a request naming no partition
// without asking the coordinator: Kafka refuses such a request
// GROUP_AUTHORIZATION_FAILED all the same. nil, or that error.
func (h *Handler) AuthorizeOffsetFetch(ctx context.Context, group string) error {
	if h.authz(ctx, "OffsetFetch").group(authz.OpDescribe, group) {
		return nil
	}
	return groupDenied(authz.OpDescribe, group)
}

// tpKey names one partition (a map key).
type tpKey struct {
	Topic     string
	Partition int32
}

// groupRead is the check of the group membership requests: Read on the
// group (Kafka's JoinGroup, SyncGroup, Heartbeat, LeaveGroup).
func (h *Handler) groupRead(ctx context.Context, request, group string) error {
	if h.authz(ctx, request).group(authz.OpRead, group) {
		return nil
	}
	return groupDenied(authz.OpRead, group)
}

// DescribeGroups describes groups; an id over the string limit is
// answered INVALID_REQUEST in its place, the others by the coordinator.
func (h *Handler) DescribeGroups(ctx context.Context, req *pb.DescribeGroupsRequest) (*pb.DescribeGroupsResponse, error) {
	var ids []string
	bad := make([]*pb.GroupDescription, len(req.GroupIds))
	az := h.authz(ctx, "DescribeGroups")
	for i, id := range req.GroupIds {
		if checkString("group id", id) != nil {
			bad[i] = &pb.GroupDescription{GroupId: shortID(id), ErrorCode: pb.ErrorCode_INVALID_REQUEST, CoordinatorId: h.NodeID}
			continue
		}
		if !az.group(authz.OpDescribe, id) {
			// Kafka: the group's error, nothing else about it.
			bad[i] = &pb.GroupDescription{GroupId: id, ErrorCode: pb.ErrorCode_GROUP_AUTHORIZATION_FAILED, CoordinatorId: h.NodeID}
			continue
		}
		ids = append(ids, id)
	}
	if len(ids) == len(req.GroupIds) {
		return h.Groups.DescribeGroups(ctx, req)
	}
	inner := &pb.DescribeGroupsResponse{}
	if len(ids) > 0 {
		var err error
		if inner, err = h.Groups.DescribeGroups(ctx, &pb.DescribeGroupsRequest{GroupIds: ids}); err != nil {
			return nil, err
		}
	}
	out := &pb.DescribeGroupsResponse{}
	j := 0
	for _, b := range bad {
		if b == nil && j < len(inner.Groups) {
			b = inner.Groups[j]
			j++
		}
		if b != nil {
			out.Groups = append(out.Groups, b)
		}
	}
	return out, nil
}

// OffsetCommit commits a group's offsets, per partition (see above).
func (h *Handler) OffsetCommit(ctx context.Context, req *pb.OffsetCommitRequest) (*pb.OffsetCommitResponse, error) {
	if err := checkStrings("group id", req.GroupId, "member id", req.MemberId, "group instance id", req.GroupInstanceId); err != nil {
		return &pb.OffsetCommitResponse{Partitions: offsetErrors(req.Offsets, err)}, nil
	}
	// Kafka: Read on the group (else every partition is refused), then
	// Read on each topic (checkOffsets).
	az := h.authz(ctx, "OffsetCommit")
	if !az.group(authz.OpRead, req.GroupId) {
		return &pb.OffsetCommitResponse{Partitions: offsetErrors(req.Offsets, groupDenied(authz.OpRead, req.GroupId))}, nil
	}
	ok, bad := h.checkOffsets(az, req.Offsets)
	if bad == nil {
		return h.Groups.OffsetCommit(ctx, req)
	}
	inner := &pb.OffsetCommitResponse{}
	if len(ok) > 0 {
		sub := &pb.OffsetCommitRequest{GroupId: req.GroupId, GenerationId: req.GenerationId, MemberId: req.MemberId, GroupInstanceId: req.GroupInstanceId, Offsets: ok}
		var err error
		if inner, err = h.Groups.OffsetCommit(ctx, sub); err != nil {
			return nil, err
		}
	}
	return &pb.OffsetCommitResponse{Partitions: mergeOffsetErrors(bad, inner.Partitions)}, nil
}

// TxnOffsetCommit commits offsets inside a producer's transaction: they
// become visible when its coordinator's COMMIT marker reaches the
// __consumer_offsets partition (Coordinator.OnTxnMarker).
func (h *Handler) TxnOffsetCommit(ctx context.Context, req *pb.TxnOffsetCommitRequest) (*pb.TxnOffsetCommitResponse, error) {
	err := checkStrings("transactional id", req.TransactionalId, "group id", req.GroupId, "member id", req.MemberId, "group instance id", req.GroupInstanceId)
	if err == nil {
		err = checkInt16("producer epoch", req.ProducerEpoch)
	}
	if err != nil {
		code, msg := errs.Split(err)
		return &pb.TxnOffsetCommitResponse{ErrorCode: code, ErrorMessage: msg, Partitions: offsetErrors(req.Offsets, err)}, nil
	}
	// Kafka's handleTxnOffsetCommitRequest: Write on the transactional id,
	// then Read on the group, each refusing the whole request; then Read
	// on each topic (checkOffsets).
	az := h.authz(ctx, "TxnOffsetCommit")
	if !az.txnID(authz.OpWrite, req.TransactionalId) {
		err = txnIDDenied(authz.OpWrite, req.TransactionalId)
	} else if !planted.On(planted.AuthzSkipTxnOffsetCommitGroup) && !az.group(authz.OpRead, req.GroupId) {
		err = groupDenied(authz.OpRead, req.GroupId)
	}
	if err != nil {
		code, msg := errs.Split(err)
		return &pb.TxnOffsetCommitResponse{ErrorCode: code, ErrorMessage: msg, Partitions: offsetErrors(req.Offsets, err)}, nil
	}
	ok, bad := h.checkOffsets(az, req.Offsets)
	if bad == nil {
		return h.Groups.TxnOffsetCommit(ctx, req)
	}
	inner := &pb.TxnOffsetCommitResponse{}
	if len(ok) > 0 {
		sub := &pb.TxnOffsetCommitRequest{TransactionalId: req.TransactionalId, GroupId: req.GroupId, ProducerId: req.ProducerId, ProducerEpoch: req.ProducerEpoch,
			GenerationId: req.GenerationId, MemberId: req.MemberId, GroupInstanceId: req.GroupInstanceId, Offsets: ok, TransactionVersion: req.TransactionVersion}
		var err error
		if inner, err = h.Groups.TxnOffsetCommit(ctx, sub); err != nil {
			return nil, err
		}
	}
	return &pb.TxnOffsetCommitResponse{ErrorCode: inner.ErrorCode, ErrorMessage: inner.ErrorMessage, Partitions: mergeOffsetErrors(bad, inner.Partitions)}, nil
}

// checkOffsets splits a commit's offsets into those to commit and, by
// position, the answers of those refused (nil when none is).
func (h *Handler) checkOffsets(az *authorizer, offs []*pb.PartitionOffset) ([]*pb.PartitionOffset, []*pb.PartitionError) {
	missing := missingIn(h, len(offs), func(i int) (string, int32) { return offs[i].Topic, offs[i].Partition })
	var ok []*pb.PartitionOffset
	var bad []*pb.PartitionError
	for i, o := range offs {
		err := error(nil)
		switch {
		case !az.topic(authz.OpRead, o.Topic):
			// Before the existence check: a refused topic is not told
			// whether it exists.
			err = topicDenied(authz.OpRead, o.Topic)
		case missing != nil && missing[i] != nil:
			err = missing[i]
		case len(o.Metadata) > h.OffsetMetadataMaxBytes:
			err = errs.New(pb.ErrorCode_OFFSET_METADATA_TOO_LARGE, "the metadata of %s-%d is %d bytes, more than offset.metadata.max.bytes=%d",
				o.Topic, o.Partition, len(o.Metadata), h.OffsetMetadataMaxBytes)
		}
		if err == nil {
			ok = append(ok, o)
			continue
		}
		if bad == nil {
			bad = make([]*pb.PartitionError, len(offs))
		}
		code, msg := errs.Split(err)
		bad[i] = &pb.PartitionError{Topic: shortID(o.Topic), Partition: o.Partition, ErrorCode: code, ErrorMessage: msg}
	}
	return ok, bad
}

// mergeOffsetErrors puts the coordinator's answers (for the offsets not
// refused, in order) between the refusals.
func mergeOffsetErrors(bad []*pb.PartitionError, inner []*pb.PartitionError) []*pb.PartitionError {
	out := make([]*pb.PartitionError, 0, len(bad))
	j := 0
	for _, b := range bad {
		if b == nil {
			if j >= len(inner) {
				continue
			}
			b = inner[j]
			j++
		}
		out = append(out, b)
	}
	return out
}

func offsetErrors(offs []*pb.PartitionOffset, err error) []*pb.PartitionError {
	code, msg := errs.Split(err)
	out := make([]*pb.PartitionError, len(offs))
	for i, o := range offs {
		out[i] = &pb.PartitionError{Topic: shortID(o.Topic), Partition: o.Partition, ErrorCode: code, ErrorMessage: msg}
	}
	return out
}
