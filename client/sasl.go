package client

import (
	"context"
	"encoding/base64"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/scram"
	"github.com/strand-io/strand/internal/wire"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// SASL: SCRAM for the SDK's gRPC connections.

// scramLogin is what WithSCRAM configures.
type scramLogin struct {
	mech           scram.Mechanism
	user, password string
	err            error
}

// WithSCRAM authenticates every connection the client opens with SCRAM
// (mechanism "SCRAM-SHA-256" or "SCRAM-SHA-512") as user: for a listener
// whose listener.security.protocol.map protocol is SASL_PLAINTEXT or
// SASL_SSL. Each broker address gets its own gRPC per-RPC credential
// (credentials.PerRPCCredentials): before its first call it runs the
// Admin.SaslAuthenticate exchange on that connection (the password never
// leaves the process: SCRAM sends a proof, and the server's signature is
// checked), keeps the node's session token and sends it with every call;
// it authenticates again when the token is about to expire, and when a
// node refuses it (a unary call is then retried once; a stream fails with
// that refusal and the next call authenticates). A wrong password fails
// calls with SASL_AUTHENTICATION_FAILED (errs.SaslAuthenticationFailed).
//
// Transport security: the credential does not require TLS
// (RequireTransportSecurity is false), so that it works against a
// SASL_PLAINTEXT listener, where the token travels in clear text and can
// be replayed by whoever sees it until it expires: that is what
// SASL_PLAINTEXT means. For SASL_SSL, give WithTLS too.
func WithSCRAM(mechanism, user, password string) Opt {
	return func(c *config) {
		m, ok := scram.ByName(mechanism)
		l := &scramLogin{mech: m, user: user, password: password}
		if !ok {
			l.err = errs.New(pb.ErrorCode_UNSUPPORTED_SASL_MECHANISM, "WithSCRAM: mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", mechanism)
		}
		c.scram = l
	}
}

const (
	saslTokenKey    = "strand-sasl-token"
	saslMethod      = "/strand.v1.Admin/SaslAuthenticate"
	saslRenewBefore = time.Minute
)

// scramCreds is one connection's SCRAM credential.
type scramCreds struct {
	login *scramLogin
	cc    *grpc.ClientConn // set once the connection is made

	auth    sync.Mutex // one exchange at a time
	mu      sync.Mutex
	token   []byte
	renewAt time.Time // a minute (at most half its life) before the token expires
}

var _ credentials.PerRPCCredentials = (*scramCreds)(nil)

// scramDialOptions are the dial options of one connection's credential;
// bind gives it the connection.
func (l *scramLogin) dialOptions() (*scramCreds, []grpc.DialOption) {
	sc := &scramCreds{login: l}
	return sc, []grpc.DialOption{grpc.WithPerRPCCredentials(sc), grpc.WithChainUnaryInterceptor(sc.retryUnary)}
}

// RequireTransportSecurity is false: see WithSCRAM.
func (sc *scramCreds) RequireTransportSecurity() bool { return false }

func (sc *scramCreds) current() []byte {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.token != nil && time.Now().Before(sc.renewAt) {
		return sc.token
	}
	return nil
}

// drop forgets tok if it is still the current token.
func (sc *scramCreds) drop(tok []byte) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if tok != nil && string(sc.token) == string(tok) {
		sc.token = nil
	}
}

// GetRequestMetadata sends the token, authenticating first if there is
// none (the exchange itself goes without).
func (sc *scramCreds) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	if ri, ok := credentials.RequestInfoFromContext(ctx); ok && ri.Method == saslMethod {
		return nil, nil
	}
	tok, err := sc.ensure(ctx)
	if err != nil {
		return nil, err
	}
	return map[string]string{saslTokenKey: base64.RawURLEncoding.EncodeToString(tok)}, nil
}

