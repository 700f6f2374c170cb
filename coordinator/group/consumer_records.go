package group

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// The records of a consumer group (key types 3 to 8 and 16, keys.go) and
// their replay. A change of a consumer group is a list of these records:
// written to the group's partition, then replayed into memory by
// applyConsumerRecord, the same function a coordinator taking over the
// partition replays the log with, so what it rebuilds is what the last
// coordinator had.

// badValue is the panic of a value that does not encode: its strings are
// not all UTF-8. Requests are checked before (checkUTF8); change recovers
// it as INVALID_REQUEST should one slip through.
type badValue struct{ err error }

func marshalValue(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(badValue{fmt.Errorf("encode %T: %w", m, err)})
	}
	if b == nil {
		b = []byte{} // an empty value is not a tombstone
	}
	return b
}

func recGroupEpoch(group string, epoch int32) record.Record {
	return record.Record{Key: cgKey(keyCGEpoch, group), Value: marshalValue(&pb.ConsumerGroupMetadataValue{Epoch: epoch})}
}

func recSubscription(group string, sub map[string]topicMeta) record.Record {
	v := &pb.ConsumerGroupPartitionMetadataValue{}
	for _, name := range sortedKeys(sub) {
		t := sub[name]
		v.Topics = append(v.Topics, &pb.ConsumerGroupTopicMetadata{TopicId: t.id, TopicName: t.name, NumPartitions: t.partitions})
	}
	return record.Record{Key: cgKey(keyCGSubscription, group), Value: marshalValue(v)}
}

func recMember(group string, m *cmember) record.Record {
	v := &pb.ConsumerGroupMemberMetadataValue{InstanceId: m.instanceID, RackId: m.rackID, ClientId: m.clientID, ClientHost: m.clientHost,
		SubscribedTopicNames: m.names, SubscribedTopicRegex: m.regex, RebalanceTimeoutMs: m.rebalanceTimeoutMs, ServerAssignor: m.assignor}
	if m.classic != nil {
		cm := &pb.ClassicMemberMetadata{SessionTimeoutMs: m.classic.sessionTimeoutMs}
		for _, p := range m.classic.protocols {
			cm.SupportedProtocols = append(cm.SupportedProtocols, &pb.ClassicProtocol{Name: p.Name, Metadata: p.Metadata})
		}
		v.ClassicMemberMetadata = cm
	}
	return record.Record{Key: cgMemberKey(keyCGMember, group, m.id), Value: marshalValue(v)}
}

func recTargetEpoch(group string, epoch int32) record.Record {
	return record.Record{Key: cgKey(keyCGTargetEpoch, group), Value: marshalValue(&pb.ConsumerGroupTargetAssignmentMetadataValue{AssignmentEpoch: epoch})}
}

func recTarget(group, member string, a assignment) record.Record {
	return record.Record{Key: cgMemberKey(keyCGTargetMember, group, member),
		Value: marshalValue(&pb.ConsumerGroupTargetAssignmentMemberValue{TopicPartitions: a.pb()})}
}

func recCurrent(group string, m *cmember) record.Record {
	return record.Record{Key: cgMemberKey(keyCGCurrentMember, group, m.id), Value: marshalValue(&pb.ConsumerGroupCurrentMemberAssignmentValue{
		MemberEpoch: m.epoch, PreviousMemberEpoch: m.prevEpoch, State: int32(m.state),
		AssignedPartitions: m.withEpochs(m.assigned), PartitionsPendingRevocation: m.withEpochs(m.revoking)})}
}

// withEpochs lists a, each partition with the epoch it was assigned at.
func (m *cmember) withEpochs(a assignment) []*pb.TopicPartitions {
	out := a.pb()
	for _, tp := range out {
		tp.AssignmentEpochs = make([]int32, len(tp.Partitions))
		for i, p := range tp.Partitions {
			tp.AssignmentEpochs[i] = m.assignedAt(tp.TopicId, p)
		}
	}
	return out
}

// epochsFromPB reads the assignment epochs of a current-assignment
// record's partitions; those it lacks (an older record) get def.
func epochsFromPB(into map[string]map[int32]int32, tps []*pb.TopicPartitions, def int32) {
	for _, tp := range tps {
		for i, p := range tp.Partitions {
			e := def
			if i < len(tp.AssignmentEpochs) {
				e = tp.AssignmentEpochs[i]
			}
			if into[tp.TopicId] == nil {
				into[tp.TopicId] = map[int32]int32{}
			}
			into[tp.TopicId][p] = e
		}
	}
}

func recRegex(group, regex string, r *resolvedRegex) record.Record {
	return record.Record{Key: cgMemberKey(keyCGRegex, group, regex),
		Value: marshalValue(&pb.ConsumerGroupRegularExpressionValue{Topics: r.topics, Version: r.version, TimestampMs: r.atMs})}
}

