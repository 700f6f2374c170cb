package main

import (
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/tlsconf"
	"github.com/strand-io/strand/node"
)

// The security settings have Kafka's names in --config; by default every
// listener stays PLAINTEXT.
func TestSecuritySettings(t *testing.T) {
	cfg := node.DefaultConfig(1, t.TempDir())
	if cfg.Security.AnyTLS() || cfg.Security.Protocol(auth.ListenerClient) != tlsconf.Plaintext {
		t.Fatal("TLS on by default")
	}
	body := `listener.security.protocol.map: CLIENT:SSL,INTER_BROKER:SSL,CONTROLLER:SSL,KAFKA:SASL_SSL
ssl.keystore.location: /etc/strand/keystore.pem
ssl.truststore.location=/etc/strand/truststore.pem
ssl.crl.location: /etc/strand/crl.pem
ssl.client.auth: required
ssl.principal.mapping.rules=RULE:^CN=([^,]+).*$/$1/L,DEFAULT
inter.broker.principals: User:CN=broker;User:CN=node4,O=strand
gossip.encryption.key.location: /etc/strand/gossip.key
`
	if err := applyConfigFile(&cfg, configFile(t, body), slog.Default()); err != nil {
		t.Fatal(err)
	}
	s := cfg.Security
	if s.Protocol(auth.ListenerClient) != tlsconf.SSL || s.Protocol(auth.ListenerKafka) != tlsconf.SASLSSL || s.Protocol(auth.ListenerExternal) != tlsconf.Plaintext ||
		s.KeystoreLocation != "/etc/strand/keystore.pem" || s.TruststoreLocation != "/etc/strand/truststore.pem" || s.CRLLocation != "/etc/strand/crl.pem" ||
		s.ClientAuth != tlsconf.ClientAuthRequired || s.GossipKeyLocation != "/etc/strand/gossip.key" ||
		len(s.InterBrokerPrincipals) != 2 || s.InterBrokerPrincipals[1] != auth.User("CN=node4,O=strand") {
		t.Fatalf("%+v", s)
	}
	if got, err := s.Mapping.Map("CN=Alice,O=strand"); err != nil || got != "alice" {
		t.Fatalf("mapping: %q %v", got, err)
	}
	for _, bad := range []string{"listener.security.protocol.map: INTER_BROKER:SASL_SSL\n", "ssl.client.auth: maybe\n", "ssl.principal.mapping.rules: RULE:x\n"} {
		c := node.DefaultConfig(1, t.TempDir())
		if err := applyConfigFile(&c, configFile(t, bad), slog.Default()); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestReadmeSecuritySettings: the README's example of the security
// settings is a config file strand server reads.
func TestReadmeSecuritySettings(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "### Transport security")
	if i < 0 {
		t.Fatal("README has no transport security section")
	}
	s = s[i:]
	start := strings.Index(s, "```text\n")
	end := strings.Index(s[start+8:], "```")
	if start < 0 || end < 0 {
		t.Fatal("no example block")
	}
	cfg := node.DefaultConfig(1, t.TempDir())
	if err := applyConfigFile(&cfg, configFile(t, s[start+8:start+8+end]), slog.Default()); err != nil {
		t.Fatal(err)
	}
	if cfg.Security.KeystoreLocation != "/etc/strand/keystore.pem" || cfg.Security.Protocol(auth.ListenerController) != tlsconf.SSL {
		t.Fatalf("%+v", cfg.Security)
	}
}
