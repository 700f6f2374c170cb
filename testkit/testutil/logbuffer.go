package testutil

import (
	"bytes"
	"sync"
)

// LogBuffer is a goroutine-safe sink for a node's or a tool's log output,
// for tests that assert what was logged.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *LogBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *LogBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
