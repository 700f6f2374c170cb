package judges

// Real cluster on real time: the judges are Kafka clients from outside this code
// (librdkafka, kcat, kafka-python, sarama, franz-go) that dial real TCP sockets.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/wait"
)

// The chain judge: franz-go's own exactly-once machinery
// (GroupTransactSession: transactional producer, consumer group,
// TxnOffsetCommit, read_committed, KIP-447 stable offsets) driven through
// Strand's Kafka listeners. Three consume-transform-produce stages copy an
// input topic to an output topic through two intermediate topics, each
// stage with its own transactional id and group; the middle stage's client
// dies in the middle of a transaction (its records already written, its
// offsets not committed) and a new incarnation takes over. The output,
// read read_committed, must hold every input record exactly once, in order
// per key, transformed by every stage.

const (
	chainPartitions = 3
	chainKeys       = 64
	// chainTxnRecords bounds one stage transaction.
	chainTxnRecords = 2000
)

// chainValue is input record i's value: its key and its sequence within
// the key.
func chainKey(i int) string   { return fmt.Sprintf("k%02d", i%chainKeys) }
func chainValue(i int) string { return fmt.Sprintf("%s:%06d", chainKey(i), i/chainKeys) }

// chainStage is one consume-transform-produce stage: it reads in
// (read_committed, group "g-"+name) and writes every record to out with the
// same key and the value suffixed with "|"+name, one transaction per poll.
type chainStage struct {
	c       *Target
	name    string
	in, out string
	// crashAfter, when positive, makes the stage's first client die once
	// the stage has committed that many transactions: in the next one,
	// after its records are written and before it ends. A transaction
	// holds at most chainTxnRecords records, so a stage runs at least
	// total/chainTxnRecords of them.
	crashAfter int64

	committed   atomic.Int64 // records in committed transactions
	txns        atomic.Int64 // committed transactions
	aborts      atomic.Int64 // transactions that ended aborted
	crashed     atomic.Bool  // the crash happened
	crashedRecs atomic.Int64 // records the dead client had written in its open transaction
	restarts    atomic.Int64 // clients started after the first

	mu   sync.Mutex
	errs []string // errors the stage saw (for the failure message)
}

func (s *chainStage) note(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.errs) < 20 {
		s.errs = append(s.errs, fmt.Sprintf(format, args...))
	}
}

func (s *chainStage) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%s: committed %d records in %d txns, %d aborted txns, crashed=%v (open txn held %d records), %d restarts, errors %q",
		s.name, s.committed.Load(), s.txns.Load(), s.aborts.Load(), s.crashed.Load(), s.crashedRecs.Load(), s.restarts.Load(), s.errs)
}

// run keeps the stage going until stop ends: a client per incarnation;
// ctx bounds every request (the test's deadline).
func (s *chainStage) run(ctx, stop context.Context) {
	for gen := 1; stop.Err() == nil && ctx.Err() == nil; gen++ {
		if gen > 1 {
			s.restarts.Add(1)
		}
		s.incarnation(ctx, stop, gen)
	}
}

// incarnation runs one client of the stage until stop ends (a clean close),
// the crash point (a dirty death), or an error a client cannot go on from.
func (s *chainStage) incarnation(ctx, stop context.Context, gen int) {
	endpoint := fmt.Sprintf("%s-gen%d", s.name, gen)
	life, die := context.WithCancel(ctx)
	defer die()
	sess, err := kgo.NewGroupTransactSession(append(franzOpts(s.c, endpoint),
		kgo.WithContext(life),
		kgo.TransactionalID("chain-"+s.name),
		kgo.TransactionTimeout(30*time.Second),
		kgo.ConsumerGroup("g-chain-"+s.name),
		kgo.ConsumeTopics(s.in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.SessionTimeout(6*time.Second),
		// Bounds how long a rebalance waits for the dead member.
		kgo.RebalanceTimeout(10*time.Second),
		kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.DefaultProduceTopic(s.out),
	)...)
	if err != nil {
		s.note("%s: new session: %v", endpoint, err)
		return
	}
	for {
		fs := sess.PollRecords(stop, chainTxnRecords)
		if stop.Err() != nil || fs.IsClientClosed() {
			sess.Close() // between transactions: a clean leave
			return
		}
		fs.EachError(func(t string, p int32, err error) { s.note("%s: fetch %s[%d]: %v", endpoint, t, p, err) })
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			s.note("%s: begin: %v", endpoint, err)
			sess.Close()
			return
		}
		var produceErr atomic.Value
		for _, r := range recs {
			out := &kgo.Record{Key: r.Key, Value: append(append([]byte(nil), r.Value...), "|"+s.name...)}
			sess.Produce(ctx, out, func(_ *kgo.Record, err error) {
				if err != nil {
					produceErr.CompareAndSwap(nil, err)
				}
			})
		}
		if s.crashAfter > 0 && !s.crashed.Load() && s.txns.Load() >= s.crashAfter {
			// Die mid-transaction: the records are on the brokers, the
			// transaction and the group offsets are not committed. The
			// client is cut off first, so neither an EndTxn nor a
			// LeaveGroup can get out while it closes: the transaction
			// coordinator and the group learn of the death only from the
			// next incarnation and the session timeout.
			if err := sess.Client().Flush(ctx); err != nil {
				s.note("%s: flush before the crash: %v", endpoint, err)
			}
			if e, _ := produceErr.Load().(error); e == nil {
				s.crashedRecs.Store(int64(len(recs)))
			}
			s.crashed.Store(true)
			s.c.Net.Isolate(endpoint)
			die()
			closed := make(chan struct{})
			go func() { defer close(closed); sess.Close() }()
			if err := wait.Until(30*time.Second, "the dead client's Close", func() bool {
				select {
				case <-closed:
					return true
				default:
					return false
				}
			}); err != nil {
				// franz-go's Close hangs: the goroutine is left behind, and
				// the stage goes on with its next incarnation.
				s.note("%s: %v", endpoint, err)
			}
			return
		}
		commit := kgo.TryCommit
		if e, _ := produceErr.Load().(error); e != nil {
			s.note("%s: produce: %v", endpoint, e)
			commit = kgo.TryAbort
		}
		committed, err := sess.End(ctx, commit)
		switch {
		case err != nil:
			// No error from End can be retried by the same client: start
			// a new one, as an application would.
			s.note("%s: end: %v", endpoint, err)
			s.aborts.Add(1)
			sess.Close()
			return
		case committed:
			s.committed.Add(int64(len(recs)))
			s.txns.Add(1)
		default:
			s.aborts.Add(1)
		}
	}
}

