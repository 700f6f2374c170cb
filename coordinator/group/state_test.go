package group

import (
	"fmt"
	"testing"
)

// TestStateTransitions checks every (from, to) pair against Kafka's table,
// written out here independently of the implementation's.
func TestStateTransitions(t *testing.T) {
	legal := map[[2]State]bool{
		{PreparingRebalance, Empty}:               true, // the last member left during a join
		{Empty, PreparingRebalance}:               true,
		{Stable, PreparingRebalance}:              true,
		{CompletingRebalance, PreparingRebalance}: true,
		{PreparingRebalance, CompletingRebalance}: true,
		{CompletingRebalance, Stable}:             true,
		{Empty, Dead}:                             true,
		{PreparingRebalance, Dead}:                true,
		{CompletingRebalance, Dead}:               true,
		{Stable, Dead}:                            true,
		{Dead, Dead}:                              true,
	}
	n := 0
	for _, from := range AllStates() {
		for _, to := range AllStates() {
			n++
			if got, want := CanTransition(from, to), legal[[2]State{from, to}]; got != want {
				t.Errorf("CanTransition(%v, %v) = %v, want %v", from, to, got, want)
			}
		}
	}
	if n != 25 {
		t.Fatalf("checked %d pairs, want 25", n)
	}
}

func TestStateString(t *testing.T) {
	want := []string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}
	for i, s := range AllStates() {
		if s.String() != want[i] {
			t.Errorf("state %d prints %q, want %q", i, s, want[i])
		}
	}
	if got := fmt.Sprint(State(9)); got != "Unknown(9)" {
		t.Errorf("unknown state prints %q", got)
	}
}

func TestKeysRoundTrip(t *testing.T) {
	cases := []struct {
		key  []byte
		want recordKey
	}{
		{offsetKey("g", "orders", 7), recordKey{typ: keyOffsetCommit, group: "g", topic: "orders", partition: 7}},
		{pendingKey("grp", "t", 0, 4242, 3), recordKey{typ: keyPendingTxnCommit, group: "grp", topic: "t", pid: 4242, epoch: 3}},
		{groupKey("ünïcode"), recordKey{typ: keyGroupMetadata, group: "ünïcode"}},
		{offsetKey("", "", -1), recordKey{typ: keyOffsetCommit, partition: -1}},
	}
	for _, c := range cases {
		got, err := decodeKey(c.key)
		if err != nil || got != c.want {
			t.Errorf("decodeKey(%x) = %+v, %v; want %+v", c.key, got, err, c.want)
		}
	}
	// The layout is fixed: type, then length-prefixed strings, big-endian.
	if got, want := fmt.Sprintf("%x", offsetKey("g", "t", 1)), "0000"+"0001"+"67"+"0001"+"74"+"00000001"; got != want {
		t.Errorf("offset key bytes %s, want %s", got, want)
	}
	bad := [][]byte{nil, {0}, {0, 9}, {0, 0, 0, 5, 'a'}, append(groupKey("g"), 0), {0, 2, 0xff, 0xff}}
	for _, b := range bad {
		if _, err := decodeKey(b); err == nil {
			t.Errorf("decodeKey(%x) accepted a bad key", b)
		}
	}
}
