// Package sim runs a whole Strand cluster in one process under a seeded
// simulator: every node's real code (Raft, gossip, brokers, replication,
// the coordinators) and the SDK's clients run inside a testing/synctest
// bubble, on an in-memory network (testkit/memnet) routed through the
// fault switchboard (testkit/fault). One seed fixes the fault schedule
// (Schedule: kills, graceful stops, isolations, cut links, a node cut
// off from the controller alone, slow nodes and links, leader elections
// and reassignments mid-run) and the workload's choices (app/workload:
// transactional producers with deliberate aborts and zombie fences, a
// consume-transform-produce stage committing group offsets in its
// transactions, read_committed and read_uncommitted readers).
//
// Time is the bubble's: the time package is virtual for every goroutine
// the run starts, hashicorp/raft's and memberlist's included, which no
// clock interface of ours could reach. A timer fires only when every
// goroutine of the bubble is blocked, so a run of a minute of virtual
// time costs what its work costs, not its waiting.
//
// The oracle is app/verify's checker at the end (no committed record
// lost or seen twice, no aborted record visible to read_committed, the
// stage's exactly-once, no hanging transaction) plus invariants checked
// on every node as the run goes (monitor.go). A failing seed prints its
// schedule, the command that replays it and the last events of each node.
package sim

import (
	"context"
	"fmt"
	"log/slog"
	mrand "math/rand"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strand-io/strand/app/drill"
	"github.com/strand-io/strand/app/verify"
	"github.com/strand-io/strand/app/workload"
	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/internal/syncx"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testcluster"
)

// Scenario is the shape of a run; a seed fills in the rest.
type Scenario struct {
	// Nodes in the cluster, each controller and broker (default 3).
	Nodes int
	// Duration of the workload's production window, virtual (default
	// 20 s). Faults fall inside it; the read-back and checks follow.
	Duration time.Duration
	// Faults scheduled in the window (default 4; 0 with NoFaults).
	Faults   int
	NoFaults bool
	// Producers and Partitions of the workload (defaults 2 and 3).
	Producers  int
	Partitions int32
	// Kafka: a third of the seeds use the Kafka door (see run).
	Kafka bool
	// Profile names a mix of faults of Profiles ("": the default mix).
	Profile string
}

func (sc *Scenario) defaults() {
	if sc.Nodes <= 0 {
		sc.Nodes = 3
	}
	if sc.Duration <= 0 {
		sc.Duration = 20 * time.Second
	}
	if sc.Faults <= 0 {
		sc.Faults = 4
	}
	if sc.NoFaults {
		sc.Faults = 0
	}
	if sc.Producers <= 0 {
		sc.Producers = 2
	}
	if sc.Partitions <= 0 {
		sc.Partitions = 3
	}
}

// Outcome is what one seed's run found.
type Outcome struct {
	Seed     uint64
	Scenario Scenario
	Schedule []Fault
	// Violations of the invariants checked as the run went, and the
	// checker's findings at the end; empty when the seed passed.
	Violations []string
	Report     verify.Report
	// Err: the run could not complete (the cluster never became usable,
	// the read-back could not finish): a failure too.
	Err     error
	Virtual time.Duration // virtual time the run took
	Wall    time.Duration // real time it took
	Trace   string
	// TraceFile holds every event of a failed run ("" for a run that
	// passed): the report prints the last ones of each node only.
	TraceFile string
}

// Failed reports whether the seed found something.
func (o *Outcome) Failed() bool { return o.Err != nil || len(o.Violations) > 0 || !o.Report.OK() }

// Summary is one line for a seed.
func (o *Outcome) Summary() string {
	state := "ok"
	if o.Failed() {
		state = "FAILED"
	}
	t := o.Report.Totals
	return fmt.Sprintf("seed %d: %s in %.1fs virtual, %.2fs wall; %d faults; %d committed, %d aborted, %d unknown txns, %d stage txns",
		o.Seed, state, o.Virtual.Seconds(), o.Wall.Seconds(), len(o.Schedule), t.CommittedTxns, t.AbortedTxns, t.UnknownTxns, t.StageTxns)
}

