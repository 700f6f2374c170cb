package drill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/strand-io/strand/client"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Names lists the drills in the order `strand verify --drill all` runs them.
var Names = []string{"kill-leader", "kill-coordinator", "kill-controller", "pause", "partition", "marker-failover", "restart-all"}

// Optional lists the drills that run only when named: marker-leader-loss is
// marker-failover without the coordinator failover (a subset of what it
// does, so "all" leaves it out to keep the CI drill short).
var Optional = []string{"marker-leader-loss"}

// Valid reports whether name is a drill.
func Valid(name string) bool { return slices.Contains(Names, name) || slices.Contains(Optional, name) }

// Env is what a drill needs besides its target: a way to ask the cluster
// who leads what, the topics whose partitions are busy, and the
// transactional id that is busiest right now.
type Env struct {
	Admin  *client.Admin
	Target Target
	// Topics are the workload's topics: kill-leader picks the partition
	// with the highest high watermark among them, and settling waits for
	// their ISRs (and the internal topics') to be full again.
	Topics []string
	// BusiestTxnID names the transactional id with the most transactions
	// so far (kill-coordinator kills its coordinator).
	BusiestTxnID func() string
	// Logf receives one timestamped line per step.
	Logf func(format string, args ...any)
	// Down is how long a killed node stays dead (default 3 s); Cut is how
	// long a node stays paused or cut off (default 12 s: past the 9 s
	// broker session timeout, so the controller fences it).
	Down, Cut time.Duration
	// SettleTimeout bounds the wait for the cluster to be whole again
	// (default 90 s).
	SettleTimeout time.Duration
	// Hold bounds the marker drills' follower-fetch hold (default 20 s).
	// They kill the partition's leader before it ends, and it must end
	// well before replica.lag.time.max.ms: a follower held longer leaves
	// the ISR, and then the leader's loss loses nothing.
	Hold time.Duration
	// Witness, when set, opens a transaction that has written a record to
	// tp (acknowledged, so replicated) and whose transactional id node
	// coordinator coordinates. The marker drills commit it once tp's
	// follower fetches are held, so that at least one commit marker is
	// sure to sit on the leader alone; the workload's own transactions are
	// caught only when they happen to commit then. The workload records
	// the witness like its other transactions.
	Witness func(ctx context.Context, tp client.TopicPartition, coordinator int32) (WitnessTxn, error)
	// KeepOff, when set, makes the workload's producers write nothing to
	// tp and waits until none of their open transactions has written to
	// it, until resume is called. The marker drills keep the workload off
	// the partition while they start the hold: a transaction that had
	// written to it and commits just after would have its first marker
	// wait for the held HW, and a broker answers the markers of one
	// WriteTxnMarkers request one after another, each waiting up to 10 s,
	// so that marker would hold up the re-sent markers the drill is about
	// for as long. Once the hold is on, the producers may write there
	// again (such writes wait for the HW, and go when the leader does).
	KeepOff func(ctx context.Context, tp client.TopicPartition) (resume func())
}

// WitnessTxn is a marker drill's own open transaction (Env.Witness).
type WitnessTxn interface {
	TransactionalID() string
	// Commit commits it; Abort aborts it (when the drill gives up before
	// its commit).
	Commit(ctx context.Context) error
	Abort(ctx context.Context) error
}

// Outcome is what one drill did.
type Outcome struct {
	Drill  string    `json:"drill"`
	Node   int32     `json:"node,omitempty"`
	Detail string    `json:"detail,omitempty"`
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	Settle float64   `json:"settle_seconds"`
	// CommitGap is the longest time without a committed transaction that
	// overlaps the drill (filled in by the workload, which saw the
	// commits).
	CommitGap float64 `json:"longest_commit_gap_seconds"`
	Skipped   string  `json:"skipped,omitempty"`
	Err       string  `json:"error,omitempty"`
}

// OK reports whether the drill ran (or was skipped) without error.
func (o Outcome) OK() bool { return o.Err == "" }

