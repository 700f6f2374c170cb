package client

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// gateBroker leads partition 0 of topic "t". It holds its first produce
// request until release is closed and answers every other one at once,
// recording each batch's size and record count.
type gateBroker struct {
	pb.UnimplementedMetadataServer
	pb.UnimplementedProducerServer
	pb.UnimplementedTransactionsServer
	addr            string
	maxMessageBytes int32
	parts           int  // partitions of "t" (default 1)
	holdAll         bool // answer no produce request at all
	release         chan struct{}
	pids            int // InitProducerId calls; the first is answered, later ones hang
	// keepValues: check every batch's CRC and keep its record values, in
	// the order written. failEvery n > 0: every nth request is answered
	// NOT_ENOUGH_REPLICAS for all its partitions and nothing of it is kept.
	keepValues bool
	failEvery  int

	mu        sync.Mutex
	values    [][]byte
	requests  int
	sizes     []int
	counts    []int32
	codecs    []record.Compression // each batch's
	reqBytes  []int                // records bytes per request
	reqParts  [][]int32            // partitions per request
	seenFirst bool
	arrived   chan struct{} // closed when the first request is in
}

func (b *gateBroker) Metadata(ctx context.Context, req *pb.MetadataRequest) (*pb.MetadataResponse, error) {
	tm := &pb.TopicMetadata{Name: "t", MaxMessageBytes: b.maxMessageBytes}
	for i := 0; i < max(b.parts, 1); i++ {
		tm.Partitions = append(tm.Partitions, &pb.PartitionMetadata{Partition: int32(i), LeaderId: 1, Replicas: []int32{1}, Isr: []int32{1}})
	}
	return &pb.MetadataResponse{ClusterId: "c", ControllerId: 1,
		Brokers: []*pb.BrokerInfo{{NodeId: 1, Address: b.addr}}, Topics: []*pb.TopicMetadata{tm}}, nil
}

func (b *gateBroker) Produce(stream pb.Producer_ProduceServer) error {
	next := int64(0)
	for {
		r, err := stream.Recv()
		if err != nil {
			return err
		}
		resp := &pb.ProduceResponse{CorrelationId: r.CorrelationId}
		b.mu.Lock()
		b.requests++
		fail := b.failEvery > 0 && b.requests%b.failEvery == 0
		b.mu.Unlock()
		if fail {
			for _, p := range r.Partitions {
				resp.Partitions = append(resp.Partitions, &pb.ProducePartitionResponse{Topic: p.Topic, Partition: p.Partition, BaseOffset: -1,
					ErrorCode: pb.ErrorCode_NOT_ENOUGH_REPLICAS, ErrorMessage: "test: refused"})
			}
			if err := stream.Send(resp); err != nil {
				return err
			}
			continue
		}
		n := 0
		var parts []int32
		for _, p := range r.Partitions {
			if b.keepValues {
				if _, err := record.Validate(p.Records); err != nil {
					return err
				}
				_, recs, err := record.Decode(p.Records)
				if err != nil {
					return err
				}
				b.mu.Lock()
				for _, rec := range recs {
					b.values = append(b.values, append([]byte(nil), rec.Value...))
				}
				b.mu.Unlock()
			}
			n += len(p.Records)
			parts = append(parts, p.Partition)
			h, err := record.ParseHeader(p.Records)
			if err != nil {
				return err
			}
			b.mu.Lock()
			b.sizes = append(b.sizes, len(p.Records))
			b.counts = append(b.counts, h.RecordCount)
			b.codecs = append(b.codecs, h.Compression())
			b.mu.Unlock()
			resp.Partitions = append(resp.Partitions, &pb.ProducePartitionResponse{Topic: p.Topic, Partition: p.Partition, BaseOffset: next})
			next += int64(h.RecordCount)
		}
		b.mu.Lock()
		b.reqBytes = append(b.reqBytes, n)
		b.reqParts = append(b.reqParts, parts)
		first := !b.seenFirst
		b.seenFirst = true
		b.mu.Unlock()
		if first {
			close(b.arrived)
		}
		if b.holdAll {
			continue
		}
		if first {
			select {
			case <-b.release:
			case <-stream.Context().Done():
				return stream.Context().Err()
			}
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

func (b *gateBroker) InitProducerId(ctx context.Context, req *pb.InitProducerIdRequest) (*pb.InitProducerIdResponse, error) {
	b.mu.Lock()
	b.pids++
	n := b.pids
	b.mu.Unlock()
	if n == 1 {
		return &pb.InitProducerIdResponse{ProducerId: 7, ProducerEpoch: 0}, nil
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// awaitValues waits up to d for the broker to keep n record values
// (keepValues; with acks=0 a Flush returns before the broker has read
// the last requests) and returns how many it has.
func (b *gateBroker) awaitValues(n int, d time.Duration) int {
	var k int
	_ = wait.Until(d, "the broker to keep the values", func() bool {
		b.mu.Lock()
		k = len(b.values)
		b.mu.Unlock()
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
	p, err := NewProducer(append([]Opt{Bootstrap(b.addr), Logger(testutil.Logger())}, opts...)...)
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
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.addr = lis.Addr().String()
	if b.release == nil {
		b.release = make(chan struct{})
	}
	b.arrived = make(chan struct{})
	srv := grpc.NewServer()
	pb.RegisterMetadataServer(srv, b)
	pb.RegisterProducerServer(srv, b)
	pb.RegisterTransactionsServer(srv, b)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
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
	b.mu.Lock()
	defer b.mu.Unlock()
	total := int32(0)
	for _, c := range b.counts[1:] {
		total += c
	}
	if total != int32(n) {
		t.Fatalf("the broker got %d records after the first, want %d", total, n)
	}
	return append([]int(nil), b.sizes[1:]...), append([]int32(nil), b.counts[1:]...)
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
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.sizes) != 4 {
		t.Fatalf("%d batches, want one per partition: %v", len(b.sizes), b.sizes)
	}
	if len(b.reqBytes) < 2 {
		t.Fatalf("all four batches in %d request(s) of %v bytes; want requests within max.request.size 6000", len(b.reqBytes), b.reqBytes)
	}
	for _, n := range b.reqBytes {
		if n > 6000 {
			t.Fatalf("a request of %d bytes, over max.request.size 6000 (requests %v)", n, b.reqBytes)
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
	b.mu.Lock()
	defer b.mu.Unlock()
	first := -1
	for i, parts := range b.reqParts[1:] {
		for _, part := range parts {
			if part == 3 && first < 0 {
				first = i
			}
		}
	}
	if first < 0 || first > 2 {
		t.Fatalf("partition 3 first served in request %d after the held one; requests carried partitions %v", first, b.reqParts)
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
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.counts {
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
