package api

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/internal/scram"
	"github.com/strand-io/strand/internal/wire"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// SASL: SCRAM on the gRPC client listeners.
//
// A client runs Admin.SaslAuthenticate, one bidirectional stream: it sends
// the mechanism with the client-first message, gets the server-first
// message, sends the client-final message, and gets the server-final
// message with a session token: 32 random bytes this node keeps for
// SASLTokens.Lifetime (default 1 h). Later calls carry the token,
// base64url, in the TokenMetadataKey metadata. Tokens live in this node's
// memory only: a token is valid on the node that issued it and until that
// node restarts; the SDK authenticates with each node it talks to.
//
// On a listener whose protocol is SASL_PLAINTEXT or SASL_SSL the
// interceptors (Interceptors) refuse every call without a valid token
// (codes.Unauthenticated carrying SASL_AUTHENTICATION_FAILED), except the
// exchange itself and the health check, and put the token's user in the
// call's auth.Session (User:<name>, Mechanism SCRAM-SHA-…). On other
// listeners a token is not asked for; one sent is ignored.

// TokenMetadataKey is the metadata key of the session token.
const TokenMetadataKey = "strand-sasl-token"

// DefaultTokenLifetime is how long a session token is accepted.
const DefaultTokenLifetime = time.Hour

// MaxTokens bounds the live tokens a node holds: past it, an exchange is
// refused until some expire (a client that authenticates in a loop cannot
// grow the table without bound).
const MaxTokens = 1 << 16

// MaxTokensPerUser bounds one user's live tokens: past it, that user's
// exchanges are refused until some expire, so one user authenticating in
// a loop cannot take every token slot (MaxTokens) and lock all others out.
const MaxTokensPerUser = 1024

const saslMethod = "/strand.v1.Admin/SaslAuthenticate"

// SASLTokens issues and checks one node's session tokens.
type SASLTokens struct {
	// Mechanisms is sasl.enabled.mechanisms (nil: SCRAM-SHA-256 and
	// SCRAM-SHA-512); only SCRAM mechanisms are run on gRPC.
	Mechanisms []string
	// Lifetime is how long a token is accepted (0: DefaultTokenLifetime).
	Lifetime time.Duration
	// FailedDelay is connection.failed.authentication.delay.ms (0: none):
	// an exchange that fails (a wrong proof, a mechanism not enabled) is
	// answered that much later, as the Kafka listener answers and closes a
	// failed authentication. The wait holds only that stream, and ends at
	// once when the stream's call ends or Close is called.
	FailedDelay time.Duration

	mu       sync.Mutex
	tokens   map[string]saslToken
	now      func() time.Time
	stopOnce sync.Once
	stop     chan struct{}
}

// stopped is closed by Close.
func (t *SASLTokens) stopped() chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stop == nil {
		t.stop = make(chan struct{})
	}
	return t.stop
}

// Close ends every failed exchange's delay now (the node closes it before
// stopping its gRPC servers, so a delayed refusal does not hold up their
// graceful stop).
func (t *SASLTokens) Close() {
	if t == nil {
		return
	}
	ch := t.stopped()
	t.stopOnce.Do(func() { close(ch) })
}

// delayFailure waits FailedDelay, or until ctx ends or Close.
func (t *SASLTokens) delayFailure(ctx context.Context) {
	if t.FailedDelay <= 0 {
		return
	}
	timer := time.NewTimer(t.FailedDelay)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	case <-t.stopped():
	}
}

type saslToken struct {
	user, mechanism string
	// listener is the listener the exchange ran on: the token is accepted
	// there only ("": anywhere; a call with no session, tests).
	listener string
	expires  time.Time
}

func (t *SASLTokens) lifetime() time.Duration {
	if t.Lifetime > 0 {
		return t.Lifetime
	}
	return DefaultTokenLifetime
}

func (t *SASLTokens) clock() time.Time {
	if t.now != nil {
		return t.now()
	}
	return time.Now()
}

