package broker

import "github.com/strand-io/strand/broker/storage"

// CleanerCandidatesForTest lists the logs the cleaner would survey now,
// with their upper bounds.
func (m *Manager) CleanerCandidatesForTest() map[storage.PartitionKey]int64 {
	out := map[storage.PartitionKey]int64{}
	for _, c := range m.compactedLogs() {
		out[c.key] = c.upperBound
	}
	return out
}

// CleanerRunningForTest reports whether the Manager started a cleaner.
func (m *Manager) CleanerRunningForTest() bool { return m.cleaner != nil }
