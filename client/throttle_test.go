package client

import (
	"context"
	"sync"
	"testing"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/fakebroker"
	"github.com/strand-io/strand/testkit/testutil"
)

// TestSenderHonoursThrottle: an answer carrying throttle_time_ms holds the
// producer's next request to that broker back for that long (KIP-219's
// client side), even though the broker would read it.
func TestSenderHonoursThrottle(t *testing.T) {
	b := fakebroker.Start(t, fakebroker.Topic{Name: "t", Partitions: 1})
	var mu sync.Mutex
	var arrived []time.Time
	b.ControlProduce(func(n int, _ *pb.ProduceRequest) fakebroker.ProduceAction {
		mu.Lock()
		arrived = append(arrived, time.Now())
		mu.Unlock()
		if n == 1 {
			return fakebroker.ProduceAction{ThrottleMs: 800}
		}
		return fakebroker.ProduceAction{}
	})
	p, err := NewProducer(Bootstrap(b.Addr()), Logger(testutil.Logger()), Linger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("a")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	first := time.Now()
	if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("b")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(arrived) != 2 {
		t.Fatalf("%d requests", len(arrived))
	}
	if d := arrived[1].Sub(first); d < 700*time.Millisecond {
		t.Fatalf("the second request reached the broker %v after a 800 ms throttle answer", d)
	}
}
