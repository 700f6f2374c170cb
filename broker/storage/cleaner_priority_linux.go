package storage

import (
	"runtime"
	"syscall"
)

// cleanerNice is the CPU niceness of the thread a cleaning pass reads and
// rewrites on: the lowest priority, so that on a busy machine the
// producers' appends, the replication and the fetches run first and the
// cleaner takes what CPU is left (Kafka's cleaner threads run at normal
// priority and are only bounded by log.cleaner.io.max.bytes.per.second).
const cleanerNice = 19

// lowPriority runs fn on an OS thread of its own whose niceness is
// cleanerNice, and returns when fn has. The goroutine ends locked to its
// thread, so the Go runtime ends that thread with it: the niceness never
// reaches a thread that runs anything else (an unprivileged process could
// not raise it back). fn must not take the log's lock: a thread this far
// down could be kept off the CPU while holding it.
func lowPriority(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		// Best effort: if the niceness cannot be set the pass runs at
		// normal priority, as before.
		_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), cleanerNice)
		fn()
	}()
	<-done
}

// threadNice returns the calling thread's niceness (for tests).
func threadNice() (int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// The raw getpriority syscall returns 20 - nice.
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
	if err != nil {
		return 0, err
	}
	return 20 - p, nil
}
