package request

import (
	"context"
	"math"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TestLeadersWaitBounded: ElectLeaders and DeleteRecords hold their answer
// for the request's timeout_ms, at most maxLeadersWait: an INT32 of
// milliseconds (about 24 days) is not taken as asked.
func TestLeadersWaitBounded(t *testing.T) {
	for _, c := range []struct {
		ms   int32
		want time.Duration
	}{
		{math.MaxInt32, maxLeadersWait},
		{int32(maxLeadersWait/time.Millisecond) + 1, maxLeadersWait},
		{0, maxLeadersWait},
		{-5, maxLeadersWait},
		{1500, 1500 * time.Millisecond},
	} {
		if got := leadersWait(c.ms); got != c.want {
			t.Errorf("timeout_ms %d waits %v, want %v", c.ms, got, c.want)
		}
	}
}

// TestWaitUntilStopsOnCancel: a wait that never completes ends as soon as
// the request's context does, and at its bound otherwise.
func TestWaitUntilStopsOnCancel(t *testing.T) {
	// In a synctest bubble the time package is virtual: the waits below
	// take no wall time, and the measured times are exact.
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		// Virtual time: the bubble's clock moves 30ms when every goroutine waits.
		go func() { time.Sleep(30 * time.Millisecond); cancel() }() // virtual time (synctest)
		start := time.Now()
		if waitUntil(ctx, time.Hour, func() bool { return false }) {
			t.Fatal("a wait that never held reported done")
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("a cancelled wait took %v", took)
		}
		start = time.Now()
		if waitUntil(context.Background(), 50*time.Millisecond, func() bool { return false }) {
			t.Fatal("a wait that never held reported done")
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("a 50ms wait took %v", took)
		}
		n := 0
		if !waitUntil(context.Background(), time.Hour, func() bool { n++; return n >= 3 }) {
			t.Fatal("a wait that held reported not done")
		}
	})
}

// TestDedupeDeleteRecords: a partition named twice is asked once, at its
// first place, with its last offset (Kafka's handler collects the request
// into a map).
func TestDedupeDeleteRecords(t *testing.T) {
	in := []*pb.DeleteRecordsPartition{
		{Topic: "a", Partition: 0, Offset: 1},
		{Topic: "b", Partition: 0, Offset: 7},
		{Topic: "a", Partition: 0, Offset: 3},
		{Topic: "a", Partition: 1, Offset: 2},
	}
	got := dedupeDeleteRecords(in)
	want := []*pb.DeleteRecordsPartition{in[2], in[1], in[3]}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("deduped %v, want %v", got, want)
	}
}