func (t *SASLTokens) enabled(mechanism string) bool {
	if _, ok := scram.ByName(mechanism); !ok {
		return false
	}
	return len(t.Mechanisms) == 0 || slices.Contains(t.Mechanisms, mechanism)
}

// issue makes a token for user (nil when MaxTokens are live), accepted on
// every listener.
func (t *SASLTokens) issue(user, mechanism string) []byte { return t.issueOn(user, mechanism, "") }

// issueOn makes a token for user accepted on listener only.
func (t *SASLTokens) issueOn(user, mechanism, listener string) []byte {
	tok := make([]byte, 32)
	if _, err := rand.Read(tok); err != nil {
		panic(err)
	}
	now := t.clock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tokens == nil {
		t.tokens = map[string]saslToken{}
	}
	mine := 0
	for k, v := range t.tokens { // drop the expired, so the table stays bounded by what is live
		if !now.Before(v.expires) {
			delete(t.tokens, k)
		} else if v.user == user {
			mine++
		}
	}
	if len(t.tokens) >= MaxTokens || mine >= MaxTokensPerUser {
		return nil
	}
	t.tokens[string(tok)] = saslToken{user: user, mechanism: mechanism, listener: listener, expires: now.Add(t.lifetime())}
	return tok
}

// check returns the token's holder if it is live.
func (t *SASLTokens) check(tok []byte) (saslToken, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.tokens[string(tok)]
	if !ok || !t.clock().Before(v.expires) {
		return saslToken{}, false
	}
	return v, true
}

func saslRefused(format string, args ...any) error {
	return wire.StatusError(codes.Unauthenticated, errs.New(pb.ErrorCode_SASL_AUTHENTICATION_FAILED, format, args...))
}

// authenticate checks ctx's token and returns ctx with the token's session.
func (t *SASLTokens) authenticate(ctx context.Context, listener string) (context.Context, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(TokenMetadataKey)
	if len(vals) == 0 && planted.On(planted.SaslTokenUnchecked) {
		return ctx, nil
	}
	if len(vals) == 0 {
		return nil, saslRefused("this listener requires SASL authentication: run SaslAuthenticate and send its token in the %q metadata", TokenMetadataKey)
	}
	raw, err := base64.RawURLEncoding.DecodeString(vals[0])
	if err != nil {
		return nil, saslRefused("the SASL session token does not decode")
	}
	tok, ok := t.check(raw)
	if ok && tok.listener != "" && tok.listener != listener && !planted.On(planted.SaslTokenUnchecked) {
		// A token is a bearer credential: one issued (and carried) on
		// another listener, e.g. a SASL_PLAINTEXT one where anyone on the
		// path may read it, does not open this one. Kafka's SASL proves
		// each connection anew.
		ok = false
	}
	if !ok {
		return nil, saslRefused("the SASL session token is unknown to this node or has expired: authenticate again")
	}
	s, ok := auth.FromContext(ctx)
	if !ok {
		s = auth.Session{Listener: listener}
		if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
			if h, _, err := net.SplitHostPort(p.Addr.String()); err == nil {
				s.Host = h
			}
		}
	}
	// The token's user replaces the connection's principal, and with it
	// whatever the connection's certificate proved: a SCRAM user is never
	// one of inter.broker.principals (Kafka: a SASL_SSL connection's
	// principal is the SASL one alone).
	s.Principal, s.Mechanism, s.Broker = auth.User(tok.user), tok.mechanism, false
	return auth.NewContext(ctx, s), nil
}

func saslExempt(method string) bool {
	return method == saslMethod || method == "/grpc.health.v1.Health/Check" || method == "/grpc.health.v1.Health/Watch"
}

// Interceptors are the server options that require a token on a listener
// of protocol (listener.security.protocol.map's value) named listener;
// none unless protocol is SASL_PLAINTEXT or SASL_SSL. They must run after
// the interceptor that puts the connection's session in the context.
func (t *SASLTokens) Interceptors(protocol, listener string) []grpc.ServerOption {
	if protocol != "SASL_PLAINTEXT" && protocol != "SASL_SSL" {
		return nil
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(t.unary(listener)), grpc.ChainStreamInterceptor(t.stream(listener))}
}