func TestFranzExactlyOnceChain(t *testing.T) {
	total := 100_000
	if testing.Short() {
		total = 5_000
	}
	runChain(t, Plain(testcluster.New(t, testcluster.Options{})), total)
}

// chainPrefixes name every topic, group and transactional id of the chain
// (for the ACLs of a secured run).
var chainPrefixes = []string{"chain-", "g-chain-"}

// runChain runs the chain of total input records on c and checks its
// output.
func runChain(t *testing.T, c *Target, total int) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	topics := []string{"chain-in", "chain-s1", "chain-s2", "chain-out"}
	for _, tp := range topics {
		c.CreateTopic(tp, chainPartitions, 3, nil)
	}
	start := time.Now()

	// The input, written by an idempotent franz-go producer.
	prod := newFranz(t, c, "chain-input", kgo.DefaultProduceTopic("chain-in"), kgo.ProducerLinger(5*time.Millisecond))
	var produceErr atomic.Value
	for i := 0; i < total; i++ {
		prod.Produce(ctx, &kgo.Record{Key: []byte(chainKey(i)), Value: []byte(chainValue(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				produceErr.CompareAndSwap(nil, err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatalf("flush the input: %v", err)
	}
	if e, _ := produceErr.Load().(error); e != nil {
		t.Fatalf("produce the input: %v", e)
	}
	prod.Close()
	t.Logf("input of %d records written in %v", total, time.Since(start).Round(time.Millisecond))

	stages := []*chainStage{
		{c: c, name: "s1", in: "chain-in", out: "chain-s1"},
		{c: c, name: "s2", in: "chain-s1", out: "chain-s2", crashAfter: int64(max(1, total/chainTxnRecords/3))},
		{c: c, name: "s3", in: "chain-s2", out: "chain-out"},
	}
	stop, stopStages := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, s := range stages {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.run(ctx, stop)
		}()
	}
	stopped := false
	halt := func() {
		if !stopped {
			stopped = true
			stopStages()
			wg.Wait()
		}
	}
	defer halt()
	report := func() string {
		var b strings.Builder
		for _, s := range stages {
			b.WriteString("\n  " + s.String())
		}
		return b.String()
	}
	// Done when the last stage has committed every record; given up when
	// no stage committed anything for a minute (a crash and restart cost
	// a session timeout and a rebalance, seconds).
	var lastSum int64
	lastMove := time.Now()
	stalled := false
	if err := wait.Until(3*time.Minute, "the last stage to commit every record", func() bool {
		sum := stages[0].committed.Load() + stages[1].committed.Load() + stages[2].committed.Load()
		if sum != lastSum {
			lastSum, lastMove = sum, time.Now()
		}
		stalled = time.Since(lastMove) > time.Minute
		return stages[2].committed.Load() >= int64(total) || ctx.Err() != nil || stalled
	}); err != nil || ctx.Err() != nil || stalled {
		if stalled {
			err = errors.Join(err, errors.New("no stage committed anything for a minute"))
		}
		t.Fatalf("%v%s", errors.Join(err, ctx.Err()), report())
	}
	t.Logf("chain done in %v%s", time.Since(start).Round(time.Millisecond), report())
	halt()

	mid := stages[1]
	if !mid.crashed.Load() || mid.restarts.Load() == 0 {
		t.Fatalf("the middle stage never crashed and restarted: %s", mid)
	}
	if mid.crashedRecs.Load() == 0 {
		t.Fatalf("the crashed transaction held no written records, so it tested nothing: %s", mid)
	}
	for _, s := range stages {
		if s.committed.Load() != int64(total) {
			t.Errorf("stage %s committed %d records, want %d (each input once)", s.name, s.committed.Load(), total)
		}
	}
	// The dead client's open transaction left records in chain-s2 that
	// the last stage must not have seen: read_uncommitted holds them,
	// read_committed does not.
	if raw := readAll(t, ctx, c, "chain-check-s2-raw", "chain-s2", chainPartitions, false); len(raw) < total+int(mid.crashedRecs.Load()) {
		t.Errorf("chain-s2 read_uncommitted holds %d records, want at least %d + the %d of the crashed transaction", len(raw), total, mid.crashedRecs.Load())
	}

	out := readAll(t, ctx, c, "chain-check-out", "chain-out", chainPartitions, true)
	checkChainOutput(t, total, out)
}

// checkChainOutput asserts that out holds input record i exactly once for
// every i < total, in order per key, with every stage's mark.
func checkChainOutput(t *testing.T, total int, out []*kgo.Record) {
	t.Helper()
	next := map[string]int{}      // key -> the sequence expected next
	keyPart := map[string]int32{} // key -> the partition it was seen in
	bad := 0
	fail := func(format string, args ...any) {
		bad++
		if bad <= 20 {
			t.Errorf(format, args...)
		}
	}
	for _, r := range out {
		key := string(r.Key)
		if p, ok := keyPart[key]; ok && p != r.Partition {
			fail("key %s in partitions %d and %d", key, p, r.Partition)
		}
		keyPart[key] = r.Partition
		want := fmt.Sprintf("%s:%06d|s1|s2|s3", key, next[key])
		if got := string(r.Value); got != want {
			fail("chain-out[%d]@%d: key %s value %q, want %q (duplicate, loss or reorder)", r.Partition, r.Offset, key, got, want)
		}
		var seq int
		if _, err := fmt.Sscanf(string(r.Value), key+":%06d", &seq); err == nil && seq >= next[key] {
			next[key] = seq + 1
		}
	}
	for k := 0; k < chainKeys && k < total; k++ {
		key := chainKey(k)
		want := total / chainKeys
		if k < total%chainKeys {
			want++
		}
		if next[key] != want {
			fail("key %s: output ends at sequence %d, want %d", key, next[key], want)
		}
	}
	if len(out) != total {
		fail("chain-out holds %d committed records, want %d", len(out), total)
	}
	if bad > 20 {
		t.Errorf("... and %d more", bad-20)
	}
}

// TestFranzIdempotentRoundTrip writes keyed records with franz-go's
// default producer (idempotent, acks=all) and reads them back with a
// franz-go consumer: every record once, at the offset its produce was
// answered with, in order per partition, under the producer id the
// cluster gave it.
func TestFranzIdempotentRoundTrip(t *testing.T) {
	const n = 2000
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := Plain(testcluster.New(t, testcluster.Options{}))
	c.CreateTopic("idem", chainPartitions, 3, nil)

	prod := newFranz(t, c, "idem-producer", kgo.DefaultProduceTopic("idem"))
	type at struct {
		p   int32
		off int64
	}
	var mu sync.Mutex
	acked := map[string]at{}
	var firstErr atomic.Value
	for i := 0; i < n; i++ {
		prod.Produce(ctx, &kgo.Record{Key: []byte(chainKey(i)), Value: []byte(chainValue(i))}, func(r *kgo.Record, err error) {
			if err != nil {
				firstErr.CompareAndSwap(nil, err)
				return
			}
			mu.Lock()
			acked[string(r.Value)] = at{r.Partition, r.Offset}
			mu.Unlock()
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if e, _ := firstErr.Load().(error); e != nil {
		t.Fatalf("produce: %v", e)
	}
	if len(acked) != n {
		t.Fatalf("%d records acknowledged, want %d", len(acked), n)
	}

	got := readAll(t, ctx, c, "idem-consumer", "idem", chainPartitions, false)
	if len(got) != n {
		t.Errorf("read %d records, want %d", len(got), n)
	}
	seen := map[string]bool{}
	next := map[string]int{}
	noPID := 0
	for _, r := range got {
		v := string(r.Value)
		if seen[v] {
			t.Errorf("%q read twice", v)
		}
		seen[v] = true
		if a, ok := acked[v]; !ok || a.p != r.Partition || a.off != r.Offset {
			t.Errorf("%q read at %d@%d, acknowledged at %+v (ok %v)", v, r.Partition, r.Offset, a, ok)
		}
		key := string(r.Key)
		if want := fmt.Sprintf("%s:%06d", key, next[key]); v != want {
			t.Errorf("key %s: read %q, want %q next", key, v, want)
		}
		next[key]++
		if r.ProducerID < 0 {
			noPID++
		}
	}
	if noPID > 0 {
		// franz-go quietly writes without idempotence when the cluster
		// does not offer InitProducerId.
		t.Errorf("%d of %d records carry no producer id: the producer was not idempotent", noPID, len(got))
	}
}
