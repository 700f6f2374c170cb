package client

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// Partition assignment for consumer groups.
//
// The group coordinator only relays bytes; the members agree on their
// meaning. A member's JoinGroup offers one protocol per assignor (named
// after it), each with the same subscription metadata; the leader decodes
// every member's subscription, runs the chosen assignor and sends each
// member its assignment through SyncGroup.
//
// Subscription metadata, version 1 (big-endian; a string is an int16
// length then UTF-8 bytes):
//
//	int16  version (1)
//	int32  topic count, then each topic: string
//	[list] the partitions the member had at the end of generation below
//	int32  generation of that list (-1: none)
//	int8   held: 1 = the member still owns the list (cooperative protocol),
//	       0 = it already gave them up (eager); the list is then only a
//	       stickiness hint
//	int8   isolation.level the member reads with (version 1+): 0 =
//	       read_uncommitted, 1 = read_committed. Only tools read it
//	       (`strand consumer-groups` measures a group's lag against the HW
//	       or the LSO by it, MemberIsolation); the assignors ignore it.
//
// Version 0 is version 1 without the isolation byte.
//
// Assignment, version 0:
//
//	int16  version (0)
//	[list] the member's partitions
//
// where [list] is: int32 topic count, then per topic: string topic, int32
// partition count, int32 partitions…, topics and partitions ascending.
// A decoder accepts a higher version whose version-0 fields come first and
// ignores what follows them.

// subscription is one member's decoded subscription.
type subscription struct {
	topics     []string
	owned      []TopicPartition
	generation int32
	held       bool
	// isolation is the member's isolation.level (version 1+).
	isolation IsolationLevel
}

// memberSubscription is a member's subscription as the leader sees it.
type memberSubscription struct {
	memberID   string
	instanceID string
	subscription
}

// assignor computes assignments from the members' subscriptions and each
// subscribed topic's partition count. It must be deterministic: the same
// input gives the same output on every member.
type assignor interface {
	name() string
	// cooperative: it never gives a member a partition another member
	// still holds (the cooperative protocol, KIP-429).
	cooperative() bool
	assign(members []memberSubscription, partitions map[string]int32) map[string][]TopicPartition
}

// assignorByName returns a built-in assignor: "range" or "cooperative-sticky".
func assignorByName(name string) (assignor, bool) {
	switch name {
	case "range":
		return rangeAssignor{}, true
	case "cooperative-sticky":
		return stickyAssignor{}, true
	}
	return nil, false
}

