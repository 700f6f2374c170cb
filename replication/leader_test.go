package replication_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/strand-io/strand/replication"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

type fetch struct {
	id          int32
	offset, leo int64
	when        time.Duration // after t0
}

func doFetches(t *testing.T, s *replication.LeaderState, fs []fetch) {
	t.Helper()
	for _, f := range fs {
		if !s.OnFetch(f.id, f.offset, f.leo, at(f.when)) {
			t.Fatalf("OnFetch(%d) refused", f.id)
		}
	}
}

func TestLeaderStateOnFetch(t *testing.T) {
	s := replication.NewLeaderState(1, []int32{1, 2, 3}, []int32{1, 2, 3}, 4, 5, 0, t0)
	if s.OnFetch(9, 0, 0, t0) {
		t.Fatal("OnFetch accepted a non-replica")
	}
	if s.OnFetch(1, 0, 0, t0) {
		t.Fatal("OnFetch accepted the leader itself")
	}
	for _, id := range []int32{1, 2, 3, 9} {
		if got := s.FollowerLEO(id); got != -1 {
			t.Fatalf("FollowerLEO(%d) before any fetch = %d", id, got)
		}
	}
	doFetches(t, s, []fetch{{2, 7, 10, 1}, {3, 3, 10, 1}, {2, 9, 12, 2}})
	if s.FollowerLEO(2) != 9 || s.FollowerLEO(3) != 3 {
		t.Fatalf("FollowerLEO = %d, %d", s.FollowerLEO(2), s.FollowerLEO(3))
	}
	if s.FollowerLEO(9) != -1 {
		t.Fatal("FollowerLEO of a non-replica")
	}
}

func TestLeaderStateCopiesInputs(t *testing.T) {
	reps, isr := []int32{1, 2, 3}, []int32{1, 2}
	s := replication.NewLeaderState(1, reps, isr, 0, 0, 0, t0)
	reps[2], isr[1] = 9, 9
	if !reflect.DeepEqual(s.Replicas, []int32{1, 2, 3}) || !reflect.DeepEqual(s.ISR, []int32{1, 2}) {
		t.Fatalf("state shares its inputs: replicas %v isr %v", s.Replicas, s.ISR)
	}
}

func TestHighWatermark(t *testing.T) {
	cases := []struct {
		name      string
		replicas  []int32
		isr       []int32
		pending   []int32
		fetches   []fetch
		leaderEnd int64
		want      int64
	}{
		{name: "no follower fetched yet", replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3}, leaderEnd: 10, want: -1},
		{name: "one ISR follower not fetched yet", replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3},
			fetches: []fetch{{2, 10, 10, 1}}, leaderEnd: 10, want: -1},
		{name: "minimum over ISR followers", replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3},
			fetches: []fetch{{2, 7, 10, 1}, {3, 9, 10, 1}}, leaderEnd: 10, want: 7},
		{name: "leader end is the bound", replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3},
			fetches: []fetch{{2, 10, 10, 1}, {3, 10, 10, 1}}, leaderEnd: 6, want: 6},
		{name: "latest fetch counts", replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3},
			fetches: []fetch{{2, 3, 10, 1}, {3, 9, 10, 1}, {2, 8, 10, 2}}, leaderEnd: 10, want: 8},
		{name: "fetch at offset 0 counts", replicas: []int32{1, 2}, isr: []int32{1, 2},
			fetches: []fetch{{2, 0, 0, 1}}, leaderEnd: 0, want: 0},
		{name: "leader alone", replicas: []int32{1, 2, 3}, isr: []int32{1}, leaderEnd: 10, want: 10},
		{name: "single replica", replicas: []int32{1}, isr: []int32{1}, leaderEnd: 42, want: 42},
		{name: "followers outside the ISR do not count", replicas: []int32{1, 2, 3}, isr: []int32{1, 2},
			fetches: []fetch{{2, 8, 10, 1}, {3, 1, 10, 1}}, leaderEnd: 10, want: 8},
		{name: "follower outside the ISR not fetched yet", replicas: []int32{1, 2, 3}, isr: []int32{1, 2},
			fetches: []fetch{{2, 8, 10, 1}}, leaderEnd: 10, want: 8},
		{name: "pending expansion waits for the new member to fetch", replicas: []int32{1, 2, 3}, isr: []int32{1, 2}, pending: []int32{1, 2, 3},
			fetches: []fetch{{2, 8, 10, 1}}, leaderEnd: 10, want: -1},
		{name: "pending expansion holds the HW to the new member", replicas: []int32{1, 2, 3}, isr: []int32{1, 2}, pending: []int32{1, 2, 3},
			fetches: []fetch{{2, 8, 10, 1}, {3, 5, 10, 1}}, leaderEnd: 10, want: 5},
		{name: "pending shrink still counts the old member", replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3}, pending: []int32{1, 2},
			fetches: []fetch{{2, 8, 10, 1}, {3, 4, 10, 1}}, leaderEnd: 10, want: 4},
		{name: "ISR member that is not a replica", replicas: []int32{1, 2}, isr: []int32{1, 2, 5},
			fetches: []fetch{{2, 8, 10, 1}}, leaderEnd: 10, want: -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := replication.NewLeaderState(1, c.replicas, c.isr, 0, 0, 0, t0)
			s.Pending = c.pending
			doFetches(t, s, c.fetches)
			if got := s.HighWatermark(c.leaderEnd); got != c.want {
				t.Fatalf("HighWatermark(%d) = %d, want %d", c.leaderEnd, got, c.want)
			}
		})
	}
}

