package perf

import (
	"testing"
	"time"
)

func TestHistogramQuantiles(t *testing.T) {
	h := NewHistogram()
	for i := 1; i <= 10000; i++ {
		h.Record(time.Duration(i) * time.Microsecond * 10) // 10 µs .. 100 ms
	}
	check := func(q float64, want time.Duration) {
		got := h.Quantile(q)
		if diff := float64(got-want) / float64(want); diff < -0.02 || diff > 0.02 {
			t.Errorf("q%.3f = %v, want %v ±2%%", q, got, want)
		}
	}
	check(0.5, 50*time.Millisecond)
	check(0.99, 99*time.Millisecond)
	check(0.999, 99900*time.Microsecond)
	if h.Max() != 100*time.Millisecond || h.Count() != 10000 {
		t.Fatalf("max %v count %d", h.Max(), h.Count())
	}
	if m := h.Mean(); m < 50*time.Millisecond || m > 50100*time.Microsecond {
		t.Fatalf("mean %v", m)
	}
	h.Reset()
	if h.Count() != 0 || h.Quantile(0.5) != 0 {
		t.Fatal("reset kept values")
	}
}

func TestBucketsAreMonotonic(t *testing.T) {
	prev := -1
	for us := uint64(0); us < 1<<24; us = us*11/10 + 1 {
		b := bucketOf(us)
		if b < prev {
			t.Fatalf("bucket(%d)=%d below bucket of a smaller value (%d)", us, b, prev)
		}
		if v := valueOf(b); v < us {
			t.Fatalf("bucket %d tops at %d, below its member %d", b, v, us)
		}
		prev = b
	}
}