func appendStr(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// appendTPList encodes a partition list grouped by topic, sorted.
func appendTPList(b []byte, tps []TopicPartition) []byte {
	byTopic := map[string][]int32{}
	for _, tp := range tps {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
	}
	topics := make([]string, 0, len(byTopic))
	for t := range byTopic {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	b = binary.BigEndian.AppendUint32(b, uint32(len(topics)))
	for _, t := range topics {
		ps := byTopic[t]
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		b = appendStr(b, t)
		b = binary.BigEndian.AppendUint32(b, uint32(len(ps)))
		for _, p := range ps {
			b = binary.BigEndian.AppendUint32(b, uint32(p))
		}
	}
	return b
}

func encodeSubscription(s subscription) []byte {
	topics := append([]string(nil), s.topics...)
	sort.Strings(topics)
	b := binary.BigEndian.AppendUint16(nil, 1)
	b = binary.BigEndian.AppendUint32(b, uint32(len(topics)))
	for _, t := range topics {
		b = appendStr(b, t)
	}
	b = appendTPList(b, s.owned)
	b = binary.BigEndian.AppendUint32(b, uint32(s.generation))
	held := byte(0)
	if s.held {
		held = 1
	}
	iso := byte(0)
	if s.isolation == ReadCommitted {
		iso = 1
	}
	return append(b, held, iso)
}

func encodeAssignment(tps []TopicPartition) []byte {
	return appendTPList(binary.BigEndian.AppendUint16(nil, 0), tps)
}

var errShort = errors.New("ends early")

type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b) < n {
		r.err = errShort
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u16() uint16 {
	if b := r.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *reader) str() string { return string(r.take(int(int16(r.u16())))) }

// count reads a list length, refusing one longer than the bytes left could hold.
func (r *reader) count(minItem int) int {
	n := int(int32(r.u32()))
	if r.err == nil && (n < 0 || n*minItem > len(r.b)) {
		r.err = fmt.Errorf("count %d does not fit in %d bytes", n, len(r.b))
		return 0
	}
	return n
}

func (r *reader) tpList() []TopicPartition {
	var out []TopicPartition
	for i, n := 0, r.count(6); i < n && r.err == nil; i++ {
		t := r.str()
		for j, m := 0, r.count(4); j < m && r.err == nil; j++ {
			out = append(out, TopicPartition{Topic: t, Partition: int32(r.u32())})
		}
	}
	return out
}

func (r *reader) version() int16 {
	v := int16(r.u16())
	if r.err == nil && v < 0 {
		r.err = fmt.Errorf("version %d", v)
	}
	return v
}

func decodeSubscription(b []byte) (subscription, error) {
	s, _, err := decodeSubscriptionRest(b)
	return s, err
}

// decodeSubscriptionRest decodes a subscription and also says how many
// bytes followed the fields of its version (a later version's).
func decodeSubscriptionRest(b []byte) (subscription, int, error) {
	r := &reader{b: b}
	v := r.version()
	var s subscription
	for i, n := 0, r.count(2); i < n && r.err == nil; i++ {
		s.topics = append(s.topics, r.str())
	}
	s.owned = r.tpList()
	s.generation = int32(r.u32())
	if h := r.take(1); len(h) == 1 {
		s.held = h[0] == 1
	}
	if v >= 1 {
		if i := r.take(1); len(i) == 1 && i[0] == 1 {
			s.isolation = ReadCommitted
		}
	}
	if r.err != nil {
		return subscription{}, 0, fmt.Errorf("subscription metadata: %w", r.err)
	}
	return s, len(r.b), nil
}

// MemberIsolation reads the isolation.level a group member advertises in
// its JoinGroup metadata (DescribeGroups returns it), for tools that
// measure a group's lag: a read_committed member can only reach the last
// stable offset. ok is false unless the metadata is, byte for byte, a
// version-1 subscription of this SDK (protocol type "consumer"): Kafka's
// own consumer protocol (Java, franz-go, librdkafka members) carries no
// isolation level, and its bytes are not taken for this SDK's.
func MemberIsolation(protocolType string, metadata []byte) (level IsolationLevel, ok bool) {
	if protocolType != "consumer" || len(metadata) < 2 || binary.BigEndian.Uint16(metadata) != 1 {
		return ReadUncommitted, false
	}
	s, rest, err := decodeSubscriptionRest(metadata)
	if err != nil || rest != 0 {
		return ReadUncommitted, false
	}
	// The last two bytes are held and isolation, each 0 or 1.
	if n := len(metadata); metadata[n-2] > 1 || metadata[n-1] > 1 {
		return ReadUncommitted, false
	}
	return s.isolation, true
}

func decodeAssignment(b []byte) ([]TopicPartition, error) {
	if len(b) == 0 {
		return nil, nil // a member the leader gave nothing
	}
	r := &reader{b: b}
	r.version()
	out := r.tpList()
	if r.err != nil {
		return nil, fmt.Errorf("assignment: %w", r.err)
	}
	return out, nil
}

func subscribes(m *memberSubscription, topic string) bool {
	for _, t := range m.topics {
		if t == topic {
			return true
		}
	}
	return false
}

// sortedTopics lists the topics any member subscribes that have partitions.
func sortedTopics(members []memberSubscription, partitions map[string]int32) []string {
	seen := map[string]bool{}
	var out []string
	for i := range members {
		for _, t := range members[i].topics {
			if !seen[t] && partitions[t] > 0 {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	sort.Strings(out)
	return out
}

func sortTPList(s []TopicPartition) []TopicPartition { sortTPs(s); return s }