func (e *Env) defaults() {
	if e.Down <= 0 {
		e.Down = 3 * time.Second
	}
	if e.Cut <= 0 {
		e.Cut = 12 * time.Second
	}
	if e.SettleTimeout <= 0 {
		e.SettleTimeout = 90 * time.Second
	}
	if e.Hold <= 0 {
		e.Hold = 20 * time.Second
	}
	if e.Logf == nil {
		e.Logf = func(string, ...any) {}
	}
}

// Run performs one drill and waits for the cluster to settle afterwards.
// Faults are always undone (the node restarted, resumed or reconnected),
// also when ctx ends, so the cluster is left whole when possible.
func Run(ctx context.Context, e *Env, name string) Outcome {
	e.defaults()
	o := Outcome{Drill: name, Start: time.Now()}
	logf := func(format string, args ...any) { e.Logf("drill %s: "+format, append([]any{name}, args...)...) }
	err := func() error {
		switch name {
		case "kill-leader":
			tp, leader, err := e.busiestPartition(ctx)
			if err != nil {
				return err
			}
			o.Node, o.Detail = leader, fmt.Sprintf("leader of %s", tp)
			logf("%s is led by node %d; kill -9 node %d", tp, leader, leader)
			return e.killAndRestart(ctx, logf, leader, func(ctx context.Context) (bool, string) {
				return e.leaderMoved(ctx, tp, leader)
			})
		case "kill-coordinator":
			id := ""
			if e.BusiestTxnID != nil {
				id = e.BusiestTxnID()
			}
			if id == "" {
				return errors.New("no transactional id has committed yet")
			}
			co, err := e.Admin.FindCoordinator(ctx, pb.CoordinatorType_TRANSACTION, id)
			if err != nil {
				return fmt.Errorf("find coordinator of %q: %w", id, err)
			}
			o.Node, o.Detail = co.NodeId, fmt.Sprintf("coordinator of %q (__transaction_state-%d)", id, co.Partition)
			logf("transactional id %q (busiest) is coordinated by node %d; kill -9 node %d", id, co.NodeId, co.NodeId)
			return e.killAndRestart(ctx, logf, co.NodeId, func(ctx context.Context) (bool, string) {
				c, err := e.Admin.FindCoordinator(ctx, pb.CoordinatorType_TRANSACTION, id)
				if err != nil {
					return false, fmt.Sprintf("coordinator of %q: %v", id, err)
				}
				return c.NodeId != co.NodeId, fmt.Sprintf("new coordinator of %q: node %d", id, c.NodeId)
			})
		case "kill-controller":
			// The quorum may be between leaders (an earlier drill): wait
			// for one, as long as settling may take.
			victim := int32(-1)
			got := e.waitFor(ctx, e.SettleTimeout, func(ctx context.Context) (bool, string) {
				dc, err := e.Admin.DescribeCluster(ctx)
				if err != nil {
					return false, fmt.Sprintf("describe cluster: %v", err)
				}
				victim = dc.ControllerId
				return victim >= 0, fmt.Sprintf("active controller: node %d", victim)
			})
			if victim < 0 {
				return fmt.Errorf("no active controller: %s", got)
			}
			o.Node, o.Detail = victim, "active controller"
			logf("node %d is the active controller; kill -9 node %d", victim, victim)
			return e.killAndRestart(ctx, logf, victim, func(ctx context.Context) (bool, string) {
				dc, err := e.Admin.DescribeCluster(ctx)
				if err != nil {
					return false, fmt.Sprintf("describe cluster: %v", err)
				}
				return dc.ControllerId >= 0 && dc.ControllerId != victim, fmt.Sprintf("new active controller: node %d", dc.ControllerId)
			})
		case "pause", "partition":
			tp, leader, err := e.busiestPartition(ctx)
			if err != nil {
				return err
			}
			o.Node, o.Detail = leader, fmt.Sprintf("leader of %s", tp)
			do, undo, verb := e.Target.Pause, e.Target.Resume, "SIGSTOP"
			if name == "partition" {
				do, undo, verb = e.Target.Isolate, e.Target.Heal, "cut off the network"
			}
			if err := do(ctx, leader); err != nil {
				return err
			}
			logf("%s node %d (leader of %s) for %s", verb, leader, tp, e.Cut)
			changed := e.waitFor(ctx, e.Cut, func(ctx context.Context) (bool, string) {
				return e.leaderMoved(ctx, tp, leader)
			})
			logf("%s", changed)
			sleepCtx(ctx, time.Until(o.Start.Add(e.Cut)))
			if err := undo(context.WithoutCancel(ctx), leader); err != nil {
				return fmt.Errorf("undo: %w", err)
			}
			logf("node %d back (%s)", leader, map[string]string{"pause": "SIGCONT", "partition": "reconnected"}[name])
			return nil
		case "marker-failover", "marker-leader-loss":
			return e.markerDrill(ctx, &o, logf, name == "marker-failover")
		case "restart-all":
			nodes := e.Target.Nodes()
			logf("kill -9 nodes %v together", nodes)
			for _, id := range nodes {
				if err := e.Target.Kill(ctx, id); err != nil {
					return fmt.Errorf("kill node %d: %w", id, err)
				}
			}
			sleepCtx(ctx, e.Down)
			logf("start nodes %v", nodes)
			for _, id := range nodes {
				if err := e.Target.Start(context.WithoutCancel(ctx), id); err != nil {
					return fmt.Errorf("start node %d: %w", id, err)
				}
			}
			return nil
		default:
			return fmt.Errorf("unknown drill %q (want one of %s)", name, strings.Join(append(slices.Clone(Names), Optional...), ", "))
		}
	}()
	var skip skipError
	if errors.As(err, &skip) {
		o.Skipped = skip.reason
		logf("skipped (%s)", o.Skipped)
		o.End = time.Now()
		return o
	}
	if errors.Is(err, ErrUnsupported) {
		o.Skipped = fmt.Sprintf("%s: %v", e.Target.Name(), err)
		logf("skipped (%s)", o.Skipped)
		o.End = time.Now()
		return o
	}
	if err != nil {
		o.Err = err.Error()
		logf("failed: %v", err)
	}
	t0 := time.Now()
	if serr := e.Settle(ctx); serr != nil {
		if o.Err == "" {
			o.Err = serr.Error()
		}
		logf("%v", serr)
	} else {
		o.Settle = time.Since(t0).Seconds()
		logf("settled in %.1fs: every broker alive, every ISR full", o.Settle)
	}
	o.End = time.Now()
	return o
}

