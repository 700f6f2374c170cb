package broker_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/replication"
)

var key = storage.PartitionKey{Topic: "orders", Partition: 0}

const leaderEpoch = 3

// newPartition is an empty partition over a real log in a temporary
// directory, with a fake clock.
func newPartition(t *testing.T) *broker.Partition {
	t.Helper()
	cfg := storage.DefaultConfig()
	cfg.Files = storage.NewFileCache(4)
	l, err := storage.Open(filepath.Join(t.TempDir(), storage.DirName(key.Topic, key.Partition)), key, cfg, 0, clock.NewFake(time.Unix(1_700_000_000, 0)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Abandon)
	return broker.NewPartition(key, l, 0)
}

// lead makes p the leader of leaderEpoch with the given ISR (node 1 is p).
func lead(t *testing.T, p *broker.Partition, isr ...int32) {
	t.Helper()
	if err := p.Log.AssignEpoch(leaderEpoch); err != nil {
		t.Fatal(err)
	}
	l := broker.Leadership{Role: broker.RoleLeader, Leader: 1, LeaderEpoch: leaderEpoch, Replicas: isr, ISR: isr, MaximalISR: isr}
	if err := p.SetLeadership(l, nil); err != nil {
		t.Fatal(err)
	}
}

type batch struct {
	pid   int64
	epoch int16
	seq   int32
	txn   bool
	n     int
}

func build(t *testing.T, b batch) []byte {
	t.Helper()
	if b.pid == 0 {
		b.pid, b.epoch, b.seq = record.NoProducerID, record.NoProducerEpoch, record.NoSequence
	}
	recs := make([]record.Record, b.n)
	for i := range recs {
		recs[i] = record.Record{Key: []byte(fmt.Sprint(i)), Value: []byte("v")}
	}
	buf, err := record.Build(record.BatchOptions{PartitionLeaderEpoch: record.NoPartitionLeader, ProducerID: b.pid, ProducerEpoch: b.epoch, BaseSequence: b.seq, Transactional: b.txn}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return buf
}

func produce(t *testing.T, p *broker.Partition, acks int32, b batch) storage.AppendResult {
	t.Helper()
	res, _, err := p.AppendAsLeader(build(t, b), acks)
	if err != nil {
		t.Fatalf("append %+v: %v", b, err)
	}
	return res
}

// TestHighWatermarkFollowsSlowestISRFetch drives the leader's view of its
// followers (replication.LeaderState) with fetch positions and feeds the
// high watermark it computes to the partition: the HW is the lowest fetch
// offset over the ISR, never passes the log end, and a leader's never
// moves back.
func TestHighWatermarkFollowsSlowestISRFetch(t *testing.T) {
	p := newPartition(t)
	lead(t, p, 1, 2, 3)
	now := time.Unix(1_700_000_000, 0)
	ls := replication.NewLeaderState(1, []int32{1, 2, 3}, []int32{1, 2, 3}, leaderEpoch, 0, 0, now)
	produce(t, p, -1, batch{n: 10})
	leo := p.Log.LogEndOffset()

	if hw := ls.HighWatermark(leo); hw != -1 {
		t.Fatalf("HW with no follower fetch yet = %d, want -1 (unknown)", hw)
	}
	ls.OnFetch(2, 10, leo, now)
	ls.OnFetch(3, 4, leo, now)
	hw := ls.HighWatermark(leo)
	if hw != 4 {
		t.Fatalf("HW from fetch offsets 10 and 4 = %d, want 4", hw)
	}
	if !p.SetHighWatermark(hw, false) || p.HighWatermark() != 4 {
		t.Fatalf("partition HW = %d, want 4", p.HighWatermark())
	}

	ls.OnFetch(3, 10, leo, now)
	if !p.SetHighWatermark(ls.HighWatermark(leo), false) || p.HighWatermark() != 10 {
		t.Fatalf("partition HW = %d after every follower fetched at 10, want 10", p.HighWatermark())
	}
	// A stale lower value (a fetch seen late) never moves a leader's HW back.
	if p.SetHighWatermark(7, false) || p.HighWatermark() != 10 {
		t.Fatalf("leader HW moved back to %d", p.HighWatermark())
	}
	// Nor past the log end.
	p.SetHighWatermark(99, false)
	if p.HighWatermark() != leo {
		t.Fatalf("HW = %d, past the log end %d", p.HighWatermark(), leo)
	}
	// A follower takes the leader's HW, which may be lower after a truncation.
	if !p.SetHighWatermark(6, true) || p.HighWatermark() != 6 {
		t.Fatalf("follower HW = %d, want 6", p.HighWatermark())
	}
}

// TestLastStableOffsetHeldByOpenTransaction: the LSO is the first offset
// of the oldest open transaction while the HW is past it, and the HW once
// the transaction's marker is below the HW.
func TestLastStableOffsetHeldByOpenTransaction(t *testing.T) {
	p := newPartition(t)
	lead(t, p, 1)
	produce(t, p, 1, batch{n: 2})                            // 0..1
	produce(t, p, 1, batch{pid: 5, seq: 0, txn: true, n: 3}) // 2..4
	produce(t, p, 1, batch{n: 1})                            // 5
	p.SetHighWatermark(p.Log.LogEndOffset(), false)
	if hw, lso := p.HighWatermark(), p.LastStableOffset(); hw != 6 || lso != 2 {
		t.Fatalf("HW %d LSO %d, want 6 and 2 (the open transaction's first offset)", hw, lso)
	}
	m, _, err := p.AppendMarker(5, 1, 0, record.ControlCommit) // 6
	if err != nil || m.Offset != 6 {
		t.Fatalf("marker: %+v, %v", m, err)
	}
	if lso := p.LastStableOffset(); lso != 2 {
		t.Fatalf("LSO %d with the COMMIT marker not replicated yet, want 2", lso)
	}
	p.SetHighWatermark(7, false)
	if lso := p.LastStableOffset(); lso != 7 {
		t.Fatalf("LSO %d once the HW passed the marker, want 7", lso)
	}
	// With nothing open the LSO is the HW, even below the log end.
	produce(t, p, 1, batch{n: 1})
	if lso := p.LastStableOffset(); lso != 7 {
		t.Fatalf("LSO %d, want the HW 7", lso)
	}
}

// TestAcksAllWaitsForHighWatermark: an acks=all produce is answered once
// the HW passes its last offset, not before (HW equal to the last offset
// is not enough: the HW is the first offset not yet on every ISR member).
func TestAcksAllWaitsForHighWatermark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPartition(t)
		lead(t, p, 1, 2)
		res := produce(t, p, -1, batch{n: 3}) // 0..2
		done := make(chan error, 1)
		go func() { done <- p.WaitForHW(context.Background(), res.LastOffset, leaderEpoch) }()

		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("answered (%v) with the HW at %d", err, p.HighWatermark())
		default:
		}
		p.SetHighWatermark(res.LastOffset, false)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("answered (%v) with the HW at the last offset %d, not past it", err, res.LastOffset)
		default:
		}
		p.SetHighWatermark(res.LastOffset+1, false)
		synctest.Wait()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("WaitForHW = %v once the HW passed", err)
			}
		default:
			t.Fatal("still waiting with the HW past the batch")
		}
	})
}

