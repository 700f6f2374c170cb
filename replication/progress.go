package replication

import "github.com/strand-io/strand/broker/storage"

// FollowerLogEnds reports, for a partition this broker leads, each
// follower's log end offset as the leader knows it from its fetches (-1:
// none yet) and the leader's own log end; ok is false when this broker
// does not lead the partition. The web console shows it as a
// reassignment's progress.
func (m *Manager) FollowerLogEnds(topic string, partition int32) (followers map[int32]int64, leaderEnd int64, ok bool) {
	le := m.leader(storage.PartitionKey{Topic: topic, Partition: partition})
	if le == nil {
		return nil, -1, false
	}
	le.mu.Lock()
	defer le.mu.Unlock()
	if le.st == nil {
		return nil, -1, false
	}
	followers = map[int32]int64{}
	for _, r := range le.st.Replicas {
		if r != le.st.Self {
			followers[r] = le.st.FollowerLEO(r)
		}
	}
	return followers, le.p.Log.LogEndOffset(), true
}