// ReplayScenario is the command that runs a seed of sc again.
func ReplayScenario(seed uint64, sc Scenario) string {
	cmd := fmt.Sprintf("go test ./testkit/sim -run 'TestSim$' -seed %d -v", seed)
	switch {
	case sc.Duration >= 2*time.Minute:
		cmd += " -long"
	case sc.Profile != "":
		cmd += fmt.Sprintf(" -profile %s -faults %d", sc.Profile, sc.Faults)
	}
	return cmd
}

// Report is everything a failing seed prints.
func (o *Outcome) ReportText() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nreplay: %s\n", o.Summary(), ReplayScenario(o.Seed, o.Scenario))
	if o.Err != nil {
		fmt.Fprintf(&b, "run error: %v\n", o.Err)
	}
	for _, v := range o.Violations {
		fmt.Fprintf(&b, "violation: %s\n", v)
	}
	if !o.Report.OK() {
		b.WriteString(o.Report.Table())
		b.WriteByte('\n')
	}
	b.WriteString("schedule:\n")
	for _, f := range o.Schedule {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	if o.TraceFile != "" {
		fmt.Fprintf(&b, "every event of the run (a failure that does not replay is read there): %s\n", o.TraceFile)
	}
	b.WriteString(o.Trace)
	return b.String()
}

// Run runs one seed of a scenario in its own synctest bubble and returns
// what it found; it does not fail t (the caller decides: a planted-bug
// hunt wants failures). t must not be running in a bubble already.
func Run(t *testing.T, seed uint64, sc Scenario) *Outcome {
	sc.defaults()
	out := &Outcome{Seed: seed, Scenario: sc, Schedule: Schedule(seed, sc)}
	wallStart := time.Now()
	// The watchdog runs outside the bubble, on real time: virtual time
	// stands still while any goroutine of the bubble can run, so one that
	// spins (a retry loop with no pause) stops the run's clock for ever.
	// It reports the seed and every goroutine's stack instead of leaving
	// the test to time out.
	var virtualNow atomic.Int64
	var tr atomic.Pointer[trace]
	stop := make(chan struct{})
	defer close(stop)
	go watchdog(seed, sc, &virtualNow, &tr, stop)
	synctest.Test(t, func(t *testing.T) {
		run(t, seed, sc, out, &virtualNow, &tr)
	})
	out.Wall = time.Since(wallStart)
	return out
}

// stallLimit is how long real time may pass without the bubble's clock
// moving before the watchdog gives up on a run.
const stallLimit = 60 * time.Second

func watchdog(seed uint64, sc Scenario, virtualNow *atomic.Int64, tr *atomic.Pointer[trace], stop <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last, since := virtualNow.Load(), time.Now()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if v := virtualNow.Load(); v != last {
			last, since = v, time.Now()
			continue
		}
		if time.Since(since) > stallLimit {
			buf := make([]byte, 64<<20)
			buf = buf[:runtime.Stack(buf, true)]
			// The stacks also go to a file, after the trace's last
			// events (what the spinning loop kept doing): a panic's
			// output is easily cut.
			if f, err := os.CreateTemp("", fmt.Sprintf("sim-seed%d-stall-*.txt", seed)); err == nil {
				if t := tr.Load(); t != nil {
					f.WriteString(t.String())
					f.WriteString("\n--- every goroutine\n")
				}
				f.Write(buf)
				f.Close()
				fmt.Fprintf(os.Stderr, "sim: seed %d stalled; the trace's last events and every goroutine's stack are in %s\n", seed, f.Name())
			}
			panic(fmt.Sprintf("seed %d: virtual time stood still for %s of real time at %s: a goroutine of the bubble never blocks (a loop without a pause?)\nreplay: %s\n%s",
				seed, stallLimit, time.Duration(last), ReplayScenario(seed, sc), buf))
		}
	}
}

