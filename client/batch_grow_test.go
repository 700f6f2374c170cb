package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/fakebroker"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// gateBroker is the fake broker (testkit/fakebroker) leading topic "t",
// steered to hold its first produce request until release is closed and
// to answer every other one at once.
type gateBroker struct {
	*fakebroker.Broker
	maxMessageBytes int32
	parts           int  // partitions of "t" (default 1)
	holdAll         bool // answer no produce request at all
	release         chan struct{}
	// failEvery n > 0: every nth request is answered NOT_ENOUGH_REPLICAS
	// for all its partitions and nothing of it is kept.
	failEvery int
	arrived   chan struct{} // closed when the first request is in
}

// batches lists the batches the broker kept, partition by partition.
func (b *gateBroker) batches() []fakebroker.Batch {
	var out []fakebroker.Batch
	for p := 0; p < max(b.parts, 1); p++ {
		out = append(out, b.Batches("t", int32(p))...)
	}
	return out
}

func (b *gateBroker) sizes() (out []int) {
	for _, bt := range b.batches() {
		out = append(out, bt.Size)
	}
	return out
}

func (b *gateBroker) counts() (out []int32) {
	for _, bt := range b.batches() {
		out = append(out, bt.Header.RecordCount)
	}
	return out
}

// values lists the record values kept, in the order written.
func (b *gateBroker) values() (out [][]byte) {
	for _, bt := range b.batches() {
		out = append(out, bt.Values...)
	}
	return out
}

// reqBytes and reqParts: the records bytes and the partitions of each
// request the broker kept.
func (b *gateBroker) reqBytes() (out []int) {
	for _, r := range b.ProduceRequests() {
		if !r.Refused {
			out = append(out, r.Bytes)
		}
	}
	return out
}

func (b *gateBroker) reqParts() (out [][]int32) {
	for _, r := range b.ProduceRequests() {
		if !r.Refused {
			out = append(out, r.Partitions)
		}
	}
	return out
}

// awaitValues waits up to d for the broker to keep n record values
// (with acks=0 a Flush returns before the broker has read the last
// requests) and returns how many it has.
func (b *gateBroker) awaitValues(n int, d time.Duration) int {
	var k int
	_ = wait.Until(d, "the broker to keep the values", func() bool {
		k = len(b.values())
		return k >= n
	})
	return k
}

// awaitFirst waits until the broker has the first produce request.
func (b *gateBroker) awaitFirst(ctx context.Context, t *testing.T) {
	t.Helper()
	select {
	case <-b.arrived:
	case <-ctx.Done():
		t.Fatal("the first request never arrived")
	}
}

