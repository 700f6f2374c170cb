package drill

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/strand-io/strand/client"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// The marker drills lose a transaction marker that only the partition's
// leader has:
//
//   - marker-leader-loss: hold the follower fetches of a busy source
//     partition P on its leader L (the HW stays put), let transactions
//     commit (their markers are appended on L only), then kill -9 L, so a
//     follower without those markers becomes P's leader.
//   - marker-failover: the same, with a coordinator failover in between:
//     once the markers sit on L, stop the coordinator C (≠ L) of a busy
//     transactional id gracefully (its controlled shutdown moves its
//     __transaction_state leaderships at once), wait until the new
//     coordinator has loaded and re-sent its markers, then kill -9 L. A
//     re-sent marker L already applied must be answered only once the ISR
//     has it: answered at once, the new coordinator writes COMPLETE_* and
//     never sends the marker again, and the transaction hangs on P's new
//     leader. C starts again before L is killed: with two of three nodes
//     down the controller quorum could elect no new leader.
//
// Then L starts again and the cluster settles. Everything between
// the hold and the kill must fit in the hold (Env.Hold), which must fit in
// replica.lag.time.max.ms. A witness transaction (Env.Witness) makes sure
// a commit is caught.

// skipError: a drill that cannot run now, for a reason (reported as
// skipped, like ErrUnsupported).
type skipError struct{ reason string }

func (s skipError) Error() string { return s.reason }

// markerPlan is who a marker drill acts on.
type markerPlan struct {
	tp     client.TopicPartition
	leader int32
	// coord is the coordinator to fail over (marker-failover), or the one
	// the witness must not share with the leader (marker-leader-loss).
	coord  int32
	busyID string // a busy transactional id coordinated by coord, or ""
}

