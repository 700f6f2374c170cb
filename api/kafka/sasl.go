package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/internal/scram"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// SASL on the Kafka listener, as Kafka's
// SaslServerAuthenticator runs it.
//
// On a listener whose protocol (Config.SecurityProtocol) is SASL_PLAINTEXT
// or SASL_SSL, a connection sends SaslHandshake v1 naming a mechanism,
// then SaslAuthenticate (v0-v2) messages until the mechanism is done;
// before that only ApiVersions is answered, and any other request closes
// the connection (Kafka's "Unexpected Kafka request of type … during SASL
// handshake"). Mechanisms: SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN, as
// sasl.enabled.mechanisms lists them (Config.SASLMechanisms); PLAIN only
// on SASL_SSL, its password checked against the user's stored SCRAM
// credential (SHA-512, else SHA-256). A mechanism not offered is answered
// UNSUPPORTED_SASL_MECHANISM with the list of those that are, and the
// connection closed; a failed authentication is answered
// SASL_AUTHENTICATION_FAILED with Kafka's message, and closed. Either
// refusal, as every SASL refusal that closes the connection, is written,
// and the connection closed, connection.failed.authentication.delay.ms
// (Config.FailedAuthenticationDelay, default 100 ms) after it was decided,
// as Kafka's Selector delays them: a client guessing passwords gets one
// answer per delay per connection. The delay holds only that connection
// (its own writer waits; its reader reads nothing more), and ends at once
// when the server closes.
//
// Not served: SaslHandshake v0 (raw SASL tokens without SaslAuthenticate
// framing, from clients older than Kafka 1.0) is answered
// UNSUPPORTED_VERSION and the connection closed; every current client uses
// v1. ApiVersions still lists SaslHandshake as 0-1, as Kafka does:
// librdkafka enables SASL mechanism negotiation only when the broker's
// range holds version 0, and refuses SCRAM and PLAIN otherwise ("SASL
// Handshake not supported by broker"), though it then sends v1.
// Re-authentication (KIP-368) is not offered: session_lifetime_ms is 0.
//
// Once authenticated, the connection's requests carry the session
// (auth.Session: User:<name>, the mechanism) in their context.
func init() {
	register(kmsg.SASLHandshake, 0, 1, handleSaslHandshake)
	register(kmsg.SASLAuthenticate, 0, 2, handleSaslAuthenticate)
}

// Security protocols (listener.security.protocol.map's values).
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// MechanismPlain is SASL/PLAIN.
const MechanismPlain = "PLAIN"

// DefaultSASLMechanisms is sasl.enabled.mechanisms' default.
var DefaultSASLMechanisms = []string{scram.NameSHA256, scram.NameSHA512}

// IsSASL reports whether protocol authenticates with SASL.
func IsSASL(protocol string) bool {
	return protocol == ProtocolSASLPlaintext || protocol == ProtocolSASLSSL
}

type saslStep int

const (
	saslNone          saslStep = iota // the listener has no SASL, or it is done
	saslWantHandshake                 // a SaslHandshake is due
	saslWantAuth                      // SaslAuthenticate messages are due
)

// saslConn is a connection's SASL state; only its reader goroutine
// touches it.
type saslConn struct {
	step      saslStep
	mechanism string
	scram     *scram.Server
	// authenticated is set once the mechanism has proved the user.
	authenticated bool
	// versionsAsked counts ApiVersions before authentication: Kafka takes
	// one (and its retry at a version the broker supports, KIP-511), so a
	// client cannot hold an unauthenticated connection open with them.
	versionsAsked int
	session       auth.Session
	// closeAfter: close the connection once the answer being queued is
	// written (a refused mechanism, a failed authentication).
	closeAfter string
}

// maxVersionsBeforeSASL is how many ApiVersions a connection may send
// before its SaslHandshake: one, and a retry at a lower version (KIP-511).
const maxVersionsBeforeSASL = 2

