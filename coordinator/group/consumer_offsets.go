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

// checkConsumerCommit validates a commit's member and epoch. txn marks a
// TxnOffsetCommit (an epoch mismatch is then ILLEGAL_GENERATION, as Kafka
// answers transactional producers); beforeEpochs an OffsetCommit below
// version 9, which a member of the consumer protocol may not use.
func checkConsumerCommit(g *group, memberID string, epoch int32, txn, beforeEpochs bool) error {
	cg := g.cg
	if epoch < 0 && len(cg.members) == 0 {
		return nil
	}
	m := cg.members[memberID]
	if m == nil {
		return unknownMember(memberID, g.id)
	}
	if !txn && m.classic == nil && beforeEpochs {
		return errs.New(pb.ErrorCode_UNSUPPORTED_VERSION, "OffsetCommit version 9 or above must be used by members using the modern group protocol")
	}
	if epoch == m.epoch {
		return nil
	}
	if txn || m.classic != nil {
		return errs.New(pb.ErrorCode_ILLEGAL_GENERATION, "The received generation id %d does not match the expected member epoch %d.", epoch, m.epoch)
	}
	return errs.New(pb.ErrorCode_STALE_MEMBER_EPOCH, "The received member epoch %d does not match the expected member epoch %d.", epoch, m.epoch)
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
