package main

import (
	"slices"
	"testing"

	"github.com/strand-io/strand/node"
)

// TestSASLMechanismsSetting: sasl.enabled.mechanisms takes Kafka's names
// of what Strand runs and refuses the rest.
func TestSASLMechanismsSetting(t *testing.T) {
	var cfg node.Config
	if err := serverSettings["sasl.enabled.mechanisms"](&cfg, "SCRAM-SHA-512, PLAIN"); err != nil || !slices.Equal(cfg.SASL.EnabledMechanisms, []string{"SCRAM-SHA-512", "PLAIN"}) {
		t.Fatalf("%v %v", cfg.SASL.EnabledMechanisms, err)
	}
	for _, bad := range []string{"GSSAPI", "", "SCRAM-SHA-1", "OAUTHBEARER,PLAIN"} {
		if err := serverSettings["sasl.enabled.mechanisms"](&cfg, bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