// tombstone is a record deleting key.
func tombstone(key []byte) record.Record { return record.Record{Key: key} }

// memberTombstones delete a member: its current assignment, its target,
// then its subscription (Kafka's order).
func memberTombstones(group, member string) []record.Record {
	return []record.Record{
		tombstone(cgMemberKey(keyCGCurrentMember, group, member)),
		tombstone(cgMemberKey(keyCGTargetMember, group, member)),
		tombstone(cgMemberKey(keyCGMember, group, member)),
	}
}

// groupTombstones delete the whole consumer group: every member, its
// regular expressions, then the group's own records; renamed maps a member
// id to the id whose records are to be deleted in its place (a static
// member replaced in the same change).
func (cg *consumerGroup) groupTombstones(group string, renamed map[string]string) []record.Record {
	var recs []record.Record
	ids := cg.sortedMemberIDs()
	name := func(id string) string {
		if r, ok := renamed[id]; ok {
			return r
		}
		return id
	}
	for _, id := range ids {
		recs = append(recs, tombstone(cgMemberKey(keyCGCurrentMember, group, name(id))))
	}
	for _, id := range ids {
		recs = append(recs, tombstone(cgMemberKey(keyCGTargetMember, group, name(id))))
	}
	recs = append(recs, tombstone(cgKey(keyCGTargetEpoch, group)))
	for _, id := range ids {
		recs = append(recs, tombstone(cgMemberKey(keyCGMember, group, name(id))))
	}
	for _, re := range sortedKeys(cg.regexes) {
		recs = append(recs, tombstone(cgMemberKey(keyCGRegex, group, re)))
	}
	recs = append(recs, tombstone(cgKey(keyCGSubscription, group)), tombstone(cgKey(keyCGEpoch, group)))
	return recs
}

// groupRecords are the records that create cg from nothing (a group
// converted from the classic protocol): every member, the epochs, the
// targets and the current assignments.
func (cg *consumerGroup) groupRecords(group string) []record.Record {
	var recs []record.Record
	ids := cg.sortedMemberIDs()
	for _, id := range ids {
		recs = append(recs, recMember(group, cg.members[id]))
	}
	if len(cg.subscription) > 0 {
		recs = append(recs, recSubscription(group, cg.subscription))
	}
	recs = append(recs, recGroupEpoch(group, cg.epoch))
	for _, id := range ids {
		recs = append(recs, recTarget(group, id, cg.target[id]))
	}
	recs = append(recs, recTargetEpoch(group, cg.assignmentEpoch))
	for _, id := range ids {
		recs = append(recs, recCurrent(group, cg.members[id]))
	}
	return recs
}