func run(t *testing.T, seed uint64, sc Scenario, out *Outcome, virtualNow *atomic.Int64, trOut *atomic.Pointer[trace]) {
	tr := newTrace()
	trOut.Store(tr)
	start := time.Now()
	tr.clock = func(d time.Duration) { virtualNow.Store(int64(d)) }
	// Half of the seeds also run one of the workload's own drills, picked
	// by the seed: the marker drills hold a partition's follower fetches
	// on its leader so a marker is on the leader alone when the
	// coordinator or the leader fails, a schedule random faults rarely
	// make.
	var drills []string
	if pick := seed / 3 % 10; pick < uint64(len(simDrills)) {
		drills = []string{simDrills[pick]}
		tr.add(0, "drill: %s", drills[0])
	}
	// The stale mix also delays some requests before their handler runs
	// (a server's goroutines scheduled late, a GC pause), so requests in
	// flight together are handled in any order: a heartbeat the broker
	// gave up on after a later one, a marker's retry before the first try.
	jitter := newJitter(seed)
	jitter.mix = sc.Profile
	// Under Kafka's default flush policy a power loss is safe alone but
	// not with a second failure soon after: until the powered-off node's
	// old session ends, the controller still counts it in the ISR and may
	// elect it with the tail it lost (Kafka's window too, before KIP-966's
	// eligible leader replicas). So a seed with a power loss either runs
	// with fsync before acknowledgement (log.flush.interval.messages=1,
	// where nothing acknowledged may be lost whatever else fails), or
	// keeps the default and the simulator lets no other fault strike
	// while the powered-off node is fragile (simulator.fragileUntil).
	var syncEveryWrite bool
	for _, f := range out.Schedule {
		if f.Kind == PowerLoss && (seed%2 == 0 || drills != nil) {
			syncEveryWrite = true
		}
		// A failed fsync needs fsyncs to fail: under the default policy a
		// run of seconds makes almost none.
		if f.Kind == FsyncFail {
			syncEveryWrite = true
		}
	}
	if syncEveryWrite {
		tr.add(0, "brokers fsync before acknowledging (log.flush.interval.messages=1)")
	}
	c := testcluster.New(t, testcluster.Options{Nodes: sc.Nodes, MemNet: true, SimDisk: true, Mutate: func(id int32, cfg *node.Config) {
		cfg.Logger = slog.New(&nodeLog{t: tr, id: id})
		if syncEveryWrite {
			cfg.BrokerConfig.Log.FlushMessages = 1
		}
		cfg.TxnTopic.Partitions = 5
		cfg.OffsetsTopic.Partitions = 5
		cfg.GroupConfig.InitialRebalanceDelay = 0
		// Every fourth seed starts transactional ids near the end of
		// their epochs, so producers are fenced there and rotate to a
		// new producer id during the run.
		if seed%4 == 1 {
			cfg.TxnConfig.FirstEpoch = 32740
		}
		cfg.TxnConfig.AbortTimedOutInterval = time.Second
		if jittered[sc.Profile] {
			cfg.UnaryInterceptors = append(cfg.UnaryInterceptors, jitter.unary)
		}
	}})
	tr.add(0, "cluster of %d nodes ready", sc.Nodes)
	mon := newMonitor(c, tr)
	s := &simulator{c: c, tr: tr, nodes: sc.Nodes, seed: seed, mon: mon, guardPowerLoss: !syncEveryWrite, skipped: map[Fault]bool{}, nodeMu: map[int32]*syncx.Mutex{}}
	if jittered[sc.Profile] {
		s.jitter = jitter
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); mon.run(ctx) }()

	runID := fmt.Sprintf("sim%d", seed)
	topics := []string{"verify-" + runID + "-src", "verify-" + runID + "-dst"}
	wg.Add(1)
	go func() { defer wg.Done(); s.play(ctx, out.Schedule, topics, sc.Partitions) }()
	rg := &rogue{s: s, topic: topics[0], parts: sc.Partitions, rng: rand.New(rand.NewPCG(seed, 0x209e))}
	wg.Add(1)
	go func() { defer wg.Done(); rg.run(ctx) }()

	// With Scenario.Kafka (SIM_KAFKA=1 in TestSim), a third of the seeds
	// send the workload's data path through the Kafka listeners as
	// franz-go clients (administration stays on the SDK). Not by default:
	// franz-go holds a sync.Mutex (its producer-id lock) across the
	// InitProducerId request, and a goroutine waiting on a sync.Mutex is
	// not durably blocked, so while that request waits on virtual time (a
	// coordinator cut off) the bubble's clock stands still and the seed
	// stalls. The Kafka door is judged by the drills (make drill-kafka)
	// and franz-go's own suite instead.
	protocol := workload.ProtocolGRPC
	if sc.Kafka && seed%3 == 2 {
		protocol = workload.ProtocolKafka
	}
	kdial := c.Net.Dialer("kafka-clients")
	tr.add(0, "workload data path: %s", protocol)
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Minute)
	res, err := workload.Run(wctx, workload.Config{
		Protocol:       protocol,
		KafkaBootstrap: c.KafkaAddrs(),
		KafkaDial: func(ctx context.Context, _, host string) (net.Conn, error) {
			return kdial(ctx, host)
		},
		Bootstrap:          c.Bootstrap(),
		ClientOpts:         c.ClientOpts(client.RetryBackoff(20*time.Millisecond, 200*time.Millisecond), client.Logger(slog.New(&nodeLog{t: tr, id: clientRing, clients: true}))),
		Duration:           sc.Duration,
		Producers:          sc.Producers,
		StageWorkers:       1,
		Partitions:         sc.Partitions,
		AbortRate:          0.2,
		RunID:              runID,
		Seed:               seed,
		Target:             s,
		Drills:             drills,
		DrillEnv:           drill.Env{Down: 500 * time.Millisecond, Cut: 3 * time.Second, Hold: 2 * time.Second, SettleTimeout: 90 * time.Second},
		TransactionTimeout: 10 * time.Second,
		TxnPause:           150 * time.Millisecond,
		HangGrace:          30 * time.Second,
		Out:                tr,
		ProgressEvery:      5 * time.Second,
	})
	wcancel()
	if err != nil {
		out.Err = err
	} else {
		out.Report = res.Report
	}
	cancel()
	wg.Wait()
	s.wg.Wait()
	out.Violations = mon.violations()
	if rg.forged > 0 {
		out.Violations = append(out.Violations, fmt.Sprintf("a leader accepted %d of %d forged transaction markers from a client", rg.forged, rg.tried))
	}
	tr.add(0, "rogue client: %d forged markers sent, %d accepted", rg.tried, rg.forged)
	out.Virtual = time.Since(start)
	out.Trace = tr.String()
	if out.Failed() {
		out.TraceFile = tr.dump(seed, logDump(c, topics))
	}
	c.Close()
	// memberlist's Shutdown does not wait for a probe it has in flight:
	// give those their virtual seconds, after which nothing may be left
	// running in the bubble.
	time.Sleep(10 * time.Second)
}

