package group

import (
	"strings"
	"testing"
)

// TestDecodeJSON: every record type of __consumer_offsets renders with its
// key's fields and its value's, a tombstone as <DELETE>, and a key that
// does not decode says so.
func TestDecodeJSON(t *testing.T) {
	m := &cmember{id: "m1", names: []string{"orders"}, rebalanceTimeoutMs: 30000, epoch: 4, prevEpoch: 3, state: memberUnrevoked,
		assigned: assignment{"tid": {0}}, revoking: assignment{"tid": {1}}}
	cases := []struct {
		key, value []byte
		want       []string
	}{
		{recGroupEpoch("g", 7).Key, recGroupEpoch("g", 7).Value, []string{`key: {"type":"3","data":{"groupId":"g"}}`, `"epoch":7`}},
		{recMember("g", m).Key, recMember("g", m).Value, []string{`"memberId":"m1"`, `"type":"5"`, `"subscribedTopicNames":["orders"]`, `"rebalanceTimeoutMs":30000`}},
		{recTarget("g", "m1", assignment{"tid": {0, 2}}).Key, recTarget("g", "m1", assignment{"tid": {0, 2}}).Value, []string{`"type":"7"`, `"partitions":[0,2]`}},
		{recCurrent("g", m).Key, recCurrent("g", m).Value, []string{`"type":"8"`, `"memberEpoch":4`, `"previousMemberEpoch":3`, `"state":1`, `"partitionsPendingRevocation":[{"topicId":"tid","partitions":[1],"assignmentEpochs":[4]}]`}},
		{recTargetEpoch("g", 7).Key, recTargetEpoch("g", 7).Value, []string{`"type":"6"`, `"assignmentEpoch":7`}},
		{recSubscription("g", map[string]topicMeta{"orders": {id: "tid", name: "orders", partitions: 3}}).Key,
			recSubscription("g", map[string]topicMeta{"orders": {id: "tid", name: "orders", partitions: 3}}).Value, []string{`"type":"4"`, `"numPartitions":3`}},
		{recRegex("g", "o.*", &resolvedRegex{topics: []string{"orders"}, version: 9}).Key, recRegex("g", "o.*", &resolvedRegex{topics: []string{"orders"}, version: 9}).Value,
			[]string{`"regularExpression":"o.*"`, `"type":"16"`, `"topics":["orders"]`}},
		{offsetKey("g", "orders", 2), nil, []string{`"partition":2`, `"topic":"orders"`, `"type":"0"`, `payload: <DELETE>`}},
		{cgMemberKey(keyCGCurrentMember, "g", "m1"), nil, []string{`payload: <DELETE>`}},
		{[]byte{0, 99}, nil, []string{`key: <unreadable`}},
	}
	for _, tc := range cases {
		got := DecodeJSON(tc.key, tc.value)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s\nlacks %s", got, w)
			}
		}
	}
}