// killAndRestart kills id, waits for moved (someone else took over) up to
// the settle timeout and at least Down, then starts id again.
func (e *Env) killAndRestart(ctx context.Context, logf func(string, ...any), id int32, moved func(context.Context) (bool, string)) error {
	t0 := time.Now()
	if err := e.Target.Kill(ctx, id); err != nil {
		return fmt.Errorf("kill node %d: %w", id, err)
	}
	logf("%s after %.1fs", e.waitFor(ctx, e.SettleTimeout, moved), time.Since(t0).Seconds())
	sleepCtx(ctx, time.Until(t0.Add(e.Down)))
	if err := e.Target.Start(context.WithoutCancel(ctx), id); err != nil {
		return fmt.Errorf("start node %d: %w", id, err)
	}
	logf("started node %d again", id)
	return nil
}

// waitFor polls cond until it holds or d passes; it returns cond's last
// description, marked when it never held.
func (e *Env) waitFor(ctx context.Context, d time.Duration, cond func(context.Context) (bool, string)) string {
	deadline := time.Now().Add(d)
	last := ""
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ok, desc := cond(cctx)
		cancel()
		last = desc
		if ok {
			return desc
		}
		if time.Now().After(deadline) || sleepCtx(ctx, 250*time.Millisecond) != nil {
			return "not yet: " + last
		}
	}
}

