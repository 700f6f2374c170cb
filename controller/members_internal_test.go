package controller

import (
	"context"
	"testing"
	"time"
)

// TestChangeTimeoutPastDeadline: a ctx whose deadline has passed gives a
// positive enqueue timeout; hashicorp/raft reads 0 (or less) as "no
// timeout" and would wait forever.
func TestChangeTimeoutPastDeadline(t *testing.T) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if got := changeTimeout(ctx); got < time.Millisecond {
		t.Fatalf("changeTimeout(past deadline) = %v, want at least 1ms", got)
	}
}