func (e *Env) markerDrill(ctx context.Context, o *Outcome, logf func(string, ...any), failover bool) error {
	// After a drill that moved leaderships (restart-all, a cut), one node
	// may lead everything until the preferred-leader election spreads
	// them again: wait for that a while.
	var plan markerPlan
	var err error
	deadline := time.Now().Add(min(e.SettleTimeout, 45*time.Second))
	for waited := false; ; waited = true {
		plan, err = e.planMarker(ctx, failover)
		var skip skipError
		if err == nil || !errors.As(err, &skip) || time.Now().After(deadline) {
			break
		}
		if !waited {
			logf("%s: waiting for the leaderships to spread", skip.reason)
		}
		if sleepCtx(ctx, 2*time.Second) != nil {
			break
		}
	}
	if err != nil {
		return err
	}
	tp, L, C := plan.tp, plan.leader, plan.coord
	o.Node = L
	resume := func() {}
	if e.KeepOff != nil {
		resume = e.KeepOff(ctx, tp)
	}
	defer func() { resume() }()
	var w WitnessTxn
	if e.Witness != nil {
		if w, err = e.Witness(ctx, tp, C); err != nil {
			logf("no witness transaction (%v): relying on the workload's own commits", err)
			w = nil
		}
	}
	id := plan.busyID
	if w != nil {
		id = w.TransactionalID()
	}
	if id == "" {
		return skipError{fmt.Sprintf("no witness transaction and no busy transactional id coordinated by node %d", C)}
	}
	if err := e.Target.HoldFollowerFetch(ctx, L, tp.Topic, tp.Partition, e.Hold); err != nil {
		if w != nil {
			_ = w.Abort(context.WithoutCancel(ctx))
		}
		return err
	}
	t0 := time.Now()
	resume()
	resume = func() {}
	killed := false
	defer func() {
		if !killed {
			_ = e.Target.ReleaseFollowerFetch(context.WithoutCancel(ctx), L, tp.Topic, tp.Partition)
		}
	}()
	// L must die before the hold ends: a second of slack for the kill.
	killBy := t0.Add(e.Hold - time.Second)
	o.Detail = fmt.Sprintf("%s led by node %d", tp, L)
	logf("holding the follower fetches of %s on its leader node %d (at most %s)", tp, L, e.Hold)

	commitDone := make(chan error, 1)
	if w != nil {
		go func() { commitDone <- w.Commit(context.WithoutCancel(ctx)) }()
		logf("committing witness transaction %q (coordinator node %d)", id, C)
		logf("%s", e.waitUntil(ctx, killBy, func(ctx context.Context) (bool, string) {
			st, err := e.Admin.DescribeTransaction(ctx, id)
			if err != nil {
				return false, fmt.Sprintf("%q: %v", id, err)
			}
			return st.State == "PrepareCommit" || st.State == "CompleteCommit", fmt.Sprintf("%q is %s", id, st.State)
		}))
	}
	// Transactions of the workload that end now append their markers on
	// L only too.
	sleepCtx(ctx, time.Until(t0.Add(1500*time.Millisecond)))

	stopDone := make(chan error, 1)
	if failover {
		o.Detail += fmt.Sprintf(", coordinator node %d of %q", C, id)
		logf("stopping node %d, coordinator of %q, gracefully", C, id)
		go func() { stopDone <- e.Target.Stop(context.WithoutCancel(ctx), C) }()
		moved := e.waitUntil(ctx, killBy, func(ctx context.Context) (bool, string) {
			co, err := e.Admin.FindCoordinator(ctx, pb.CoordinatorType_TRANSACTION, id)
			if err != nil {
				return false, fmt.Sprintf("coordinator of %q: %v", id, err)
			}
			if co.NodeId == C {
				return false, fmt.Sprintf("node %d still coordinates %q", C, id)
			}
			st, err := e.Admin.DescribeTransaction(ctx, id)
			if err != nil {
				return false, fmt.Sprintf("node %d coordinates %q: %v", co.NodeId, id, err)
			}
			return true, fmt.Sprintf("node %d coordinates %q now, loaded (%s)", co.NodeId, id, st.State)
		})
		logf("%s after %.1fs", moved, time.Since(t0).Seconds())
		// The new coordinator re-sends the markers of what it found
		// prepared; give them time to be answered (they must wait for the
		// hold) before the leader goes.
		settled := e.waitUntil(ctx, minTime(time.Now().Add(2*time.Second), killBy), func(ctx context.Context) (bool, string) {
			st, err := e.Admin.DescribeTransaction(ctx, id)
			if err != nil {
				return false, fmt.Sprintf("%q: %v", id, err)
			}
			return st.State == "CompleteCommit", fmt.Sprintf("%q is %s", id, st.State)
		})
		logf("after the failover: %s", settled)
		// The coordinator comes back before the leader goes: with two of
		// three nodes down the controller quorum could not elect a new
		// leader.
		select {
		case err := <-stopDone:
			if err != nil {
				logf("stop node %d: %v", C, err)
			}
		case <-time.After(time.Minute):
			return fmt.Errorf("node %d did not stop within a minute", C)
		}
		if err := e.Target.Start(context.WithoutCancel(ctx), C); err != nil {
			return fmt.Errorf("start node %d: %w", C, err)
		}
		logf("started node %d again; %s", C, e.waitUntil(ctx, killBy, func(ctx context.Context) (bool, string) {
			return e.brokerAlive(ctx, C)
		}))
	}
	if time.Now().After(t0.Add(e.Hold)) {
		logf("the hold ran out before the leader could be killed: the markers may be replicated already")
	}
	logf("kill -9 node %d (leader of %s, %.1fs into the hold)", L, tp, time.Since(t0).Seconds())
	if err := e.Target.Kill(ctx, L); err != nil {
		return fmt.Errorf("kill node %d: %w", L, err)
	}
	killed = true
	tk := time.Now()
	logf("%s after %.1fs", e.waitFor(ctx, e.SettleTimeout, func(ctx context.Context) (bool, string) {
		return e.leaderMoved(ctx, tp, L)
	}), time.Since(tk).Seconds())
	var errsOut []error
	sleepCtx(ctx, time.Until(tk.Add(e.Down)))
	if err := e.Target.Start(context.WithoutCancel(ctx), L); err != nil {
		errsOut = append(errsOut, fmt.Errorf("start node %d: %w", L, err))
	} else {
		logf("started node %d again", L)
	}
	if w != nil {
		select {
		case err := <-commitDone:
			if err != nil {
				logf("witness %q: commit: %v", id, err)
			} else {
				logf("witness %q committed", id)
			}
		case <-time.After(e.SettleTimeout):
			logf("witness %q: commit still unanswered", id)
		}
	}
	return errors.Join(errsOut...)
}

