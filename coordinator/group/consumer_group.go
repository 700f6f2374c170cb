package group

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// A consumer group of the consumer rebalance protocol (KIP-848): the
// coordinator keeps each member's subscription, computes a target
// assignment with a server-side assignor whenever the group epoch moves
// past the target's epoch, and reconciles every member towards its target
// one heartbeat at a time (reconcile.go). Its durable state is a set of
// records in __consumer_offsets (consumer_records.go), written before
// memory changes and replayed, live and on load, by the same code; the
// indexes below (static members, partition epochs) are derived from them.
//
// The group epoch moves when a member joins, leaves or changes its
// subscription, or when the subscribed topics change; the target
// assignment epoch follows it once a heartbeat computes the new target;
// a member's epoch follows the target epoch once it has revoked what it
// must give up. A partition is in at most one member's assigned or
// pending-revocation set at a time: partEpochs holds the epoch of its
// current owner, and a partition is handed to its next owner only once it
// is free there (the owner's heartbeat no longer lists it).

// assignment is a set of partitions by topic id, each list sorted and
// without duplicates; topics with no partitions are absent.
type assignment map[string][]int32

// memberState is where a member is in its reconciliation (Kafka's
// MemberState, with its record values).
type memberState int8

const (
	// memberStable: the member owns its target (or all of it that is free).
	memberStable memberState = 0
	// memberUnrevoked: the member must first give up partitions.
	memberUnrevoked memberState = 1
	// memberUnreleased: the member waits for partitions others still hold.
	memberUnreleased memberState = 2
)

func (s memberState) String() string {
	switch s {
	case memberStable:
		return "stable"
	case memberUnrevoked:
		return "unrevoked_partitions"
	case memberUnreleased:
		return "unreleased_partitions"
	}
	return fmt.Sprintf("unknown(%d)", int8(s))
}

// The member epochs a leave heartbeat carries.
const (
	leaveEpoch       int32 = -1 // the member leaves the group
	staticLeaveEpoch int32 = -2 // a static member leaves for now and will rejoin
)

// classicInfo is what a member using the classic protocol (JoinGroup and
// SyncGroup) in a consumer group has that the others have not.
type classicInfo struct {
	sessionTimeoutMs int32
	protocols        []*pb.GroupProtocol // in the member's preference order
}

// cmember is a member of a consumer group. The persisted fields come from
// its records; the rest is the coordinator's timers for it. A cmember in a
// group is never modified in place: a change builds a copy (clone), which
// replaces it when its records are replayed.
type cmember struct {
	id                                       string
	instanceID, rackID, clientID, clientHost string
	rebalanceTimeoutMs                       int32
	names                                    []string // subscribed topic names, sorted
	regex                                    string   // subscribed regular expression ("" for none)
	assignor                                 string   // server assignor it asked for ("" for none)
	classic                                  *classicInfo

	epoch, prevEpoch int32
	state            memberState
	assigned         assignment
	revoking         assignment // pending revocation
	// assignEpochs: the member epoch at which each partition of assigned
	// and revoking was given to it (KIP-1251: an offset commit at an
	// older member epoch is accepted for a partition it still has since).
	assignEpochs map[string]map[int32]int32

	// Not persisted: the member's session (lastSeen plus its session
	// timeout), the deadline to revoke by when it entered
	// memberUnrevoked at revokeEpoch, and for a classic member the
	// deadlines to rejoin after being told of a rebalance and to sync
	// after its join.
	lastSeen    time.Time
	revokeBy    time.Time
	revokeEpoch int32
	joinBy      time.Time
	syncBy      time.Time
}

func (m *cmember) clone() *cmember {
	c := *m
	c.names = slices.Clone(m.names)
	c.assigned = m.assigned.clone()
	c.revoking = m.revoking.clone()
	if m.assignEpochs != nil {
		c.assignEpochs = make(map[string]map[int32]int32, len(m.assignEpochs))
		for t, byP := range m.assignEpochs {
			c.assignEpochs[t] = maps.Clone(byP)
		}
	}
	if m.classic != nil {
		ci := *m.classic
		ci.protocols = slices.Clone(m.classic.protocols)
		c.classic = &ci
	}
	return &c
}

