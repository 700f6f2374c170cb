// Package replication keeps replicas in step: follower fetchers (one per
// source broker, many partitions per request), the leader's view of its
// followers (log end offsets, ISR membership, the high watermark), ISR
// changes through the controller's AlterPartition, and truncation by
// leader epoch (KIP-101, KIP-279) before a follower fetches.
package replication

import (
	"sort"
	"time"
)

// followerState is what a leader knows of one follower.
type followerState struct {
	leo                int64 // the follower's fetch offset: everything below is on it
	lastFetch          time.Time
	lastFetchLeaderLEO int64
	lastCaughtUp       time.Time
}

// LeaderState is the pure core a partition leader runs: follower fetches
// and ticks in, the high watermark and ISR changes out. It does no I/O and
// holds no lock; the Manager serialises calls per partition.
type LeaderState struct {
	Self           int32
	Replicas       []int32
	ISR            []int32
	LeaderEpoch    int32
	PartitionEpoch int32
	// EpochStart is the leader's log end when it became leader: a follower
	// joins the ISR only once it has everything up to here too.
	EpochStart int64
	// Pending is the ISR of an AlterPartition in flight (nil if none).
	Pending []int32

	followers map[int32]*followerState
}

// NewLeaderState starts leadership at epochStart; every follower is
// considered caught up at now, like Kafka, so none drops out of the ISR
// before it has had replica.lag.time.max.ms to fetch.
func NewLeaderState(self int32, replicas, isr []int32, leaderEpoch, partitionEpoch int32, epochStart int64, now time.Time) *LeaderState {
	s := &LeaderState{Self: self, Replicas: append([]int32(nil), replicas...), ISR: append([]int32(nil), isr...),
		LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch, EpochStart: epochStart, followers: map[int32]*followerState{}}
	for _, r := range replicas {
		if r != self {
			s.followers[r] = &followerState{leo: -1, lastCaughtUp: now, lastFetch: now}
		}
	}
	return s
}

// SetReplicas installs a new replica set under the same leadership (a
// reassignment adds or removes replicas without a new leader epoch):
// followers that stay keep what the leader knows of them, new ones start
// unknown (log end -1, caught up at now, as at the start of leadership, so
// they join the ISR only through an expansion once they have caught up),
// and removed ones are forgotten.
func (s *LeaderState) SetReplicas(replicas []int32, now time.Time) {
	s.Replicas = append([]int32(nil), replicas...)
	for _, r := range replicas {
		if r != s.Self && s.followers[r] == nil {
			s.followers[r] = &followerState{leo: -1, lastCaughtUp: now, lastFetch: now}
		}
	}
	for id := range s.followers {
		if !has(replicas, id) {
			delete(s.followers, id)
		}
	}
}

// KeepPending is what a metadata change under the same leadership (same
// leader epoch: an ISR or replica-set change the leader did not ask for, or
// the answer to its own AlterPartition arriving through metadata first)
// leaves of the AlterPartition in flight: the members it adds that are
// still replicas and not yet in isr. The HW keeps waiting for them, since
// the controller may still commit the expansion; members no longer replicas
// or already applied are dropped, and with none left Pending is nil. Call
// it after SetReplicas, with the new ISR.
func (s *LeaderState) KeepPending(isr []int32) {
	var keep []int32
	for _, r := range s.Pending {
		if has(s.Replicas, r) && !has(isr, r) {
			keep = append(keep, r)
		}
	}
	s.Pending = keep
}

// OnFetch records a follower fetch at fetchOffset while the leader's log
// end was leaderLEO. A follower caught up with the log end is caught up now;
// one that reached the log end of its previous fetch was caught up then.
func (s *LeaderState) OnFetch(id int32, fetchOffset, leaderLEO int64, now time.Time) bool {
	f := s.followers[id]
	if f == nil {
		return false
	}
	if fetchOffset >= leaderLEO {
		f.lastCaughtUp = now
	} else if fetchOffset >= f.lastFetchLeaderLEO && f.lastFetch.After(f.lastCaughtUp) {
		f.lastCaughtUp = f.lastFetch
	}
	f.leo = fetchOffset
	f.lastFetchLeaderLEO = leaderLEO
	f.lastFetch = now
	return true
}

// FollowerLEO returns what the leader knows of a follower's log end (-1 unknown).
func (s *LeaderState) FollowerLEO(id int32) int64 {
	if f := s.followers[id]; f != nil {
		return f.leo
	}
	return -1
}

// MaximalISR is the ISR plus the members of an expansion in flight: the
// high watermark must wait for all of them.
func (s *LeaderState) MaximalISR() []int32 {
	out := append([]int32(nil), s.ISR...)
	for _, r := range s.Pending {
		if !has(out, r) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// HighWatermark is the smallest log end over the maximal ISR, counting the
// leader's own as leaderEnd (its log end, or its fsynced end under
// flush.messages=1).
func (s *LeaderState) HighWatermark(leaderEnd int64) int64 {
	hw := leaderEnd
	for _, r := range s.MaximalISR() {
		if r == s.Self {
			continue
		}
		f := s.followers[r]
		if f == nil || f.leo < 0 {
			return -1
		}
		if f.leo < hw {
			hw = f.leo
		}
	}
	return hw
}

// ISRChange proposes the next ISR, or nil if none is due: followers that
// are not in the ISR but have caught up with the HW and the epoch start,
// and that eligible allows (nil: all), are added; members that have not
// caught up for lag are removed. While an AlterPartition is in flight
// nothing new is proposed. eligible is Kafka's isReplicaIsrEligible
// (KIP-841): a fenced or shutting-down broker is not proposed, since the
// controller would refuse it (INELIGIBLE_REPLICA) on every fetch.
func (s *LeaderState) ISRChange(hw int64, now time.Time, lag time.Duration, eligible func(int32) bool) []int32 {
	if s.Pending != nil {
		return nil
	}
	next := append([]int32(nil), s.ISR...)
	changed := false
	for _, r := range s.Replicas {
		f := s.followers[r]
		if r == s.Self || f == nil {
			continue
		}
		in := has(next, r)
		switch {
		case !in && f.leo >= hw && f.leo >= s.EpochStart && now.Sub(f.lastCaughtUp) < lag && (eligible == nil || eligible(r)):
			next = append(next, r)
			changed = true
		case in && now.Sub(f.lastCaughtUp) > lag:
			next = remove(next, r)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	sort.Slice(next, func(i, j int) bool { return next[i] < next[j] })
	return next
}

func has(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func remove(s []int32, v int32) []int32 {
	out := s[:0:0]
	for _, x := range s {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}
