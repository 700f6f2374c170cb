package group

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// tp names a partition of a consumed topic.
type tp struct {
	topic     string
	partition int32
}

// offsetEntry is a committed (or pending) offset and where in
// __consumer_offsets it was written: of two values for one partition the
// one written later in the log wins, in memory exactly as on reload.
type offsetEntry struct {
	offset      int64
	leaderEpoch int32
	metadata    string
	commitMs    int64
	logOffset   int64
	// txnID is the transactional id of a pending entry (from the record's
	// "transactional.id" header), for operators chasing a stuck commit.
	txnID string
}

// member is one member of a group. joinCh / syncCh are set while its
// JoinGroup / SyncGroup call waits for the answer (buffered, one answer).
type member struct {
	id, instanceID, clientID         string
	clientHost                       string
	sessionTimeout, rebalanceTimeout time.Duration
	protocols                        []*pb.GroupProtocol // preference order
	assignment                       []byte
	lastHeartbeat                    time.Time
	joined                           bool // has (re)joined in the rebalance under way
	joinCh                           chan *pb.JoinGroupResponse
	syncCh                           chan *pb.SyncGroupResponse
}

// metadataFor is the member's metadata for a protocol (nil if it has none).
func (m *member) metadataFor(name string) []byte {
	for _, p := range m.protocols {
		if p.Name == name {
			return p.Metadata
		}
	}
	return nil
}

func (m *member) supports(name string) bool {
	for _, p := range m.protocols {
		if p.Name == name {
			return true
		}
	}
	return false
}

func sameProtocols(a, b []*pb.GroupProtocol) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || !bytes.Equal(a[i].Metadata, b[i].Metadata) {
			return false
		}
	}
	return true
}

// answerJoin delivers a JoinGroup answer to a waiting call, if any.
func (m *member) answerJoin(r *pb.JoinGroupResponse) {
	if m.joinCh != nil {
		m.joinCh <- r
		m.joinCh = nil
	}
}

// answerSync delivers a SyncGroup answer to a waiting call, if any.
func (m *member) answerSync(r *pb.SyncGroupResponse) {
	if m.syncCh != nil {
		m.syncCh <- r
		m.syncCh = nil
	}
}

// group is one consumer group: its membership (the classic protocol's
// state machine) and its offsets. It is guarded by its shard's mutex.
type group struct {
	id           string
	state        State
	stateSince   time.Time
	protocolType string
	protocol     string
	generation   int32
	leader       string
	members      map[string]*member
	order        []string // member ids in join order (the leader is chosen from it)

	// joinNotBefore holds back the first rebalance of an empty group
	// (group.initial.rebalance.delay.ms); rebalanceDeadline ends the join
	// phase: members that have not rejoined by then are removed.
	joinNotBefore     time.Time
	rebalanceDeadline time.Time
	initialDelay      bool
	// syncing: the leader's assignment is being written.
	syncing bool
	// deleting: DeleteGroups is writing the group's tombstones; nobody
	// joins meanwhile (a membership written before the group's tombstone
	// would be lost on reload while live it stayed).
	deleting bool

	offsets map[tp]offsetEntry
	// pending holds transactional offsets per partition and producer id,
	// until the producer's COMMIT or ABORT marker.
	pending map[tp]map[int64]offsetEntry
	// pendingWrites counts TxnOffsetCommit writes in flight per partition
	// (require_stable treats them as pending).
	pendingWrites map[tp]int
	// commitWrites counts OffsetCommit writes in flight: the group object
	// they apply to outlives a change that replaces its membership.
	commitWrites int

	// cg is set for a group of the consumer protocol (KIP-848); its
	// classic membership above is then empty.
	cg *consumerGroup
}

func newGroup(id string, now time.Time) *group {
	return &group{id: id, state: Empty, stateSince: now, members: map[string]*member{}, offsets: map[tp]offsetEntry{},
		pending: map[tp]map[int64]offsetEntry{}, pendingWrites: map[tp]int{}}
}

// hasPending reports whether a transactional commit of p is pending.
func (g *group) hasPending(p tp) bool { return len(g.pending[p]) > 0 || g.pendingWrites[p] > 0 }

// holdsOffsets reports whether the group has offsets, committed or
// pending, or commits of them in flight. Offsets belong to the group id,
// not to its membership (Kafka keeps them apart from the group): a
// membership tombstone, DeleteGroups aside (which tombstones every offset
// first), leaves them.
func (g *group) holdsOffsets() bool {
	return len(g.offsets) > 0 || len(g.pending) > 0 || len(g.pendingWrites) > 0 || g.commitWrites > 0
}

// dropOffset applies an offset tombstone written at logOffset at: the
// committed offset of p and its pending transactional offsets go, unless
// written after the tombstone (Kafka's replay of an offset tombstone).
func (g *group) dropOffset(p tp, at int64) {
	if e, ok := g.offsets[p]; ok && e.logOffset < at {
		delete(g.offsets, p)
	}
	for pid, e := range g.pending[p] {
		if e.logOffset < at {
			delete(g.pending[p], pid)
		}
	}
	if len(g.pending[p]) == 0 {
		delete(g.pending, p)
	}
}

// applyCommitted installs e as the committed offset of p unless a value
// written later in the log is already there.
func (g *group) applyCommitted(p tp, e offsetEntry) {
	if cur, ok := g.offsets[p]; ok && cur.logOffset > e.logOffset {
		return
	}
	g.offsets[p] = e
}