// Settle waits until every node of the target is a live, unfenced broker
// and every partition of the watched and internal topics has a leader and
// a full ISR, twice in a row a second apart.
func (e *Env) Settle(ctx context.Context) error {
	e.defaults()
	deadline := time.Now().Add(e.SettleTimeout)
	sleepCtx(ctx, time.Second)
	good, why := 0, ""
	for good < 2 {
		if time.Now().After(deadline) {
			return fmt.Errorf("did not settle within %s: %s", e.SettleTimeout, why)
		}
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		why = e.whole(cctx)
		cancel()
		if why == "" {
			good++
		} else {
			good = 0
		}
		if err := sleepCtx(ctx, time.Second); err != nil {
			return err
		}
	}
	return nil
}

// whole returns "" when the cluster is whole, else what is missing.
func (e *Env) whole(ctx context.Context) string {
	md, err := e.Admin.Metadata(ctx, true, append([]string{"__transaction_state", "__consumer_offsets"}, e.Topics...)...)
	if err != nil {
		return err.Error()
	}
	live := map[int32]bool{}
	for _, b := range md.Brokers {
		if !b.Fenced {
			live[b.NodeId] = true
		}
	}
	for _, id := range e.Target.Nodes() {
		if !live[id] {
			return fmt.Sprintf("broker %d is not alive", id)
		}
	}
	if md.ControllerId < 0 {
		return "no active controller"
	}
	for _, t := range md.Topics {
		if t.ErrorCode != pb.ErrorCode_NONE {
			continue // an internal topic not created yet
		}
		for _, p := range t.Partitions {
			if p.LeaderId < 0 {
				return fmt.Sprintf("%s/%d has no leader", t.Name, p.Partition)
			}
			if len(p.Isr) < len(p.Replicas) {
				return fmt.Sprintf("%s/%d ISR %v of replicas %v", t.Name, p.Partition, p.Isr, p.Replicas)
			}
		}
	}
	return ""
}

// busiestPartition is the partition of the watched topics with the
// highest high watermark, and its leader.
func (e *Env) busiestPartition(ctx context.Context) (client.TopicPartition, int32, error) {
	md, err := e.Admin.Metadata(ctx, false, e.Topics...)
	if err != nil {
		return client.TopicPartition{}, -1, err
	}
	leaders := map[client.TopicPartition]int32{}
	var tps []client.TopicPartition
	for _, t := range md.Topics {
		for _, p := range t.Partitions {
			tp := client.TopicPartition{Topic: t.Name, Partition: p.Partition}
			if p.LeaderId >= 0 {
				tps = append(tps, tp)
				leaders[tp] = p.LeaderId
			}
		}
	}
	if len(tps) == 0 {
		return client.TopicPartition{}, -1, fmt.Errorf("no partition of %v has a leader", e.Topics)
	}
	offs, err := e.Admin.ListOffsets(ctx, tps, client.OffsetLatest, client.ReadUncommitted)
	if err != nil {
		return client.TopicPartition{}, -1, err
	}
	sort.Slice(tps, func(i, j int) bool {
		hi, hj := offs[tps[i]].HighWatermark, offs[tps[j]].HighWatermark
		if hi != hj {
			return hi > hj
		}
		return tps[i].String() < tps[j].String()
	})
	return tps[0], leaders[tps[0]], nil
}

// leaderMoved reports whether tp has a leader other than old.
func (e *Env) leaderMoved(ctx context.Context, tp client.TopicPartition, old int32) (bool, string) {
	l, err := e.leaderOf(ctx, tp)
	switch {
	case err != nil:
		return false, fmt.Sprintf("leader of %s: %v", tp, err)
	case l < 0:
		return false, fmt.Sprintf("%s has no leader", tp)
	}
	return l != old, fmt.Sprintf("new leader of %s: node %d", tp, l)
}

func (e *Env) leaderOf(ctx context.Context, tp client.TopicPartition) (int32, error) {
	return e.Admin.Leader(ctx, tp)
}

// sleepCtx sleeps d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
