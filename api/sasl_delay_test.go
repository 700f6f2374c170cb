package api

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/wire"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// oneMessageSASLStream is an exchange whose client sends one message.
type oneMessageSASLStream struct {
	grpc.ServerStream
	ctx   context.Context
	first *pb.SaslAuthenticateRequest
	once  sync.Once
}

func (f *oneMessageSASLStream) Context() context.Context { return f.ctx }
func (f *oneMessageSASLStream) Recv() (*pb.SaslAuthenticateRequest, error) {
	var m *pb.SaslAuthenticateRequest
	f.once.Do(func() { m = f.first })
	if m == nil {
		<-f.ctx.Done()
		return nil, f.ctx.Err()
	}
	return m, nil
}
func (f *oneMessageSASLStream) Send(*pb.SaslAuthenticateResponse) error { return nil }

// TestSASLFailureDelayed: a failed gRPC SCRAM exchange (a client-first
// message that does not parse, a mechanism not enabled) is refused
// connection.failed.authentication.delay.ms after it failed, as the Kafka
// listener answers a failed authentication; other exchanges are not held
// up; and neither the call's end nor Close waits for the delay.
func TestSASLFailureDelayed(t *testing.T) {
	run := func(tokens *SASLTokens, ctx context.Context, mech string) (time.Duration, pb.ErrorCode) {
		start := time.Now()
		st := &oneMessageSASLStream{ctx: ctx, first: &pb.SaslAuthenticateRequest{Mechanism: mech, AuthBytes: []byte("not a client-first message")}}
		err := (&adminService{sasl: tokens}).saslAuthenticate(st)
		return time.Since(start), errs.CodeOf(wire.FromStatus(err))
	}
	tokens := &SASLTokens{FailedDelay: 300 * time.Millisecond}
	for _, mech := range []string{"SCRAM-SHA-256", "PLAIN"} {
		want := pb.ErrorCode_SASL_AUTHENTICATION_FAILED
		if mech == "PLAIN" {
			want = pb.ErrorCode_UNSUPPORTED_SASL_MECHANISM
		}
		if d, code := run(tokens, context.Background(), mech); code != want || d < 300*time.Millisecond {
			t.Errorf("%s: refused %v after %v, want %v after the 300ms delay", mech, code, d, want)
		}
	}
	// Ten failing exchanges at once take one delay, not ten.
	var wg sync.WaitGroup
	start := time.Now()
	for range 10 {
		wg.Add(1)
		go func() { defer wg.Done(); run(tokens, context.Background(), "SCRAM-SHA-256") }()
	}
	wg.Wait()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("ten concurrent failures took %v: one delays another", d)
	}
	// No delay configured: at once.
	if d, _ := run(&SASLTokens{}, context.Background(), "SCRAM-SHA-256"); d > 200*time.Millisecond {
		t.Errorf("without a delay: refused after %v", d)
	}

	long := &SASLTokens{FailedDelay: time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if d, _ := run(long, ctx, "SCRAM-SHA-256"); d > 5*time.Second {
		t.Errorf("a call that ended waited %v for its delay", d)
	}
	time.AfterFunc(100*time.Millisecond, long.Close)
	if d, _ := run(long, context.Background(), "SCRAM-SHA-256"); d > 5*time.Second {
		t.Errorf("Close left a delayed refusal waiting %v", d)
	}
	long.Close() // twice: no panic
}