// gateProducer starts a producer on b with opts; it is closed, and its
// context (20 s) cancelled, when the test ends.
func gateProducer(t *testing.T, b *gateBroker, opts ...Opt) (*Producer, context.Context) {
	t.Helper()
	p, err := NewProducer(append([]Opt{Bootstrap(b.Addr()), Logger(testutil.Logger())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(func() {
		p.Close(ctx)
		cancel()
	})
	return p, ctx
}

func startGate(t *testing.T, b *gateBroker) {
	t.Helper()
	b.Broker = fakebroker.Start(t, fakebroker.Topic{Name: "t", Partitions: int32(max(b.parts, 1)), MaxMessageBytes: b.maxMessageBytes})
	if b.release == nil {
		b.release = make(chan struct{})
	}
	b.arrived = make(chan struct{})
	// The first InitProducerId is answered, later ones hang.
	b.Intercept("InitProducerId", func(ctx context.Context, n int, _ any) (any, error) {
		if n == 1 {
			return &pb.InitProducerIdResponse{ProducerId: 7, ProducerEpoch: 0}, nil
		}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	seenFirst := false
	b.ControlProduce(func(n int, _ *pb.ProduceRequest) fakebroker.ProduceAction {
		if b.failEvery > 0 && n%b.failEvery == 0 {
			return fakebroker.ProduceAction{Code: pb.ErrorCode_NOT_ENOUGH_REPLICAS, Message: "test: refused"}
		}
		first := !seenFirst
		seenFirst = true
		if first {
			close(b.arrived)
		}
		switch {
		case b.holdAll:
			return fakebroker.ProduceAction{Drop: true}
		case first:
			return fakebroker.ProduceAction{Hold: b.release}
		}
		return fakebroker.ProduceAction{}
	})
}

// growRun starts a gateBroker announcing maxMessageBytes for the topic and
// a producer with max.in.flight 1, linger 0, batch.size 1 KiB and the given
// batch.max.size. It sends one record, which the broker holds; produces n
// records of 100 bytes while it is held; releases it; flushes; and
// returns the batches the broker saw after the first.
func growRun(t *testing.T, maxMessageBytes int32, batchMax, n int) (sizes []int, counts []int32) {
	t.Helper()
	b := &gateBroker{maxMessageBytes: maxMessageBytes}
	startGate(t, b)
	p, ctx := gateProducer(t, b, EnableIdempotence(IdempotenceOff), Linger(0), BatchSize(1024), BatchMaxSize(batchMax), MaxInFlight(1))
	p.Produce(ctx, &Record{Topic: "t", Value: []byte("first")}, nil)
	b.awaitFirst(ctx, t)
	failed := 0
	var mu sync.Mutex
	for i := 0; i < n; i++ {
		p.Produce(ctx, &Record{Topic: "t", Value: make([]byte, 100)}, func(_ *Record, err error) {
			if err != nil {
				mu.Lock()
				failed++
				mu.Unlock()
			}
		})
	}
	close(b.release)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if failed > 0 {
		t.Fatalf("%d records failed", failed)
	}
	allSizes, allCounts := b.sizes(), b.counts()
	total := int32(0)
	for _, c := range allCounts[1:] {
		total += c
	}
	if total != int32(n) {
		t.Fatalf("the broker got %d records after the first, want %d", total, n)
	}
	return allSizes[1:], allCounts[1:]
}

// While the window is full (one batch in flight, max.in.flight 1), the
// open batch grows past batch.size up to batch.max.size instead of queueing
// batch.size batches behind it (KIP-782's batch.max.size).
func TestBatchGrowsWhileTheWindowIsFull(t *testing.T) {
	// 60 records of about 110 bytes: more than batch.size, less than 8 KiB.
	sizes, counts := growRun(t, 1<<20, 8192, 60)
	if len(sizes) != 1 || counts[0] != 60 {
		t.Fatalf("batches after the held one: sizes %v, records %v; want one batch of all 60", sizes, counts)
	}
	if sizes[0] <= 1024 || sizes[0] > 8192+record.HeaderSize {
		t.Fatalf("grown batch is %d bytes; want more than batch.size and at most batch.max.size", sizes[0])
	}
}

// Growth stops at batch.max.size: a backlog bigger than that goes out as
// several batches, each within it.
func TestBatchGrowthStopsAtBatchMaxSize(t *testing.T) {
	sizes, _ := growRun(t, 1<<20, 4096, 200) // about 22 KB of records
	if len(sizes) < 5 {
		t.Fatalf("%d batches (%v) for about 22 KB under batch.max.size 4096; want at least 5", len(sizes), sizes)
	}
	grown := 0
	for _, s := range sizes {
		if s > 4096+record.HeaderSize {
			t.Fatalf("a batch of %d bytes is over batch.max.size 4096 (sizes %v)", s, sizes)
		}
		if s > 1024+record.HeaderSize+200 {
			grown++
		}
	}
	if grown == 0 {
		t.Fatalf("no batch grew past batch.size (sizes %v)", sizes)
	}
}

// Growth stays within 90 % of the topic's max.message.bytes, is off when
// the broker does not say the limit, and is off with batch.max.size at or
// below batch.size: then every batch is at most batch.size plus the record
// that crossed it (Kafka's behaviour).
func TestBatchGrowthLimits(t *testing.T) {
	cases := []struct {
		name            string
		maxMessageBytes int32
		batchMax        int
		limit           int
		mustGrow        bool
	}{
		{"topic limit", 3000, 1 << 20, 3000 / 10 * 9, true},
		{"limit unknown", 0, 1 << 20, 1024 + record.HeaderSize + 200, false},
		{"batch.max.size off", 1 << 20, 0, 1024 + record.HeaderSize + 200, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sizes, _ := growRun(t, c.maxMessageBytes, c.batchMax, 100)
			grew := false
			for _, s := range sizes {
				if s > c.limit {
					t.Fatalf("a batch of %d bytes; want at most %d (sizes %v)", s, c.limit, sizes)
				}
				grew = grew || s > 1024+record.HeaderSize+200
			}
			if c.mustGrow && !grew {
				t.Fatalf("no batch grew past batch.size (sizes %v)", sizes)
			}
		})
	}
}

// byPartition sends each record to the partition it names.
type byPartition struct{}

func (byPartition) Partition(rec *Record, n int) int32 { return rec.Partition }
func (byPartition) OnNewBatch(string, int)             {}

// A request stays within max.request.size: the batches of four partitions,
// about 2 KB each, go out in requests of at most 6000 bytes, not all in one
// (Kafka's producer does the same).
func TestRequestsStayWithinMaxRequestSize(t *testing.T) {
	b := &gateBroker{maxMessageBytes: 1 << 20, parts: 4, release: make(chan struct{})}
	close(b.release)
	startGate(t, b)

	p, ctx := gateProducer(t, b, EnableIdempotence(IdempotenceOff), Linger(time.Minute), BatchSize(4096),
		MaxRequestSize(6000), MaxInFlight(5), WithPartitioner(byPartition{}))
	for part := int32(0); part < 4; part++ {
		for i := 0; i < 18; i++ {
			p.Produce(ctx, &Record{Topic: "t", Partition: part, Value: make([]byte, 100)}, nil)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sizes, reqBytes := b.sizes(), b.reqBytes()
	if len(sizes) != 4 {
		t.Fatalf("%d batches, want one per partition: %v", len(sizes), sizes)
	}
	if len(reqBytes) < 2 {
		t.Fatalf("all four batches in %d request(s) of %v bytes; want requests within max.request.size 6000", len(reqBytes), reqBytes)
	}
	for _, n := range reqBytes {
		if n > 6000 {
			t.Fatalf("a request of %d bytes, over max.request.size 6000 (requests %v)", n, reqBytes)
		}
	}
}

// batch.max.size cannot be negative.
func TestBatchMaxSizeValidated(t *testing.T) {
	if _, err := NewProducer(Bootstrap("127.0.0.1:1"), BatchMaxSize(-1)); err == nil {
		t.Fatal("batch.max.size -1 accepted")
	}
}

// Requests cut short by max.request.size do not keep going to the same
// partitions: each round of the drain starts one partition further on, so
// partition 3 is served within the first three requests after the backlog
// built up, not after partitions 0 and 1 have sent all they have (Kafka's
// drainIndex).
func TestDrainRotatesAcrossPartitions(t *testing.T) {
	b := &gateBroker{maxMessageBytes: 1 << 20, parts: 4}
	startGate(t, b)
	p, ctx := gateProducer(t, b, EnableIdempotence(IdempotenceOff), Linger(time.Minute), BatchSize(2048), BatchMaxSize(0),
		MaxRequestSize(5000), MaxInFlight(1), WithPartitioner(byPartition{}))
	// Partition 0's first full batch goes out and is held (max.in.flight
	// 1 keeps everything else back) while the backlog builds.
	for part := int32(0); part < 4; part++ {
		for i := 0; i < 3*16; i++ { // three batches of about 1.9 KB each
			p.Produce(ctx, &Record{Topic: "t", Partition: part, Value: make([]byte, 100)}, nil)
		}
		if part == 0 {
			b.awaitFirst(ctx, t)
		}
	}
	close(b.release)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	reqParts := b.reqParts()
	first := -1
	for i, parts := range reqParts[1:] {
		for _, part := range parts {
			if part == 3 && first < 0 {
				first = i
			}
		}
	}
	if first < 0 || first > 2 {
		t.Fatalf("partition 3 first served in request %d after the held one; requests carried partitions %v", first, reqParts)
	}
}

// An open batch that cannot be sent because the window stays full fails
// with ErrDeliveryTimeout at delivery.timeout.ms, as a queued batch does,
// and Flush returns. Here the leader answers nothing: the batch in flight
// times out, the producer needs a new producer id, and that request hangs.
func TestOpenBatchExpiresWhileTheWindowIsFull(t *testing.T) {
	b := &gateBroker{maxMessageBytes: 1 << 20, holdAll: true}
	startGate(t, b)
	p, ctx := gateProducer(t, b, Linger(0), BatchSize(1024), MaxInFlight(1),
		RequestTimeout(200*time.Millisecond), DeliveryTimeout(600*time.Millisecond), RetryBackoff(20*time.Millisecond, 50*time.Millisecond))
	p.Produce(ctx, &Record{Topic: "t", Value: []byte("first")}, nil)
	b.awaitFirst(ctx, t)
	var mu sync.Mutex
	var errsSeen []error
	for i := 0; i < 10; i++ {
		p.Produce(ctx, &Record{Topic: "t", Value: make([]byte, 100)}, func(_ *Record, err error) {
			mu.Lock()
			errsSeen = append(errsSeen, err)
			mu.Unlock()
		})
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v (the open batch never completed)", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(errsSeen) != 10 {
		t.Fatalf("%d outcomes, want 10", len(errsSeen))
	}
	for _, err := range errsSeen {
		if !errors.Is(err, ErrDeliveryTimeout) || Indefinite(err) {
			t.Fatalf("outcome %v; want a definite ErrDeliveryTimeout (never sent)", err)
		}
	}
	for _, c := range b.counts() {
		if c != 1 {
			t.Fatalf("the broker got a batch of %d records; only the first record's batch was ever sendable", c)
		}
	}
}

// mayGrowLocked lets a batch grow only while one closed now would wait:
// batches queued ahead, the partition blocked, or max.in.flight batches out;
// and never past growCap.
func TestMayGrowOnlyWhileABatchWouldWait(t *testing.T) {
	p := &Producer{cfg: config{maxInFlight: 2}}
	pp := &ppart{growCap: 4096}
	if p.mayGrowLocked(pp, 2000) {
		t.Fatal("grew with the window empty")
	}
	pp.window = []*pbatch{{}}
	if p.mayGrowLocked(pp, 2000) {
		t.Fatal("grew with room in the window")
	}
	pp.window = append(pp.window, &pbatch{})
	if !p.mayGrowLocked(pp, 2000) {
		t.Fatal("did not grow with the window full")
	}
	if p.mayGrowLocked(pp, 5000) {
		t.Fatal("grew past growCap")
	}
	pp.window = nil
	pp.queued = []*pbatch{{}}
	if !p.mayGrowLocked(pp, 2000) {
		t.Fatal("did not grow behind a queued batch")
	}
	pp.queued, pp.blocked = nil, true
	if !p.mayGrowLocked(pp, 2000) {
		t.Fatal("did not grow while the partition is blocked")
	}
}

// Keyless records on a topic of several partitions stay on the sticky
// partition for a window of batch.max.size batches, so its batch grows
// while its window is full, as one partition's does: moving to another
// partition at every full batch.size batch sent a small batch per
// partition (a 1 000-partition topic cost the brokers a batch
// per 16 KiB and ran at 63 % of one partition's rate).
func TestKeylessBatchesGrowOnSeveralPartitions(t *testing.T) {
	b := &gateBroker{maxMessageBytes: 1 << 20, parts: 4, release: make(chan struct{})}
	startGate(t, b)
	p, ctx := gateProducer(t, b, EnableIdempotence(IdempotenceOff), Linger(0), BatchSize(1024), BatchMaxSize(8192), MaxInFlight(1))
	p.Produce(ctx, &Record{Topic: "t", Value: []byte("first")}, nil)
	b.awaitFirst(ctx, t)
	for i := 0; i < 60; i++ { // about 6.6 KB: within one grown batch
		p.Produce(ctx, &Record{Topic: "t", Value: make([]byte, 100)}, nil)
	}
	close(b.release)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var used []int32
	for part := int32(0); part < 4; part++ {
		if bs := b.Batches("t", part); len(bs) > 0 {
			used = append(used, part)
			if len(bs) != 2 || bs[1].Header.RecordCount != 60 {
				var counts []int32
				for _, bt := range bs {
					counts = append(counts, bt.Header.RecordCount)
				}
				t.Fatalf("partition %d got batches of %v records; want the first, then one of all 60", part, counts)
			}
		}
	}
	if len(used) != 1 {
		t.Fatalf("keyless records went to partitions %v; want one (the sticky one)", used)
	}
}
