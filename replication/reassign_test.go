package replication_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/strand-io/strand/replication"
)

// TestLeaderStateSetReplicas: a reassignment's new replica is known to the
// leader without a new leader epoch; it does not hold back the HW and
// joins the ISR only through an expansion once caught up; a removed
// replica is forgotten.
func TestLeaderStateSetReplicas(t *testing.T) {
	lag := 10 * time.Second
	s := replication.NewLeaderState(1, []int32{1, 2, 3}, []int32{1, 2, 3}, 5, 7, 100, at(0))
	s.OnFetch(2, 100, 100, at(time.Second))
	s.OnFetch(3, 100, 100, at(time.Second))
	if s.OnFetch(4, 0, 100, at(time.Second)) {
		t.Fatal("a fetch from a broker that is not a replica was counted")
	}
	s.SetReplicas([]int32{2, 3, 4, 1}, at(2*time.Second))
	if hw := s.HighWatermark(100); hw != 100 {
		t.Fatalf("HW %d with the new replica outside the ISR, want 100", hw)
	}
	if !s.OnFetch(4, 40, 100, at(3*time.Second)) {
		t.Fatal("the new replica's fetch was refused")
	}
	if next := s.ISRChange(100, at(3*time.Second), lag, nil); next != nil {
		t.Fatalf("ISR change %v before the new replica caught up", next)
	}
	// Behind for longer than the lag: not an ISR member, so nothing to remove.
	s.OnFetch(2, 100, 100, at(19*time.Second))
	s.OnFetch(3, 100, 100, at(19*time.Second))
	if next := s.ISRChange(100, at(20*time.Second), lag, nil); next != nil {
		t.Fatalf("ISR change %v for a lagging replica outside the ISR, want none", next)
	}
	s.OnFetch(2, 100, 100, at(21*time.Second))
	s.OnFetch(3, 100, 100, at(21*time.Second))
	s.OnFetch(4, 100, 100, at(21*time.Second))
	if next := s.ISRChange(100, at(21*time.Second), lag, nil); !reflect.DeepEqual(next, []int32{1, 2, 3, 4}) {
		t.Fatalf("ISR change %v once caught up, want [1 2 3 4]", next)
	}
	// Completion removes 1's follower 2 (1 stays leader here).
	s.SetReplicas([]int32{1, 3, 4}, at(22*time.Second))
	if s.OnFetch(2, 100, 100, at(22*time.Second)) {
		t.Fatal("a removed replica's fetch was still counted")
	}
	if s.FollowerLEO(4) != 100 || s.FollowerLEO(3) != 100 {
		t.Fatal("followers that stay lost their log ends")
	}
}
