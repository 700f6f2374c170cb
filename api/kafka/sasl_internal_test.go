package kafka

import (
	"context"
	"slices"
	"testing"

	"github.com/strand-io/strand/internal/auth"
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
// its session; an unauthenticated one's see none (as today).
func TestSASLSessionInContext(t *testing.T) {
	c := &Conn{}
	if _, ok := auth.FromContext(c.withSession(context.Background())); ok {
		t.Fatal("a session before authentication")
	}
	c.sasl.authenticated = true
	c.sasl.session = auth.Session{Principal: auth.User("alice"), Mechanism: "SCRAM-SHA-256", Listener: auth.ListenerKafka}
	s, ok := auth.FromContext(c.withSession(context.Background()))
	if !ok || s.Principal.String() != "User:alice" || s.Mechanism != "SCRAM-SHA-256" {
		t.Fatalf("%+v %v", s, ok)
	}
}