// planMarker picks the partition to hold (the busiest of the source topic,
// Topics[0], whose leader can be told apart from a coordinator), its
// leader, and a coordinator node other than the leader: the busiest
// transactional id's when it can be, else another node that coordinates
// some transactional ids. A coordinator to stop (failover) is preferably
// not the active controller either: a controller that stops gracefully
// goes on expiring the sessions of brokers whose heartbeats its stopped
// server no longer takes, and fences them (seen in process with a 2 s
// session timeout; a failover drill is not about that).
func (e *Env) planMarker(ctx context.Context, failover bool) (markerPlan, error) {
	if len(e.Topics) == 0 {
		return markerPlan{}, errors.New("no topic to drill")
	}
	md, err := e.Admin.Metadata(ctx, true, e.Topics[0], "__transaction_state")
	if err != nil {
		return markerPlan{}, err
	}
	leaders := map[client.TopicPartition]int32{}
	var tps []client.TopicPartition
	coordinators := map[int32]bool{}
	for _, t := range md.Topics {
		for _, p := range t.Partitions {
			if p.LeaderId < 0 {
				continue
			}
			if t.Name == "__transaction_state" {
				coordinators[p.LeaderId] = true
				continue
			}
			tp := client.TopicPartition{Topic: t.Name, Partition: p.Partition}
			tps = append(tps, tp)
			leaders[tp] = p.LeaderId
		}
	}
	if len(tps) == 0 {
		return markerPlan{}, fmt.Errorf("no partition of %s has a leader", e.Topics[0])
	}
	offs, err := e.Admin.ListOffsets(ctx, tps, client.OffsetLatest, client.ReadUncommitted)
	if err != nil {
		return markerPlan{}, err
	}
	sort.Slice(tps, func(i, j int) bool {
		hi, hj := offs[tps[i]].HighWatermark, offs[tps[j]].HighWatermark
		if hi != hj {
			return hi > hj
		}
		return tps[i].String() < tps[j].String()
	})
	busyID, busyCoord := "", int32(-1)
	if e.BusiestTxnID != nil {
		if busyID = e.BusiestTxnID(); busyID != "" {
			if co, err := e.Admin.FindCoordinator(ctx, pb.CoordinatorType_TRANSACTION, busyID); err == nil {
				busyCoord = co.NodeId
			}
		}
	}
	var others []int32
	for id := range coordinators {
		others = append(others, id)
	}
	sort.Slice(others, func(i, j int) bool { return others[i] < others[j] })
	avoid := int32(-1)
	if failover {
		if dc, err := e.Admin.DescribeCluster(ctx); err == nil {
			avoid = dc.ControllerId
		}
	}
	for _, strict := range []bool{true, false} {
		ok := func(c, l int32) bool { return c != l && (!strict || c != avoid) }
		for _, tp := range tps {
			l := leaders[tp]
			if busyCoord >= 0 && ok(busyCoord, l) {
				return markerPlan{tp: tp, leader: l, coord: busyCoord, busyID: busyID}, nil
			}
			for _, c := range others {
				if ok(c, l) && (e.Witness != nil || c == busyCoord) {
					return markerPlan{tp: tp, leader: l, coord: c}, nil
				}
			}
		}
	}
	return markerPlan{}, skipError{fmt.Sprintf("no partition of %s has a leader other than every transaction coordinator (coordinators %v)", e.Topics[0], others)}
}

// waitUntil polls cond until it holds or deadline passes; it returns
// cond's last description, marked when it never held.
// Each look is bounded by the deadline too (at least a second), so a slow
// answer from a node going down cannot carry the wait far past it.
func (e *Env) waitUntil(ctx context.Context, deadline time.Time, cond func(context.Context) (bool, string)) string {
	for {
		cctx, cancel := context.WithDeadline(ctx, maxTime(deadline, time.Now().Add(time.Second)))
		ok, desc := cond(cctx)
		cancel()
		if ok {
			return desc
		}
		if !time.Now().Before(deadline) || sleepCtx(ctx, 100*time.Millisecond) != nil {
			return "not yet: " + desc
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// brokerAlive reports whether broker id is registered and unfenced.
func (e *Env) brokerAlive(ctx context.Context, id int32) (bool, string) {
	md, err := e.Admin.Metadata(ctx, false)
	if err != nil {
		return false, fmt.Sprintf("metadata: %v", err)
	}
	for _, b := range md.Brokers {
		if b.NodeId == id && !b.Fenced {
			return true, fmt.Sprintf("broker %d is alive", id)
		}
	}
	return false, fmt.Sprintf("broker %d is not alive yet", id)
}