// simDrills are the workload's drills a seed may add to its schedule.
var simDrills = []string{"marker-failover", "marker-leader-loss", "kill-leader", "kill-coordinator", "kill-controller"}

// simulator applies a schedule to the cluster. It is also the drill
// target the workload settles with (Nodes).
type simulator struct {
	c     *testcluster.Cluster
	tr    *trace
	nodes int
	seed  uint64
	mon   *monitor
	// guardPowerLoss: the brokers keep the default flush policy, so after
	// a power loss no other fault may strike until fragileUntil (the
	// powered-off node restarted, its old session over, registered again).
	guardPowerLoss bool
	fragileUntil   time.Time
	// lastStart is when a node last started again: until it is back in
	// the ISR, a power loss of another node may take acknowledged
	// records with it (the default flush policy's window), so the guard
	// skips one that soon.
	lastStart time.Time
	skipped   map[Fault]bool
	// resumes end pauses on their own timers (Pause).
	resumes []*time.Timer
	// jitter delays requests in the stale mix (nil in the others).
	jitter *jitter

	mu     sync.Mutex
	nodeMu map[int32]*syncx.Mutex
	// wg: goroutines the faults start (FsyncFail's watcher).
	wg sync.WaitGroup
}

// stop stops node id gracefully and tells the monitor once its controlled
// shutdown has completed.
func (s *simulator) stop(id int32) error {
	s.lockNode(id)
	defer s.unlockNode(id)
	n := s.c.Take(id)
	if n == nil {
		return nil
	}
	// The broker epoch of this incarnation's own registration (0 while
	// the controller has not taken it, as after a quick restart while the
	// last incarnation's session lives): only that one must stay fenced.
	ep := n.Lifecycle.Epoch()
	if ep > 0 {
		s.mon.stopStarted(id, ep, n.Lifecycle.ShutdownConfirmed)
	}
	err := n.Stop()
	s.mon.stopEnded(id)
	// Only a shutdown the controller confirmed: one that ran out of time
	// (the controller unreachable) leaves the broker unfenced until its
	// session expires, as in Kafka.
	if ep > 0 && n.Lifecycle.ShutdownConfirmed() {
		s.mon.stopped(id, ep)
	} else {
		s.tr.add(id, "controlled shutdown not confirmed by the controller")
	}
	return err
}

