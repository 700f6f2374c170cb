package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// sink owns the Produce stream to one broker: requests go out in order on
// one stream (so a partition's pipelined batches reach the log in sequence
// order), answers are matched by correlation id. A request unanswered for
// request.timeout.ms tears the stream down, as Kafka closes the
// connection, and everything in flight on it is retried.
type sink struct {
	p  *Producer
	id int32

	mu       sync.Mutex
	inflight map[int64]*sentReq
	nextCorr int64
	queue    []*sentReq
	kick     chan struct{}
	gen      int // stream generation
	cancel   context.CancelFunc
	done     chan struct{}
	// drain is closed when the producer closes: the stream is half-closed
	// so the broker reads every request already written before it ends.
	drain chan struct{}
	// throttledUntil: an answer's throttle_time_ms (a client quota) holds
	// every request to this broker back until then, as Kafka's
	// clients back off a throttled broker (KIP-219).
	throttledUntil time.Time
}

type sentReq struct {
	corr     int64
	req      *pb.ProduceRequest
	batches  []*pbatch
	deadline time.Time
	sent     time.Time
	gen      int
}

func newSink(p *Producer, id int32) *sink {
	ctx, cancel := context.WithCancel(p.ctx)
	s := &sink{p: p, id: id, inflight: map[int64]*sentReq{}, kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{}), drain: make(chan struct{})}
	go s.run(ctx)
	return s
}

// canSend reports whether another request may go out (called under p.mu).
// joining: the caller is adding to a request already being assembled.
func (s *sink) canSend(joining bool) bool {
	if joining {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inflight)+len(s.queue) < s.p.cfg.maxInFlight
}

// send queues one request of batches (called under p.mu).
func (s *sink) send(bs []*pbatch) {
	req := &pb.ProduceRequest{Acks: s.p.cfg.acks.wire(), TimeoutMs: int32(s.p.cfg.requestTimeout / time.Millisecond)}
	if s.p.txn != nil {
		req.TransactionalId = s.p.cfg.transactionalID
	}
	for _, b := range bs {
		req.Partitions = append(req.Partitions, &pb.PartitionRecords{Topic: b.tp.Topic, Partition: b.tp.Partition, Records: b.bytes})
	}
	s.mu.Lock()
	s.nextCorr++
	req.CorrelationId = s.nextCorr
	sr := &sentReq{corr: s.nextCorr, req: req, batches: bs}
	s.queue = append(s.queue, sr)
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// stop ends the sink. The stream is half-closed first and the broker given
// up to d to read what was written and end it: an acks=0 request is
// "answered" once written, and cancelling the stream at once could drop
// it unread. Then the stream is cancelled.
func (s *sink) stop(d time.Duration) {
	close(s.drain)
	t := time.NewTimer(d)
	select {
	case <-s.done:
	case <-t.C:
	}
	t.Stop()
	s.cancel()
	<-s.done
}

func (s *sink) run(ctx context.Context) {
	defer close(s.done)
	attempt := 0
	for ctx.Err() == nil {
		s.mu.Lock()
		idle := len(s.queue) == 0
		s.mu.Unlock()
		if idle {
			select {
			case <-ctx.Done():
				return
			case <-s.drain:
				return
			case <-s.kick:
			}
			continue
		}
		err := s.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			attempt++
			s.p.cl.lg.Debug("produce stream ended", "broker", s.id, "err", err)
			_ = s.p.cfg.sleep(ctx, backoff(&s.p.cfg, attempt-1))
		} else {
			attempt = 0
		}
	}
}

