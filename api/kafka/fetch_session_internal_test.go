package kafka

import (
	"sync"
	"testing"
	"time"
)

// TestSessionCacheEvictsWhileSessionsServe: the cache picks a session to
// evict by when each was last used while requests of those sessions run
// and record their use, each under its own session's lock only. Run with
// -race, which reports a plain timestamp read and written that way. The
// least recently used session idle past a minute is the one evicted.
func TestSessionCacheEvictsWhileSessionsServe(t *testing.T) {
	c := newSessionCache(2)
	start := time.Unix(1_000_000, 0)
	idle := c.open(start, false)
	busy := c.open(start, false)
	if idle == nil || busy == nil {
		t.Fatal("a cache of two slots declined a session")
	}
	busy.touch(start.Add(2 * time.Minute))
	var wg sync.WaitGroup
	stop, running := make(chan struct{}), make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; ; i++ {
			busy.mu.Lock()
			busy.touch(start.Add(2*time.Minute + time.Duration(i)))
			busy.mu.Unlock()
			if i == 1 {
				close(running)
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	<-running
	// While the busy session serves requests, new sessions are declined:
	// neither has been idle a minute at start+30s.
	for range 200 {
		if s := c.open(start.Add(30*time.Second), false); s != nil {
			t.Fatal("a full cache evicted a session used 30 seconds ago")
		}
	}
	// Three minutes on, the idle session (used at start) is the one to go.
	opened := c.open(start.Add(3*time.Minute), false)
	close(stop)
	wg.Wait()
	if opened == nil {
		t.Fatal("a full cache declined a session though one had been idle for three minutes")
	}
	if c.get(idle.id) != nil {
		t.Fatal("the idle session survived; the eviction took another")
	}
	if c.get(busy.id) == nil {
		t.Fatal("the session in use was evicted")
	}
}