// lockNode serialises what starts and stops node id: the schedule's
// faults and the workload's drill both do, and a start while a graceful
// stop is still under way would find the node's addresses in use.
func (s *simulator) lockNode(id int32) {
	s.mu.Lock()
	m := s.nodeMu[id]
	if m == nil {
		m = &syncx.Mutex{}
		s.nodeMu[id] = m
	}
	s.mu.Unlock()
	m.Lock()
}

func (s *simulator) unlockNode(id int32) {
	s.mu.Lock()
	m := s.nodeMu[id]
	s.mu.Unlock()
	m.Unlock()
}

// kill stops node id as kill -9 does (power: its disk also crashes).
func (s *simulator) kill(id int32, power bool, rng *mrand.Rand) bool {
	s.lockNode(id)
	defer s.unlockNode(id)
	n := s.c.Take(id)
	if n == nil {
		return false
	}
	n.Kill()
	if power {
		s.c.Member(id).Disk.CrashTorn(rng)
	}
	return true
}

// start starts node id again (a no-op if it runs).
func (s *simulator) start(id int32) error {
	s.lockNode(id)
	defer s.unlockNode(id)
	// A failed fsync is armed for the incarnation that was running (it
	// stops the node, FsyncFail); one killed before it fired must not
	// leave it to fail the next incarnation's recovery, and so its start.
	if d := s.c.Member(id).Disk; d != nil && s.c.NodeOf(id) == nil {
		d.DisarmSyncFailures()
	}
	err := s.c.TryStart(id)
	if err == nil {
		s.mon.stopped(id, 0)
		s.mu.Lock()
		s.lastStart = time.Now()
		s.mu.Unlock()
	}
	return err
}

// step is one change the schedule makes: a fault's start or its end.
type step struct {
	at   time.Duration
	f    Fault
	undo bool
}

func (s *simulator) play(ctx context.Context, sched []Fault, topics []string, partitions int32) {
	var steps []step
	for _, f := range sched {
		steps = append(steps, step{at: f.At, f: f})
		if f.Dur > 0 {
			steps = append(steps, step{at: f.At + f.Dur, f: f, undo: true})
		}
	}
	slices.SortStableFunc(steps, func(a, b step) int { return int(a.at - b.at) })
	begin := time.Now()
	// A fault's start may find its undo's conditions changed (another
	// fault's end started the node, say); each step does what still makes
	// sense and says so in the trace.
	peerOf := map[Fault]int32{}
	for _, st := range steps {
		select {
		case <-ctx.Done():
			s.healAll()
			return
		case <-time.After(time.Until(begin.Add(st.at))):
		}
		s.jitter.start()
		s.apply(ctx, st, topics, partitions, peerOf)
	}
	<-ctx.Done()
}

func (s *simulator) name(id int32) string { return s.c.Member(id).Name() }