// TestAcksAllTimesOut: with the HW stuck, the wait ends at the request's
// deadline with REQUEST_TIMED_OUT.
func TestAcksAllTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPartition(t)
		lead(t, p, 1, 2)
		res := produce(t, p, -1, batch{n: 1})
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := p.WaitForHW(ctx, res.LastOffset, leaderEpoch)
		if errs.CodeOf(err) != pb.ErrorCode_REQUEST_TIMED_OUT {
			t.Fatalf("WaitForHW = %v, want REQUEST_TIMED_OUT", err)
		}
		if waited := time.Since(start); waited != 30*time.Second {
			t.Fatalf("waited %v, want the request timeout 30s", waited)
		}
	})
}

// TestAcksAllEndsOnLeadershipChange: a leader that loses leadership while
// a produce waits answers NOT_LEADER_OR_FOLLOWER at once (the write's fate
// is for the new leader to decide).
func TestAcksAllEndsOnLeadershipChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPartition(t)
		lead(t, p, 1, 2)
		res := produce(t, p, -1, batch{n: 1})
		done := make(chan error, 1)
		go func() { done <- p.WaitForHW(context.Background(), res.LastOffset, leaderEpoch) }()
		synctest.Wait()
		p.SetLeadership(broker.Leadership{Role: broker.RoleFollower, Leader: 2, LeaderEpoch: leaderEpoch + 1}, nil)
		synctest.Wait()
		select {
		case err := <-done:
			if errs.CodeOf(err) != pb.ErrorCode_NOT_LEADER_OR_FOLLOWER {
				t.Fatalf("WaitForHW = %v, want NOT_LEADER_OR_FOLLOWER", err)
			}
		default:
			t.Fatal("still waiting after the leadership moved")
		}
	})
}

