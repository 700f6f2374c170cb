package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/strand-io/strand/node"
)

// saslMechanismsSetting is sasl.enabled.mechanisms: a
// comma list of SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN (PLAIN is offered
// on SASL_SSL listeners only).
func saslMechanismsSetting(cfg *node.Config, v string) error {
	var out []string
	for _, m := range strings.Split(v, ",") {
		m = strings.TrimSpace(m)
		if m == "" {
			continue
		}
		switch m {
		case "SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN":
			out = append(out, m)
		default:
			return fmt.Errorf("sasl.enabled.mechanisms: %q is not supported (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN are)", m)
		}
	}
	if len(out) == 0 {
		return fmt.Errorf("sasl.enabled.mechanisms: name at least one mechanism")
	}
	cfg.SASL.EnabledMechanisms = out
	return nil
}

// failedAuthDelaySetting is connection.failed.authentication.delay.ms:
// how much later a failed SASL authentication is answered (and its Kafka
// connection closed); 0 turns the delay off (node.SASLConfig's negative).
func failedAuthDelaySetting(cfg *node.Config, d time.Duration) {
	if d == 0 {
		d = -1
	}
	cfg.SASL.FailedAuthenticationDelay = d
}
