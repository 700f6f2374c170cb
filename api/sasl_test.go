package api

import (
	"context"
	"encoding/base64"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/wire"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TestSASLTokenInterceptor: a live token's user becomes the call's
// principal (replacing the connection's), an expired or unknown one is
// refused, the exchange itself needs none, and a PLAINTEXT listener asks
// for nothing.
func TestSASLTokenInterceptor(t *testing.T) {
	now := time.Unix(1000, 0)
	tokens := &SASLTokens{Lifetime: time.Minute, now: func() time.Time { return now }}
	tok := tokens.issue("alice", "SCRAM-SHA-256")
	opts := tokens.Interceptors("SASL_PLAINTEXT", auth.ListenerClient)
	if len(opts) != 2 || len(tokens.Interceptors("PLAINTEXT", auth.ListenerClient)) != 0 || len(tokens.Interceptors("SSL", auth.ListenerClient)) != 0 {
		t.Fatal("interceptors on the wrong listeners")
	}
	unary := tokens.unary(auth.ListenerClient)
	call := func(method string, token []byte) (auth.Session, error) {
		ctx := auth.NewContext(context.Background(), auth.Session{Principal: auth.Anonymous, Host: "10.0.0.9", Listener: auth.ListenerClient})
		if token != nil {
			ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(TokenMetadataKey, base64.RawURLEncoding.EncodeToString(token)))
		}
		var got auth.Session
		_, err := unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: method}, func(ctx context.Context, _ any) (any, error) {
			got, _ = auth.FromContext(ctx)
			return nil, nil
		})
		return got, err
	}
	s, err := call("/strand.v1.Metadata/Metadata", tok)
	if err != nil || s.Principal != auth.User("alice") || s.Mechanism != "SCRAM-SHA-256" || s.Host != "10.0.0.9" {
		t.Fatalf("live token: %+v %v", s, err)
	}
	if _, err := call("/strand.v1.Metadata/Metadata", nil); errs.CodeOf(wire.FromStatus(err)) != pb.ErrorCode_SASL_AUTHENTICATION_FAILED {
		t.Fatalf("no token: %v", err)
	}
	if _, err := call("/strand.v1.Metadata/Metadata", []byte("forged")); errs.CodeOf(wire.FromStatus(err)) != pb.ErrorCode_SASL_AUTHENTICATION_FAILED {
		t.Fatalf("forged token: %v", err)
	}
	if s, err := call(saslMethod, nil); err != nil || s.Principal != auth.Anonymous {
		t.Fatalf("the exchange: %+v %v", s, err)
	}
	now = now.Add(time.Minute)
	if _, err := call("/strand.v1.Metadata/Metadata", tok); errs.CodeOf(wire.FromStatus(err)) != pb.ErrorCode_SASL_AUTHENTICATION_FAILED {
		t.Fatalf("expired token: %v", err)
	}
	// Issuing sweeps expired tokens.
	tokens.issue("bob", "SCRAM-SHA-512")
	if len(tokens.tokens) != 1 {
		t.Fatalf("%d tokens kept", len(tokens.tokens))
	}
}

type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (f fakeStream) Context() context.Context { return f.ctx }

// TestSASLTokenStreamInterceptor: a stream (Produce, Fetch…) without a
// token is refused; with one, the handler's stream context carries the
// user.
func TestSASLTokenStreamInterceptor(t *testing.T) {
	tokens := &SASLTokens{}
	tok := tokens.issue("bob", "SCRAM-SHA-512")
	stream := tokens.stream(auth.ListenerExternal)
	var got auth.Session
	handler := func(_ any, ss grpc.ServerStream) error {
		got, _ = auth.FromContext(ss.Context())
		return nil
	}
	info := &grpc.StreamServerInfo{FullMethod: "/strand.v1.Producer/Produce"}
	if err := stream(nil, fakeStream{ctx: context.Background()}, info, handler); errs.CodeOf(wire.FromStatus(err)) != pb.ErrorCode_SASL_AUTHENTICATION_FAILED {
		t.Fatalf("no token: %v", err)
	}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(TokenMetadataKey, base64.RawURLEncoding.EncodeToString(tok)))
	if err := stream(nil, fakeStream{ctx: ctx}, info, handler); err != nil || got.Principal != auth.User("bob") || got.Listener != auth.ListenerExternal || got.Mechanism != "SCRAM-SHA-512" {
		t.Fatalf("token: %+v %v", got, err)
	}
}