func (t *SASLTokens) unary(listener string) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if saslExempt(info.FullMethod) {
			return handler(ctx, req)
		}
		ctx, err := t.authenticate(ctx, listener)
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

func (t *SASLTokens) stream(listener string) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if saslExempt(info.FullMethod) {
			return handler(srv, ss)
		}
		ctx, err := t.authenticate(ss.Context(), listener)
		if err != nil {
			return err
		}
		return handler(srv, &sessionStream{ServerStream: ss, ctx: ctx})
	}
}

// SASLExchangeTimeout bounds a gRPC SASL exchange from its start to the
// client's last message: an unauthenticated client may not hold a stream
// (and its goroutine) open by never finishing it.
var SASLExchangeTimeout = 30 * time.Second

// recvBy is st.Recv, given up at deadline (the stream then ends with the
// handler, which ends the pending Recv too).
func recvBy(st pb.Admin_SaslAuthenticateServer, deadline <-chan time.Time) (*pb.SaslAuthenticateRequest, error) {
	type got struct {
		m   *pb.SaslAuthenticateRequest
		err error
	}
	ch := make(chan got, 1)
	go func() {
		m, err := st.Recv()
		ch <- got{m, err}
	}()
	select {
	case g := <-ch:
		return g.m, g.err
	case <-deadline:
		return nil, saslRefused("the SASL exchange did not complete within %v", SASLExchangeTimeout)
	}
}

// saslAuthenticate runs one SCRAM exchange (see the file comment).
func (s *adminService) saslAuthenticate(st pb.Admin_SaslAuthenticateServer) error {
	if s.sasl == nil {
		return wire.StatusError(codes.FailedPrecondition, errs.New(pb.ErrorCode_ILLEGAL_SASL_STATE, "SASL is not configured on this node"))
	}
	timer := time.NewTimer(SASLExchangeTimeout)
	defer timer.Stop()
	first, err := recvBy(st, timer.C)
	if err != nil {
		return err
	}
	m, ok := scram.ByName(first.Mechanism)
	if !ok || !s.sasl.enabled(first.Mechanism) {
		s.sasl.delayFailure(st.Context())
		return wire.StatusError(codes.Unauthenticated, errs.New(pb.ErrorCode_UNSUPPORTED_SASL_MECHANISM,
			"SASL mechanism %q is not enabled on the gRPC listeners (SCRAM-SHA-256 and SCRAM-SHA-512 are, as sasl.enabled.mechanisms allows)", first.Mechanism))
	}
	failed := func() error {
		s.sasl.delayFailure(st.Context()) // connection.failed.authentication.delay.ms
		return saslRefused("Authentication failed during authentication due to invalid credentials with SASL mechanism %s", m.Name())
	}
	srv := m.NewServer(func(user string) (scram.Credential, bool) { return s.h.ScramCredential(user, m) }, nil)
	out, err := srv.Step(first.AuthBytes)
	if err != nil {
		return failed()
	}
	if err := st.Send(&pb.SaslAuthenticateResponse{AuthBytes: out}); err != nil {
		return err
	}
	final, err := recvBy(st, timer.C)
	if err != nil {
		return err
	}
	out, err = srv.Step(final.AuthBytes)
	if err != nil || !srv.Done() {
		return failed()
	}
	listener := ""
	if sess, ok := auth.FromContext(st.Context()); ok {
		listener = sess.Listener
	}
	tok := s.sasl.issueOn(srv.User(), m.Name(), listener)
	if tok == nil {
		return wire.StatusError(codes.ResourceExhausted, errs.New(pb.ErrorCode_SASL_AUTHENTICATION_FAILED, "this node holds its most live SASL sessions (%d in all, %d per user): try again later", MaxTokens, MaxTokensPerUser))
	}
	return st.Send(&pb.SaslAuthenticateResponse{AuthBytes: out, Token: tok, SessionLifetimeMs: s.sasl.lifetime().Milliseconds()})
}
