package group

import (
	"bytes"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// DecodeJSON renders a __consumer_offsets record as kafka-dump-log 4.x's
// --offsets-decoder prints one: the key's type and fields, then the value
// (a tombstone prints <DELETE>). Strand's values are protobuf messages;
// their fields print under their JSON names.
func DecodeJSON(key, value []byte) string {
	k, err := decodeKey(key)
	if err != nil {
		return fmt.Sprintf("key: <unreadable: %v> payload: <skipped>", err)
	}
	data := map[string]any{}
	var msg proto.Message
	switch k.typ {
	case keyOffsetCommit, keyPendingTxnCommit:
		data["group"], data["topic"], data["partition"] = k.group, k.topic, k.partition
		if k.typ == keyPendingTxnCommit {
			data["producerId"], data["producerEpoch"] = k.pid, k.epoch
		}
		msg = &pb.OffsetCommitValue{}
	case keyGroupMetadata:
		data["group"] = k.group
		msg = &pb.GroupMetadataValue{}
	case keyCGEpoch:
		data["groupId"] = k.group
		msg = &pb.ConsumerGroupMetadataValue{}
	case keyCGSubscription:
		data["groupId"] = k.group
		msg = &pb.ConsumerGroupPartitionMetadataValue{}
	case keyCGMember:
		data["groupId"], data["memberId"] = k.group, k.member
		msg = &pb.ConsumerGroupMemberMetadataValue{}
	case keyCGTargetEpoch:
		data["groupId"] = k.group
		msg = &pb.ConsumerGroupTargetAssignmentMetadataValue{}
	case keyCGTargetMember:
		data["groupId"], data["memberId"] = k.group, k.member
		msg = &pb.ConsumerGroupTargetAssignmentMemberValue{}
	case keyCGCurrentMember:
		data["groupId"], data["memberId"] = k.group, k.member
		msg = &pb.ConsumerGroupCurrentMemberAssignmentValue{}
	case keyCGRegex:
		data["groupId"], data["regularExpression"] = k.group, k.member
		msg = &pb.ConsumerGroupRegularExpressionValue{}
	}
	kj, _ := json.Marshal(struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}{fmt.Sprint(k.typ), data})
	if value == nil {
		return fmt.Sprintf("key: %s payload: <DELETE>", kj)
	}
	if err := proto.Unmarshal(value, msg); err != nil {
		return fmt.Sprintf("key: %s payload: <unreadable: %v>", kj, err)
	}
	vj, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(msg)
	var compact bytes.Buffer
	if err == nil {
		err = json.Compact(&compact, vj)
	}
	if err != nil {
		return fmt.Sprintf("key: %s payload: <unprintable: %v>", kj, err)
	}
	return fmt.Sprintf(`key: %s payload: {"version":"0","data":%s}`, kj, compact.Bytes())
}