func (s *Server) saslEnabled() bool { return IsSASL(s.cfg.SecurityProtocol) }

// mechanisms is what this listener offers: the enabled ones, PLAIN only on
// SASL_SSL.
func (s *Server) mechanisms() []string {
	en := s.cfg.SASLMechanisms
	if len(en) == 0 {
		en = DefaultSASLMechanisms
	}
	var out []string
	for _, m := range en {
		if m == MechanismPlain && s.cfg.SecurityProtocol != ProtocolSASLSSL {
			continue
		}
		if _, ok := scram.ByName(m); ok || m == MechanismPlain {
			out = append(out, m)
		}
	}
	return out
}

func (c *Conn) initSASL() {
	if c.srv.saslEnabled() {
		c.sasl.step = saslWantHandshake
	}
}

// saslGate refuses (closing the connection) a request an unauthenticated
// SASL connection may not send yet.
func (c *Conn) saslGate(key int16) error {
	if !c.srv.saslEnabled() || c.sasl.authenticated || planted.On(planted.SaslGateOpen) {
		return nil
	}
	switch kmsg.Key(key) {
	case kmsg.ApiVersions:
		if c.sasl.step == saslWantHandshake && c.sasl.versionsAsked < maxVersionsBeforeSASL {
			c.sasl.versionsAsked++
			return nil
		}
	case kmsg.SASLHandshake:
		if c.sasl.step == saslWantHandshake {
			return nil
		}
	case kmsg.SASLAuthenticate:
		if c.sasl.step == saslWantAuth {
			return nil
		}
	}
	return violation("sasl_unauthenticated", "unexpected Kafka request of type %s during SASL handshake", kmsg.NameForKey(key))
}

// SASLMaxReceiveBytes is Kafka's sasl.server.max.receive.size default: the
// largest frame a connection may send before it has authenticated.
const SASLMaxReceiveBytes = 524288

// saslMaxReceive is the frame bound before SASL authentication (0: none,
// the listener has no SASL or the connection has authenticated).
func (c *Conn) saslMaxReceive() int32 {
	if !c.srv.saslEnabled() || c.sasl.authenticated {
		return 0
	}
	return SASLMaxReceiveBytes
}

// withSession adds the connection's authenticated session to ctx.
func (c *Conn) withSession() auth.Session {
	if c.sasl.authenticated {
		s := c.sasl.session
		s.TLS = c.session.TLS
		return s
	}
	return c.session
}

func handleSaslHandshake(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.SASLHandshakeRequest)
	resp := kmsg.NewPtrSASLHandshakeResponse()
	if !c.srv.saslEnabled() || c.sasl.authenticated {
		// Also once authenticated: re-authentication (KIP-368) is not
		// offered, so a second handshake is out of turn, as Kafka's
		// KafkaApis answers it (connections.max.reauth.ms=0); it must not
		// start an exchange that would switch the connection's principal.
		resp.ErrorCode = code(pb.ErrorCode_ILLEGAL_SASL_STATE)
		return resp, nil
	}
	offered := c.srv.mechanisms()
	resp.SupportedMechanisms = offered
	if req.Version == 0 {
		// v0 would be followed by raw tokens, which are not read.
		resp.ErrorCode = code(pb.ErrorCode_UNSUPPORTED_VERSION)
		c.sasl.closeAfter = "SaslHandshake v0 (raw SASL tokens) is not served; use v1"
		return resp, nil
	}
	if !slices.Contains(offered, req.Mechanism) {
		resp.ErrorCode = code(pb.ErrorCode_UNSUPPORTED_SASL_MECHANISM)
		c.sasl.closeAfter = fmt.Sprintf("unsupported SASL mechanism %q (offered: %v)", req.Mechanism, offered)
		return resp, nil
	}
	c.sasl.mechanism, c.sasl.step = req.Mechanism, saslWantAuth
	if m, ok := scram.ByName(req.Mechanism); ok {
		c.sasl.scram = m.NewServer(func(user string) (scram.Credential, bool) { return c.H.ScramCredential(user, m) }, nil)
	}
	return resp, nil
}

