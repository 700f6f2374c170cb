package hostile

// Real node on real time: the hostile requests are raw bytes on a real TCP connection
// to the Kafka listener; could dial MemNet inside synctest; not moved yet.

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strand-io/strand/api"
	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/internal/wire"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/wait"
)

// Bounds on what one client can make a node hold:
// requests in flight on a Produce stream, fetch sessions and the
// partitions they keep, and the bytes one fetch reads.

// writeAcked writes vals to partition 0 of topic with acks=all through the
// SDK; each is acknowledged before it returns.
func (tg *target) writeAcked(topic string, vals ...string) {
	tg.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := client.NewProducer(tg.opts(client.WithPartitioner(client.ManualPartitioner{}))...)
	if err != nil {
		tg.t.Fatal(err)
	}
	defer p.Close(ctx)
	var recs []*client.Record
	for _, v := range vals {
		recs = append(recs, &client.Record{Topic: topic, Partition: 0, Value: []byte(v)})
	}
	if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		tg.t.Fatalf("acks=all write to %s: %v", topic, err)
	}
}

// logEnd is the log end offset of partition p of topic on the dev node.
func (tg *target) logEnd(topic string, p int32) int64 {
	tg.t.Helper()
	part, err := tg.dev.Repl.Partition(topic, p)
	if err != nil {
		tg.t.Fatal(err)
	}
	return part.Log.LogEndOffset()
}

func batchOf(t testing.TB, vals ...string) []byte {
	t.Helper()
	var recs []record.Record
	for _, v := range vals {
		recs = append(recs, record.Record{Value: []byte(v), Timestamp: time.Now().UnixMilli()})
	}
	b, err := record.Build(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, PartitionLeaderEpoch: -1}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestProduceStreamNeverReadIsBounded (item 3): a client floods one
// Produce stream with acks=all requests and never reads an answer. Its
// connection takes 64 KiB of answers (its HTTP/2 window) and then none;
// from there the node holds at most max.in.flight.requests.per.stream
// requests of the stream and reads no more of it (gRPC's flow control
// then stops the client), instead of a goroutine and an answer per
// request. Bound stated: at most 64 goroutines and 16 MiB of live heap
// above what the node had before, during the flood and after it. Other
// producers are still acknowledged meanwhile; once the flooder reads,
// every request it sent is answered NONE; records acknowledged before are
// all still there.
func TestProduceStreamNeverReadIsBounded(t *testing.T) {
	const limit = 8
	tg := devTarget(t, func(c *node.Config) { c.ProduceMaxInFlight = limit })
	tg.createTopic("flood", 1, 1)
	tg.createTopic("kept", 1, 1)
	var kept []string
	for i := range 20 {
		kept = append(kept, fmt.Sprintf("kept-%d", i))
	}
	tg.writeAcked("kept", kept...)
	tg.assertServes() // warm up what a served client leaves running
	b := measure(t)

	// A window of 64 KiB (no BDP growth) takes about a thousand answers.
	cc := tg.rawWith(tg.dev.Addr(), grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := pb.NewProducerClient(cc).Produce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 5000
	var sent atomic.Int64
	sendDone := make(chan error, 1)
	go func() {
		for i := range n {
			req := &pb.ProduceRequest{CorrelationId: int64(i + 1), Acks: -1, TimeoutMs: 30000,
				Partitions: []*pb.PartitionRecords{{Topic: "flood", Partition: 0, Records: batchOf(t, fmt.Sprintf("f-%d", i))}}}
			if err := st.Send(req); err != nil {
				sendDone <- err
				return
			}
			sent.Add(1)
		}
		sendDone <- nil
	}()
	// Watch the flood: it ends when every request sent has been written
	// (the node read them all) or after 4 s (the node stopped reading).
	slack := 64
	peak := 0
	_ = wait.Until(4*time.Second, "every request sent to be written", func() bool {
		g := runtime.NumGoroutine()
		peak = max(peak, g)
		if g > b.goroutines+slack {
			t.Fatalf("flooding an unread Produce stream: %d goroutines (before %d, bound +%d); %d requests sent, %d written",
				g, b.goroutines, slack, sent.Load(), tg.logEnd("flood", 0))
		}
		return int64(n) == sent.Load() && tg.logEnd("flood", 0) == n
	})
	written := tg.logEnd("flood", 0)
	t.Logf("flood of %d acks=all requests, unread: %d sent, %d written; goroutines %d before, peak %d", n, sent.Load(), written, b.goroutines, peak)
	if written >= n {
		t.Errorf("the node read all %d requests of a stream whose answers are not read (want it to stop reading)", n)
	}
	b.check(slack, 16<<20)
	tg.assertServes()

	// The flooder reads at last: every request is answered, in full.
	seen := map[int64]bool{}
	for len(seen) < n {
		r, err := st.Recv()
		if err != nil {
			t.Fatalf("after %d answers: %v", len(seen), err)
		}
		if len(r.Partitions) != 1 || r.Partitions[0].ErrorCode != pb.ErrorCode_NONE {
			t.Fatalf("answer %d: %v, want NONE", r.CorrelationId, r.Partitions)
		}
		seen[r.CorrelationId] = true
	}
	if err := <-sendDone; err != nil {
		t.Fatal(err)
	}
	cancel()
	tg.dropRaw()
	if got := tg.readAll("flood", 0, client.ReadUncommitted, n); len(got) != n {
		t.Errorf("flood: read %d records back, want %d", len(got), n)
	}
	if got := tg.readAll("kept", 0, client.ReadUncommitted, len(kept)); fmt.Sprint(got) != fmt.Sprint(kept) {
		t.Errorf("kept: read %q, want %q", got, kept)
	}
	b.check(slack, 16<<20)
}

// rawWith is raw with more dial options (a hostile client picks its own
// flow-control windows).
func (tg *target) rawWith(addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	tg.t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, append(append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, wire.ErrorCodeDialOptions()...), opts...)...)
	if err != nil {
		tg.t.Fatal(err)
	}
	tg.t.Cleanup(func() { cc.Close() })
	tg.conns = append(tg.conns, cc)
	return cc
}

