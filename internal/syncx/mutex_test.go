package syncx

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestMutexExcludes(t *testing.T) {
	var m Mutex
	n := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				m.Lock()
				n++
				m.Unlock()
			}
		}()
	}
	wg.Wait()
	if n != 8000 {
		t.Fatalf("n = %d, want 8000", n)
	}
	if !m.TryLock() {
		t.Fatal("TryLock of a free mutex failed")
	}
	if m.TryLock() {
		t.Fatal("TryLock of a held mutex succeeded")
	}
	m.Unlock()
}

func TestLockContextGivesUp(t *testing.T) {
	var m Mutex
	m.Lock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := m.LockContext(ctx); err == nil {
		t.Fatal("LockContext of a held mutex returned nil after its context ended")
	}
	m.Unlock()
	if err := m.LockContext(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestUnlockOfUnlockedPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	var m Mutex
	m.Unlock()
}

// TestWaiterLetsVirtualTimeRun is why the package exists: a holder that
// waits for a timer while another goroutine waits for the lock. In a
// synctest bubble the timer fires only if every goroutine is durably
// blocked; a waiter on a sync.Mutex is not, so with sync.Mutex this test
// never ends (the bubble's clock stands still).
func TestWaiterLetsVirtualTimeRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var m Mutex
		m.Lock()
		done := make(chan struct{})
		go func() {
			m.Lock()
			m.Unlock()
			close(done)
		}()
		time.Sleep(time.Hour) // virtual time (synctest): the holder waits with the waiter blocked
		m.Unlock()
		<-done
	})
}
