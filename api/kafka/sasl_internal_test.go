package kafka

import (
	"slices"
	"testing"
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
