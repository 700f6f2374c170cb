package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/internal/certs"
)

// testCerts writes a CA, a node keystore for 127.0.0.1 and a client
// keystore into a temporary directory.
type testCerts struct {
	dir                  string
	ca                   *certs.CA
	caFile, node, client string
}

func newTestCerts(t *testing.T, nodeHosts ...string) *testCerts {
	t.Helper()
	dir := t.TempDir()
	ca, err := certs.NewCA("test CA", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	tc := &testCerts{dir: dir, ca: ca, caFile: filepath.Join(dir, "ca.pem"), node: filepath.Join(dir, "node.pem"), client: filepath.Join(dir, "alice.pem")}
	if len(nodeHosts) == 0 {
		nodeHosts = []string{"127.0.0.1", "localhost"}
	}
	node, err := ca.Issue(certs.Spec{CommonName: "broker", Hosts: nodeHosts, Server: true, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	alice, err := ca.Issue(certs.Spec{CommonName: "alice", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	for p, b := range map[string][]byte{tc.caFile: ca.CertPEM(), tc.node: node.KeystorePEM(), tc.client: alice.KeystorePEM()} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return tc
}

func TestCommandConfigEveryKey(t *testing.T) {
	tc := newTestCerts(t)
	keyOnly := filepath.Join(tc.dir, "alice.key")
	// The keystore's key in a file of its own (ssl.key.location).
	b, _ := os.ReadFile(tc.client)
	if err := os.WriteFile(keyOnly, b[strings.Index(string(b), "-----BEGIN PRIVATE KEY"):], 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, body string
		check      func(t *testing.T, cc *commandConfig)
	}{
		{"empty: plaintext", "# nothing\n\n", func(t *testing.T, cc *commandConfig) {
			if cc.Protocol != protoPlaintext || cc.TLS != nil || cc.sasl() {
				t.Fatalf("%+v", cc)
			}
		}},
		{"SSL with a keystore", "security.protocol=SSL\nssl.truststore.location=" + tc.caFile + "\nssl.keystore.location: " + tc.client + "\n", func(t *testing.T, cc *commandConfig) {
			if cc.TLS == nil || cc.TLS.RootCAs == nil || len(cc.TLS.Certificates) != 1 {
				t.Fatalf("TLS not loaded: %+v", cc.TLS)
			}
			leaf, _ := x509.ParseCertificate(cc.TLS.Certificates[0].Certificate[0])
			if leaf.Subject.CommonName != "alice" {
				t.Fatalf("client certificate %s", leaf.Subject)
			}
			if len(cc.sdkOptsOrDie(t)) != 1 || len(cc.kgoOpts()) != 1 {
				t.Fatalf("want one SDK option (WithTLS) and one franz-go option (DialTLSConfig)")
			}
		}},
		{"ssl lower case, separate key, PEM types", "security.protocol = ssl\nssl.truststore.location=" + tc.caFile + "\nssl.keystore.location=" + tc.client +
			"\nssl.key.location=" + keyOnly + "\nssl.keystore.type=PEM\nssl.truststore.type=PEM\nssl.endpoint.identification.algorithm=https\n", func(t *testing.T, cc *commandConfig) {
			if cc.Protocol != protoSSL || cc.Key != keyOnly || len(cc.TLS.Certificates) != 1 {
				t.Fatalf("%+v", cc)
			}
		}},
		{"SSL with the system's CAs and no client certificate", "security.protocol=SSL\n", func(t *testing.T, cc *commandConfig) {
			if cc.TLS == nil || cc.TLS.RootCAs != nil || len(cc.TLS.Certificates) != 0 {
				t.Fatalf("%+v", cc.TLS)
			}
		}},
		{"SASL_SSL SCRAM", "security.protocol=SASL_SSL\nssl.truststore.location=" + tc.caFile + "\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=alice\nsasl.password=secret\n", func(t *testing.T, cc *commandConfig) {
			if cc.Mechanism != "SCRAM-SHA-512" || cc.Username != "alice" || cc.Password != "secret" || cc.TLS == nil {
				t.Fatalf("%+v", cc)
			}
			if len(cc.kgoOpts()) != 2 {
				t.Fatalf("franz-go: want DialTLSConfig and SASL")
			}
		}},
		{"SASL_PLAINTEXT SCRAM-SHA-256", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=scram-sha-256\nsasl.username=bob\nsasl.password=pw\n", func(t *testing.T, cc *commandConfig) {
			if cc.Mechanism != "SCRAM-SHA-256" || cc.TLS != nil || len(cc.kgoOpts()) != 1 {
				t.Fatalf("%+v", cc)
			}
		}},
		{"JAAS SCRAM", "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n  username=\"carol\" password=\"p w\";\n", func(t *testing.T, cc *commandConfig) {
			if cc.Username != "carol" || cc.Password != "p w" {
				t.Fatalf("%+v", cc)
			}
		}},
		{"JAAS PLAIN implies the mechanism", "security.protocol=SASL_SSL\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"dave\" password=\"x\";\n", func(t *testing.T, cc *commandConfig) {
			if cc.Mechanism != "PLAIN" || cc.Username != "dave" {
				t.Fatalf("%+v", cc)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cc, err := loadCommandConfig(writeFile(t, "client.properties", c.body))
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, cc)
		})
	}
}

func (cc *commandConfig) sdkOptsOrDie(t *testing.T) []any {
	t.Helper()
	opts, err := cc.clientOpts()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]any, len(opts))
	for i := range opts {
		out[i] = opts[i]
	}
	return out
}

func TestCommandConfigRefusals(t *testing.T) {
	tc := newTestCerts(t)
	for _, c := range []struct{ name, body, want string }{
		{"unknown key", "security.protocol=SSL\nssl.truststore.locaton=x\n", "unknown properties ssl.truststore.locaton"},
		{"bad protocol", "security.protocol=TLS\n", `security.protocol "TLS": want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL`},
		{"not key=value", "security.protocol\n", "line 1"},
		{"set twice", "security.protocol=SSL\nsecurity.protocol=SSL\n", "set twice"},
		{"ssl files on PLAINTEXT", "ssl.truststore.location=" + tc.caFile + "\n", "security.protocol is PLAINTEXT"},
		{"missing truststore", "security.protocol=SSL\nssl.truststore.location=/nonexistent/ca.pem\n", "/nonexistent/ca.pem"},
		{"truststore that is no PEM", "security.protocol=SSL\nssl.truststore.location=" + writeFile(t, "x.pem", "hello") + "\n", "no PEM certificate"},
		{"keystore without a key", "security.protocol=SSL\nssl.keystore.location=" + tc.caFile + "\n", "no PEM private key"},
		{"key without keystore", "security.protocol=SSL\nssl.key.location=" + tc.client + "\n", "ssl.key.location is set without ssl.keystore.location"},
		{"JKS", "security.protocol=SSL\nssl.keystore.type=JKS\n", "only PEM"},
		{"no host check", "security.protocol=SSL\nssl.endpoint.identification.algorithm=\n", "always checked"},
		{"SASL keys on SSL", "security.protocol=SSL\nsasl.mechanism=PLAIN\n", "set it to SASL_SSL or SASL_PLAINTEXT"},
		{"GSSAPI by default", "security.protocol=SASL_SSL\nsasl.username=a\nsasl.password=b\n", `sasl.mechanism "GSSAPI"`},
		{"unknown mechanism", "security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\nsasl.username=a\nsasl.password=b\n", `sasl.mechanism "OAUTHBEARER"`},
		{"PLAIN in the clear", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=a\nsasl.password=b\n", "use it with security.protocol=SASL_SSL"},
		{"no password", "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\nsasl.username=a\n", "SASL needs sasl.username and sasl.password"},
		{"bad JAAS", "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config=username=a\n", "sasl.jaas.config: want"},
		{"JAAS Kerberos", "security.protocol=SASL_SSL\nsasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required username=\"a\" password=\"b\";\n", "only ScramLoginModule and PlainLoginModule"},
		{"JAAS and username", "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=a\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\" password=\"b\";\n", "not both"},
		{"JAAS PLAIN with SCRAM", "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\" password=\"b\";\n", "does not go with"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeFile(t, "client.properties", c.body)
			_, err := loadCommandConfig(p)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("error %q: want it to say %q and name %s", err, c.want, p)
			}
		})
	}
	if _, err := loadCommandConfig(filepath.Join(t.TempDir(), "nope.properties")); err == nil || !strings.Contains(err.Error(), "nope.properties") {
		t.Fatalf("missing file: %v", err)
	}
}

// withSecurity sets the command's connection settings for one test.
func withSecurity(t *testing.T, body string) {
	t.Helper()
	cc, err := loadCommandConfig(writeFile(t, "client.properties", body))
	if err != nil {
		t.Fatal(err)
	}
	old := security
	security = cc
	t.Cleanup(func() { security = old })
}

// tlsServer accepts TLS connections with the node keystore of tc and
// holds each open until the test ends.
func tlsServer(t *testing.T, tc *testCerts, auth tls.ClientAuthType) string {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(tc.node, tc.node)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(tc.ca.Cert)
	lis, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: auth})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.(*tls.Conn).Handshake()
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				var b [1]byte
				c.Read(b[:])
			}()
		}
	}()
	return lis.Addr().String()
}

