package group

import (
	"context"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Describing consumer groups: ConsumerGroupDescribe (KIP-848's own), and
// the classic shape DescribeGroups gives Strand's own tools.

// groupTypeConsumer is the type ListGroups reports for a consumer group.
const groupTypeConsumer = "consumer"

// ConsumerGroupDescribe describes consumer groups: state, epochs, the
// assignor, and every member with its subscription, its assignment and its
// target (topics named as the image names them now). A group this
// coordinator does not have, or a classic one, answers GROUP_ID_NOT_FOUND.
// Authorized operations are the request layer's to fill in.
func (c *Coordinator) ConsumerGroupDescribe(ctx context.Context, req *pb.ConsumerGroupDescribeRequest) (*pb.ConsumerGroupDescribeResponse, error) {
	resp := &pb.ConsumerGroupDescribeResponse{}
	names := topicNamesByID(c.image())
	for _, id := range req.GroupIds {
		d := &pb.DescribedConsumerGroup{GroupId: id, AuthorizedOperations: -2147483648}
		resp.Groups = append(resp.Groups, d)
		s, err := c.lockShard(id)
		if err != nil {
			d.ErrorCode, d.ErrorMessage = errs.Split(err)
			continue
		}
		g, err := consumerGroupOf(s, id)
		if err != nil {
			s.mu.Unlock()
			d.ErrorCode, d.ErrorMessage = errs.Split(err)
			continue
		}
		cg := g.cg
		d.State, d.GroupEpoch, d.AssignmentEpoch = cg.state(), cg.epoch, cg.assignmentEpoch
		d.AssignorName = cg.preferredAssignor(nil)
		if d.AssignorName == "" {
			d.AssignorName = c.cfg.ConsumerAssignors[0]
		}
		for _, mid := range cg.sortedMemberIDs() {
			m := cg.members[mid]
			dm := &pb.DescribedConsumerMember{MemberId: m.id, MemberEpoch: m.epoch, ClientId: m.clientID, ClientHost: m.clientHost,
				SubscribedTopicNames: append([]string(nil), m.names...), MemberType: 1,
				Assignment: describedPartitions(m.assigned, names), TargetAssignment: describedPartitions(cg.target[m.id], names)}
			if m.instanceID != "" {
				dm.InstanceId = &m.instanceID
			}
			if m.rackID != "" {
				dm.RackId = &m.rackID
			}
			if m.regex != "" {
				dm.SubscribedTopicRegex = &m.regex
			}
			if m.classic != nil {
				dm.MemberType = 0
			}
			d.Members = append(d.Members, dm)
		}
		s.mu.Unlock()
	}
	return resp, nil
}

func describedPartitions(a assignment, names map[string]string) []*pb.DescribedTopicPartitions {
	out := []*pb.DescribedTopicPartitions{}
	for _, tp := range a.pb() {
		out = append(out, &pb.DescribedTopicPartitions{TopicId: tp.TopicId, TopicName: names[tp.TopicId], Partitions: tp.Partitions})
	}
	return out
}

// describeClassicShape fills a DescribeGroups description of a consumer
// group (s.mu held): protocol type "consumer", its assignor as the
// protocol, its group epoch as the generation, and each member's
// subscription and assignment in the embedded consumer protocol's
// encoding (a classic member's own subscription, as it joined).
func (c *Coordinator) describeClassicShape(d *pb.GroupDescription, g *group, im *metadata.Image) {
	cg := g.cg
	d.GroupType, d.State, d.ProtocolType, d.GenerationId = groupTypeConsumer, cg.state(), "consumer", cg.epoch
	d.Protocol = cg.preferredAssignor(nil)
	if d.Protocol == "" {
		d.Protocol = c.cfg.ConsumerAssignors[0]
	}
	for _, mid := range cg.sortedMemberIDs() {
		m := cg.members[mid]
		owned := byTopicName(m.assigned, im)
		var meta []byte
		if m.classic != nil && len(m.classic.protocols) > 0 {
			meta = m.classic.protocols[0].Metadata
		} else {
			meta = encodeClassicSubscription(3, m.names, owned, m.rackID)
		}
		d.Members = append(d.Members, &pb.GroupMember{MemberId: m.id, GroupInstanceId: m.instanceID, ClientId: m.clientID, ClientHost: m.clientHost,
			Metadata: meta, Assignment: encodeClassicAssignment(3, owned)})
	}
}
