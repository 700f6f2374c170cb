package replication_test

// Real cluster on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/testcluster"
)

// ackLog records, per partition, the values acknowledged and their offsets.
type ackLog struct {
	mu      sync.Mutex
	acked   map[int32]map[int]int64 // partition -> value -> offset
	errs    []error
	settled int           // promises run, acknowledged or failed
	changed chan struct{} // a token after each promise
}

// waitBelow blocks until fewer than n of the sent records are unsettled,
// or stop is closed (false).
func (a *ackLog) waitBelow(sent, n int, stop <-chan struct{}) bool {
	for {
		a.mu.Lock()
		pending := sent - a.settled
		a.mu.Unlock()
		if pending < n {
			return true
		}
		select {
		case <-a.changed:
		case <-stop:
			return false
		}
	}
}

func newAckLog() *ackLog {
	return &ackLog{acked: map[int32]map[int]int64{}, changed: make(chan struct{}, 1)}
}

func (a *ackLog) promise(r *client.Record, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.settled++
	select {
	case a.changed <- struct{}{}:
	default:
	}
	if err != nil {
		a.errs = append(a.errs, err)
		return
	}
	v, _ := strconv.Atoi(string(r.Value))
	if a.acked[r.Partition] == nil {
		a.acked[r.Partition] = map[int]int64{}
	}
	a.acked[r.Partition][v] = r.Offset
}

func (a *ackLog) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, m := range a.acked {
		n += len(m)
	}
	return n
}

// readAll reads every partition of topic from the start to its HW.
func readAll(t *testing.T, c *testcluster.Cluster, topic string, parts int32) map[int32][]*client.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm, _ := client.NewAdmin(c.ClientOpts()...)
	defer adm.Close()
	var tps []client.TopicPartition
	assign := map[client.TopicPartition]int64{}
	for p := int32(0); p < parts; p++ {
		tp := client.TopicPartition{Topic: topic, Partition: p}
		tps = append(tps, tp)
		assign[tp] = client.OffsetEarliest
	}
	ends, err := adm.ListOffsets(ctx, tps, client.OffsetLatest, client.ReadUncommitted)
	if err != nil {
		t.Fatal(err)
	}
	cons, _ := client.NewConsumer(c.ClientOpts()...)
	defer cons.Close(ctx)
	cons.Assign(assign)
	out := map[int32][]*client.Record{}
	done := func() bool {
		for _, tp := range tps {
			if cons.Position(tp) < ends[tp].HighWatermark {
				return false
			}
		}
		return true
	}
	for !done() {
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			out[r.Partition] = append(out[r.Partition], r)
		}
	}
	return out
}

// checkExactlyOnce: every acknowledged record is in the log once, at its
// acknowledged offset, and each partition's values are in send order.
func checkExactlyOnce(t *testing.T, acks *ackLog, logs map[int32][]*client.Record) {
	t.Helper()
	for p, recs := range logs {
		seen := map[int]int64{}
		last := -1
		for _, r := range recs {
			v, _ := strconv.Atoi(string(r.Value))
			if off, dup := seen[v]; dup {
				t.Fatalf("partition %d: value %d at offsets %d and %d", p, v, off, r.Offset)
			}
			seen[v] = r.Offset
			if v <= last {
				t.Fatalf("partition %d: value %d after %d (out of send order)", p, v, last)
			}
			last = v
		}
		for v, off := range acks.acked[p] {
			got, ok := seen[v]
			if !ok {
				t.Fatalf("partition %d: acknowledged value %d (offset %d) is lost", p, v, off)
			}
			if got != off {
				t.Fatalf("partition %d: value %d acknowledged at %d but stored at %d", p, v, off, got)
			}
		}
	}
}

