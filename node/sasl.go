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
	// Tests set it; a server's listener.security.protocol.map is read
	// through Config.Security (Node.listenerProtocol).
	Protocols map[string]string
	// TokenLifetime is how long a gRPC session token is accepted (0: 1 h).
	TokenLifetime time.Duration
}

// saslTokens is the node's store of gRPC session tokens.
func (c SASLConfig) tokens() *api.SASLTokens {
	return &api.SASLTokens{Mechanisms: c.EnabledMechanisms, Lifetime: c.TokenLifetime}
}

// listenerProtocol is listener's protocol: SASLConfig.Protocols when it
// names the listener (tests), else listener.security.protocol.map.
func (n *Node) listenerProtocol(cfg Config, listener string) string {
	if p, ok := cfg.SASL.Protocols[listener]; ok {
		return p
	}
	return string(n.sec.Protocol(listener))
}
