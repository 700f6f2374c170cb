package kafka

import (
	"context"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/internal/auth"
)

// Client quotas (package quota): what a request cost its
// principal is recorded once its handler returns (the produced bytes, a
// consumer fetch's answered bytes, the handler's wall time for
// request_percentage), the throttle time goes into the answer's
// ThrottleMillis, and the connection's reader stops for that long before
// it reads the next request, as Kafka's brokers mute a throttled channel
// (KIP-219): a client that ignores the throttle time is slowed anyway.
//
// Unlike Kafka, a throttled consumer fetch still carries its records
// (Kafka answers it empty and un-records its bytes); the next fetch waits
// the throttle time all the same.

// throttle records what the request cost and returns how long to mute
// the connection; resp (nil for acks=0) carries the time.
func (c *Conn) throttle(ctx context.Context, req kmsg.Request, resp kmsg.Response, handled time.Duration) time.Duration {
	q := c.srv.cfg.Quotas
	if q == nil {
		return 0
	}
	var d time.Duration
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		n := 0
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				n += len(p.Records)
			}
		}
		d = q.RecordProduce(ctx, n)
	case *kmsg.FetchRequest:
		replica := r.ReplicaID
		if r.Version >= 15 {
			replica = r.ReplicaState.ID
		}
		if fr, ok := resp.(*kmsg.FetchResponse); ok && replica < 0 { // a consumer's, not a follower's
			n := 0
			for _, t := range fr.Topics {
				for _, p := range t.Partitions {
					n += len(p.RecordBatches)
				}
			}
			d = q.RecordFetch(ctx, n)
		}
	}
	if resp != nil { // Kafka leaves acks=0 produce out of the request quota
		if rd := q.RecordRequest(ctx, handled); rd > d {
			d = rd
		}
	}
	if d > 0 && resp != nil {
		setThrottle(resp, d)
	}
	return d
}

// setThrottle puts d into resp's ThrottleMillis if it has one, keeping a
// larger time already there; a deferred answer gets it once complete.
func setThrottle(resp kmsg.Response, d time.Duration) {
	if df, ok := resp.(*deferred); ok {
		wait := df.wait
		df.wait = func(ctx context.Context) {
			wait(ctx)
			setThrottle(df.Response, d)
		}
		return
	}
	tr, ok := resp.(interface {
		kmsg.ThrottleResponse
		kmsg.SetThrottleResponse
	})
	if !ok {
		return
	}
	if ms, _ := tr.Throttle(); d.Milliseconds() > int64(ms) {
		tr.SetThrottle(int32(min(d.Milliseconds(), 1<<31-1)))
	}
}

// mute waits d (on the server's clock) before the next request is read.
func (c *Conn) mute(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	c.srv.metrics.throttled.Inc()
	t := c.srv.clock().NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestingSessionFunc assigns a connection its session (Config.TestingSession).
type TestingSessionFunc func(net.Conn) (auth.Session, bool)