func TestLeaderStateMaximalISR(t *testing.T) {
	cases := []struct {
		isr, pending, want []int32
	}{
		{isr: []int32{3, 1}, want: []int32{1, 3}},
		{isr: []int32{1, 2}, pending: []int32{1, 2, 3}, want: []int32{1, 2, 3}},
		{isr: []int32{1, 3}, pending: []int32{1}, want: []int32{1, 3}},
		{isr: []int32{2, 1}, pending: []int32{3, 1}, want: []int32{1, 2, 3}},
	}
	for _, c := range cases {
		s := replication.NewLeaderState(1, []int32{1, 2, 3}, c.isr, 0, 0, 0, t0)
		s.Pending = c.pending
		isrBefore := append([]int32(nil), s.ISR...)
		if got := s.MaximalISR(); !reflect.DeepEqual(got, c.want) {
			t.Fatalf("MaximalISR(isr %v, pending %v) = %v, want %v", c.isr, c.pending, got, c.want)
		}
		if !reflect.DeepEqual(s.ISR, isrBefore) {
			t.Fatalf("MaximalISR changed the ISR to %v", s.ISR)
		}
	}
}

// TestLeaderStateLastCaughtUp observes when a follower was last caught up
// through ISRChange: an ISR member is removed exactly when it has not been
// caught up for longer than the lag.
func TestLeaderStateLastCaughtUp(t *testing.T) {
	const lag = 10 * time.Second
	cases := []struct {
		name     string
		fetches  []fetch
		caughtUp time.Duration // after t0
	}{
		{name: "leadership start counts as caught up", caughtUp: 0},
		{name: "at the log end: caught up now", fetches: []fetch{{2, 100, 100, 3 * time.Second}}, caughtUp: 3 * time.Second},
		{name: "beyond the log end: caught up now", fetches: []fetch{{2, 101, 100, 3 * time.Second}}, caughtUp: 3 * time.Second},
		{name: "behind: not caught up", fetches: []fetch{{2, 50, 100, 3 * time.Second}}, caughtUp: 0},
		{name: "reached the previous fetch's log end: caught up at the previous fetch",
			fetches:  []fetch{{2, 50, 100, 3 * time.Second}, {2, 100, 120, 5 * time.Second}},
			caughtUp: 3 * time.Second},
		{name: "short of the previous fetch's log end: not caught up",
			fetches:  []fetch{{2, 50, 100, 3 * time.Second}, {2, 99, 120, 5 * time.Second}},
			caughtUp: 0},
		{name: "a steady stream behind the end keeps catching up",
			fetches: []fetch{
				{2, 100, 100, 1 * time.Second}, // at the end
				{2, 100, 120, 2 * time.Second}, // reached what was the end at 1s
				{2, 110, 130, 3 * time.Second}, // short of 120, the end at 2s
				{2, 130, 140, 4 * time.Second}, // reached 130, the end at 3s
			},
			caughtUp: 3 * time.Second},
		{name: "never moves back",
			fetches:  []fetch{{2, 100, 100, 7 * time.Second}, {2, 100, 100, 7 * time.Second}, {2, 100, 150, 8 * time.Second}},
			caughtUp: 7 * time.Second},
		{name: "at the end after falling behind",
			fetches:  []fetch{{2, 10, 100, 1 * time.Second}, {2, 20, 100, 2 * time.Second}, {2, 100, 100, 9 * time.Second}},
			caughtUp: 9 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := replication.NewLeaderState(1, []int32{1, 2}, []int32{1, 2}, 0, 0, 0, t0)
			doFetches(t, s, c.fetches)
			last := at(c.caughtUp)
			if got := s.ISRChange(0, last.Add(lag), lag, nil); got != nil {
				t.Fatalf("ISRChange at caught-up+lag = %v, want none (caught up at %v)", got, c.caughtUp)
			}
			if got := s.ISRChange(0, last.Add(lag+time.Millisecond), lag, nil); !reflect.DeepEqual(got, []int32{1}) {
				t.Fatalf("ISRChange just past caught-up+lag = %v, want [1] (caught up at %v)", got, c.caughtUp)
			}
		})
	}
}

