package main

import "testing"

// perf scale's fairness figure: the least-served client over the most.
func TestPerfScaleMinMax(t *testing.T) {
	mn, mx := minMax([]int64{40, 10, 30, 20})
	if mn != 10 || mx != 40 {
		t.Fatalf("minMax = %d, %d; want 10, 40", mn, mx)
	}
	if r := ratio(mn, mx); r != 0.25 {
		t.Fatalf("ratio = %v; want 0.25", r)
	}
	if mn, mx := minMax(nil); mn != 0 || mx != 0 || ratio(mn, mx) != 0 {
		t.Fatalf("no clients: %d, %d, %v; want zeros", mn, mx, ratio(mn, mx))
	}
}