func (g *group) byInstance(instanceID string) *member {
	if instanceID == "" {
		return nil
	}
	for _, m := range g.members {
		if m.instanceID == instanceID {
			return m
		}
	}
	return nil
}

func (g *group) addMember(m *member) {
	g.members[m.id] = m
	g.order = append(g.order, m.id)
}

// removeMember drops a member; a call of it still waiting is answered with
// code (it is no longer in the group).
func (g *group) removeMember(m *member, code pb.ErrorCode, why string) {
	m.answerJoin(&pb.JoinGroupResponse{ErrorCode: code, ErrorMessage: why, MemberId: m.id, GenerationId: -1})
	m.answerSync(&pb.SyncGroupResponse{ErrorCode: code, ErrorMessage: why})
	delete(g.members, m.id)
	for i, id := range g.order {
		if id == m.id {
			g.order = append(g.order[:i], g.order[i+1:]...)
			break
		}
	}
	if g.leader == m.id {
		g.leader = ""
	}
}

// renameMember gives a static member its new member id.
func (g *group) renameMember(m *member, newID string) {
	old := m.id
	delete(g.members, old)
	m.id = newID
	g.members[newID] = m
	for i, id := range g.order {
		if id == old {
			g.order[i] = newID
		}
	}
	if g.leader == old {
		g.leader = newID
	}
}

// supportedProtocols is the set of protocols every member (but skip)
// supports; nil when there are no other members.
func (g *group) supportedProtocols(skip string) map[string]bool {
	var out map[string]bool
	for _, m := range g.members {
		if m.id == skip {
			continue
		}
		mine := map[string]bool{}
		for _, p := range m.protocols {
			mine[p.Name] = true
		}
		if out == nil {
			out = mine
			continue
		}
		for n := range out {
			if !mine[n] {
				delete(out, n)
			}
		}
	}
	return out
}

// compatible reports whether a member with these protocols may join: the
// same protocol type, and at least one protocol every other member has.
func (g *group) compatible(memberID, protocolType string, protocols []*pb.GroupProtocol) bool {
	others := g.supportedProtocols(memberID)
	if others == nil {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		if others[p.Name] {
			return true
		}
	}
	return false
}

// selectProtocol picks the protocol for a generation: among the protocols
// every member supports, each member votes for its most preferred one and
// the most votes win (ties: the earlier in the first member's list).
func (g *group) selectProtocol() string {
	cands := g.supportedProtocols("")
	if len(cands) == 0 {
		return ""
	}
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if cands[p.Name] {
				votes[p.Name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	first := g.members[g.order[0]]
	for _, p := range first.protocols {
		if cands[p.Name] && votes[p.Name] > bestVotes {
			best, bestVotes = p.Name, votes[p.Name]
		}
	}
	return best
}

func (g *group) maxRebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

func (g *group) allJoined() bool {
	for _, m := range g.members {
		if !m.joined {
			return false
		}
	}
	return true
}

// metadataValue is the group's membership as written to the log.
func (g *group) metadataValue(now time.Time) *pb.GroupMetadataValue {
	v := &pb.GroupMetadataValue{ProtocolType: g.protocolType, Generation: g.generation, Protocol: g.protocol, Leader: g.leader,
		CurrentStateTimestampMs: now.UnixMilli()}
	for _, id := range g.order {
		m := g.members[id]
		v.Members = append(v.Members, &pb.GroupMetadataMember{MemberId: m.id, GroupInstanceId: m.instanceID, ClientId: m.clientID, ClientHost: m.clientHost,
			RebalanceTimeoutMs: int32(m.rebalanceTimeout / time.Millisecond), SessionTimeoutMs: int32(m.sessionTimeout / time.Millisecond),
			Subscription: m.metadataFor(g.protocol), Assignment: m.assignment})
	}
	return v
}

// restore installs a membership read from the log. The members'
// sessions start at now.
func (g *group) restore(v *pb.GroupMetadataValue, now time.Time) {
	for _, m := range g.members {
		g.removeMember(m, pb.ErrorCode_UNKNOWN_MEMBER_ID, "replaced by the group metadata in the log")
	}
	g.protocolType, g.generation, g.protocol, g.leader = v.ProtocolType, v.Generation, v.Protocol, v.Leader
	g.members, g.order = map[string]*member{}, nil
	for _, vm := range v.Members {
		g.addMember(&member{id: vm.MemberId, instanceID: vm.GroupInstanceId, clientID: vm.ClientId, clientHost: vm.ClientHost,
			sessionTimeout:   time.Duration(vm.SessionTimeoutMs) * time.Millisecond,
			rebalanceTimeout: time.Duration(vm.RebalanceTimeoutMs) * time.Millisecond,
			protocols:        []*pb.GroupProtocol{{Name: v.Protocol, Metadata: vm.Subscription}},
			assignment:       vm.Assignment, lastHeartbeat: now})
	}
	g.state, g.stateSince = Empty, now
	if len(g.members) > 0 {
		g.state = Stable
	}
	g.syncing, g.initialDelay = false, false
}

// newMemberID is clientID followed by a random suffix, like Kafka's.
func newMemberID(clientID string) string {
	if clientID == "" {
		clientID = "member"
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return clientID + "-" + hex.EncodeToString(b[:])
}
