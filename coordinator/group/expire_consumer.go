package group

import (
	"fmt"
	"time"
)

// The deadlines of consumer group members, checked by the sweep: a member
// whose session ran out (group.consumer.session.timeout.ms, or a classic
// member's session.timeout.ms), one that did not revoke within its
// rebalance timeout, and a classic member that did not rejoin or sync in
// time is fenced: removed from the group, which moves on without it.

// memberDue reports whether a member is past one of its deadlines, and
// which.
func (c *Coordinator) memberDue(m *cmember, now time.Time) (bool, string) {
	if timeout := m.sessionTimeout(c.cfg.ConsumerSessionTimeout); !m.lastSeen.IsZero() && now.Sub(m.lastSeen) > timeout {
		return true, fmt.Sprintf("its session expired (no heartbeat within %v)", timeout)
	}
	if m.classic == nil && m.state == memberUnrevoked && !m.revokeBy.IsZero() && m.epoch == m.revokeEpoch && now.After(m.revokeBy) {
		return true, fmt.Sprintf("it did not revoke its partitions within its rebalance timeout (%d ms) at epoch %d", m.rebalanceTimeoutMs, m.epoch)
	}
	if m.classic != nil && !m.joinBy.IsZero() && now.After(m.joinBy) {
		return true, "the classic member did not rejoin within its rebalance timeout"
	}
	if m.classic != nil && !m.syncBy.IsZero() && now.After(m.syncBy) {
		return true, "the classic member did not sync within its rebalance timeout"
	}
	return false, ""
}

// expireConsumer starts the removal of every member of a consumer group
// past a deadline (s.mu held). Each removal runs through the group's
// lane, in the background, and checks the deadline again there.
func (c *Coordinator) expireConsumer(s *shard, g *group, now time.Time) {
	for id, m := range g.cg.members {
		if due, _ := c.memberDue(m, now); !due {
			continue
		}
		key := g.id + "\x00" + id
		if s.fencing[key] {
			continue
		}
		s.fencing[key] = true
		gid, mid := g.id, id
		if !c.goBackground(func() {
			c.fenceIfStill(gid, mid, c.memberDue)
			s.mu.Lock()
			delete(s.fencing, key)
			s.mu.Unlock()
		}) {
			delete(s.fencing, key)
		}
	}
}
