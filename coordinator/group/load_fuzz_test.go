package group

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// FuzzGroupKey: decodeKey never panics; a key it decodes encodes back to
// the same bytes.
func FuzzGroupKey(f *testing.F) {
	f.Add(offsetKey("g", "t", 3))
	f.Add(pendingKey("g", "t", 3, 9, 1))
	f.Add(groupKey("g"))
	f.Add([]byte{0, 2, 0xff, 0xff})
	for _, typ := range []int16{keyCGEpoch, keyCGSubscription, keyCGTargetEpoch} {
		f.Add(cgKey(typ, "g"))
	}
	for _, typ := range []int16{keyCGMember, keyCGTargetMember, keyCGCurrentMember, keyCGRegex} {
		f.Add(cgMemberKey(typ, "g", "m"))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := decodeKey(b)
		if err != nil {
			return
		}
		var again []byte
		switch k.typ {
		case keyOffsetCommit:
			again = offsetKey(k.group, k.topic, k.partition)
		case keyPendingTxnCommit:
			again = pendingKey(k.group, k.topic, k.partition, k.pid, k.epoch)
		case keyGroupMetadata:
			again = groupKey(k.group)
		case keyCGEpoch, keyCGSubscription, keyCGTargetEpoch:
			again = cgKey(k.typ, k.group)
		case keyCGMember, keyCGTargetMember, keyCGCurrentMember, keyCGRegex:
			again = cgMemberKey(k.typ, k.group, k.member)
		default:
			t.Fatalf("decoded unknown key type %d", k.typ)
		}
		if string(again) != string(b) {
			t.Fatalf("key %+v re-encodes as %x, was %x", k, again, b)
		}
	})
}

// FuzzGroupLoadRecord: replaying any record of __consumer_offsets (an
// offset commit, a pending transactional commit or group metadata, as a
// coordinator loading the partition does) never panics, whatever its
// value holds, and a group-metadata value that decodes survives a
// marshal round trip.
func FuzzGroupLoadRecord(f *testing.F) {
	gm, _ := proto.Marshal(&pb.GroupMetadataValue{ProtocolType: "consumer", Generation: 3, Protocol: "range", Leader: "m1",
		Members: []*pb.GroupMetadataMember{{MemberId: "m1", ClientId: "c", SessionTimeoutMs: 45000, RebalanceTimeoutMs: 300000, Subscription: []byte{1}, Assignment: []byte{2}}}})
	oc, _ := proto.Marshal(&pb.OffsetCommitValue{Offset: 10, LeaderEpoch: 1, Metadata: "m", CommitTimestampMs: 5})
	f.Add(groupKey("g"), gm, false)
	f.Add(offsetKey("g", "t", 0), oc, false)
	f.Add(pendingKey("g", "t", 0, 4, 1), oc, false)
	f.Add(groupKey("g"), []byte(nil), true)
	// A consumer group's records (KIP-848).
	cg := newConsumerGroup()
	m := &cmember{id: "m", names: []string{"t"}, regex: "t.*", assignor: "uniform", rebalanceTimeoutMs: 1000, epoch: 3, prevEpoch: 2,
		state: memberUnrevoked, assigned: assignment{"id": {0, 1}}, revoking: assignment{"id": {2}},
		classic: &classicInfo{sessionTimeoutMs: 10000, protocols: []*pb.GroupProtocol{{Name: "range", Metadata: []byte{0, 1}}}}}
	cg.members["m"], cg.epoch, cg.assignmentEpoch = m, 3, 3
	cg.target["m"] = assignment{"id": {0, 1}}
	cg.subscription["t"] = topicMeta{id: "id", name: "t", partitions: 3}
	cg.regexes["t.*"] = &resolvedRegex{topics: []string{"t"}, version: 9}
	for _, r := range append(cg.groupRecords("g"), recRegex("g", "t.*", cg.regexes["t.*"])) {
		f.Add(r.Key, r.Value, false)
		f.Add(r.Key, []byte(nil), true)
	}
	f.Fuzz(func(t *testing.T, key, value []byte, tombstone bool) {
		if tombstone {
			value = nil
		} else if value == nil {
			value = []byte{}
		}
		c := &Coordinator{lg: slog.New(slog.NewTextHandler(io.Discard, nil))}
		s := newShard(0, nil, 0)
		now := time.Unix(1_700_000_000, 0)
		_ = c.applyRecord(s, record.Record{Key: key, Value: value}, now, -1)
		// Twice: a second record for the same group replaces the first.
		_ = c.applyRecord(s, record.Record{Key: key, Value: value, Offset: 1}, now, -1)
		// And in a transactional batch: pending for its producer.
		_ = c.applyRecord(s, record.Record{Key: key, Value: value, Offset: 2}, now, 7)
		// A consumer group's indexes stay those of its members.
		for _, g := range s.groups {
			if g.cg == nil {
				continue
			}
			for id, mm := range g.cg.members {
				if mm.id != id {
					t.Fatalf("member %q filed under %q", mm.id, id)
				}
			}
			_ = g.cg.state()
		}
		var v pb.GroupMetadataValue
		if value != nil && proto.Unmarshal(value, &v) == nil {
			b, err := proto.Marshal(&v)
			var v2 pb.GroupMetadataValue
			if err != nil || proto.Unmarshal(b, &v2) != nil || !proto.Equal(&v, &v2) {
				t.Fatalf("group metadata value does not round-trip: %v", err)
			}
		}
	})
}
