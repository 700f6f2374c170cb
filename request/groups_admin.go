package request

import (
	"context"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// The administrator's group requests (coordinator/group/admin.go). Unlike
// the requests of groups.go they are answered, not refused, on a node with
// no group coordinator: ListGroups with no groups, the others
// COORDINATOR_NOT_AVAILABLE.

// ListGroups lists the groups whose coordinator is this broker (an
// administrator asks every broker and merges the answers).
func (h *Handler) ListGroups(ctx context.Context, req *pb.ListGroupsRequest) (*pb.ListGroupsResponse, error) {
	if h.Groups == nil {
		return &pb.ListGroupsResponse{}, nil
	}
	// Kafka: Describe on the cluster lists every group, else only the
	// groups the principal may Describe.
	az := h.authz(ctx, "ListGroups")
	resp, err := h.Groups.ListGroups(ctx, req)
	if err != nil || resp == nil || az.open() || az.quietly().cluster(authz.OpDescribe) {
		return resp, err
	}
	kept := resp.Groups[:0:0]
	quiet := az.quietly()
	for _, g := range resp.Groups {
		if quiet.group(authz.OpDescribe, g.GroupId) {
			kept = append(kept, g)
		}
	}
	resp.Groups = kept
	return resp, nil
}

// DeleteGroups deletes groups with no members and their offsets; an id
// over the string limit is answered INVALID_REQUEST in its place.
func (h *Handler) DeleteGroups(ctx context.Context, req *pb.DeleteGroupsRequest) (*pb.DeleteGroupsResponse, error) {
	out := &pb.DeleteGroupsResponse{Groups: make([]*pb.GroupResult, len(req.GroupIds))}
	var ids []string
	var at []int
	az := h.authz(ctx, "DeleteGroups")
	for i, id := range req.GroupIds {
		if err := checkString("group id", id); err != nil {
			code, msg := errs.Split(err)
			out.Groups[i] = &pb.GroupResult{GroupId: shortID(id), ErrorCode: code, ErrorMessage: msg}
			continue
		}
		if !az.group(authz.OpDelete, id) {
			code, msg := errs.Split(groupDenied(authz.OpDelete, id))
			out.Groups[i] = &pb.GroupResult{GroupId: id, ErrorCode: code, ErrorMessage: msg}
			continue
		}
		if h.Groups == nil {
			out.Groups[i] = &pb.GroupResult{GroupId: id, ErrorCode: pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, ErrorMessage: noGroupCoordinator}
			continue
		}
		ids, at = append(ids, id), append(at, i)
	}
	if len(ids) == 0 {
		return out, nil
	}
	inner, err := h.Groups.DeleteGroups(ctx, &pb.DeleteGroupsRequest{GroupIds: ids})
	if err != nil {
		return nil, err
	}
	for j, r := range inner.Groups {
		if j < len(at) {
			out.Groups[at[j]] = r
		}
	}
	return out, nil
}

// OffsetDelete deletes committed offsets of a group: a partition that
// does not exist in this broker's metadata answers
// UNKNOWN_TOPIC_OR_PARTITION (as in Kafka), the others the coordinator.
func (h *Handler) OffsetDelete(ctx context.Context, req *pb.OffsetDeleteRequest) (*pb.OffsetDeleteResponse, error) {
	if err := checkString("group id", req.GroupId); err != nil {
		code, msg := errs.Split(err)
		return &pb.OffsetDeleteResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	// Kafka: Delete on the group, else the request's error; Read on each
	// topic, else the partition's TOPIC_AUTHORIZATION_FAILED (before the
	// existence check).
	az := h.authz(ctx, "OffsetDelete")
	if !az.group(authz.OpDelete, req.GroupId) {
		code, msg := errs.Split(groupDenied(authz.OpDelete, req.GroupId))
		return &pb.OffsetDeleteResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	if h.Groups == nil {
		return &pb.OffsetDeleteResponse{ErrorCode: pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, ErrorMessage: noGroupCoordinator}, nil
	}
	missing := missingIn(h, len(req.Partitions), func(i int) (string, int32) { return req.Partitions[i].Topic, req.Partitions[i].Partition })
	for i, p := range req.Partitions {
		if !az.topic(authz.OpRead, p.Topic) {
			if missing == nil {
				missing = make([]error, len(req.Partitions))
			}
			missing[i] = topicDenied(authz.OpRead, p.Topic)
		}
	}
	if missing == nil {
		return h.Groups.OffsetDelete(ctx, req)
	}
	var known []*pb.TopicPartition
	for i, p := range req.Partitions {
		if missing[i] == nil {
			known = append(known, p)
		}
	}
	inner := &pb.OffsetDeleteResponse{}
	if len(known) > 0 {
		var err error
		if inner, err = h.Groups.OffsetDelete(ctx, &pb.OffsetDeleteRequest{GroupId: req.GroupId, Partitions: known}); err != nil {
			return nil, err
		}
	} else {
		// Every partition is unknown: the group must still exist.
		var err error
		if inner, err = h.Groups.OffsetDelete(ctx, &pb.OffsetDeleteRequest{GroupId: req.GroupId}); err != nil {
			return nil, err
		}
	}
	out := &pb.OffsetDeleteResponse{ErrorCode: inner.ErrorCode, ErrorMessage: inner.ErrorMessage}
	if inner.ErrorCode != pb.ErrorCode_NONE {
		return out, nil
	}
	j := 0
	for i, p := range req.Partitions {
		if missing[i] != nil {
			code, msg := errs.Split(missing[i])
			out.Partitions = append(out.Partitions, &pb.PartitionError{Topic: shortID(p.Topic), Partition: p.Partition, ErrorCode: code, ErrorMessage: msg})
			continue
		}
		if j < len(inner.Partitions) {
			out.Partitions = append(out.Partitions, inner.Partitions[j])
			j++
		}
	}
	return out, nil
}

const noGroupCoordinator = "this node runs no group coordinator"