// TestAcksAllNeedsMinInsyncReplicas: with fewer ISR members than
// min.insync.replicas an acks=all produce is refused before anything is
// written; acks=1 is not.
func TestAcksAllNeedsMinInsyncReplicas(t *testing.T) {
	p := newPartition(t)
	lead(t, p, 1)
	p.SetMinISR(2)
	_, _, err := p.AppendAsLeader(build(t, batch{n: 1}), -1)
	if errs.CodeOf(err) != pb.ErrorCode_NOT_ENOUGH_REPLICAS {
		t.Fatalf("acks=all with ISR [1] and min.insync.replicas=2: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	if leo := p.Log.LogEndOffset(); leo != 0 {
		t.Fatalf("log end %d after a refused produce", leo)
	}
	produce(t, p, 1, batch{n: 1})
	p.UpdateISR([]int32{1, 2}, []int32{1, 2}, 1)
	produce(t, p, -1, batch{n: 1})
}

// TestFetchWatchersWokenByAppendAndHighWatermark: a waiting fetch (its
// channel registered with Watch) is woken by an append and by a HW move,
// not by a duplicate that appends nothing or a HW call that moves nothing,
// and no longer once it unwatches.
func TestFetchWatchersWokenByAppendAndHighWatermark(t *testing.T) {
	p := newPartition(t)
	lead(t, p, 1)
	ch := make(chan struct{}, 1)
	p.Watch(ch)
	woken := func() bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	if woken() {
		t.Fatal("woken before anything happened")
	}
	produce(t, p, 1, batch{pid: 9, seq: 0, n: 2})
	if !woken() {
		t.Fatal("an append did not wake the fetch")
	}
	if res := produce(t, p, 1, batch{pid: 9, seq: 0, n: 2}); !res.Duplicate {
		t.Fatalf("re-sent batch not a duplicate: %+v", res)
	}
	if woken() {
		t.Fatal("a duplicate, which appends nothing, woke the fetch")
	}
	p.SetHighWatermark(2, false)
	if !woken() {
		t.Fatal("a HW move did not wake the fetch")
	}
	p.SetHighWatermark(2, false)
	if woken() {
		t.Fatal("a HW call that moved nothing woke the fetch")
	}
	p.Unwatch(ch)
	produce(t, p, 1, batch{n: 1})
	if woken() {
		t.Fatal("woken after Unwatch")
	}
}

// TestAcksAllNotAnsweredByAnotherLeadersHW: an acks=all wait that starts
// (or wakes) only after its leader became a follower, truncated the write
// away and followed the new leader past that offset must not take the
// follower's HW for its own: the record at the offset is another one now.
// It is NOT_LEADER_OR_FOLLOWER, so the producer retries. (The drill
// workload lost an acknowledged transactional record this way: the answer
// said offset 336, and offset 336 held another producer's record.)
func TestAcksAllNotAnsweredByAnotherLeadersHW(t *testing.T) {
	p := newPartition(t)
	lead(t, p, 1, 2)
	produce(t, p, 1, batch{n: 2}) // offsets 0-1, on both replicas
	p.SetHighWatermark(2, false)
	ours := produce(t, p, -1, batch{n: 1}) // offset 2, on this leader only
	// The leadership moves; this replica truncates to the new leader's log
	// and appends what the new leader wrote at offsets 2-3.
	follower := broker.Leadership{Role: broker.RoleFollower, Leader: 2, LeaderEpoch: leaderEpoch + 1}
	if err := p.SetLeadership(follower, func() error { return p.Log.TruncateTo(2) }); err != nil {
		t.Fatal(err)
	}
	if err := p.Log.AssignEpoch(leaderEpoch + 1); err != nil {
		t.Fatal(err)
	}
	other := build(t, batch{n: 2})
	binary.BigEndian.PutUint64(other[0:8], 2) // the new leader's offsets 2-3
	if _, err := p.AppendAsFollower(other, leaderEpoch+1); err != nil {
		t.Fatal(err)
	}
	p.SetHighWatermark(4, false)

	err := p.WaitForHW(context.Background(), ours.LastOffset, leaderEpoch)
	if errs.CodeOf(err) != pb.ErrorCode_NOT_LEADER_OR_FOLLOWER {
		t.Fatalf("WaitForHW after the write was truncated away = %v, want NOT_LEADER_OR_FOLLOWER (HW %d now covers another record at offset %d)", err, p.HighWatermark(), ours.LastOffset)
	}
}

// TestLastStableOffsetNotBelowLogStart: DeleteRecords may move the log
// start past the first offset of a transaction still open; the LSO is then
// the log start (Kafka's max(first unstable, log start)), never below it,
// and still capped by the HW. Once the transaction commits and the HW passes
// its marker the LSO is the HW again.
func TestLastStableOffsetNotBelowLogStart(t *testing.T) {
	p := newPartition(t)
	lead(t, p, 1)
	produce(t, p, 1, batch{n: 2})                            // 0..1
	produce(t, p, 1, batch{pid: 5, seq: 0, txn: true, n: 3}) // 2..4, open
	produce(t, p, 1, batch{n: 2})                            // 5..6
	p.SetHighWatermark(p.Log.LogEndOffset(), false)
	if lso := p.LastStableOffset(); lso != 2 {
		t.Fatalf("LSO %d, want 2 (the open transaction's first offset)", lso)
	}
	ls, err := p.Log.AdvanceLogStart(4) // inside the open transaction
	if err != nil || ls != 4 {
		t.Fatalf("AdvanceLogStart: %d, %v", ls, err)
	}
	if lso, start := p.LastStableOffset(), p.Log.LogStartOffset(); lso != start {
		t.Fatalf("LSO %d with the log start %d past the open transaction's first offset 2, want the log start", lso, start)
	}
	// Past the HW too: the LSO stays capped by the HW.
	ls, err = p.Log.AdvanceLogStart(6)
	if err != nil || ls != 6 {
		t.Fatalf("AdvanceLogStart: %d, %v", ls, err)
	}
	if lso, hw := p.LastStableOffset(), p.HighWatermark(); lso != 6 || hw != 7 {
		t.Fatalf("LSO %d HW %d, want 6 (the log start) and 7", lso, hw)
	}
	m, _, err := p.AppendMarker(5, 1, 0, record.ControlCommit) // 7
	if err != nil || m.Offset != 7 {
		t.Fatalf("marker: %+v, %v", m, err)
	}
	if lso := p.LastStableOffset(); lso != 6 {
		t.Fatalf("LSO %d with the COMMIT marker not replicated yet, want the log start 6", lso)
	}
	p.SetHighWatermark(8, false)
	if lso := p.LastStableOffset(); lso != 8 {
		t.Fatalf("LSO %d once the HW passed the marker, want the HW 8", lso)
	}
}
