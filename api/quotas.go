package api

import (
	"context"
	"time"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/clock"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Client quotas on the gRPC front door (package quota). The
// produce stream records each request's bytes and handler time, answers
// with throttle_time_ms, and reads nothing more from the stream for that
// long (as the Kafka door mutes its connection, KIP-219). A consumer
// Fetch (not a follower's) records the bytes it answers; being unary, its
// answer itself is held back for the throttle time (Kafka's behaviour
// before KIP-219). No session in the context: never throttled.

func (d *Deps) quotaClock() clock.Clock {
	if d.QuotaClock != nil {
		return d.QuotaClock
	}
	return clock.Real
}

// produceThrottle records a produce request and returns its throttle.
func (d *Deps) produceThrottle(ctx context.Context, req *pb.ProduceRequest, handled time.Duration) time.Duration {
	if d.Quotas == nil {
		return 0
	}
	n := 0
	for _, p := range req.Partitions {
		n += len(p.Records)
	}
	t := d.Quotas.RecordProduce(ctx, n)
	if req.Acks != 0 {
		t = max(t, d.Quotas.RecordRequest(ctx, handled))
	}
	return t
}

// fetchThrottle records a consumer fetch's answer and returns its throttle.
func (d *Deps) fetchThrottle(ctx context.Context, req *pb.FetchRequest, resp *pb.FetchResponse, handled time.Duration) time.Duration {
	if d == nil || d.Quotas == nil || resp == nil || req.ReplicaId >= 0 {
		return 0
	}
	n := 0
	for _, p := range resp.Partitions {
		n += len(p.Records)
	}
	return max(d.Quotas.RecordFetch(ctx, n), d.Quotas.RecordRequest(ctx, handled))
}

// pause waits t on the quota clock, or until ctx ends.
func (d *Deps) pause(ctx context.Context, t time.Duration) {
	if t <= 0 {
		return
	}
	tm := d.quotaClock().NewTimer(t)
	defer tm.Stop()
	select {
	case <-tm.C():
	case <-ctx.Done():
	}
}

// QuotaUnary is the client listeners' interceptor for request_percentage
// on unary calls: the handler's wall time is recorded for the
// caller's principal and, over the quota, the answer is held back for the
// throttle time (a unary answer has nowhere to carry it; Kafka before
// KIP-219 delayed answers so). Fetch records its own (with its bytes).
// It must run after the interceptor that puts the session in the context.
func (d *Deps) QuotaUnary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if d.Quotas == nil || info.FullMethod == pb.Consumer_Fetch_FullMethodName {
			return h(ctx, req)
		}
		start := time.Now()
		resp, err := h(ctx, req)
		d.pause(ctx, d.Quotas.RecordRequest(ctx, time.Since(start)))
		return resp, err
	}
}