// assignedAt is the member epoch a partition of assigned or revoking was
// given to the member at (its epoch, not below 0, when not recorded: a
// record written before assignment epochs were).
func (m *cmember) assignedAt(topicID string, p int32) int32 {
	if e, ok := m.assignEpochs[topicID][p]; ok {
		return e
	}
	return max(m.epoch, 0)
}

// owns reports whether a partition is in the member's assigned or revoking set.
func (m *cmember) owns(topicID string, p int32) bool {
	return m.assigned.has(topicID, p) || m.revoking.has(topicID, p)
}

// setAssignEpochs keeps the epochs of what the member still has, and
// gives epoch to what it has newly.
func (m *cmember) setAssignEpochs(old *cmember, epoch int32) {
	m.assignEpochs = map[string]map[int32]int32{}
	for _, a := range []assignment{m.assigned, m.revoking} {
		for t, ps := range a {
			for _, p := range ps {
				e := epoch
				if old != nil && old.owns(t, p) {
					e = old.assignedAt(t, p)
				}
				if m.assignEpochs[t] == nil {
					m.assignEpochs[t] = map[int32]int32{}
				}
				m.assignEpochs[t][p] = e
			}
		}
	}
}

// reconciledTo reports whether the member is at epoch and owns its target.
func (m *cmember) reconciledTo(epoch int32) bool {
	return m.state == memberStable && m.epoch == epoch
}

// sameSubscription compares what the member's metadata record holds.
func (m *cmember) sameMetadata(o *cmember) bool {
	if m.instanceID != o.instanceID || m.rackID != o.rackID || m.clientID != o.clientID || m.clientHost != o.clientHost ||
		m.rebalanceTimeoutMs != o.rebalanceTimeoutMs || m.regex != o.regex || m.assignor != o.assignor || !slices.Equal(m.names, o.names) {
		return false
	}
	if (m.classic == nil) != (o.classic == nil) {
		return false
	}
	if m.classic == nil {
		return true
	}
	if m.classic.sessionTimeoutMs != o.classic.sessionTimeoutMs || !sameProtocols(m.classic.protocols, o.classic.protocols) {
		return false
	}
	return true
}

// sameAssignmentState compares what the member's current-assignment
// record holds.
func (m *cmember) sameAssignmentState(o *cmember) bool {
	if m.epoch != o.epoch || m.prevEpoch != o.prevEpoch || m.state != o.state || !m.assigned.equal(o.assigned) || !m.revoking.equal(o.revoking) {
		return false
	}
	for _, a := range []assignment{m.assigned, m.revoking} {
		for t, ps := range a {
			for _, p := range ps {
				if m.assignedAt(t, p) != o.assignedAt(t, p) {
					return false
				}
			}
		}
	}
	return true
}

// sessionTimeout is how long the member may go without a heartbeat.
func (m *cmember) sessionTimeout(consumerDefault time.Duration) time.Duration {
	if m.classic != nil {
		return time.Duration(m.classic.sessionTimeoutMs) * time.Millisecond
	}
	return consumerDefault
}

// topicMeta is a subscribed topic as the group last saw it.
type topicMeta struct {
	id         string
	name       string
	partitions int32
}

// resolvedRegex is what a subscription's regular expression matched.
type resolvedRegex struct {
	topics  []string // sorted
	version int64    // the metadata image offset it was resolved against
	atMs    int64
}

// Consumer group states, Kafka's names.
const (
	cgEmpty       = "Empty"
	cgAssigning   = "Assigning"
	cgReconciling = "Reconciling"
	cgStable      = "Stable"
)

// consumerGroup is the consumer-protocol half of a group (group.cg).
type consumerGroup struct {
	epoch           int32
	assignmentEpoch int32
	members         map[string]*cmember
	target          map[string]assignment
	subscription    map[string]topicMeta // by topic name
	regexes         map[string]*resolvedRegex

	// Derived from the members: instance id → member id, and the epoch of
	// each owned partition's owner (topic id → partition → epoch).
	static     map[string]string
	partEpochs map[string]map[int32]int32

	// Not persisted: the metadata image offset the subscription was last
	// computed against, and when the regular expressions were last
	// refreshed.
	metaOffset   int64
	regexRefresh time.Time
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{members: map[string]*cmember{}, target: map[string]assignment{}, subscription: map[string]topicMeta{},
		regexes: map[string]*resolvedRegex{}, static: map[string]string{}, partEpochs: map[string]map[int32]int32{}, metaOffset: -1}
}