// delayFailedAuthentication makes p, the refusal that ends a SASL
// authentication, wait connection.failed.authentication.delay.ms in the
// connection's writer (in request order, as a deferred answer) before it
// is written; the connection is closed after it.
func (c *Conn) delayFailedAuthentication(p *pending) {
	d := c.srv.cfg.FailedAuthenticationDelay
	if d <= 0 {
		return
	}
	clk := c.srv.clock()
	p.resp = &deferred{Response: p.resp, wait: func(ctx context.Context) {
		t := clk.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C():
		case <-ctx.Done():
		}
	}}
}

// authFailedMessage is Kafka's message for a failed authentication.
func authFailedMessage(mechanism string) string {
	return "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mechanism
}

func handleSaslAuthenticate(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.SASLAuthenticateRequest)
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	if !c.srv.saslEnabled() || c.sasl.step != saslWantAuth {
		resp.ErrorCode = code(pb.ErrorCode_ILLEGAL_SASL_STATE)
		resp.ErrorMessage = errMsg("SaslAuthenticate without a SaslHandshake first")
		c.sasl.closeAfter = "SaslAuthenticate out of turn"
		return resp, nil
	}
	fail := func(err error) (kmsg.Response, error) {
		resp.ErrorCode = code(pb.ErrorCode_SASL_AUTHENTICATION_FAILED)
		resp.ErrorMessage = errMsg(authFailedMessage(c.sasl.mechanism))
		c.sasl.closeAfter = fmt.Sprintf("SASL %s authentication failed: %v", c.sasl.mechanism, err)
		return resp, nil
	}
	var user string
	if c.sasl.mechanism == MechanismPlain {
		u, ok := verifyPlain(req.SASLAuthBytes, c.H.ScramCredential)
		if !ok {
			return fail(scram.ErrAuthFailed)
		}
		user = u
	} else {
		out, err := c.sasl.scram.Step(req.SASLAuthBytes)
		if err != nil {
			return fail(err)
		}
		resp.SASLAuthBytes = out
		if !c.sasl.scram.Done() {
			return resp, nil
		}
		user = c.sasl.scram.User()
	}
	host, _, _ := splitHostPort(c.nc.RemoteAddr().String())
	c.sasl.authenticated, c.sasl.step, c.sasl.scram = true, saslNone, nil
	c.sasl.session = auth.Session{Principal: auth.User(user), Host: host, Listener: auth.ListenerKafka,
		Mechanism: c.sasl.mechanism, TLS: c.srv.cfg.SecurityProtocol == ProtocolSASLSSL}
	c.Log.Debug("SASL authenticated", "principal", c.sasl.session.Principal.String(), "mechanism", c.sasl.mechanism)
	return resp, nil
}

// verifyPlain checks a PLAIN message ("authzid NUL user NUL password")
// against the user's stored SCRAM credential; the authzid, when given,
// must be the user.
func verifyPlain(msg []byte, lookup func(string, scram.Mechanism) (scram.Credential, bool)) (string, bool) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 || len(parts[1]) == 0 {
		return "", false
	}
	authz, user, password := string(parts[0]), string(parts[1]), string(parts[2])
	if authz != "" && authz != user {
		return "", false
	}
	for _, m := range []scram.Mechanism{scram.SHA512, scram.SHA256} {
		if cred, ok := lookup(user, m); ok {
			return user, m.VerifyPlain(cred, password)
		}
	}
	return "", false
}

var errNoPort = errors.New("no port")

// splitHostPort is net.SplitHostPort without its error for a bare host.
func splitHostPort(addr string) (string, string, error) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			h := addr[:i]
			if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
				h = h[1 : len(h)-1]
			}
			return h, addr[i+1:], nil
		}
	}
	return addr, "", errNoPort
}