// TestFetchSessionsFromMadeUpReplicas (item 4): fetches on the
// inter-broker listener (from the node's own address, which its peer
// filter admits) in the names of replicas that are not registered, at
// wrong epochs, or of the node itself, each opening a fetch session over
// 2000 made-up partitions, are refused with STALE_BROKER_EPOCH before
// anything is kept: no session, no partition held, heap within 16 MiB of
// before. The node still serves; acknowledged records are still there.
func TestFetchSessionsFromMadeUpReplicas(t *testing.T) {
	tg := devTarget(t)
	tg.createTopic("kept", 1, 1)
	kept := []string{"k0", "k1", "k2"}
	tg.writeAcked("kept", kept...)
	tg.assertServes()
	b := measure(t)
	n := tg.dev
	self := n.Repl.Image().Brokers[n.ID()]
	var parts []*pb.FetchPartition
	for i := range 2000 {
		parts = append(parts, &pb.FetchPartition{Topic: fmt.Sprintf("made-up-%d", i%50), Partition: int32(i), FetchOffset: 0, CurrentLeaderEpoch: -1})
	}
	cons := pb.NewConsumerClient(tg.raw(n.InterBrokerAddr()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type attempt struct {
		replica int32
		epoch   int64
		want    string
	}
	var attempts []attempt
	for id := int32(100); id < 400; id++ {
		attempts = append(attempts, attempt{id, 0, fmt.Sprintf("fetch from broker %d: no such broker is registered", id)})
	}
	attempts = append(attempts,
		attempt{n.ID(), self.Epoch, fmt.Sprintf("fetch with replica_id %d: that is this broker; a broker does not follow itself", n.ID())},
		attempt{2, self.Epoch, "fetch from broker 2: no such broker is registered"})
	for _, a := range attempts {
		resp, err := cons.Fetch(ctx, &pb.FetchRequest{ReplicaId: a.replica, ReplicaEpoch: a.epoch, SessionEpoch: 1, MaxBytes: 1 << 20, Partitions: parts})
		if err != nil {
			t.Fatalf("fetch as replica %d: %v", a.replica, err)
		}
		if resp.ErrorCode != pb.ErrorCode_STALE_BROKER_EPOCH || resp.ErrorMessage != a.want || resp.SessionId != 0 || len(resp.Partitions) != 0 {
			t.Fatalf("fetch as replica %d: %v %q (session %d, %d partitions), want STALE_BROKER_EPOCH %q and nothing else",
				a.replica, resp.ErrorCode, resp.ErrorMessage, resp.SessionId, len(resp.Partitions), a.want)
		}
	}
	if s, p := n.Repl.FetchSessions(); s != 0 || p != 0 {
		t.Errorf("after %d session opens from made-up replicas: %d sessions holding %d partitions, want none", len(attempts), s, p)
	}
	tg.dropRaw()
	b.check(32, 16<<20)
	tg.assertServes()
	if got := tg.readAll("kept", 0, client.ReadUncommitted, len(kept)); fmt.Sprint(got) != fmt.Sprint(kept) {
		t.Errorf("kept: read %q, want %q", got, kept)
	}
}

// TestFetchMaxBytesCapped (item 5): fetches asking for 2 GiB at once
// (max_bytes and partition_max_bytes both MaxInt32), sixteen at a time,
// are each answered with at most fetch.max.bytes (1 MiB here) of
// records, except that the first batch is answered whole when it alone is
// larger (a 1.5 MiB batch); reading on from each answer's end reaches the
// log end with every record, in order. Heap within 16 MiB of before
// afterwards; the node still serves.
func TestFetchMaxBytesCapped(t *testing.T) {
	const limit = 1 << 20
	tg := devTarget(t, func(c *node.Config) {
		c.ReplicationConfig.ConsumerFetchMaxBytes = limit
		c.MessageMaxBytes = 2 << 20
	})
	tg.createTopic("big", 1, 1)
	// One batch larger than fetch.max.bytes, then 48 batches of 64 KiB.
	cc := tg.raw(tg.dev.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := pb.NewProducerClient(cc).Produce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	pad := func(i, n int) string {
		v := fmt.Sprintf("v%03d-", i)
		return v + strings.Repeat("x", n-len(v))
	}
	for i := range 49 {
		size := 64 << 10
		if i == 0 {
			size = 3 << 19 // 1.5 MiB
		}
		v := pad(i, size)
		want = append(want, v[:5])
		if err := st.Send(&pb.ProduceRequest{CorrelationId: int64(i), Acks: 1, TimeoutMs: 10000,
			Partitions: []*pb.PartitionRecords{{Topic: "big", Partition: 0, Records: batchOf(t, v)}}}); err != nil {
			t.Fatal(err)
		}
		r, err := st.Recv()
		if err != nil || r.Partitions[0].ErrorCode != pb.ErrorCode_NONE {
			t.Fatalf("write %d: %v %v", i, r, err)
		}
	}
	end := tg.logEnd("big", 0)
	b := measure(t)
	cons := pb.NewConsumerClient(cc)
	// readFrom reads partition 0 of big from offset 0 to the log end with
	// 2 GiB fetches, checking each answer's size; it returns the values'
	// first five bytes.
	readFrom := func() ([]string, error) {
		var got []string
		for off := int64(0); off < end; {
			resp, err := cons.Fetch(ctx, &pb.FetchRequest{ReplicaId: -1, MaxBytes: math.MaxInt32,
				Partitions: []*pb.FetchPartition{{Topic: "big", Partition: 0, FetchOffset: off, PartitionMaxBytes: math.MaxInt32, CurrentLeaderEpoch: -1}}})
			if err != nil {
				return got, fmt.Errorf("fetch at %d: %w", off, err)
			}
			p := resp.Partitions[0]
			if p.ErrorCode != pb.ErrorCode_NONE || len(p.Records) == 0 {
				return got, fmt.Errorf("fetch at %d: %v %q, %d bytes: no progress", off, p.ErrorCode, p.ErrorMessage, len(p.Records))
			}
			n := 0
			for it := record.NewIter(p.Records); it.Next(); n++ {
				h, recs, err := record.Decode(it.Batch())
				if err != nil {
					return got, err
				}
				for _, r := range recs {
					got = append(got, string(r.Value[:5]))
				}
				off = h.NextOffset()
			}
			if len(p.Records) > limit && n != 1 {
				return got, fmt.Errorf("fetch at %d: %d bytes in %d batches, want at most fetch.max.bytes=%d (or one whole batch)", off, len(p.Records), n, limit)
			}
		}
		return got, nil
	}
	errc := make(chan error, 16)
	for range 16 {
		go func() {
			got, err := readFrom()
			if err == nil && fmt.Sprint(got) != fmt.Sprint(want) {
				err = fmt.Errorf("read %d values %q, want %d %q", len(got), got, len(want), want)
			}
			errc <- err
		}()
	}
	for range 16 {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
	tg.dropRaw()
	b.check(32, 16<<20)
	tg.assertServes()
}

// TestManyProduceStreamsOnOneConnection (item 3): the in-flight bound is
// per stream, so a client that opens hundreds of Produce streams on one
// connection, each filled to the bound and never read, must not multiply
// it: a client connection serves at most api.MaxStreamsPerConnection RPCs
// at once and the rest wait in the client. The node runs no more Produce
// handlers than that and still serves others.
func TestManyProduceStreamsOnOneConnection(t *testing.T) {
	const limit, streams = 4, 300
	tg := devTarget(t, func(c *node.Config) { c.ProduceMaxInFlight = limit })
	tg.createTopic("streams", 1, 1)
	tg.assertServes()

	cc := tg.rawWith(tg.dev.Addr(), grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var opened atomic.Int64
	var wg sync.WaitGroup
	for s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := pb.NewProducerClient(cc).Produce(ctx)
			if err != nil {
				return // cancelled while waiting for a stream
			}
			opened.Add(1)
			for i := range limit {
				req := &pb.ProduceRequest{CorrelationId: int64(i + 1), Acks: -1, TimeoutMs: 30000,
					Partitions: []*pb.PartitionRecords{{Topic: "streams", Partition: 0, Records: batchOf(t, fmt.Sprintf("s%d-%d", s, i))}}}
				if st.Send(req) != nil {
					return
				}
			}
			<-ctx.Done()
		}()
	}
	// Wait until the node runs as many Produce handlers as one connection
	// may have; then one more stream on that connection must not open (it
	// waits in the client for the node's stream quota), and the node must
	// still run no more handlers than the cap. Without the cap all 300
	// open at once and the extra stream opens at once.
	wait.Eventually(t, 10*time.Second, "the node to run a connection's worth of Produce handlers", func() bool {
		return produceHandlers() >= api.MaxStreamsPerConnection
	})
	pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, extraErr := pb.NewProducerClient(cc).Produce(pctx)
	pcancel()
	most := produceHandlers()
	t.Logf("%d streams asked for on one connection: %d opened, %d Produce handlers on the node; one more stream: %v",
		streams, opened.Load(), most, extraErr)
	if extraErr == nil {
		t.Errorf("a stream beyond the connection's %d opened", api.MaxStreamsPerConnection)
	}
	if most > api.MaxStreamsPerConnection || opened.Load() > int64(api.MaxStreamsPerConnection) {
		t.Errorf("one connection ran %d Produce handlers (%d streams opened) at once, want at most %d", most, opened.Load(), api.MaxStreamsPerConnection)
	}
	tg.assertServes()
	cancel()
	wg.Wait()
	tg.dropRaw()
}

// produceHandlers counts the goroutines running the node's Produce
// handler (the test and the node share the process).
func produceHandlers() int {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 2)
	return strings.Count(buf.String(), "api.(*producerService).Produce(")
}
