package api

import (
	"sync"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/request"
)

// producerService is the Producer service: the stream plumbing around
// request.Handler.Produce, which validates and appends each request.
type producerService struct {
	pb.UnimplementedProducerServer
	d *Deps
	h *request.Handler
}

// Produce appends the requests of one stream in arrival order and answers
// each when it is complete (see producer.proto).
//
// At most ProduceMaxInFlight requests of a stream are in flight: read and
// not yet answered, an answer counting until the stream has taken it
// (Send returned). At the bound the stream is not read until an answer
// goes out, so a client that sends faster than it is answered, or never
// reads its answers, is held back by gRPC's flow control (the client's
// Send blocks) instead of growing a goroutine and an answer per request
// here. (A Kafka broker reads nothing more from a connection until its
// request is answered; a stream pipelines a few.)
func (s *producerService) Produce(stream pb.Producer_ProduceServer) error {
	ctx := stream.Context()
	limit := s.d.ProduceMaxInFlight
	if limit <= 0 {
		limit = DefaultProduceMaxInFlight
	}
	// slots holds one token per request in flight; the sender takes the
	// token back once the answer is on the stream. out never blocks: it
	// has room for every request in flight.
	slots := make(chan struct{}, limit)
	out := make(chan *pb.ProduceResponse, limit)
	sendErr := make(chan error, 1)
	go func() {
		var err error
		for r := range out {
			if err == nil {
				err = stream.Send(r)
			}
			<-slots
		}
		sendErr <- err
	}()
	var wg sync.WaitGroup
	m := s.d.Metrics
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		req, err := stream.Recv()
		if err != nil {
			break // EOF or cancellation: the client is done with the stream
		}
		start := time.Now()
		resp, wait := s.h.Produce(ctx, req)
		throttle := s.d.produceThrottle(ctx, req, time.Since(start)) // quotas.go
		// The appends are done (only an fsync may still be pending): the
		// request's records go back to the pool (producebuf.go).
		releaseProduceRequest(req)
		if resp != nil {
			resp.ThrottleTimeMs = int32(min(throttle.Milliseconds(), 1<<31-1))
		}
		s.d.pause(ctx, throttle) // the stream is not read meanwhile
		if req.Acks == 0 && resp != nil && request.AllOK(resp) {
			<-slots
			m.observe("Produce", start)
			continue
		}
		if wait == nil {
			out <- resp
			m.observe("Produce", start)
			continue
		}
		m.waiting(1) // in the produce purgatory until its waits end
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { m.waiting(-1); m.observe("Produce", start) }()
			wait.Wait(ctx)
			out <- resp
		}()
	}
	wg.Wait()
	close(out)
	return <-sendErr
}
