package client

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// breakOnce makes the first Produce stream fail its third send, as a broken
// connection does, after slowing every send of that stream so that the
// producer queues several requests behind the failing one.
type breakOnce struct{ used atomic.Bool }

func (b *breakOnce) intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != pb.Producer_Produce_FullMethodName || b.used.Swap(true) {
		return s, err
	}
	return &breakingStream{ClientStream: s}, nil
}

type breakingStream struct {
	grpc.ClientStream
	mu    sync.Mutex
	sends int
}

func (s *breakingStream) SendMsg(m any) error {
	time.Sleep(20 * time.Millisecond)
	s.mu.Lock()
	s.sends++
	n := s.sends
	s.mu.Unlock()
	if n >= 3 {
		return errors.New("test: the stream broke")
	}
	return s.ClientStream.SendMsg(m)
}

// With acks=0, the requests queued behind one whose send failed were
// never answered and never failed: their batches stayed in flight and
// Flush waited for them for ever. Now they are retried on the next stream,
// and every record arrives.
func TestNoAckRequestsAfterAFailedSendAreRetried(t *testing.T) {
	b := &gateBroker{release: make(chan struct{})}
	close(b.release)
	startGate(t, b)
	brk := &breakOnce{}
	p, ctx := gateProducer(t, b, RequiredAcks(NoAck), EnableIdempotence(IdempotenceOff), Linger(0), BatchSize(100), MaxInFlight(5),
		RetryBackoff(time.Millisecond, 10*time.Millisecond), DialOptions(grpc.WithStreamInterceptor(brk.intercept)))
	const n = 40
	var done, failed atomic.Int64
	for i := 0; i < n; i++ {
		p.Produce(ctx, &Record{Topic: "t", Value: make([]byte, 200)}, func(_ *Record, err error) {
			if err != nil {
				failed.Add(1)
			}
			done.Add(1)
		})
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.Flush(fctx); err != nil {
		t.Fatalf("Flush: %v (%d of %d records settled)", err, done.Load(), n)
	}
	if !brk.used.Load() {
		t.Fatal("the stream was never broken")
	}
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d records failed, want every one retried", f)
	}
	if k := b.awaitValues(n, 5*time.Second); k != n {
		t.Fatalf("the broker has %d records, want %d", k, n)
	}
}
