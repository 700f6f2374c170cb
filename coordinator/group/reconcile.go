package group

// reconcile moves a member one step towards its target assignment (Kafka's
// CurrentAssignmentBuilder): it returns the member as it is when nothing
// can change, or a copy in its next state.
//
//	stable     ── new target epoch ──▶ next assignment (below)
//	unrevoked  ── the member no longer reports the partitions to revoke ──▶
//	              next assignment at epoch+1
//	unreleased ── ▶ next assignment (the partitions it waits for may be free now)
//
// The next assignment keeps what the member owns that is still in its
// target; what it owns outside the target is to be revoked; what is in
// the target but not owned is given only if no member holds it (owner
// returns -1). Then: partitions to revoke that the member still reports
// (owned, nil when the heartbeat did not say) → unrevoked, at its current
// epoch; else the member moves to the target epoch, with the free
// partitions added, stable or unreleased (some it waits for are still
// held).
//
// owned is what the member's heartbeat reported (nil: not reported, as
// a heartbeat that repeats nothing); owner gives the epoch of a
// partition's current owner.
func reconcile(m *cmember, targetEpoch int32, target assignment, owner func(topicID string, p int32) int32, owned assignment) *cmember {
	switch m.state {
	case memberStable:
		if m.epoch == targetEpoch {
			return m
		}
		return nextAssignment(m, m.epoch, targetEpoch, target, owner, owned)
	case memberUnrevoked:
		if ownsAny(owned, m.revoking) {
			return m
		}
		return nextAssignment(m, m.epoch+1, targetEpoch, target, owner, owned)
	case memberUnreleased:
		return nextAssignment(m, m.epoch, targetEpoch, target, owner, owned)
	}
	return m
}

// ownsAny reports whether the reported partitions include one of revoking;
// partitions not reported (nil) count as still owned.
func ownsAny(owned, revoking assignment) bool {
	if owned == nil {
		return true
	}
	return owned.intersects(revoking)
}

func nextAssignment(m *cmember, epoch, targetEpoch int32, target assignment, owner func(string, int32) int32, owned assignment) *cmember {
	keep, revoke, add := assignment{}, assignment{}, assignment{}
	unreleased := false
	topics := map[string]bool{}
	for t := range target {
		topics[t] = true
	}
	for t := range m.assigned {
		topics[t] = true
	}
	for t := range topics {
		want, have := target[t], m.assigned[t]
		for _, p := range have {
			if target.has(t, p) {
				keep[t] = append(keep[t], p)
			} else {
				revoke[t] = append(revoke[t], p)
			}
		}
		for _, p := range want {
			if m.assigned.has(t, p) {
				continue
			}
			if owner(t, p) != -1 {
				unreleased = true
				continue
			}
			add[t] = append(add[t], p)
		}
	}
	keep, revoke, add = keep.normalized(), revoke.normalized(), add.normalized()

	n := m.clone()
	if len(revoke) > 0 && ownsAny(owned, revoke) {
		n.state, n.assigned, n.revoking = memberUnrevoked, keep, revoke
		n.setEpoch(epoch)
		n.setAssignEpochs(m, epoch)
		return n
	}
	for t, ps := range add {
		keep[t] = append(keep[t], ps...)
	}
	n.assigned, n.revoking = keep.normalized(), assignment{}
	n.state = memberStable
	if unreleased {
		n.state = memberUnreleased
	}
	n.setEpoch(targetEpoch)
	n.setAssignEpochs(m, targetEpoch)
	return n
}

// setEpoch moves the member to epoch, remembering the one it leaves.
func (m *cmember) setEpoch(epoch int32) {
	if m.epoch != epoch {
		m.prevEpoch = m.epoch
		m.epoch = epoch
	}
}
