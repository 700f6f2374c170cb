// Package perf holds what the perf tools share: an HDR-style latency
// histogram and an open-loop rate limiter.
package perf

import (
	"math"
	"sync"
	"time"
)

// Histogram records durations with under 2% relative error from 1 µs
// to over an hour (log-linear buckets, like HdrHistogram with two
// significant digits). Safe for concurrent use.
type Histogram struct {
	mu     sync.Mutex
	counts []uint64
	n      uint64
	sum    time.Duration
	max    time.Duration
}

const (
	subBuckets = 128 // values below are exact; above, 64 buckets per power of two (~1.6%)
	maxExp     = 42  // 2^42 µs ≈ 50 days
)

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram { return &Histogram{counts: make([]uint64, subBuckets*maxExp)} }

func bucketOf(us uint64) int {
	if us < subBuckets {
		return int(us)
	}
	exp := 63 - leadingZeros(us) - 6 // us / 2^exp in [64,128)
	idx := exp*64 + int(us>>uint(exp))
	if idx >= subBuckets*maxExp {
		idx = subBuckets*maxExp - 1
	}
	return idx
}

// valueOf returns the highest value of bucket i (in µs).
func valueOf(i int) uint64 {
	if i < subBuckets {
		return uint64(i)
	}
	exp := i/64 - 1
	mant := uint64(i - exp*64)
	return (mant+1)<<uint(exp) - 1
}

func leadingZeros(x uint64) int {
	n := 0
	for x&(1<<63) == 0 {
		x <<= 1
		n++
	}
	return n
}

// Record adds one duration.
func (h *Histogram) Record(d time.Duration) {
	us := uint64(0)
	if d > 0 {
		us = uint64(d / time.Microsecond)
	}
	h.mu.Lock()
	h.counts[bucketOf(us)]++
	h.n++
	h.sum += d
	if d > h.max {
		h.max = d
	}
	h.mu.Unlock()
}

// Count is the number of recorded values.
func (h *Histogram) Count() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// Mean is the average duration.
func (h *Histogram) Mean() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}

// Max is the largest duration recorded.
func (h *Histogram) Max() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.max
}

// Quantile returns the value below which a share q of the values fall.
func (h *Histogram) Quantile(q float64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank == 0 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			v := time.Duration(valueOf(i)) * time.Microsecond
			if v > h.max {
				v = h.max
			}
			return v
		}
	}
	return h.max
}

// Reset empties the histogram (for windowed progress lines).
func (h *Histogram) Reset() {
	h.mu.Lock()
	for i := range h.counts {
		h.counts[i] = 0
	}
	h.n, h.sum, h.max = 0, 0, 0
	h.mu.Unlock()
}

// Throttle paces an open loop at a target rate (Kafka's
// ThroughputThrottler): callers ask before each send and are held back to
// the schedule, whatever the acknowledgements do. perSec <= 0 never waits.
type Throttle struct {
	perSec float64
	start  time.Time
	sent   int64
}

// NewThrottle starts the schedule now.
func NewThrottle(perSec float64) *Throttle { return &Throttle{perSec: perSec, start: time.Now()} }

// Wait blocks until the next send is due.
func (t *Throttle) Wait() {
	if t.perSec <= 0 {
		return
	}
	t.sent++
	due := t.start.Add(time.Duration(float64(t.sent) / t.perSec * float64(time.Second)))
	if d := time.Until(due); d > 0 {
		time.Sleep(d)
	}
}
