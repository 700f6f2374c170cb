// Package syncx holds a mutex for locks that are held across a wait (a
// Raft commit, a call to another node): a Mutex whose waiters block on a
// channel instead of the runtime's semaphore.
//
// The difference matters in two places. A waiter can give up
// (LockContext), where sync.Mutex makes it wait as long as the holder's
// call takes. And inside a testing/synctest bubble, where the cluster
// simulation runs every node on virtual time, a goroutine blocked on a
// channel is durably blocked but one blocked on a sync.Mutex is not: the
// bubble's clock advances only when every goroutine is durably blocked, so
// a sync.Mutex held while its holder waits for a timer (a Raft election,
// a retry backoff) stops the clock for ever and the run hangs.
//
// Locks that are never held across a wait stay sync.Mutex: they are
// cheaper, and a waiter on them never waits for long.
package syncx

import (
	"context"
	"sync"
)

// Mutex is a mutual exclusion lock whose waiters block on a channel. The
// zero value is an unlocked mutex; it must not be copied after first use.
type Mutex struct {
	once sync.Once
	ch   chan struct{}
}

func (m *Mutex) init() { m.once.Do(func() { m.ch = make(chan struct{}, 1) }) }

// Lock locks m, waiting until it is free.
func (m *Mutex) Lock() {
	m.init()
	m.ch <- struct{}{}
}

// TryLock locks m if it is free and reports whether it did.
func (m *Mutex) TryLock() bool {
	m.init()
	select {
	case m.ch <- struct{}{}:
		return true
	default:
		return false
	}
}

// LockContext locks m, or returns ctx's error if ctx ends first.
func (m *Mutex) LockContext(ctx context.Context) error {
	m.init()
	select {
	case m.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Unlock unlocks m. Unlocking an unlocked Mutex is a fatal error, as with
// sync.Mutex.
func (m *Mutex) Unlock() {
	m.init()
	select {
	case <-m.ch:
	default:
		panic("syncx: unlock of unlocked mutex")
	}
}
