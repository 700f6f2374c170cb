package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/scram"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TestSASLMechanismsOffered: PLAIN is offered on SASL_SSL only, and only
// when enabled; unknown names are never offered.
func TestSASLMechanismsOffered(t *testing.T) {
	for _, tc := range []struct {
		protocol string
		enabled  []string
		want     []string
	}{
		{ProtocolSASLPlaintext, nil, []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}},
		{ProtocolSASLPlaintext, []string{"PLAIN", "SCRAM-SHA-512"}, []string{"SCRAM-SHA-512"}},
		{ProtocolSASLSSL, []string{"PLAIN", "SCRAM-SHA-512", "GSSAPI"}, []string{"PLAIN", "SCRAM-SHA-512"}},
		{ProtocolSASLSSL, nil, []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}},
	} {
		s := &Server{cfg: Config{SecurityProtocol: tc.protocol, SASLMechanisms: tc.enabled}}
		if got := s.mechanisms(); !slices.Equal(got, tc.want) {
			t.Errorf("%s %v: offered %v, want %v", tc.protocol, tc.enabled, got, tc.want)
		}
	}
	if (&Server{cfg: Config{SecurityProtocol: ProtocolSSL}}).saslEnabled() || !(&Server{cfg: Config{SecurityProtocol: ProtocolSASLSSL}}).saslEnabled() {
		t.Fatal("saslEnabled")
	}
}

// TestSASLSessionInContext: an authenticated connection's handlers see
// its SASL session (with the connection's TLS flag); an unauthenticated
// one's see the connection's session (anonymous, or its certificate's).
func TestSASLSessionInContext(t *testing.T) {
	c := &Conn{session: auth.Session{Principal: auth.Anonymous, TLS: true}}
	if s := c.withSession(); s.Principal != auth.Anonymous {
		t.Fatalf("before authentication: %+v", s)
	}
	c.sasl.authenticated = true
	c.sasl.session = auth.Session{Principal: auth.User("alice"), Mechanism: "SCRAM-SHA-256", Listener: auth.ListenerKafka}
	s, ok := auth.FromContext(auth.NewContext(context.Background(), c.withSession()))
	if !ok || s.Principal.String() != "User:alice" || s.Mechanism != "SCRAM-SHA-256" || !s.TLS {
		t.Fatalf("%+v %v", s, ok)
	}
}

// TestVerifyPlain: PLAIN's "authzid NUL user NUL password" checked
// against the stored SCRAM credential (SHA-512 first, else SHA-256).
func TestVerifyPlain(t *testing.T) {
	salt := scram.NewSalt()
	creds := map[string]map[string]scram.Credential{
		"alice": {"SCRAM-SHA-256": scram.SHA256.NewCredential("alice-secret", salt, 4096)},
		"bob":   {"SCRAM-SHA-512": scram.SHA512.NewCredential("bob-secret", salt, 4096)},
	}
	lookup := func(u string, m scram.Mechanism) (scram.Credential, bool) {
		c, ok := creds[u][m.Name()]
		return c, ok
	}
	for _, tc := range []struct {
		msg  string
		user string
		ok   bool
	}{
		{"\x00alice\x00alice-secret", "alice", true},
		{"alice\x00alice\x00alice-secret", "alice", true},
		{"\x00bob\x00bob-secret", "bob", true},
		{"\x00alice\x00wrong", "", false},
		{"bob\x00alice\x00alice-secret", "", false}, // authzid other than the user
		{"\x00mallory\x00alice-secret", "", false},
		{"\x00\x00alice-secret", "", false},
		{"alice-secret", "", false},
	} {
		u, ok := verifyPlain([]byte(tc.msg), lookup)
		if ok != tc.ok || (ok && u != tc.user) {
			t.Errorf("%q: %q %v", tc.msg, u, ok)
		}
	}
}

// TestSASLUnauthenticatedFrameBound: before SASL authentication a frame
// larger than sasl.server.max.receive.size closes the connection as soon
// as its size is read, without waiting for (or allocating) its body; once
// authenticated, socket.request.max.bytes is the bound again.
func TestSASLUnauthenticatedFrameBound(t *testing.T) {
	for _, authenticated := range []bool{false, true} {
		srv, cli := net.Pipe()
		s := &Server{cfg: Config{SecurityProtocol: ProtocolSASLPlaintext, MaxRequestBytes: 100 << 20}}
		c := &Conn{srv: s, nc: srv, raw: srv, out: make(chan pending, 1)}
		c.initSASL()
		c.sasl.authenticated = authenticated
		errc := make(chan error, 1)
		go func() { errc <- c.read(context.Background()) }()
		var size [4]byte
		binary.BigEndian.PutUint32(size[:], SASLMaxReceiveBytes+1)
		if _, err := cli.Write(size[:]); err != nil {
			t.Fatal(err)
		}
		var err error
		ended := false
		select {
		case err = <-errc:
			ended = true
		case <-time.After(time.Second):
		}
		cli.Close()
		srv.Close()
		if !ended {
			err = <-errc
		}
		var pe *protocolError
		refused := ended && errors.As(err, &pe) && pe.reason == "oversized"
		if refused == authenticated {
			t.Fatalf("authenticated=%v: refused at once %v (read ended with %v)", authenticated, refused, err)
		}
	}
}

// TestSASLHandshakeAfterAuthentication: an authenticated connection's
// second SaslHandshake is ILLEGAL_SASL_STATE (no re-authentication) and
// starts no exchange, so the connection keeps its principal.
func TestSASLHandshakeAfterAuthentication(t *testing.T) {
	s := &Server{cfg: Config{SecurityProtocol: ProtocolSASLPlaintext}}
	c := &Conn{srv: s}
	c.initSASL()
	c.sasl.authenticated, c.sasl.step = true, saslNone
	c.sasl.session = auth.Session{Principal: auth.User("alice")}
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Mechanism = "SCRAM-SHA-256"
	resp, err := handleSaslHandshake(context.Background(), c, req)
	if err != nil || resp.(*kmsg.SASLHandshakeResponse).ErrorCode != code(pb.ErrorCode_ILLEGAL_SASL_STATE) {
		t.Fatalf("%+v %v", resp, err)
	}
	if c.sasl.step != saslNone || c.withSession().Principal != auth.User("alice") {
		t.Fatalf("the handshake changed the connection's SASL state: step %v, %+v", c.sasl.step, c.withSession())
	}
}
