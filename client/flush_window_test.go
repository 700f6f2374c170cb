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

// holder steers the fake broker to answer produce requests only once it
// holds `hold` of them unanswered (or 300 ms have passed without a new
// one), recording the most it ever held.
type holder struct {
	hold int

	mu    sync.Mutex
	gate  chan struct{} // closed to answer the requests held
	held  int
	most  int
	timer *time.Timer
}

func (h *holder) control(int, *pb.ProduceRequest) fakebroker.ProduceAction {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gate == nil {
		h.gate = make(chan struct{})
	}
	gate := h.gate
	h.held++
	h.most = max(h.most, h.held)
	if h.timer != nil {
		h.timer.Stop()
	}
	if h.held >= h.hold {
		h.openLocked()
	} else {
		h.timer = time.AfterFunc(300*time.Millisecond, func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.gate == gate {
				h.openLocked()
			}
		})
	}
	return fakebroker.ProduceAction{Hold: gate}
}

func (h *holder) openLocked() {
	close(h.gate)
	h.gate, h.held = nil, 0
}

func (h *holder) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.timer != nil {
		h.timer.Stop()
	}
}

// TestFlushKeepsTheWindowFull: while Flush (or a transaction's commit)
// drains a backlog, the producer keeps max.in.flight requests outstanding
// to the partition's leader, not just the one each answer frees.
func TestFlushKeepsTheWindowFull(t *testing.T) {
	b := fakebroker.Start(t, fakebroker.Topic{Name: "t"})
	h := &holder{hold: 5}
	defer h.stop()
	b.ControlProduce(h.control)

	p, err := NewProducer(Bootstrap(b.Addr()), EnableIdempotence(IdempotenceOff), Linger(time.Minute), BatchSize(1024), MaxInFlight(5), Logger(testutil.Logger()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	defer p.Close(ctx)
	// 40 batches of 1 KiB wait in the accumulator (linger.ms is a minute).
	for i := 0; i < 40; i++ {
		p.Produce(ctx, &Record{Topic: "t", Value: make([]byte, 1000)}, nil)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(b.Batches("t", 0)); n != 40 {
		t.Fatalf("broker saw %d batches; want 40", n)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.most != 5 {
		t.Fatalf("at most %d produce requests were outstanding during Flush; want max.in.flight = 5", h.most)
	}
}
