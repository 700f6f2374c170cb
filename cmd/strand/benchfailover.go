package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strand-io/strand/app/drill"
	"github.com/strand-io/strand/client"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

func init() { extraCommands = append(extraCommands, benchFailoverCmd) }

// The faults bench-failover measures.
var failoverFaults = []string{"kill-coordinator", "kill-controller", "kill-leader", "pause-coordinator", "stall-coordinator", "flap-coordinator", "restart-coordinator"}

// flapCycles is how many times flap-coordinator stops the node for --stall
// and lets it run for --stall.
const flapCycles = 5

func benchFailoverCmd() *cobra.Command {
	var (
		target, dataDir, kafkaBootstrap, topic, doors, faults string
		reps                                                  int
		trace                                                 bool
		down, pauseFor, stall, window                         time.Duration
	)
	cmd := &cobra.Command{
		Use:   "bench-failover",
		Short: "Measure how long exactly-once commits stop when a node fails",
		Long: `bench-failover runs one transactional producer through each front door (the
SDK over gRPC, --bootstrap; franz-go over the Kafka listener, --kafka-bootstrap),
committing one-record transactions to --topic (created with 3 replicas and
min.insync.replicas=2 if missing) in a loop, and for each fault, --reps times:

  kill-coordinator     kill -9 the node coordinating the producer's transactions,
                       start it again --down later
  kill-controller      kill -9 the active controller's node, likewise
  kill-leader          kill -9 the leader of the topic's partition, likewise
  pause-coordinator    SIGSTOP the coordinator's node for --pause, then SIGCONT
  stall-coordinator    SIGSTOP it for --stall (a short stall: a GC pause, a busy
                       disk), which should move nothing
  flap-coordinator     stop it for --stall and let it run for --stall, five times
                       (a node that keeps stalling), which should move nothing
  restart-coordinator  a controlled shutdown (SIGTERM) of the coordinator's node,
                       then start it again

It reports, per door and fault, the time from the fault to the first commit of
a transaction begun after it ("first commit"), and the longest time between two
commits from 1 s before the fault to the end of its window ("longest gap"):
median and worst of the repetitions. Kafka acts on a dead broker only once
broker.session.timeout.ms (9 s by default) has passed, the reference column.
Each repetition starts once the cluster is whole again (every broker alive,
every ISR full) and commits flow.

--target process drives the cluster of scripts/run.sh under --data-dir (make
bench-failover starts one); compose drives the docker compose cluster.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signalContext()
			defer stop()
			tgt, err := pickTarget(ctx, target, dataDir, nil)
			if err != nil {
				return err
			}
			if tgt == nil {
				return fmt.Errorf("bench-failover needs a target to put faults on (--target process or compose)")
			}
			adm, err := newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			if err := failoverTopic(ctx, adm, topic); err != nil {
				return err
			}
			b := &failoverBench{adm: adm, tgt: tgt, topic: topic, reps: reps, down: down, pause: pauseFor, stall: stall, window: window,
				out: cmd.OutOrStdout(), env: &drill.Env{Admin: adm, Target: tgt, Topics: []string{topic}, SettleTimeout: 3 * time.Minute}}
			b.env.Logf = func(string, ...any) {}
			if trace {
				traceSlow = cmd.OutOrStdout()
			}
			var rows []failoverRow
			for _, door := range strings.Split(doors, ",") {
				var open func(id string) (failoverProducer, error)
				switch door = strings.TrimSpace(door); door {
				case "sdk":
					open = func(id string) (failoverProducer, error) { return newSDKFailoverProducer(ctx, cmd, id) }
				case "kafka":
					open = func(id string) (failoverProducer, error) {
						return newKafkaFailoverProducer(strings.Split(kafkaBootstrap, ","), id)
					}
				default:
					return fmt.Errorf("--doors: sdk and kafka, not %q", door)
				}
				for _, f := range strings.Split(faults, ",") {
					f = strings.TrimSpace(f)
					if !slices.Contains(failoverFaults, f) {
						return fmt.Errorf("--faults: %q is none of %s", f, strings.Join(failoverFaults, ", "))
					}
					row, err := b.measure(ctx, door, f, open)
					if err != nil {
						return fmt.Errorf("%s, %s: %w", door, f, err)
					}
					rows = append(rows, row)
				}
			}
			printFailoverTable(cmd.OutOrStdout(), rows)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&target, "target", "process", "the cluster to put faults on: process (scripts/run.sh under --data-dir) or compose")
	fl.StringVar(&dataDir, "data-dir", "data", "the process cluster's directory (node<N>.pid and node<N>.cmd)")
	fl.StringVar(&kafkaBootstrap, "kafka-bootstrap", "127.0.0.1:9092,127.0.0.1:9102,127.0.0.1:9112", "the Kafka listeners, for --doors kafka")
	fl.StringVar(&topic, "topic", "bench-failover", "the topic the producer writes (one partition)")
	fl.StringVar(&doors, "doors", "sdk,kafka", "the front doors to measure: sdk, kafka")
	fl.StringVar(&faults, "faults", strings.Join(failoverFaults, ","), "the faults to measure")
	fl.IntVar(&reps, "reps", 5, "repetitions of each fault")
	fl.DurationVar(&down, "down", 3*time.Second, "how long a killed node stays down")
	fl.DurationVar(&pauseFor, "pause", 20*time.Second, "how long pause-coordinator stops the node")
	fl.DurationVar(&stall, "stall", time.Second, "how long stall-coordinator stops the node")
	fl.BoolVar(&trace, "trace", false, "print each step of a transaction slower than 300 ms (produce, commit) with its start time")
	fl.DurationVar(&window, "window", 15*time.Second, "how long after a fault commits are watched (at least until the node is back, plus 5 s)")
	return cmd
}

// failoverTopic creates topic (one partition, three replicas,
// min.insync.replicas=2) unless it exists.
func failoverTopic(ctx context.Context, adm *client.Admin, topic string) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := adm.CreateTopic(cctx, client.TopicSpec{Name: topic, Partitions: 1, ReplicationFactor: 3, Configs: map[string]string{"min.insync.replicas": "2"}})
	if err != nil && !errors.Is(err, client.ErrTopicAlreadyExists) {
		return err
	}
	return nil
}

// failoverProducer commits one-record transactions through one door.
type failoverProducer interface {
	// Commit runs one transaction of value to topic and commits it.
	Commit(ctx context.Context, topic string, value []byte) error
	Close()
}

type sdkFailoverProducer struct{ p *client.Producer }

func newSDKFailoverProducer(ctx context.Context, cmd *cobra.Command, id string) (failoverProducer, error) {
	opts := secure(client.Bootstrap(bootstrap(cmd)...))
	opts = append(opts, client.TransactionalID(id), client.RequestTimeout(5*time.Second))
	p, err := client.NewProducer(opts...)
	if err != nil {
		return nil, err
	}
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := p.InitTransactions(ictx); err != nil {
		p.Close(context.Background())
		return nil, err
	}
	return sdkFailoverProducer{p}, nil
}

func (s sdkFailoverProducer) Commit(ctx context.Context, topic string, value []byte) error {
	if err := s.p.BeginTransaction(); err != nil {
		return err
	}
	t := time.Now()
	if err := s.p.ProduceSync(ctx, &client.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
		_ = s.p.AbortTransaction(ctx)
		return err
	}
	traceStep(t, "produce")
	t = time.Now()
	defer traceStep(t, "commit")
	if err := s.p.CommitTransaction(ctx); err != nil {
		_ = s.p.AbortTransaction(ctx)
		return err
	}
	return nil
}

func (s sdkFailoverProducer) Close() { s.p.Close(context.Background()) }

type kafkaFailoverProducer struct{ cl *kgo.Client }

// kafkaFailoverOpts: franz-go asks for metadata at most every 5 s by
// default (MetadataMinAge), so it finds a new leader or coordinator no
// sooner; it waits for an answer from a stopped broker for the request's
// own timeout (10 s for a produce) plus 10 s (RequestTimeoutOverhead),
// and backs off from 250 ms up to 5 s between retries.
func kafkaFailoverOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RequestTimeoutOverhead(time.Second),
		kgo.ProduceRequestTimeout(time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	}
}

// newKafkaFailoverProducer is franz-go with the settings the README's
// Failover section gives for a client that should follow a failover
// within seconds (kafkaFailoverOpts).
func newKafkaFailoverProducer(seeds []string, id string) (failoverProducer, error) {
	opts := append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.TransactionalID(id), kgo.RequiredAcks(kgo.AllISRAcks())},
		kafkaFailoverOpts()...)
	opts = append(opts, security.kgoOpts()...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return kafkaFailoverProducer{cl}, nil
}

// traceSlow, when set (--trace), prints each step of a transaction that
// took longer than 300 ms: where a failover's time goes.
var traceSlow io.Writer

func traceStep(began time.Time, step string) {
	if d := time.Since(began); traceSlow != nil && d > 300*time.Millisecond {
		fmt.Fprintf(traceSlow, "  trace: %s from %s took %s\n", step, began.UTC().Format("15:04:05.000"), fmtDur(d))
	}
}

func (k kafkaFailoverProducer) Commit(ctx context.Context, topic string, value []byte) error {
	if err := k.cl.BeginTransaction(); err != nil {
		return err
	}
	t := time.Now()
	if err := k.cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
		_ = k.cl.AbortBufferedRecords(ctx)
		_ = k.cl.EndTransaction(ctx, kgo.TryAbort)
		return err
	}
	traceStep(t, "produce")
	t = time.Now()
	defer traceStep(t, "commit")
	return k.cl.EndTransaction(ctx, kgo.TryCommit)
}

func (k kafkaFailoverProducer) Close() { k.cl.Close() }

// commitLog is what a committing loop did: each transaction's begin and
// commit times, in order.
type commitLog struct {
	mu      sync.Mutex
	commits []commitTimes
	errs    int
	lastErr error
}

type commitTimes struct{ begin, end time.Time }

func (c *commitLog) add(begin, end time.Time) {
	c.mu.Lock()
	c.commits = append(c.commits, commitTimes{begin, end})
	c.mu.Unlock()
}

func (c *commitLog) fail(err error) {
	c.mu.Lock()
	c.errs++
	c.lastErr = err
	c.mu.Unlock()
}

func (c *commitLog) since(t time.Time) []commitTimes {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, _ := slices.BinarySearchFunc(c.commits, t, func(ct commitTimes, t time.Time) int { return ct.end.Compare(t) })
	return slices.Clone(c.commits[i:])
}

// commitLoop commits one-record transactions until ctx ends; after an
// error it opens a new producer (the old one's transaction is aborted by
// the new one's InitProducerId), as an application would.
func commitLoop(ctx context.Context, open func(id string) (failoverProducer, error), id, topic string, log *commitLog) {
	var p failoverProducer
	defer func() {
		if p != nil {
			p.Close()
		}
	}()
	for n := 0; ctx.Err() == nil; n++ {
		if p == nil {
			var err error
			if p, err = open(id); err != nil {
				log.fail(err)
				_ = sleepCtx(ctx, 100*time.Millisecond)
				continue
			}
		}
		begin := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := p.Commit(cctx, topic, []byte(fmt.Sprintf("%s-%d", id, n)))
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				log.fail(err)
			}
			p.Close()
			p = nil
			continue
		}
		log.add(begin, time.Now())
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

type failoverBench struct {
	adm                        *client.Admin
	tgt                        drill.Target
	env                        *drill.Env
	topic                      string
	reps                       int
	down, pause, stall, window time.Duration
	out                        io.Writer
}

// failoverRow is one door and fault's repetitions.
type failoverRow struct {
	door, fault string
	first, gap  []time.Duration
	moved       int // repetitions in which the partition's leader or the coordinator moved
	errs        int
	none        int // repetitions with no commit begun after the fault within the window
}

// measure runs fault reps times through door.
func (b *failoverBench) measure(ctx context.Context, door, fault string, open func(string) (failoverProducer, error)) (failoverRow, error) {
	row := failoverRow{door: door, fault: fault}
	id := fmt.Sprintf("bench-failover-%s-%d", door, time.Now().UnixNano())
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	log := &commitLog{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); commitLoop(lctx, open, id, b.topic, log) }()
	defer wg.Wait()
	defer cancel()
	for rep := 1; rep <= b.reps; rep++ {
		if err := b.env.Settle(ctx); err != nil {
			return row, err
		}
		if err := b.flowing(ctx, log); err != nil {
			return row, err
		}
		victim, err := b.victim(ctx, fault, id)
		if err != nil {
			return row, err
		}
		before, err := b.placement(ctx, id)
		if err != nil {
			return row, err
		}
		t0 := time.Now()
		back, err := b.inject(ctx, fault, victim)
		if err != nil {
			return row, err
		}
		end := t0.Add(b.window)
		if e := back.Add(5 * time.Second); e.After(end) {
			end = e
		}
		if err := sleepCtx(ctx, time.Until(end)); err != nil {
			return row, err
		}
		after, _ := b.placement(ctx, id)
		if after != before {
			row.moved++
		}
		first, gap := failoverFigures(log.since(t0.Add(-time.Second)), t0, end)
		if first == end.Sub(t0) {
			row.none++
		}
		row.first, row.gap = append(row.first, first), append(row.gap, gap)
		fmt.Fprintf(b.out, "%s %s #%d: node %d at %s UTC; first commit after %s, longest gap %s; placement %s -> %s\n",
			door, fault, rep, victim, t0.UTC().Format("15:04:05.000"), fmtDur(first), fmtDur(gap), before, after)
	}
	log.mu.Lock()
	row.errs = log.errs
	log.mu.Unlock()
	return row, nil
}

// failoverFigures: the time from t0 to the end of the first transaction
// begun at or after t0 (end-t0 if none), and the longest time between
// consecutive commit ends from the first of cs up to end.
func failoverFigures(cs []commitTimes, t0, end time.Time) (first, gap time.Duration) {
	first = end.Sub(t0)
	for _, c := range cs {
		if !c.begin.Before(t0) {
			first = c.end.Sub(t0)
			break
		}
	}
	prev := t0.Add(-time.Second)
	for _, c := range cs {
		if c.end.After(end) {
			break
		}
		gap = max(gap, c.end.Sub(prev))
		prev = c.end
	}
	gap = max(gap, end.Sub(prev))
	return first, gap
}

// flowing waits until commits come at least every 200 ms.
func (b *failoverBench) flowing(ctx context.Context, log *commitLog) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if n := len(log.since(time.Now().Add(-time.Second))); n >= 5 {
			return nil
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	return fmt.Errorf("no commits flow (%d errors, the last: %v)", log.errs, log.lastErr)
}

// victim is the node fault acts on.
func (b *failoverBench) victim(ctx context.Context, fault, txnID string) (int32, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	switch {
	case strings.HasSuffix(fault, "-coordinator"):
		c, err := b.adm.FindCoordinator(cctx, pb.CoordinatorType_TRANSACTION, txnID)
		if err != nil {
			return 0, err
		}
		return c.NodeId, nil
	case fault == "kill-controller":
		md, err := b.adm.Metadata(cctx, false)
		if err != nil {
			return 0, err
		}
		if md.ControllerId < 0 {
			return 0, fmt.Errorf("no active controller")
		}
		return md.ControllerId, nil
	default:
		return b.leader(cctx)
	}
}

func (b *failoverBench) leader(ctx context.Context) (int32, error) {
	md, err := b.adm.Metadata(ctx, false, b.topic)
	if err != nil {
		return 0, err
	}
	for _, t := range md.Topics {
		for _, p := range t.Partitions {
			if p.LeaderId >= 0 {
				return p.LeaderId, nil
			}
		}
	}
	return 0, fmt.Errorf("%s has no leader", b.topic)
}

// placement names where the producer's coordinator and the topic's leader
// are.
func (b *failoverBench) placement(ctx context.Context, txnID string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := b.adm.FindCoordinator(cctx, pb.CoordinatorType_TRANSACTION, txnID)
	if err != nil {
		return "", err
	}
	l, err := b.leader(cctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("coordinator %d, leader %d", c.NodeId, l), nil
}

// inject puts fault on node id and undoes it (in the background for a
// pause or a kill); it returns when the node is expected back.
func (b *failoverBench) inject(ctx context.Context, fault string, id int32) (time.Time, error) {
	switch {
	case strings.HasPrefix(fault, "kill-"):
		if err := b.tgt.Kill(ctx, id); err != nil {
			return time.Time{}, err
		}
		if err := sleepCtx(ctx, b.down); err != nil {
			return time.Time{}, err
		}
		return time.Now(), b.tgt.Start(ctx, id)
	case fault == "pause-coordinator", fault == "stall-coordinator":
		d := b.pause
		if fault == "stall-coordinator" {
			d = b.stall
		}
		if err := b.tgt.Pause(ctx, id); err != nil {
			return time.Time{}, err
		}
		_ = sleepCtx(ctx, d)
		return time.Now(), b.tgt.Resume(context.WithoutCancel(ctx), id)
	case fault == "flap-coordinator":
		for i := 0; i < flapCycles; i++ {
			if err := b.tgt.Pause(ctx, id); err != nil {
				return time.Time{}, err
			}
			_ = sleepCtx(ctx, b.stall)
			if err := b.tgt.Resume(context.WithoutCancel(ctx), id); err != nil {
				return time.Time{}, err
			}
			if err := sleepCtx(ctx, b.stall); err != nil {
				return time.Time{}, err
			}
		}
		return time.Now(), nil
	case fault == "restart-coordinator":
		if err := b.tgt.Stop(ctx, id); err != nil {
			return time.Time{}, err
		}
		return time.Now(), b.tgt.Start(ctx, id)
	}
	return time.Time{}, fmt.Errorf("unknown fault %q", fault)
}

func fmtDur(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func printFailoverTable(w io.Writer, rows []failoverRow) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| door | fault | first commit, median | worst | longest gap, median | worst | placement moved | producer errors | Kafka (session timeout) |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range rows {
		worst := fmtDur(slices.Max(r.first))
		if r.none > 0 {
			worst = fmt.Sprintf("none in the window (%d of %d)", r.none, len(r.first))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %d of %d | %d | 9 s |\n", r.door, r.fault,
			fmtDur(median(r.first)), worst, fmtDur(median(r.gap)), fmtDur(slices.Max(r.gap)), r.moved, len(r.first), r.errs)
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
