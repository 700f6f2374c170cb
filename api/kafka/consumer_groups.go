package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/coordinator/group"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// The consumer rebalance protocol (KIP-848): ConsumerGroupHeartbeat (0-1;
// version 1 has the member generate its id and may subscribe by regular
// expression) and ConsumerGroupDescribe (0-1; version 1 tells a member's
// protocol). Both are listed by ApiVersions only when the group
// coordinator serves the consumer protocol
// (group.coordinator.rebalance.protocols lists "consumer"); a client that
// sends them anyway is answered UNSUPPORTED_VERSION, as Kafka does.
func init() {
	register(kmsg.ConsumerGroupHeartbeat, 0, 1, handleConsumerGroupHeartbeat)
	register(kmsg.ConsumerGroupDescribe, 0, 1, handleConsumerGroupDescribe)
}

// consumerProtocolAPIs are listed only where the consumer protocol is served.
var consumerProtocolAPIs = map[int16]bool{int16(kmsg.ConsumerGroupHeartbeat): true, int16(kmsg.ConsumerGroupDescribe): true}

// consumerProtocol reports whether this connection's node serves the
// consumer rebalance protocol.
func consumerProtocol(c *Conn) bool {
	return c.H != nil && c.H.Groups != nil && c.H.Groups.ConsumerProtocolEnabled()
}

func handleConsumerGroupHeartbeat(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.ConsumerGroupHeartbeatRequest)
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.MemberEpoch = -1
	if !consumerProtocol(c) {
		resp.ErrorCode = code(pb.ErrorCode_UNSUPPORTED_VERSION)
		resp.ErrorMessage = errMsg("this broker does not serve the consumer group protocol (group.coordinator.rebalance.protocols does not list consumer)")
		return resp, nil
	}
	preq := &pb.ConsumerGroupHeartbeatRequest{GroupId: req.Group, MemberId: req.MemberID, MemberEpoch: req.MemberEpoch, InstanceId: req.InstanceID,
		RackId: req.RackID, RebalanceTimeoutMs: req.RebalanceTimeoutMillis, SubscribedTopicRegex: req.SubscribedTopicRegex,
		ServerAssignor: req.ServerAssignor, ClientId: c.ClientID, ClientHost: clientHost(c), Version: int32(req.Version)}
	if req.SubscribedTopicNames != nil {
		preq.SubscribedTopicNames = &pb.TopicNames{Names: req.SubscribedTopicNames}
	}
	if req.Topics != nil {
		preq.TopicPartitions = &pb.OwnedPartitions{}
		for _, t := range req.Topics {
			preq.TopicPartitions.Topics = append(preq.TopicPartitions.Topics, &pb.TopicPartitions{TopicId: topicIDString(t.TopicID), Partitions: t.Partitions})
		}
	}
	presp, err := c.H.ConsumerGroupHeartbeat(ctx, preq)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = splitCode(err)
		return resp, nil
	}
	resp.ErrorCode, resp.ErrorMessage = code(presp.ErrorCode), errMsg(presp.ErrorMessage)
	resp.MemberEpoch, resp.HeartbeatIntervalMillis = presp.MemberEpoch, presp.HeartbeatIntervalMs
	if presp.MemberId != "" {
		id := presp.MemberId
		resp.MemberID = &id
	}
	if a := presp.Assignment; a != nil && presp.ErrorCode == pb.ErrorCode_NONE {
		ra := &kmsg.ConsumerGroupHeartbeatResponseAssignment{}
		for _, tp := range a.Topics {
			t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			t.TopicID, t.Partitions = topicID(tp.TopicId), tp.Partitions
			ra.Topics = append(ra.Topics, t)
		}
		if ra.Topics == nil {
			ra.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
		}
		resp.Assignment = ra
	}
	return resp, nil
}

func handleConsumerGroupDescribe(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.ConsumerGroupDescribeRequest)
	resp := kmsg.NewPtrConsumerGroupDescribeResponse()
	fill := func(ec int16, msg *string) {
		for _, id := range req.Groups {
			g := kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group, g.ErrorCode, g.ErrorMessage = id, ec, msg
			resp.Groups = append(resp.Groups, g)
		}
	}
	if !consumerProtocol(c) {
		fill(code(pb.ErrorCode_UNSUPPORTED_VERSION), errMsg("this broker does not serve the consumer group protocol"))
		return resp, nil
	}
	presp, err := c.H.ConsumerGroupDescribe(ctx, &pb.ConsumerGroupDescribeRequest{GroupIds: req.Groups, IncludeAuthorizedOperations: req.IncludeAuthorizedOperations})
	if err != nil {
		ec, msg := splitCode(err)
		fill(ec, msg)
		return resp, nil
	}
	for i, id := range req.Groups {
		g := kmsg.NewConsumerGroupDescribeResponseGroup()
		g.Group = id
		if i >= len(presp.Groups) || presp.Groups[i] == nil {
			g.ErrorCode = code(pb.ErrorCode_UNKNOWN_SERVER_ERROR)
			resp.Groups = append(resp.Groups, g)
			continue
		}
		d := presp.Groups[i]
		g.ErrorCode, g.ErrorMessage = code(d.ErrorCode), errMsg(d.ErrorMessage)
		g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName, g.AuthorizedOperations = d.State, d.GroupEpoch, d.AssignmentEpoch, d.AssignorName, d.AuthorizedOperations
		for _, m := range d.Members {
			gm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			gm.MemberID, gm.InstanceID, gm.RackID, gm.MemberEpoch = m.MemberId, m.InstanceId, m.RackId, m.MemberEpoch
			gm.ClientID, gm.ClientHost, gm.SubscribedTopics, gm.SubscribedTopicRegex = m.ClientId, m.ClientHost, m.SubscribedTopicNames, m.SubscribedTopicRegex
			if gm.SubscribedTopics == nil {
				gm.SubscribedTopics = []string{}
			}
			gm.Assignment, gm.TargetAssignment = describedAssignment(m.Assignment), describedAssignment(m.TargetAssignment)
			gm.MemberType = int8(m.MemberType)
			g.Members = append(g.Members, gm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

func describedAssignment(tps []*pb.DescribedTopicPartitions) kmsg.Assignment {
	a := kmsg.Assignment{TopicPartitions: []kmsg.AssignmentTopicPartition{}}
	for _, tp := range tps {
		a.TopicPartitions = append(a.TopicPartitions, kmsg.AssignmentTopicPartition{TopicID: topicID(tp.TopicId), Topic: tp.TopicName, Partitions: tp.Partitions})
	}
	return a
}

// servedTo is what ApiVersions lists to a connection: every API served,
// less the consumer protocol's where its node does not serve it.
func servedTo(c *Conn) []kmsg.ApiVersionsResponseApiKey {
	return ServedWith(consumerProtocol(c))
}

// ServedWith lists the APIs served by a node that serves the consumer
// rebalance protocol (consumer) or does not.
func ServedWith(consumer bool) []kmsg.ApiVersionsResponseApiKey {
	var out []kmsg.ApiVersionsResponseApiKey
	for _, k := range servedAll() {
		if consumer || !consumerProtocolAPIs[k.ApiKey] {
			out = append(out, k)
		}
	}
	return out
}

// Served lists the APIs a node with the default configuration serves, by
// key (what ApiVersions answers it).
func Served() []kmsg.ApiVersionsResponseApiKey { return ServedWith(group.DefaultConsumerProtocol) }