func (s *simulator) apply(ctx context.Context, st step, topics []string, partitions int32, peerOf map[Fault]int32) {
	f := st.f
	if s.guardPowerLoss && !st.undo && time.Now().Before(s.fragileUntil) {
		switch f.Kind {
		case Kill, PowerLoss, Stop, Isolate, Cut, CutController:
			s.tr.add(0, "skipped fault %s: a powered-off node may still be counted in the ISR", f)
			// Its end must not start or heal what another fault did.
			s.skipped[f] = true
			return
		}
	}
	if st.undo && (s.skipped[f] || f.Kind == Pause) {
		return // a pause ends on its own timer
	}
	if f.Kind == PowerLoss {
		// Fragile until it restarted, its old session ended (2 s),
		// and it registered and caught up: 3 s after the restart is
		// ample on virtual time. The restart is the undo step, which runs
		// when the steps before it have (one at a time: a slow step
		// delays it past At+Dur), so the 3 s count from when it runs.
		if st.undo {
			s.fragileUntil = time.Now().Add(3 * time.Second)
		} else {
			s.fragileUntil = time.Now().Add(24 * time.Hour)
		}
	}
	verb := "start"
	if st.undo {
		verb = "end"
	}
	s.tr.add(0, "%s fault: %s", verb, f)
	if f.Node > 0 {
		s.tr.add(f.Node, "%s fault: %s", verb, f)
	}
	switch f.Kind {
	case Kill, PowerLoss, Stop:
		if st.undo {
			if err := s.start(f.Node); err != nil {
				s.tr.add(f.Node, "restart failed: %v", err)
			}
			return
		}
		if f.Kind == PowerLoss && len(s.c.Running()) < s.nodes {
			s.tr.add(f.Node, "power loss skipped: another node is down")
			return
		}
		s.mu.Lock()
		recent := time.Since(s.lastStart) < 5*time.Second
		s.mu.Unlock()
		if f.Kind == PowerLoss && s.guardPowerLoss && recent {
			s.tr.add(f.Node, "power loss skipped: a node started within 5 s may not be back in the ISR")
			return
		}
		if f.Kind == Stop {
			if err := s.stop(f.Node); err != nil {
				s.tr.add(f.Node, "controlled shutdown: %v", err)
			}
			return
		}
		if !s.kill(f.Node, f.Kind == PowerLoss, mrand.New(mrand.NewSource(int64(s.seed^uint64(f.At))))) {
			s.tr.add(f.Node, "already down")
		}
	case FsyncFail:
		if st.undo {
			return
		}
		n := s.c.NodeOf(f.Node)
		if n == nil {
			s.tr.add(f.Node, "down: no fsync to fail")
			return
		}
		// A segment of one of the source topic's partitions (its files
		// are named by offset): a failed fsync of a checkpoint file is
		// only logged, and would use the failure up.
		dir := fmt.Sprintf("%s-%d", topics[0], (f.Peer-1)%partitions)
		s.c.Member(f.Node).Disk.FailNextSync(filepath.Join(s.c.Member(f.Node).Cfg.DataDir, dir, "0"), nil)
		// As strand server does: a failed fsync stops the node (a
		// controlled shutdown), whose restart recovers the log.
		failed := n.StorageFailed()
		if failed == nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			select {
			case <-ctx.Done():
				return
			case <-time.After(f.Dur):
				s.tr.add(f.Node, "no fsync failed within %s", f.Dur)
				s.c.Member(f.Node).Disk.DisarmSyncFailures()
				return
			case <-failed:
			}
			s.tr.add(f.Node, "storage failed (%v): stopping the node as strand server does", n.StorageErr())
			if s.c.NodeOf(f.Node) != n {
				return
			}
			if err := s.stop(f.Node); err != nil {
				s.tr.add(f.Node, "stop: %v", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			if err := s.start(f.Node); err != nil {
				s.tr.add(f.Node, "restart failed: %v", err)
			}
		}()
	case Isolate:
		if st.undo {
			s.c.Heal(f.Node)
			s.c.Gossip.Heal()
			return
		}
		s.c.Isolate(f.Node)
		s.c.Gossip.Isolate(s.c.Member(f.Node).Cfg.GossipListen)
	case Pause:
		// The pause ends on its own timer, not as a step of the schedule:
		// the steps run one at a time, and a graceful stop of the paused
		// node (or of a node waiting on it) lasts until its controlled
		// shutdown gives up, so a step would end the pause only after the
		// stop, never while it waits for the held answers.
		s.c.Net.Hold(s.name(f.Node))
		s.c.Gossip.Isolate(s.c.Member(f.Node).Cfg.GossipListen)
		s.resumes = append(s.resumes, time.AfterFunc(f.Dur, func() {
			s.tr.add(0, "end fault: %s", f)
			s.tr.add(f.Node, "end fault: %s", f)
			s.c.Net.Release(s.name(f.Node))
			s.c.Gossip.Heal()
		}))
	case Cut:
		if st.undo {
			s.c.Net.Heal(s.name(f.Node))
			return
		}
		s.c.Net.Cut(s.name(f.Node), s.name(f.Peer))
	case CutController:
		if st.undo {
			if p, ok := peerOf[f]; ok {
				s.c.Net.Heal(s.name(p))
			}
			return
		}
		ctl := s.c.ActiveController()
		if ctl <= 0 || ctl == f.Node {
			s.tr.add(f.Node, "no other active controller to cut off from (active: %d)", ctl)
			return
		}
		peerOf[f] = ctl
		s.tr.add(f.Node, "cut off from the active controller, node %d", ctl)
		s.c.Net.Cut(s.name(f.Node), s.name(ctl))
	case Slow:
		for id := int32(1); id <= int32(s.nodes); id++ {
			if id == f.Node {
				continue
			}
			lat := f.Lat
			if st.undo {
				lat = 0
			}
			s.c.Net.SetDelay(s.name(f.Node), s.name(id), lat)
		}
	case Delay:
		lat := f.Lat
		if st.undo {
			lat = 0
		}
		s.c.Net.SetDelay(s.name(f.Node), s.name(f.Peer), lat)
	case Handover:
		s.handover(ctx, st, topics, partitions, peerOf)
	case Elect, Reassign:
		s.withAdmin(ctx, func(cctx context.Context, adm *client.Admin) { s.electOrReassign(cctx, adm, f, topics, partitions) })
	}
}

// electOrReassign is an Elect or a Reassign fault.
func (s *simulator) electOrReassign(cctx context.Context, adm *client.Admin, f Fault, topics []string, partitions int32) {
	if f.Kind == Elect {
		var tps []client.TopicPartition
		for _, tp := range topics {
			for p := range partitions {
				tps = append(tps, client.TopicPartition{Topic: tp, Partition: p})
			}
		}
		res, err := adm.ElectLeaders(cctx, client.ElectPreferred, tps)
		s.tr.add(0, "preferred election: %d answers, err %v", len(res), err)
		return
	}
	tp := client.TopicPartition{Topic: topics[f.Pick%len(topics)], Partition: int32(f.Pick/len(topics)) % partitions}
	part := s.c.Partition(tp.Topic, tp.Partition)
	if part == nil || len(part.Replicas) == 0 {
		s.tr.add(0, "reassign %v: not in the metadata yet", tp)
		return
	}
	target := append(append([]int32(nil), part.Replicas[1:]...), part.Replicas[0])
	res, err := adm.AlterPartitionReassignments(cctx, map[client.TopicPartition][]int32{tp: target})
	s.tr.add(0, "reassign %v from %v to %v: %v %v", tp, part.Replicas, target, res[tp], err)
}

// withAdmin runs fn with an admin client of the cluster and a context of
// 5 s (virtual) at most.
func (s *simulator) withAdmin(ctx context.Context, fn func(context.Context, *client.Admin)) {
	adm, err := client.NewAdmin(s.c.ClientOpts(client.RequestTimeout(3 * time.Second))...)
	if err != nil {
		s.tr.add(0, "admin: %v", err)
		return
	}
	defer adm.Close()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	fn(cctx, adm)
}

// jittered are the mixes whose requests go through the jitter.
var jittered = map[string]bool{"stale": true, "handover": true, "markers": true}

// handover is one move of a Handover fault: its start moves the
// partition's leadership to the replica after the leader, its end (the
// undo step) on to the replica after that one. Each move reorders the
// replicas so that the new leader is preferred, then asks for a preferred
// election of the partition. The second move counts from the replica the
// first one chose (peerOf), not from the metadata, which may not show
// the first move yet.
func (s *simulator) handover(ctx context.Context, st step, topics []string, partitions int32, peerOf map[Fault]int32) {
	f := st.f
	tp := client.TopicPartition{Topic: topics[f.Pick%len(topics)], Partition: int32(f.Pick/len(topics)) % partitions}
	part := s.c.Partition(tp.Topic, tp.Partition)
	if part == nil || len(part.Replicas) < 2 {
		s.tr.add(0, "handover %v: not in the metadata yet", tp)
		return
	}
	from := part.Leader
	if st.undo {
		prev, ok := peerOf[f]
		if !ok {
			return // the first move did not happen
		}
		from = prev
	}
	i := slices.Index(part.Replicas, from)
	if i < 0 {
		s.tr.add(0, "handover %v: leader %d is not among the replicas %v", tp, from, part.Replicas)
		return
	}
	n := len(part.Replicas)
	target := make([]int32, 0, n)
	for k := 1; k <= n; k++ {
		target = append(target, part.Replicas[(i+k)%n])
	}
	peerOf[f] = target[0]
	s.withAdmin(ctx, func(cctx context.Context, adm *client.Admin) {
		res, err := adm.AlterPartitionReassignments(cctx, map[client.TopicPartition][]int32{tp: target})
		s.tr.add(0, "handover %v: replicas %v to %v: %v %v", tp, part.Replicas, target, res[tp], err)
		el, err := adm.ElectLeaders(cctx, client.ElectPreferred, []client.TopicPartition{tp})
		s.tr.add(0, "handover %v to node %d: preferred election %v, err %v", tp, target[0], el, err)
	})
}

// healAll ends every fault: links healed, delays gone, every node started.
func (s *simulator) healAll() {
	for _, t := range s.resumes {
		t.Stop()
	}
	s.c.Net.HealAll()
	s.c.Gossip.Heal()
	for id := int32(1); id <= int32(s.nodes); id++ {
		if err := s.start(id); err != nil {
			s.tr.add(id, "restart failed: %v", err)
		}
	}
}

// The drill target: the workload asks it which nodes must be alive before
// it reads back, and runs its drill (Scenario.Drill) through it. The
// schedule ends every fault inside the window; Settle starts any node
// still down.
func (s *simulator) Name() string { return "simulation" }
func (s *simulator) Nodes() []int32 {
	var out []int32
	for id := int32(1); id <= int32(s.nodes); id++ {
		out = append(out, id)
	}
	return out
}
func (s *simulator) Kill(ctx context.Context, id int32) error {
	s.tr.add(id, "drill: kill -9")
	s.kill(id, false, nil)
	return nil
}
func (s *simulator) Start(ctx context.Context, id int32) error {
	s.tr.add(id, "drill: start")
	return s.start(id)
}
func (s *simulator) Stop(ctx context.Context, id int32) error {
	s.tr.add(id, "drill: graceful stop")
	return s.stop(id)
}
func (s *simulator) Pause(ctx context.Context, id int32) error {
	s.tr.add(id, "drill: pause")
	s.c.Net.Hold(s.name(id))
	s.c.Gossip.Isolate(s.c.Member(id).Cfg.GossipListen)
	return nil
}
func (s *simulator) Resume(ctx context.Context, id int32) error {
	s.tr.add(id, "drill: resume")
	s.c.Net.Release(s.name(id))
	s.c.Gossip.Heal()
	return nil
}
func (s *simulator) Isolate(ctx context.Context, id int32) error {
	s.tr.add(id, "drill: isolate")
	s.c.Isolate(id)
	return nil
}
func (s *simulator) Heal(ctx context.Context, id int32) error {
	s.tr.add(id, "drill: heal")
	s.c.Heal(id)
	return nil
}
func (s *simulator) HoldFollowerFetch(ctx context.Context, id int32, topic string, partition int32, d time.Duration) error {
	n := s.c.NodeOf(id)
	if n == nil {
		return fmt.Errorf("node %d is down", id)
	}
	s.tr.add(id, "drill: hold follower fetches of %s-%d for %s", topic, partition, d)
	_, err := n.HoldFollowerFetch(topic, partition, d)
	return err
}
func (s *simulator) ReleaseFollowerFetch(ctx context.Context, id int32, topic string, partition int32) error {
	n := s.c.NodeOf(id)
	if n == nil {
		return fmt.Errorf("node %d is down", id)
	}
	n.ReleaseFollowerFetch(topic, partition)
	return nil
}