// The bootstrap probe does the TLS handshake: a good configuration
// passes; a certificate problem ends the command at once (no retrying for
// --bootstrap-wait) with a sentence naming the address, what failed and
// the files used.
func TestProbeBootstrapTLS(t *testing.T) {
	tc := newTestCerts(t)
	good := "security.protocol=SSL\nssl.truststore.location=" + tc.caFile + "\nssl.keystore.location=" + tc.client + "\n"
	addr := tlsServer(t, tc, tls.RequireAndVerifyClientCert)

	withSecurity(t, good)
	if got, err := probeBootstrap(context.Background(), []string{addr}, 2*time.Second); err != nil || got[0] != addr {
		t.Fatalf("good configuration: %v %v", got, err)
	}

	other := newTestCerts(t)
	wrongHost := newTestCerts(t, "node9.example")
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	go func() {
		for {
			c, err := plain.Accept()
			if err != nil {
				return
			}
			go func() {
				// Answer, then hold the connection until the client hangs up
				// (at most a second), as a plaintext server would.
				c.Write([]byte("HTTP/1.1 400 no\r\n\r\n"))
				c.SetReadDeadline(time.Now().Add(time.Second))
				io.Copy(io.Discard, c)
				c.Close()
			}()
		}
	}()
	for _, c := range []struct {
		name, body, addr string
		want             []string
	}{
		{"another CA", "security.protocol=SSL\nssl.truststore.location=" + other.caFile + "\nssl.keystore.location=" + tc.client + "\n", addr,
			[]string{addr, "not signed by a CA of the truststore", other.caFile}},
		{"no client certificate", "security.protocol=SSL\nssl.truststore.location=" + tc.caFile + "\n", addr,
			[]string{addr, "refused", "certificate"}},
		{"a client certificate of another CA", "security.protocol=SSL\nssl.truststore.location=" + tc.caFile + "\nssl.keystore.location=" + other.client + "\n", addr,
			[]string{addr, "refused", other.client}},
		{"wrong host", "security.protocol=SSL\nssl.truststore.location=" + wrongHost.caFile + "\nssl.keystore.location=" + wrongHost.client + "\n", tlsServer(t, wrongHost, tls.RequireAndVerifyClientCert),
			[]string{"not for host 127.0.0.1"}},
		{"plaintext listener", good, plain.Addr().String(), []string{"does not speak TLS", "PLAINTEXT"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			withSecurity(t, c.body)
			start := time.Now()
			_, err := probeBootstrap(context.Background(), []string{c.addr}, 10*time.Second)
			if err == nil {
				t.Fatal("probe passed")
			}
			if time.Since(start) > 5*time.Second {
				t.Errorf("took %v: a certificate error must not be retried until --bootstrap-wait ends", time.Since(start))
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
