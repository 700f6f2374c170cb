package node

import (
	"time"

	"github.com/strand-io/strand/api"
)

// SASLConfig is SASL on the client listeners (issue 22: sasl).
type SASLConfig struct {
	// EnabledMechanisms is sasl.enabled.mechanisms (nil: SCRAM-SHA-256,
	// SCRAM-SHA-512). PLAIN is offered on a SASL_SSL Kafka listener only,
	// and never on gRPC.
	EnabledMechanisms []string
	// Protocols is each client listener's protocol by listener name
	// (auth.ListenerClient, ListenerExternal, ListenerKafka): what
	// listener.security.protocol.map says. A listener not named is
	// PLAINTEXT; SASL_PLAINTEXT and SASL_SSL require SASL authentication.
	// The settings file's map fills it.
	Protocols map[string]string
	// TokenLifetime is how long a gRPC session token is accepted (0: 1 h).
	TokenLifetime time.Duration
}

// saslTokens is the node's store of gRPC session tokens.
func (c SASLConfig) tokens() *api.SASLTokens {
	return &api.SASLTokens{Mechanisms: c.EnabledMechanisms, Lifetime: c.TokenLifetime}
}

// protocol is listener's protocol ("" for PLAINTEXT).
func (c SASLConfig) protocol(listener string) string { return c.Protocols[listener] }
