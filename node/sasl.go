package node

import (
	"fmt"
	"time"

	"github.com/strand-io/strand/api"
	"github.com/strand-io/strand/api/kafka"
)

// SASLConfig is SASL on the client listeners.
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
	// FailedAuthenticationDelay is connection.failed.authentication.delay.ms
	// (0: Kafka's default, 100 ms; negative: none): a failed SASL
	// authentication is answered (and, on the Kafka listener, its
	// connection closed) that much later, on both doors. It must be less
	// than connections.max.idle.ms.
	FailedAuthenticationDelay time.Duration
}

// failedAuthDelay is connection.failed.authentication.delay.ms in force (0:
// none).
func (c SASLConfig) failedAuthDelay() time.Duration {
	switch {
	case c.FailedAuthenticationDelay < 0:
		return 0
	case c.FailedAuthenticationDelay == 0:
		return kafka.DefaultFailedAuthenticationDelay
	}
	return c.FailedAuthenticationDelay
}

// kafkaFailedAuthDelay is failedAuthDelay as kafka.Config takes it
// (negative: none).
func (c SASLConfig) kafkaFailedAuthDelay() time.Duration {
	if d := c.failedAuthDelay(); d > 0 {
		return d
	}
	return -1
}

// checkFailedAuthDelay is Kafka's rule: the delay must be less than
// connections.max.idle.ms, or a delayed answer could find its connection
// closed as idle.
func (c SASLConfig) checkFailedAuthDelay(maxIdle time.Duration) error {
	if d := c.failedAuthDelay(); d >= maxIdle {
		return fmt.Errorf("connection.failed.authentication.delay.ms=%d should always be less than connections.max.idle.ms=%d to prevent failed authentication responses from timing out",
			d.Milliseconds(), maxIdle.Milliseconds())
	}
	return nil
}

// saslTokens is the node's store of gRPC session tokens.
func (c SASLConfig) tokens() *api.SASLTokens {
	return &api.SASLTokens{Mechanisms: c.EnabledMechanisms, Lifetime: c.TokenLifetime, FailedDelay: c.failedAuthDelay()}
}

// listenerProtocol is listener's protocol: SASLConfig.Protocols when it
// names the listener (tests), else listener.security.protocol.map.
func (n *Node) listenerProtocol(cfg Config, listener string) string {
	if p, ok := cfg.SASL.Protocols[listener]; ok {
		return p
	}
	return string(n.sec.Protocol(listener))
}