// applyConsumerRecord replays one consumer group record (s.mu held).
func (c *Coordinator) applyConsumerRecord(s *shard, k recordKey, value []byte, now time.Time) error {
	g := s.groups[k.group]
	if value == nil {
		if g == nil || g.cg == nil {
			return nil
		}
	} else {
		if g == nil {
			g = s.group(k.group, now, true)
		}
		if g.cg == nil {
			c.becomeConsumerGroup(g, now)
		}
	}
	cg := g.cg
	switch k.typ {
	case keyCGEpoch:
		if value == nil {
			if len(cg.members) > 0 {
				return fmt.Errorf("group %q: epoch tombstone while %d members remain", k.group, len(cg.members))
			}
			g.cg = nil
			g.stateSince = now
			if !g.holdsOffsets() && len(g.members) == 0 {
				delete(s.groups, k.group)
			}
			return nil
		}
		var v pb.ConsumerGroupMetadataValue
		if err := proto.Unmarshal(value, &v); err != nil {
			return err
		}
		cg.epoch = v.Epoch
	case keyCGSubscription:
		if value == nil {
			cg.subscription = map[string]topicMeta{}
			return nil
		}
		var v pb.ConsumerGroupPartitionMetadataValue
		if err := proto.Unmarshal(value, &v); err != nil {
			return err
		}
		sub := make(map[string]topicMeta, len(v.Topics))
		for _, t := range v.Topics {
			sub[t.TopicName] = topicMeta{id: t.TopicId, name: t.TopicName, partitions: t.NumPartitions}
		}
		cg.subscription = sub
	case keyCGMember:
		if value == nil {
			cg.removeMember(k.member)
			return nil
		}
		var v pb.ConsumerGroupMemberMetadataValue
		if err := proto.Unmarshal(value, &v); err != nil {
			return err
		}
		m := &cmember{id: k.member, assigned: assignment{}, revoking: assignment{}, lastSeen: now}
		if old := cg.members[k.member]; old != nil {
			m = old.clone()
		}
		m.instanceID, m.rackID, m.clientID, m.clientHost = v.InstanceId, v.RackId, v.ClientId, v.ClientHost
		m.names = slices.Clone(v.SubscribedTopicNames)
		sort.Strings(m.names)
		m.regex, m.rebalanceTimeoutMs, m.assignor = v.SubscribedTopicRegex, v.RebalanceTimeoutMs, v.ServerAssignor
		m.classic = nil
		if cm := v.ClassicMemberMetadata; cm != nil {
			m.classic = &classicInfo{sessionTimeoutMs: cm.SessionTimeoutMs}
			for _, p := range cm.SupportedProtocols {
				m.classic.protocols = append(m.classic.protocols, &pb.GroupProtocol{Name: p.Name, Metadata: p.Metadata})
			}
		}
		return cg.putMember(m)
	case keyCGTargetEpoch:
		if value == nil {
			cg.assignmentEpoch = -1
			return nil
		}
		var v pb.ConsumerGroupTargetAssignmentMetadataValue
		if err := proto.Unmarshal(value, &v); err != nil {
			return err
		}
		cg.assignmentEpoch = v.AssignmentEpoch
	case keyCGTargetMember:
		if value == nil {
			delete(cg.target, k.member)
			return nil
		}
		var v pb.ConsumerGroupTargetAssignmentMemberValue
		if err := proto.Unmarshal(value, &v); err != nil {
			return err
		}
		cg.target[k.member] = assignmentFromPB(v.TopicPartitions)
	case keyCGCurrentMember:
		old := cg.members[k.member]
		if value == nil {
			if old == nil {
				return nil
			}
			m := old.clone()
			m.setEpoch(leaveEpoch)
			m.assigned, m.revoking, m.state, m.assignEpochs = assignment{}, assignment{}, memberStable, nil
			return cg.putMember(m)
		}
		var v pb.ConsumerGroupCurrentMemberAssignmentValue
		if err := proto.Unmarshal(value, &v); err != nil {
			return err
		}
		m := &cmember{id: k.member, lastSeen: now}
		if old != nil {
			m = old.clone()
		}
		m.epoch, m.prevEpoch, m.state = v.MemberEpoch, v.PreviousMemberEpoch, memberState(v.State)
		m.assigned, m.revoking = assignmentFromPB(v.AssignedPartitions), assignmentFromPB(v.PartitionsPendingRevocation)
		m.assignEpochs = map[string]map[int32]int32{}
		epochsFromPB(m.assignEpochs, v.AssignedPartitions, max(v.MemberEpoch, 0))
		epochsFromPB(m.assignEpochs, v.PartitionsPendingRevocation, max(v.MemberEpoch, 0))
		return cg.putMember(m)
	case keyCGRegex:
		if value == nil {
			delete(cg.regexes, k.member)
			return nil
		}
		var v pb.ConsumerGroupRegularExpressionValue
		if err := proto.Unmarshal(value, &v); err != nil {
			return err
		}
		topics := slices.Clone(v.Topics)
		sort.Strings(topics)
		cg.regexes[k.member] = &resolvedRegex{topics: topics, version: v.Version, atMs: v.TimestampMs}
	}
	return nil
}

// becomeConsumerGroup gives g an empty consumer half; a classic
// membership it still had (its tombstone should have come first) is
// dropped, its waiting calls told to rejoin.
func (c *Coordinator) becomeConsumerGroup(g *group, now time.Time) {
	if len(g.members) > 0 {
		c.lg.Warn("consumer group record for a group with classic members; dropping them", "group", g.id, "members", len(g.members))
		g.restore(&pb.GroupMetadataValue{}, now)
	}
	g.cg = newConsumerGroup()
	g.stateSince = now
}

// replayConsumer applies a change's records to memory once they are
// written (s.mu held); a record that does not apply is a bug, logged.
func (c *Coordinator) replayConsumer(s *shard, recs []record.Record, now time.Time) {
	for _, r := range recs {
		k, err := decodeKey(r.Key)
		if err == nil {
			switch k.typ {
			case keyGroupMetadata:
				err = c.applyGroupMetadata(s, k.group, r.Value, now)
			case keyOffsetCommit:
				// A deleted group's offsets (DeleteGroups of a consumer
				// group): tombstones only.
				if g := s.groups[k.group]; g != nil && r.Value == nil {
					g.dropOffset(tp{k.topic, k.partition}, math.MaxInt64)
				}
			default:
				err = c.applyConsumerRecord(s, k, r.Value, now)
			}
		}
		if err != nil {
			c.lg.Error("replaying a consumer group record failed", "err", err)
		}
	}
}