// state is the group's state (Kafka's ConsumerGroupState).
func (cg *consumerGroup) state() string {
	switch {
	case len(cg.members) == 0:
		return cgEmpty
	case cg.epoch > cg.assignmentEpoch:
		return cgAssigning
	}
	for _, m := range cg.members {
		if !m.reconciledTo(cg.assignmentEpoch) {
			return cgReconciling
		}
	}
	return cgStable
}

// sortedMemberIDs lists the members by id.
func (cg *consumerGroup) sortedMemberIDs() []string {
	ids := make([]string, 0, len(cg.members))
	for id := range cg.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// staticMember is the member holding an instance id, or nil.
func (cg *consumerGroup) staticMember(instanceID string) *cmember {
	if instanceID == "" {
		return nil
	}
	return cg.members[cg.static[instanceID]]
}

// partitionEpoch is the epoch of the partition's owner, -1 when free.
func (cg *consumerGroup) partitionEpoch(topicID string, p int32) int32 {
	if e, ok := cg.partEpochs[topicID][p]; ok {
		return e
	}
	return -1
}

// putMember installs m (replacing the member of its id), keeping the
// indexes; an ownership conflict is returned (a bug: the caller logs it).
func (cg *consumerGroup) putMember(m *cmember) error {
	old := cg.members[m.id]
	var err error
	if old != nil {
		cg.dropEpochs(old)
		if old.instanceID != "" && cg.static[old.instanceID] == old.id {
			delete(cg.static, old.instanceID)
		}
	}
	cg.members[m.id] = m
	if m.instanceID != "" {
		cg.static[m.instanceID] = m.id
	}
	if e := cg.addEpochs(m.assigned, m.epoch); e != nil {
		err = e
	}
	if e := cg.addEpochs(m.revoking, m.epoch); e != nil && err == nil {
		err = e
	}
	return err
}

// removeMember drops a member and its partition epochs.
func (cg *consumerGroup) removeMember(id string) {
	old := cg.members[id]
	if old == nil {
		return
	}
	cg.dropEpochs(old)
	delete(cg.members, id)
	if old.instanceID != "" && cg.static[old.instanceID] == id {
		delete(cg.static, old.instanceID)
	}
}

func (cg *consumerGroup) dropEpochs(m *cmember) {
	for _, a := range []assignment{m.assigned, m.revoking} {
		for t, ps := range a {
			byP := cg.partEpochs[t]
			for _, p := range ps {
				if e, ok := byP[p]; ok && e == m.epoch {
					delete(byP, p)
				}
			}
			if len(byP) == 0 {
				delete(cg.partEpochs, t)
			}
		}
	}
}

// addEpochs marks a's partitions owned at epoch. A partition already
// owned is a broken invariant: it is reported and left to its owner.
func (cg *consumerGroup) addEpochs(a assignment, epoch int32) error {
	var err error
	for t, ps := range a {
		byP := cg.partEpochs[t]
		if byP == nil {
			byP = map[int32]int32{}
			cg.partEpochs[t] = byP
		}
		for _, p := range ps {
			if prev, ok := byP[p]; ok {
				if err == nil {
					err = fmt.Errorf("partition %s-%d is already owned at epoch %d, cannot own it at %d", t, p, prev, epoch)
				}
				continue
			}
			byP[p] = epoch
		}
	}
	return err
}

// numClassic counts the members using the classic protocol.
func (cg *consumerGroup) numClassic() int {
	n := 0
	for _, m := range cg.members {
		if m.classic != nil {
			n++
		}
	}
	return n
}

// subscribedTopics is every topic name the group subscribes to: the
// members' names, and what the regular expressions they use resolved to
// (in regexes, the group's as a change leaves them). skip leaves one
// member out and extra counts one in (a member replaced or being added),
// as the group would be after the change.
func (cg *consumerGroup) subscribedTopics(skip string, extra *cmember, regexes map[string]*resolvedRegex) map[string]bool {
	out := map[string]bool{}
	used := map[string]bool{}
	add := func(m *cmember) {
		for _, n := range m.names {
			out[n] = true
		}
		if m.regex != "" {
			used[m.regex] = true
		}
	}
	for id, m := range cg.members {
		if id == skip || (extra != nil && id == extra.id) {
			continue
		}
		add(m)
	}
	if extra != nil {
		add(extra)
	}
	for re := range used {
		if r := regexes[re]; r != nil {
			for _, t := range r.topics {
				out[t] = true
			}
		}
	}
	return out
}

// regexUsers counts the members subscribed with a regular expression.
func (cg *consumerGroup) regexUsers(re string) int {
	n := 0
	for _, m := range cg.members {
		if m.regex == re {
			n++
		}
	}
	return n
}

// preferredAssignor is the assignor most members ask for (ties: the
// first by name), counting extra in place of the member of its id; "" when
// none asks.
func (cg *consumerGroup) preferredAssignor(extra *cmember) string {
	counts := map[string]int{}
	for id, m := range cg.members {
		if extra != nil && id == extra.id {
			continue
		}
		if m.assignor != "" {
			counts[m.assignor]++
		}
	}
	if extra != nil && extra.assignor != "" {
		counts[extra.assignor]++
	}
	best, n := "", 0
	for name, c := range counts {
		if c > n || (c == n && name < best) {
			best, n = name, c
		}
	}
	return best
}

// waitingOnUnreleased reports whether a member waiting for partitions
// still has one that another member holds.
func (cg *consumerGroup) waitingOnUnreleased(m *cmember) bool {
	if m.state != memberUnreleased {
		return false
	}
	for t, ps := range cg.target[m.id] {
		for _, p := range ps {
			if !m.assigned.has(t, p) && cg.partitionEpoch(t, p) != -1 {
				return true
			}
		}
	}
	return false
}

// The assignment helpers.

func (a assignment) clone() assignment {
	if a == nil {
		return nil
	}
	out := make(assignment, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}

func (a assignment) equal(b assignment) bool {
	if len(a) != len(b) {
		return false
	}
	for t, ps := range a {
		if !slices.Equal(ps, b[t]) {
			return false
		}
	}
	return true
}

func (a assignment) has(topicID string, p int32) bool {
	_, ok := slices.BinarySearch(a[topicID], p)
	return ok
}

func (a assignment) size() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

// normalized sorts every list, drops duplicates and empty topics.
func (a assignment) normalized() assignment {
	out := make(assignment, len(a))
	for t, ps := range a {
		if len(ps) == 0 {
			continue
		}
		c := slices.Clone(ps)
		slices.Sort(c)
		out[t] = slices.Compact(c)
	}
	return out
}

// subsetOf reports whether every partition of a is in b.
func (a assignment) subsetOf(b assignment) bool {
	for t, ps := range a {
		for _, p := range ps {
			if !b.has(t, p) {
				return false
			}
		}
	}
	return true
}

// intersects reports whether a and b share a partition.
func (a assignment) intersects(b assignment) bool {
	for t, ps := range a {
		for _, p := range ps {
			if b.has(t, p) {
				return true
			}
		}
	}
	return false
}

func assignmentFromPB(tps []*pb.TopicPartitions) assignment {
	a := assignment{}
	for _, tp := range tps {
		a[tp.TopicId] = append(a[tp.TopicId], tp.Partitions...)
	}
	return a.normalized()
}

// pb lists the assignment sorted by topic id.
func (a assignment) pb() []*pb.TopicPartitions {
	ids := make([]string, 0, len(a))
	for t := range a {
		ids = append(ids, t)
	}
	sort.Strings(ids)
	out := make([]*pb.TopicPartitions, 0, len(ids))
	for _, t := range ids {
		out = append(out, &pb.TopicPartitions{TopicId: t, Partitions: slices.Clone(a[t])})
	}
	return out
}

func (a assignment) String() string {
	ids := make([]string, 0, len(a))
	for t := range a {
		ids = append(ids, t)
	}
	sort.Strings(ids)
	s := "{"
	for i, t := range ids {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%s:%v", t, a[t])
	}
	return s + "}"
}
