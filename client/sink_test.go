package client

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strand-io/strand/testkit/wait"

	"google.golang.org/grpc"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// breakOnce makes the first Produce stream fail its third send, as a broken
// connection does. That stream sends nothing until release is closed (the
// test closes it once every record is handed to the producer), so several
// requests are queued behind the failing one; and it fails the third send
// only once delivered() says the broker has the first two (acks=0 requests
// already on a torn stream may be lost, as in Kafka: not what this checks).
type breakOnce struct {
	used      atomic.Bool
	release   chan struct{}
	delivered func(n int) bool
}

func (b *breakOnce) intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != pb.Producer_Produce_FullMethodName || b.used.Swap(true) {
		return s, err
	}
	return &breakingStream{ClientStream: s, release: b.release, delivered: b.delivered}, nil
}

type breakingStream struct {
	grpc.ClientStream
	release   <-chan struct{}
	delivered func(n int) bool
	mu        sync.Mutex
	sends     int
}

func (s *breakingStream) SendMsg(m any) error {
	select {
	case <-s.release:
	case <-s.Context().Done():
		return s.Context().Err()
	}
	s.mu.Lock()
	s.sends++
	n := s.sends
	s.mu.Unlock()
	if n >= 3 {
		if err := wait.Until(5*time.Second, "the broker to hold the requests sent before the break", func() bool { return s.delivered(n - 1) }); err != nil {
			return err
		}
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
	brk := &breakOnce{release: make(chan struct{}), delivered: func(n int) bool { return len(b.values()) >= n }}
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
	close(brk.release)
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
