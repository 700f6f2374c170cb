package group

import (
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Offset commits and fetches against a consumer group, checked against
// member epochs as Kafka's ConsumerGroup.validateOffsetCommit and
// validateOffsetFetch do: OffsetCommit (v9+ carries the member epoch in
// its generation id) and TxnOffsetCommit name a member and its epoch; a
// commit with no member and a negative epoch (an administrator, or a
// consumer outside the group protocol) is accepted only while the group
// has no members.

// partitionCheck validates one partition of a commit (nil: committed).
type partitionCheck func(topic string, partition int32) error

// checkConsumerCommit validates a commit's member and epoch: a request
// error, or for some commits a check per partition. txn marks a
// TxnOffsetCommit (an epoch that is not the member's is then
// ILLEGAL_GENERATION, as Kafka answers transactional producers);
// beforeEpochs an OffsetCommit below version 9, which a member of the
// consumer protocol may not use.
//
// A member of the consumer protocol may commit at an older epoch than its
// own (KIP-1251, assignment epochs): each partition is then committed if
// the member still has it (assigned, or being revoked) and got it at or
// before that epoch, else answered STALE_MEMBER_EPOCH. A commit sent just
// before a heartbeat moved the member on (it gained partitions) is thus
// not refused for the partitions it had all along.
func checkConsumerCommit(g *group, memberID string, epoch int32, txn, beforeEpochs bool, topicID func(string) string) (partitionCheck, error) {
	cg := g.cg
	if epoch < 0 && len(cg.members) == 0 {
		return nil, nil
	}
	m := cg.members[memberID]
	if m == nil {
		return nil, unknownMember(memberID, g.id)
	}
	if !txn && m.classic == nil && beforeEpochs {
		return nil, errs.New(pb.ErrorCode_UNSUPPORTED_VERSION, "OffsetCommit version 9 or above must be used by members using the modern group protocol")
	}
	switch {
	case epoch == m.epoch:
		return nil, nil
	case txn || m.classic != nil:
		return nil, errs.New(pb.ErrorCode_ILLEGAL_GENERATION, "The received generation id %d does not match the expected member epoch %d.", epoch, m.epoch)
	case epoch > m.epoch:
		return nil, errs.New(pb.ErrorCode_STALE_MEMBER_EPOCH, "The received member epoch %d is larger than the expected member epoch %d.", epoch, m.epoch)
	}
	return func(topic string, p int32) error {
		id := topicID(topic)
		switch {
		case id == "" || !m.owns(id, p):
			return errs.New(pb.ErrorCode_STALE_MEMBER_EPOCH, "Partition %s-%d is not assigned to member %s (member epoch %d, received %d).", topic, p, m.id, m.epoch, epoch)
		case epoch < m.assignedAt(id, p):
			return errs.New(pb.ErrorCode_STALE_MEMBER_EPOCH, "The received member epoch %d is older than the epoch %d partition %s-%d was assigned at.", epoch, m.assignedAt(id, p), topic, p)
		}
		return nil
	}, nil
}

// checkConsumerFetch validates the member an OffsetFetch (v9+) names; a
// fetch naming none is not checked.
func checkConsumerFetch(g *group, memberID string, epoch int32) error {
	if g == nil || g.cg == nil || memberID == "" {
		return nil
	}
	m := g.cg.members[memberID]
	if m == nil {
		return unknownMember(memberID, g.id)
	}
	if epoch == m.epoch {
		return nil
	}
	if m.classic != nil {
		return errs.New(pb.ErrorCode_ILLEGAL_GENERATION, "The received generation id %d does not match the expected member epoch %d.", epoch, m.epoch)
	}
	return errs.New(pb.ErrorCode_STALE_MEMBER_EPOCH, "The received member epoch %d does not match the expected member epoch %d.", epoch, m.epoch)
}