// session runs one stream until it fails; every request in flight on it
// then fails retriably.
func (s *sink) session(ctx context.Context) error {
	cc, err := s.p.cl.brokerConn(s.id)
	if err != nil {
		s.failQueued(err)
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := pb.NewProducerClient(cc).Produce(sctx)
	if err != nil {
		s.failQueued(err)
		return err
	}
	s.mu.Lock()
	s.gen++
	gen := s.gen
	s.mu.Unlock()
	recvErr := make(chan error, 1)
	go func() { recvErr <- s.receive(stream, gen) }()
	tick := s.p.cfg.clock.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var sessErr error
loop:
	for {
		if d := s.throttleLeft(); d > 0 {
			t := s.p.cfg.clock.NewTimer(d)
			select {
			case <-t.C():
			case <-ctx.Done():
				t.Stop()
				sessErr = ctx.Err()
				break loop
			case err := <-recvErr:
				t.Stop()
				sessErr = err
				break loop
			}
		}
		s.mu.Lock()
		q := s.queue
		s.queue = nil
		now := s.p.cfg.clock.Now()
		for _, sr := range q {
			sr.gen, sr.sent = gen, now
			sr.deadline = now.Add(s.p.cfg.requestTimeout + min(s.p.cfg.requestTimeout/2, 2*time.Second))
			if sr.req.Acks != 0 {
				s.inflight[sr.corr] = sr
			}
		}
		s.mu.Unlock()
		for i, sr := range q {
			if err := stream.Send(sr.req); err != nil {
				sessErr = err
				// Unsent requests of this round are failed with the rest,
				// acks=0 ones too: only those already written to the
				// stream were answered.
				s.mu.Lock()
				for j, o := range q {
					if o.req.Acks == 0 && j < i {
						continue
					}
					s.inflight[o.corr] = o
				}
				s.mu.Unlock()
				break loop
			}
			if sr.req.Acks == 0 {
				s.p.onResponse(sr, nil, nil)
			}
		}
		select {
		case <-ctx.Done():
			sessErr = ctx.Err()
			break loop
		case err := <-recvErr:
			sessErr = err
			break loop
		case <-s.drain:
			// Closing: nothing more will be queued. Half-close, and wait
			// for the broker to end the stream (it has then read every
			// request) or for stop to cancel it.
			_ = stream.CloseSend()
			select {
			case sessErr = <-recvErr:
			case <-ctx.Done():
				sessErr = ctx.Err()
			}
			break loop
		case <-s.kick:
		case <-tick.C():
			if sr := s.expired(); sr != nil {
				sessErr = errs.New(pb.ErrorCode_REQUEST_TIMED_OUT, "no answer from broker %d within request.timeout.ms=%v", s.id, s.p.cfg.requestTimeout)
				break loop
			}
			// A request unanswered for a second: is the broker stopped
			// and fenced (stopped.go)? Then its requests go elsewhere now.
			if s.unansweredFor(slowCall) {
				if s.p.cl.brokerFenced(s.id) {
					sessErr = fmt.Errorf("broker %d: %w", s.id, errBrokerFenced)
					break loop
				}
				s.p.cl.slowBroker(s.id)
			}
		}
	}
	cancel()
	_ = stream.CloseSend()
	s.failInflight(gen, sessErr)
	return sessErr
}

// throttleLeft is how long the broker's last throttle still holds.
func (s *sink) throttleLeft() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.throttledUntil.IsZero() {
		return 0
	}
	return s.throttledUntil.Sub(s.p.cfg.clock.Now())
}

// unansweredFor reports whether a request has been in flight for d.
func (s *sink) unansweredFor(d time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.p.cfg.clock.Now()
	for _, sr := range s.inflight {
		if now.Sub(sr.sent) >= d {
			return true
		}
	}
	return false
}

func (s *sink) expired() *sentReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.p.cfg.clock.Now()
	for _, sr := range s.inflight {
		if now.After(sr.deadline) {
			return sr
		}
	}
	return nil
}

func (s *sink) receive(stream pb.Producer_ProduceClient, gen int) error {
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		s.mu.Lock()
		if resp.ThrottleTimeMs > 0 {
			s.throttledUntil = s.p.cfg.clock.Now().Add(time.Duration(resp.ThrottleTimeMs) * time.Millisecond)
		}
		sr := s.inflight[resp.CorrelationId]
		if sr != nil && sr.gen == gen {
			delete(s.inflight, resp.CorrelationId)
		} else {
			sr = nil
		}
		s.mu.Unlock()
		if sr != nil {
			s.p.onResponse(sr, resp, nil)
		}
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// failInflight fails every request of stream generation gen.
func (s *sink) failInflight(gen int, cause error) {
	if cause == nil {
		cause = errors.New("stream closed")
	}
	s.mu.Lock()
	var failed []*sentReq
	for c, sr := range s.inflight {
		if sr.gen == gen {
			failed = append(failed, sr)
			delete(s.inflight, c)
		}
	}
	s.mu.Unlock()
	for _, sr := range failed {
		s.p.onResponse(sr, nil, fmt.Errorf("broker %d: %w", s.id, cause))
	}
}

func (s *sink) failQueued(cause error) {
	s.mu.Lock()
	q := s.queue
	s.queue = nil
	s.mu.Unlock()
	for _, sr := range q {
		s.p.onResponse(sr, nil, &notSentError{fmt.Errorf("broker %d: %w", s.id, cause)})
	}
}

// notSentError marks a request that never left the client.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }
