package sim

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// jitter delays some requests, drawn from the seed: one in eight by 1 to
// 100 ms (virtual) before its handler runs (requests in flight together
// are handled in any order), one in sixteen by as much after the handler
// answered, and one in twenty-five by 0.5 to 3 s after (an answer computed
// and then held, as by a server goroutine descheduled or a GC pause: it
// arrives describing a state that has moved on). Broker heartbeats draw
// their own delay before the handler (heartbeatDelay). The draws are taken in
// the order requests arrive, which the bubble's scheduling decides, so a
// replay draws the same delays but may give them to other requests.
//
// It is on only once the schedule's first fault starts (start): while the
// cluster starts and the workload creates its topics, a held heartbeat
// answer would fence a broker and fail the setup, which is no finding.
//
// In the handover mix (mix "handover") it holds only answers to
// OffsetForLeaderEpoch: half of them 0.2 to 1.2 s after the handler. In
// the markers mix (mix "markers") it loses only answers to
// WriteTxnMarkers (lostMarkerAnswer).
type jitter struct {
	mix string
	on  atomic.Bool
	mu  sync.Mutex
	rng *rand.Rand
}

func (j *jitter) start() {
	if j != nil {
		j.on.Store(true)
	}
}

func newJitter(seed uint64) *jitter {
	return &jitter{rng: rand.New(rand.NewPCG(seed, 0x717735))}
}

// delays draws the delay before the handler and the delay after it.
func (j *jitter) delays() (before, after time.Duration) {
	j.mu.Lock()
	defer j.mu.Unlock()
	switch x := j.rng.IntN(400); {
	case x < 50:
		before = time.Duration(1+j.rng.IntN(100)) * time.Millisecond
	case x < 75:
		after = time.Duration(1+j.rng.IntN(100)) * time.Millisecond
	case x < 91:
		after = time.Duration(500+j.rng.IntN(2500)) * time.Millisecond
	}
	return before, after
}

// heartbeatDelay draws the delay before a broker heartbeat's handler:
// half of them wait 1 to 150 ms, as behind a busy controller. A broker
// stopping cancels the heartbeat it has in flight and sends its
// controlled-shutdown request at once, so a delayed one is handled
// after the shutdown, as a stale heartbeat that must not unfence the
// broker (its session allows 2 s).
func (j *jitter) heartbeatDelay() time.Duration { return j.sometimes(2, 1, 150) }

// sometimes draws, one time in n, a duration of lo plus less than span
// milliseconds, and 0 the other times.
func (j *jitter) sometimes(n, lo, span int) time.Duration {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.rng.IntN(n) != n-1 {
		return 0
	}
	return time.Duration(lo+j.rng.IntN(span)) * time.Millisecond
}

// handoverHold draws the hold of an OffsetForLeaderEpoch answer in the
// handover mix.
func (j *jitter) handoverHold() time.Duration { return j.sometimes(2, 200, 1000) }

// lostAnswerAfter draws whether the answer to a WriteTxnMarkers is lost in
// the markers mix, and when: one in three is, 1 to 30 ms after the
// request arrived (0: answered). The leader has appended the markers by
// then and is waiting for its followers; the coordinator, seeing an error,
// sends them again 20 ms later, and the leader finds them applied. It
// must not answer the repeat before the in-sync replicas have them
// either.
func (j *jitter) lostAnswerAfter() time.Duration { return j.sometimes(3, 1, 30) }

func pause(d time.Duration) {
	if d > 0 {
		t := time.NewTimer(d)
		<-t.C
	}
}

// unary is the gRPC interceptor. The handler runs after its delay even if
// the caller gave up meanwhile, as a server that already took a request
// does.
func (j *jitter) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !j.on.Load() {
		return handler(ctx, req)
	}
	switch j.mix {
	case "markers":
		if info.FullMethod != pb.Transactions_WriteTxnMarkers_FullMethodName {
			return handler(ctx, req)
		}
		if d := j.lostAnswerAfter(); d > 0 {
			hctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			_, _ = handler(hctx, req)
			return nil, status.Error(codes.Unavailable, "the simulated network lost the answer to WriteTxnMarkers")
		}
		return handler(ctx, req)
	case "handover":
		if info.FullMethod != pb.Consumer_OffsetForLeaderEpoch_FullMethodName {
			return handler(ctx, req)
		}
		resp, err := handler(ctx, req)
		pause(j.handoverHold())
		return resp, err
	}
	before, after := j.delays()
	if info.FullMethod == pb.Controller_BrokerHeartbeat_FullMethodName {
		before = j.heartbeatDelay()
	}
	pause(before)
	resp, err := handler(ctx, req)
	pause(after)
	return resp, err
}