func (sc *scramCreds) ensure(ctx context.Context) ([]byte, error) {
	if tok := sc.current(); tok != nil {
		return tok, nil
	}
	sc.auth.Lock()
	defer sc.auth.Unlock()
	if tok := sc.current(); tok != nil {
		return tok, nil // another call authenticated meanwhile
	}
	tok, life, err := sc.exchange(ctx)
	if err != nil {
		return nil, err
	}
	sc.mu.Lock()
	sc.token, sc.renewAt = tok, time.Now().Add(life-min(life/2, saslRenewBefore))
	sc.mu.Unlock()
	return tok, nil
}

// exchange runs SaslAuthenticate on the connection.
func (sc *scramCreds) exchange(ctx context.Context) ([]byte, time.Duration, error) {
	l := sc.login
	if l.err != nil {
		return nil, 0, wire.StatusError(codes.Unauthenticated, l.err.(*errs.Error))
	}
	if sc.cc == nil {
		return nil, 0, status.Error(codes.Unavailable, "SCRAM: connection not ready")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := pb.NewAdminClient(sc.cc).SaslAuthenticate(ctx)
	if err != nil {
		return nil, 0, asStatus(err)
	}
	cl := l.mech.NewClient(l.user, l.password, "")
	first, _, _ := cl.Step(nil)
	if err := st.Send(&pb.SaslAuthenticateRequest{Mechanism: l.mech.Name(), AuthBytes: first}); err != nil {
		return nil, 0, asStatus(recvErr(st, err))
	}
	sfirst, err := st.Recv()
	if err != nil {
		return nil, 0, asStatus(err)
	}
	final, _, err := cl.Step(sfirst.AuthBytes)
	if err != nil {
		return nil, 0, saslFailed("SCRAM exchange with the server failed: %v", err)
	}
	if err := st.Send(&pb.SaslAuthenticateRequest{AuthBytes: final}); err != nil {
		return nil, 0, asStatus(recvErr(st, err))
	}
	sfinal, err := st.Recv()
	if err != nil {
		return nil, 0, asStatus(err)
	}
	if _, _, err := cl.Step(sfinal.AuthBytes); err != nil {
		return nil, 0, saslFailed("the server did not prove it knows the credential: %v", err)
	}
	if len(sfinal.Token) == 0 {
		return nil, 0, saslFailed("the server sent no session token")
	}
	life := time.Duration(sfinal.SessionLifetimeMs) * time.Millisecond
	if life <= 0 {
		life = time.Hour
	}
	return sfinal.Token, life, nil
}

// recvErr: a Send that fails with io.EOF means the server ended the
// stream; its status is what Recv returns.
func recvErr(st pb.Admin_SaslAuthenticateClient, err error) error {
	if _, rerr := st.Recv(); rerr != nil {
		return rerr
	}
	return err
}

func saslFailed(format string, args ...any) error {
	return wire.StatusError(codes.Unauthenticated, errs.New(pb.ErrorCode_SASL_AUTHENTICATION_FAILED, format, args...))
}

// asStatus keeps an error gRPC can carry as the call's status.
func asStatus(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Unavailable, err.Error())
}

// retryUnary retries once a unary call whose token the node refused (it
// restarted, or the token expired early), with a new token.
func (sc *scramCreds) retryUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	tok := sc.current()
	err := invoker(ctx, method, req, reply, cc, opts...)
	if tok == nil || method == saslMethod || status.Code(err) != codes.Unauthenticated {
		return err
	}
	if errs.CodeOf(wire.FromStatus(err)) != pb.ErrorCode_SASL_AUTHENTICATION_FAILED {
		return err
	}
	sc.drop(tok)
	return invoker(ctx, method, req, reply, cc, opts...)
}

// saslRefusal reports an authentication refusal no retry can mend: a wrong
// password or a mechanism the node does not offer.
func saslRefusal(err error) bool {
	c := errs.CodeOf(err)
	return c == pb.ErrorCode_SASL_AUTHENTICATION_FAILED || c == pb.ErrorCode_UNSUPPORTED_SASL_MECHANISM
}
