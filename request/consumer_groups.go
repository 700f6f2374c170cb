package request

import (
	"context"
	"sort"
	"strings"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/coordinator/group"
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// The consumer rebalance protocol's requests (KIP-848): ConsumerGroupHeartbeat
// and ConsumerGroupDescribe, answered by the group coordinator
// (coordinator/group/heartbeat.go) behind Kafka's authorization:
//
//   - ConsumerGroupHeartbeat needs Read on the group, and Describe on every
//     topic it names (else TOPIC_AUTHORIZATION_FAILED for the whole
//     request); a regular expression resolves only to topics the
//     principal may describe.
//   - ConsumerGroupDescribe needs Describe on each group (else
//     GROUP_AUTHORIZATION_FAILED for it), and Describe on the topics its
//     members subscribe to or are assigned (else TOPIC_AUTHORIZATION_FAILED
//     for the group, nothing of it told).

// ConsumerGroupHeartbeat is a consumer group member's heartbeat.
func (h *Handler) ConsumerGroupHeartbeat(ctx context.Context, req *pb.ConsumerGroupHeartbeatRequest) (*pb.ConsumerGroupHeartbeatResponse, error) {
	fail := func(err error) (*pb.ConsumerGroupHeartbeatResponse, error) {
		code, msg := errs.Split(err)
		return &pb.ConsumerGroupHeartbeatResponse{ErrorCode: code, ErrorMessage: msg, MemberEpoch: -1}, nil
	}
	err := checkStrings("group id", req.GroupId, "member id", req.MemberId, "group instance id", deref(req.InstanceId),
		"rack id", deref(req.RackId), "subscribed topic regex", deref(req.SubscribedTopicRegex), "server assignor", deref(req.ServerAssignor),
		"client id", req.ClientId, "client host", req.ClientHost)
	if req.SubscribedTopicNames != nil {
		for _, t := range req.SubscribedTopicNames.Names {
			if err == nil {
				err = checkString("subscribed topic name", t)
			}
		}
	}
	if err != nil {
		return fail(err)
	}
	if h.Groups == nil {
		return fail(errs.New(pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, noGroupCoordinator))
	}
	az := h.authz(ctx, "ConsumerGroupHeartbeat")
	if !az.group(authz.OpRead, req.GroupId) {
		return fail(groupDenied(authz.OpRead, req.GroupId))
	}
	if req.SubscribedTopicNames != nil {
		var denied []string
		for _, t := range req.SubscribedTopicNames.Names {
			if !az.topic(authz.OpDescribe, t) {
				denied = append(denied, t)
			}
		}
		if len(denied) > 0 {
			sort.Strings(denied)
			return fail(errs.New(pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED, "not authorized to describe the subscribed topics %s", strings.Join(denied, ", ")))
		}
	}
	var allow group.TopicFilter
	if !az.open() {
		quiet := az.quietly()
		allow = func(topic string) bool { return quiet.topic(authz.OpDescribe, topic) }
	}
	return h.Groups.ConsumerGroupHeartbeat(ctx, req, allow)
}

// ConsumerGroupDescribe describes consumer groups.
func (h *Handler) ConsumerGroupDescribe(ctx context.Context, req *pb.ConsumerGroupDescribeRequest) (*pb.ConsumerGroupDescribeResponse, error) {
	out := &pb.ConsumerGroupDescribeResponse{Groups: make([]*pb.DescribedConsumerGroup, len(req.GroupIds))}
	az := h.authz(ctx, "ConsumerGroupDescribe")
	var ids []string
	var at []int
	for i, id := range req.GroupIds {
		d := &pb.DescribedConsumerGroup{GroupId: shortID(id), AuthorizedOperations: -2147483648}
		var err error
		switch {
		case checkString("group id", id) != nil:
			err = checkString("group id", id)
		case !az.group(authz.OpDescribe, id):
			err = groupDenied(authz.OpDescribe, id)
		case h.Groups == nil:
			err = errs.New(pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, noGroupCoordinator)
		}
		if err != nil {
			d.ErrorCode, d.ErrorMessage = errs.Split(err)
			out.Groups[i] = d
			continue
		}
		ids, at = append(ids, id), append(at, i)
	}
	if len(ids) == 0 {
		return out, nil
	}
	inner, err := h.Groups.ConsumerGroupDescribe(ctx, &pb.ConsumerGroupDescribeRequest{GroupIds: ids})
	if err != nil {
		return nil, err
	}
	quiet := az.quietly()
	for j, d := range inner.Groups {
		if j >= len(at) {
			break
		}
		if d.ErrorCode == pb.ErrorCode_NONE && !az.open() {
			if denied := deniedTopics(quiet, d); len(denied) > 0 {
				d = &pb.DescribedConsumerGroup{GroupId: d.GroupId, AuthorizedOperations: -2147483648, ErrorCode: pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED,
					ErrorMessage: "not authorized to describe topics of the group: " + strings.Join(denied, ", ")}
			}
		}
		if d.ErrorCode == pb.ErrorCode_NONE && req.IncludeAuthorizedOperations {
			d.AuthorizedOperations = groupOperations(quiet, d.GroupId)
		}
		out.Groups[at[j]] = d
	}
	return out, nil
}

// deniedTopics lists the topics a described group names that the
// principal may not describe.
func deniedTopics(az *authorizer, d *pb.DescribedConsumerGroup) []string {
	seen := map[string]bool{}
	var denied []string
	check := func(name string) {
		if name == "" || seen[name] {
			return
		}
		seen[name] = true
		if !az.topic(authz.OpDescribe, name) {
			denied = append(denied, name)
		}
	}
	for _, m := range d.Members {
		for _, t := range m.SubscribedTopicNames {
			check(t)
		}
		for _, tp := range m.Assignment {
			check(tp.TopicName)
		}
		for _, tp := range m.TargetAssignment {
			check(tp.TopicName)
		}
	}
	sort.Strings(denied)
	return denied
}

// groupOperations is the bit set of the group operations Kafka defines
// (Read, Describe, Delete, DescribeConfigs, AlterConfigs) the principal
// may do on the group.
func groupOperations(az *authorizer, id string) int32 {
	var ops int32
	for _, op := range []authz.Operation{authz.OpRead, authz.OpDescribe, authz.OpDelete, authz.OpDescribeConfigs, authz.OpAlterConfigs} {
		if az.group(op, id) {
			ops |= 1 << uint(op)
		}
	}
	return ops
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