// sameLogs waits until every replica of a partition holds identical bytes.
func sameLogs(t *testing.T, c *testcluster.Cluster, topic string, p int32) {
	t.Helper()
	var why string
	c.Eventually(30*time.Second, fmt.Sprintf("identical replicas of %s-%d (%s)", topic, p, why), func() bool {
		part := c.Partition(topic, p)
		var ref []byte
		for i, r := range part.Replicas {
			l := c.Log(r, topic, p)
			if l == nil {
				why = fmt.Sprintf("no log on %d", r)
				return false
			}
			res, err := l.Read(l.LogStartOffset(), 64<<20, l.LogEndOffset(), true)
			if err != nil {
				why = err.Error()
				return false
			}
			var all []byte
			all = append(all, res.Records...)
			for next := nextOffset(res.Records); next < l.LogEndOffset(); next = nextOffset(all) {
				more, err := l.Read(next, 64<<20, l.LogEndOffset(), true)
				if err != nil || len(more.Records) == 0 {
					why = fmt.Sprint("read ", err)
					return false
				}
				all = append(all, more.Records...)
			}
			if i == 0 {
				ref = all
			} else if !bytes.Equal(ref, all) {
				why = fmt.Sprintf("replica %d differs (%d vs %d bytes)", r, len(all), len(ref))
				return false
			}
		}
		return true
	})
}

func nextOffset(buf []byte) int64 {
	var next int64
	for it := record.NewIter(buf); it.Next(); {
		h := it.Header()
		next = h.NextOffset()
	}
	return next
}

// TestKillLeaderWhileProducing: an idempotent producer writes with
// acks=all and min ISR 2; the leader is killed (kill -9) mid-stream. Every
// acknowledged record is there exactly once, in order, after the new leader
// takes over, and the producer carries on.
func TestKillLeaderWhileProducing(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	const parts = 3
	c.CreateTopic("orders", parts, 3, map[string]string{"min.insync.replicas": "2"})
	p, err := client.NewProducer(c.ClientOpts(client.RequestTimeout(2*time.Second), client.DeliveryTimeout(2*time.Minute),
		client.WithPartitioner(client.ManualPartitioner{}), client.Linger(time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	acks := newAckLog()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	sent := 0
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p.Produce(ctx, &client.Record{Topic: "orders", Partition: int32(i % parts), Value: []byte(strconv.Itoa(i))}, acks.promise)
			sent++
			// At most 500 records unsettled: the stream keeps flowing
			// through the failover without running ahead of the acks.
			if !acks.waitBelow(sent, 500, stop) {
				return
			}
		}
	}()
	c.Eventually(20*time.Second, "first acks", func() bool { return acks.count() > 2000 })
	victim := c.Partition("orders", 0).Leader
	before := acks.count()
	c.Kill(victim)
	t.Logf("killed leader %d after %d acks", victim, before)
	c.Eventually(30*time.Second, "a new leader for orders-0", func() bool {
		l := c.Partition("orders", 0).Leader
		return l >= 0 && l != victim
	})
	c.Eventually(30*time.Second, "acks resume", func() bool { return acks.count() > before+3000 })
	close(stop)
	wg.Wait()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close(ctx)
	if len(acks.errs) > 0 {
		t.Fatalf("%d records failed; first: %v", len(acks.errs), acks.errs[0])
	}
	if acks.count() != sent {
		t.Fatalf("%d acknowledged of %d sent", acks.count(), sent)
	}
	checkExactlyOnce(t, acks, readAll(t, c, "orders", parts))

	// The killed node comes back, catches up, rejoins every ISR, and
	// preferred-leader election gives it its leaderships back.
	c.Start(victim)
	c.WaitReady(30 * time.Second)
	c.Eventually(30*time.Second, "full ISRs", func() bool {
		for i := int32(0); i < parts; i++ {
			if len(c.Partition("orders", i).ISR) != 3 {
				return false
			}
		}
		return true
	})
	c.Eventually(30*time.Second, "preferred leaders back", func() bool {
		for i := int32(0); i < parts; i++ {
			pp := c.Partition("orders", i)
			if pp.Leader != pp.Replicas[0] {
				return false
			}
		}
		return true
	})
	for i := int32(0); i < parts; i++ {
		sameLogs(t, c, "orders", i)
	}
}
