package main

// Real cluster on real time: real TLS (and SASL) handshakes over TCP; MemNet's
// listeners serve no TLS.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strand-io/strand/testkit/testcluster"
)

// TestCLIOverTLS: against a cluster with TLS on every listener and client
// certificates required, the binary's commands connect with
// --command-config (or $STRAND_COMMAND_CONFIG) through the SDK, franz-go
// (--protocol kafka) and bare gRPC (health, features); without it a
// command ends at once saying the listener speaks TLS.
func TestCLIOverTLS(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{TLS: &testcluster.TLSOptions{}})
	dir := t.TempDir()
	ks := filepath.Join(dir, "admin.pem")
	if err := os.WriteFile(ks, c.TLS.Client(t, "admin").KeystorePEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	props := writeFile(t, "admin.properties", "security.protocol=SSL\nssl.truststore.location="+c.TLS.TruststoreFile+"\nssl.keystore.location="+ks+"\n")
	b, cc := "--bootstrap="+strings.Join(c.Bootstrap(), ","), "--command-config="+props
	kb := "--kafka-bootstrap=" + strings.Join(c.KafkaAddrs(), ",")

	mustContain(t, run(t, "", "topics", "create", "tls", "--partitions", "2", b, cc), "Created topic tls.")
	run(t, "a\nb\n", "produce", "tls", b, cc)
	run(t, "c\nd\n", "produce", "tls", "--protocol", "kafka", kb, b, cc)
	for _, door := range [][]string{nil, {"--protocol", "kafka", kb}} {
		out := run(t, "", append([]string{"consume", "tls", "--from-beginning", "--max-records", "4", "--timeout", "10s", b, cc}, door...)...)
		for _, v := range []string{"a\n", "b\n", "c\n", "d\n"} {
			if !strings.Contains(out, v) {
				t.Fatalf("consume %v: %q lacks %q", door, out, v)
			}
		}
	}
	mustContain(t, run(t, "", "cluster", "describe", b, cc), "ActiveController")
	mustContain(t, run(t, "", "features", "describe", b, cc), "transaction.version")
	run(t, "", "health", "--addr", c.Bootstrap()[0], cc)
	// The environment variable instead of the flag.
	out, errOut, _, err := runEnv(t, []string{"STRAND_COMMAND_CONFIG=" + props}, "topics", "list", b)
	if err != nil || !strings.Contains(out, "tls") {
		t.Fatalf("STRAND_COMMAND_CONFIG: %v\n%s%s", err, out, errOut)
	}
	// No settings: refused at once, saying what to do.
	_, errOut, took, err := runEnv(t, nil, "topics", "list", b)
	if err == nil || !strings.Contains(errOut, "speaks TLS") || !strings.Contains(errOut, "--command-config") {
		t.Fatalf("plaintext against TLS: %v\n%s", err, errOut)
	}
	if took.Seconds() > 10 {
		t.Fatalf("plaintext against TLS took %v to fail", took)
	}
}