func TestISRChange(t *testing.T) {
	const lag = 10 * time.Second
	cases := []struct {
		name       string
		replicas   []int32
		isr        []int32
		pending    []int32
		epochStart int64
		fetches    []fetch
		hw         int64
		now        time.Duration
		want       []int32
	}{
		{name: "nothing due", replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3},
			fetches: []fetch{{2, 10, 10, 1 * time.Second}, {3, 10, 10, 1 * time.Second}}, hw: 10, now: 2 * time.Second},
		{name: "caught-up follower added", replicas: []int32{1, 2, 3}, isr: []int32{1, 2},
			fetches: []fetch{{2, 10, 10, 1 * time.Second}, {3, 10, 10, 1 * time.Second}}, hw: 10, now: 2 * time.Second,
			want: []int32{1, 2, 3}},
		{name: "added when at the HW though behind the log end", replicas: []int32{1, 2, 3}, isr: []int32{1, 2},
			fetches: []fetch{{3, 8, 10, 1 * time.Second}, {3, 10, 12, 2 * time.Second}}, hw: 10, now: 3 * time.Second,
			want: []int32{1, 2, 3}},
		{name: "below the HW not added", replicas: []int32{1, 2, 3}, isr: []int32{1, 2},
			fetches: []fetch{{3, 9, 9, 1 * time.Second}}, hw: 10, now: 2 * time.Second},
		{name: "below the epoch start not added", replicas: []int32{1, 2, 3}, isr: []int32{1, 2}, epochStart: 20,
			fetches: []fetch{{3, 15, 15, 1 * time.Second}}, hw: 10, now: 2 * time.Second},
		{name: "at the epoch start added", replicas: []int32{1, 2, 3}, isr: []int32{1, 2}, epochStart: 15,
			fetches: []fetch{{3, 15, 15, 1 * time.Second}}, hw: 10, now: 2 * time.Second, want: []int32{1, 2, 3}},
		{name: "never fetched not added", replicas: []int32{1, 2, 3}, isr: []int32{1, 2}, hw: -1, now: 1 * time.Second},
		{name: "not caught up within lag not added", replicas: []int32{1, 2, 3}, isr: []int32{1, 2},
			fetches: []fetch{{2, 100, 100, 15 * time.Second}, {3, 50, 100, 15 * time.Second}}, hw: 40, now: 16 * time.Second},
		{name: "stale ISR member removed", replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3},
			fetches: []fetch{{2, 100, 100, 20 * time.Second}, {3, 50, 100, 20 * time.Second}}, hw: 50, now: 21 * time.Second,
			want: []int32{1, 2}},
		{name: "ISR member that never fetched removed after lag", replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3},
			fetches: []fetch{{2, 100, 100, 5 * time.Second}}, hw: -1, now: 11 * time.Second,
			want: []int32{1, 2}},
		{name: "ISR member that never fetched kept within lag", replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3},
			fetches: []fetch{{2, 100, 100, 5 * time.Second}}, hw: -1, now: 9 * time.Second},
		{name: "ISR member behind but caught up within lag kept", replicas: []int32{1, 2}, isr: []int32{1, 2},
			fetches: []fetch{{2, 50, 100, 5 * time.Second}, {2, 100, 200, 15 * time.Second}}, hw: 50, now: 15 * time.Second},
		{name: "remove and add in one proposal, sorted", replicas: []int32{3, 1, 2}, isr: []int32{1, 2},
			fetches: []fetch{{2, 10, 100, 20 * time.Second}, {3, 100, 100, 20 * time.Second}}, hw: 10, now: 20 * time.Second,
			want: []int32{1, 3}},
		{name: "added member sorted into place", replicas: []int32{1, 2, 3, 4}, isr: []int32{1, 4, 3},
			fetches: []fetch{{2, 10, 10, 20 * time.Second}, {3, 10, 10, 20 * time.Second}, {4, 10, 10, 20 * time.Second}}, hw: 10, now: 21 * time.Second,
			want: []int32{1, 2, 3, 4}},
		{name: "nothing while an AlterPartition is in flight", replicas: []int32{1, 2, 3}, isr: []int32{1, 2}, pending: []int32{1},
			fetches: []fetch{{3, 10, 10, 20 * time.Second}}, hw: 10, now: 21 * time.Second},
		{name: "nothing while an empty pending ISR is in flight", replicas: []int32{1, 2, 3}, isr: []int32{1, 2}, pending: []int32{},
			fetches: []fetch{{3, 10, 10, 20 * time.Second}}, hw: 10, now: 21 * time.Second},
		{name: "the leader alone is never removed", replicas: []int32{1}, isr: []int32{1}, hw: 0, now: time.Hour},
		{name: "the leader stays when all followers are stale", replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3}, hw: 0, now: time.Hour,
			want: []int32{1}},
		{name: "the leader is never added either", replicas: []int32{1, 2}, isr: []int32{2}, hw: 0,
			fetches: []fetch{{2, 0, 0, 1 * time.Second}}, now: 2 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := replication.NewLeaderState(1, c.replicas, c.isr, 0, 0, c.epochStart, t0)
			s.Pending = c.pending
			doFetches(t, s, c.fetches)
			isrBefore := append([]int32(nil), s.ISR...)
			got := s.ISRChange(c.hw, at(c.now), lag, nil)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("ISRChange = %v, want %v", got, c.want)
			}
			if !reflect.DeepEqual(s.ISR, isrBefore) {
				t.Fatalf("ISRChange changed the ISR to %v", s.ISR)
			}
		})
	}
}
