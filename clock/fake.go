package clock

import (
	"sort"
	"sync"
	"time"
)

// Fake is a Clock that moves only when told to. Timers and tickers fire
// during Advance, in deadline order.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter
}

type fakeWaiter struct {
	f        *Fake
	deadline time.Time
	period   time.Duration // 0 for timers
	ch       chan time.Time
	active   bool
}

// NewFake starts a fake clock at t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves time forward by d, firing due timers and tickers.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	target := f.now.Add(d)
	for {
		sort.Slice(f.waiters, func(i, j int) bool { return f.waiters[i].deadline.Before(f.waiters[j].deadline) })
		var next *fakeWaiter
		for _, w := range f.waiters {
			if w.active && !w.deadline.After(target) {
				next = w
				break
			}
		}
		if next == nil {
			break
		}
		f.now = next.deadline
		select {
		case next.ch <- f.now:
		default:
		}
		if next.period > 0 {
			next.deadline = next.deadline.Add(next.period)
		} else {
			next.active = false
		}
	}
	f.now = target
	f.mu.Unlock()
}

func (f *Fake) add(w *fakeWaiter) {
	f.mu.Lock()
	f.waiters = append(f.waiters, w)
	f.mu.Unlock()
}

// NewTimer returns a timer driven by Advance.
func (f *Fake) NewTimer(d time.Duration) Timer {
	w := &fakeWaiter{f: f, deadline: f.Now().Add(d), ch: make(chan time.Time, 1), active: true}
	f.add(w)
	return w
}

// NewTicker returns a ticker driven by Advance.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	w := &fakeWaiter{f: f, deadline: f.Now().Add(d), period: d, ch: make(chan time.Time, 1), active: true}
	f.add(w)
	return fakeTicker{w}
}

func (w *fakeWaiter) C() <-chan time.Time { return w.ch }

func (w *fakeWaiter) Stop() bool {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	was := w.active
	w.active = false
	return was
}

func (w *fakeWaiter) Reset(d time.Duration) bool {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	was := w.active
	w.active = true
	w.deadline = w.f.now.Add(d)
	return was
}

type fakeTicker struct{ w *fakeWaiter }

func (t fakeTicker) C() <-chan time.Time { return t.w.ch }
func (t fakeTicker) Stop()               { t.w.Stop() }
