package workload

import (
	"context"
	"time"

	"github.com/strand-io/strand/app/drill"
)

// drillEnv is what the drills act on: this run's admin client, target,
// topics and witness, with noTarget when none is configured.
func (r *run) drillEnv() *drill.Env {
	e := r.cfg.DrillEnv
	e.Admin, e.Target, e.Topics, e.BusiestTxnID = r.admin, r.cfg.Target, r.topics(), r.busiest
	e.Logf = r.logf
	e.Witness, e.KeepOff = r.witness, r.keepOff
	if e.Target == nil {
		e.Target = noTarget{}
	}
	return &e
}

// drills runs the configured drills spaced over the duration, each at
// least once; with Repeat it cycles through them until the duration ends.
func (r *run) drills(ctx context.Context) []drill.Outcome {
	if len(r.cfg.Drills) == 0 || r.cfg.Target == nil {
		return nil
	}
	env := r.drillEnv()
	n := len(r.cfg.Drills)
	// A warm-up before the first drill, then one slot per drill (a soak
	// drills every 15 s).
	gap := r.cfg.Duration / time.Duration(n+1)
	if r.cfg.Repeat {
		gap = min(gap, 15*time.Second)
	}
	var out []drill.Outcome
	next := r.start.Add(min(gap, 10*time.Second))
	for i := 0; ; i++ {
		if i >= n {
			if !r.cfg.Repeat {
				return out
			}
			select {
			case <-r.timeUp:
				return out
			default:
			}
		}
		select {
		case <-ctx.Done():
			return out
		case <-time.After(time.Until(next)):
		}
		name := r.cfg.Drills[i%n]
		r.drillNow.Store(name)
		o := drill.Run(ctx, env, name)
		r.drillNow.Store("")
		r.drillsRun.Add(1)
		out = append(out, o)
		next = time.Now().Add(max(gap-time.Since(o.Start), 2*time.Second))
	}
}

// noTarget is the target when none is configured: nothing to drill.
type noTarget struct{}

func (noTarget) Name() string                                { return "none" }
func (noTarget) Nodes() []int32                              { return nil }
func (noTarget) Kill(ctx context.Context, id int32) error    { return drill.ErrUnsupported }
func (noTarget) Start(ctx context.Context, id int32) error   { return drill.ErrUnsupported }
func (noTarget) Pause(ctx context.Context, id int32) error   { return drill.ErrUnsupported }
func (noTarget) Resume(ctx context.Context, id int32) error  { return drill.ErrUnsupported }
func (noTarget) Isolate(ctx context.Context, id int32) error { return drill.ErrUnsupported }
func (noTarget) Heal(ctx context.Context, id int32) error    { return drill.ErrUnsupported }
func (noTarget) Stop(ctx context.Context, id int32) error    { return drill.ErrUnsupported }
func (noTarget) HoldFollowerFetch(ctx context.Context, id int32, topic string, partition int32, d time.Duration) error {
	return drill.ErrUnsupported
}
func (noTarget) ReleaseFollowerFetch(ctx context.Context, id int32, topic string, partition int32) error {
	return drill.ErrUnsupported
}