// TestSASLTokenDropsCertificateBroker: on a SASL_SSL listener whose
// connection also sent a broker's certificate, the call's principal is
// the token's user, and it is not a broker (the authorizer would treat
// the SCRAM user as a super user otherwise).
func TestSASLTokenDropsCertificateBroker(t *testing.T) {
	tokens := &SASLTokens{}
	tok := tokens.issue("alice", "SCRAM-SHA-256")
	ctx := auth.NewContext(context.Background(), auth.Session{Principal: auth.User("CN=broker"), Mechanism: "SSL", Broker: true, TLS: true, Listener: auth.ListenerClient})
	ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(TokenMetadataKey, base64.RawURLEncoding.EncodeToString(tok)))
	var got auth.Session
	_, err := tokens.unary(auth.ListenerClient)(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/strand.v1.Metadata/Metadata"}, func(ctx context.Context, _ any) (any, error) {
		got, _ = auth.FromContext(ctx)
		return nil, nil
	})
	if err != nil || got.Principal != auth.User("alice") || got.Broker || !got.TLS {
		t.Fatalf("%+v %v", got, err)
	}
}

// TestSASLTokensPerUserBound: one user authenticating in a loop runs out
// of tokens at MaxTokensPerUser; another user still gets one.
func TestSASLTokensPerUserBound(t *testing.T) {
	tokens := &SASLTokens{}
	for i := range MaxTokensPerUser {
		if tokens.issue("mallory", "SCRAM-SHA-256") == nil {
			t.Fatalf("token %d refused", i)
		}
	}
	if tokens.issue("mallory", "SCRAM-SHA-256") != nil {
		t.Fatalf("mallory holds more than %d tokens", MaxTokensPerUser)
	}
	if tokens.issue("alice", "SCRAM-SHA-256") == nil {
		t.Fatal("alice refused a token")
	}
}

// TestSASLTokenBoundToListener: a token issued by the exchange on one
// listener (here a SASL_PLAINTEXT EXTERNAL one, readable on the path) is
// refused on another (the SASL_SSL CLIENT one), accepted on its own.
func TestSASLTokenBoundToListener(t *testing.T) {
	tokens := &SASLTokens{}
	tok := tokens.issueOn("alice", "SCRAM-SHA-256", auth.ListenerExternal)
	call := func(listener string) error {
		ctx := auth.NewContext(context.Background(), auth.Session{Principal: auth.Anonymous, Listener: listener})
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(TokenMetadataKey, base64.RawURLEncoding.EncodeToString(tok)))
		_, err := tokens.unary(listener)(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/strand.v1.Metadata/Metadata"}, func(context.Context, any) (any, error) { return nil, nil })
		return err
	}
	if err := call(auth.ListenerExternal); err != nil {
		t.Fatalf("on its own listener: %v", err)
	}
	if err := call(auth.ListenerClient); errs.CodeOf(wire.FromStatus(err)) != pb.ErrorCode_SASL_AUTHENTICATION_FAILED {
		t.Fatalf("on another listener: %v", err)
	}
}

// silentSASLStream is an exchange whose client never sends a message.
type silentSASLStream struct {
	grpc.ServerStream
	ctx  context.Context
	done chan struct{}
}

func (f silentSASLStream) Context() context.Context { return f.ctx }
func (f silentSASLStream) Recv() (*pb.SaslAuthenticateRequest, error) {
	<-f.done
	return nil, context.Canceled
}
func (f silentSASLStream) Send(*pb.SaslAuthenticateResponse) error { return nil }

// TestSASLExchangeTimeout: a client that opens the exchange and sends
// nothing is refused once SASLExchangeTimeout has passed, instead of
// holding the stream forever.
func TestSASLExchangeTimeout(t *testing.T) {
	defer func(d time.Duration) { SASLExchangeTimeout = d }(SASLExchangeTimeout)
	SASLExchangeTimeout = 50 * time.Millisecond
	st := silentSASLStream{ctx: context.Background(), done: make(chan struct{})}
	defer close(st.done)
	errc := make(chan error, 1)
	go func() { errc <- (&adminService{sasl: &SASLTokens{}}).saslAuthenticate(st) }()
	select {
	case err := <-errc:
		if errs.CodeOf(wire.FromStatus(err)) != pb.ErrorCode_SASL_AUTHENTICATION_FAILED {
			t.Fatalf("%v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a silent SASL exchange is still open after 5s")
	}
}
