package main

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strand-io/strand/internal/tlsconf"
)

func runCerts(t *testing.T, args ...string) (string, error) {
	t.Helper()
	c := certsCmd()
	var out bytes.Buffer
	c.SetOut(&out)
	c.SetErr(&out)
	c.SetArgs(args)
	err := c.Execute()
	return out.String(), err
}

func readPEMCerts(t *testing.T, path string) []*x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return out
		}
		if blk.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, c)
		}
	}
}

// strand certs writes a CA, node keystores (CN=broker, the node's name
// and the common hosts as SANs, server and client use) and client
// keystores that verify against it and load as the CLI loads them, a
// 32-byte gossip key, and --command-config files; it refuses to replace
// the CA without --force.
func TestCertsCommand(t *testing.T) {
	out := filepath.Join(t.TempDir(), "certs")
	msg, err := runCerts(t, "--out", out, "--hosts", "node1,node2", "--hosts", "localhost,127.0.0.1", "--clients", "admin,verify", "--days", "30")
	if err != nil {
		t.Fatalf("%v\n%s", err, msg)
	}
	roots := x509.NewCertPool()
	cas := readPEMCerts(t, filepath.Join(out, "ca.pem"))
	if len(cas) != 1 || !cas[0].IsCA {
		t.Fatalf("ca.pem: %d certificates", len(cas))
	}
	roots.AddCert(cas[0])
	key, err := os.ReadFile(filepath.Join(out, "gossip.key"))
	if err != nil {
		t.Fatal(err)
	}
	if k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(key))); err != nil || len(k) != 32 {
		t.Fatalf("gossip.key: %d bytes, %v", len(k), err)
	}
	for _, node := range []string{"node1", "node2"} {
		dir := filepath.Join(out, node)
		chain := readPEMCerts(t, filepath.Join(dir, "keystore.pem"))
		if len(chain) != 2 || !chain[1].Equal(cas[0]) {
			t.Fatalf("%s keystore: want the leaf then the CA, got %d certificates", node, len(chain))
		}
		leaf := chain[0]
		if leaf.Subject.String() != "CN=broker" {
			t.Errorf("%s subject %s, want CN=broker (principal User:CN=broker)", node, leaf.Subject)
		}
		if !slices.Equal(leaf.DNSNames, []string{node, "localhost"}) || len(leaf.IPAddresses) != 1 || leaf.IPAddresses[0].String() != "127.0.0.1" {
			t.Errorf("%s SANs: %v %v", node, leaf.DNSNames, leaf.IPAddresses)
		}
		for _, use := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			for _, host := range []string{node, "localhost", "127.0.0.1"} {
				if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, KeyUsages: []x509.ExtKeyUsage{use}}); err != nil {
					t.Errorf("%s for %s (usage %v): %v", node, host, use, err)
				}
			}
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "node3"}); err == nil {
			t.Errorf("%s's certificate is good for node3 too", node)
		}
		if d := leaf.NotAfter.Sub(leaf.NotBefore).Hours() / 24; d < 29 || d > 31 {
			t.Errorf("%s valid for %.1f days, want 30", node, d)
		}
		if !bytes.Equal(mustRead(t, filepath.Join(dir, "ca.pem")), mustRead(t, filepath.Join(out, "ca.pem"))) ||
			!bytes.Equal(mustRead(t, filepath.Join(dir, "gossip.key")), key) {
			t.Errorf("%s's directory does not hold the CA and the gossip key", node)
		}
		// The node reads them as the server's settings name them.
		if _, err := tlsconf.ReadGossipKey(filepath.Join(dir, "gossip.key")); err != nil {
			t.Errorf("%s gossip.key: %v", node, err)
		}
		if _, err := tlsconf.NewStore(filepath.Join(dir, "keystore.pem"), filepath.Join(dir, "ca.pem"), "", slog.New(slog.DiscardHandler)); err != nil {
			t.Errorf("%s: the node's TLS store does not load its files: %v", node, err)
		}
		props := string(mustRead(t, filepath.Join(dir, "client.properties")))
		for _, want := range []string{"security.protocol=SSL", "ssl.truststore.location=/etc/strand/tls/ca.pem", "ssl.keystore.location=/etc/strand/tls/keystore.pem"} {
			if !strings.Contains(props, want) {
				t.Errorf("%s/client.properties lacks %q:\n%s", node, want, props)
			}
		}
		// Readable by the container's user, who does not own the files.
		if st, err := os.Stat(filepath.Join(dir, "keystore.pem")); err != nil || st.Mode().Perm()&0o004 == 0 {
			t.Errorf("%s keystore mode %v, want readable by others (the container's uid 10001)", node, st.Mode())
		}
	}
	if _, err := os.Stat(filepath.Join(out, "localhost")); err == nil {
		t.Error("localhost got a node directory")
	}
	for _, c := range []string{"admin", "verify"} {
		cc, err := loadCommandConfig(filepath.Join(out, c+".properties"))
		if err != nil {
			t.Fatalf("%s.properties does not load: %v", c, err)
		}
		if cc.Protocol != protoSSL || len(cc.TLS.Certificates) != 1 {
			t.Fatalf("%s.properties: %+v", c, cc)
		}
		leaf, _ := x509.ParseCertificate(cc.TLS.Certificates[0].Certificate[0])
		if leaf.Subject.String() != "CN="+c {
			t.Errorf("%s: subject %s", c, leaf.Subject)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: cc.TLS.RootCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s does not verify against the truststore its properties name: %v", c, err)
		}
		if st, _ := os.Stat(filepath.Join(out, c+".pem")); st.Mode().Perm() != 0o600 {
			t.Errorf("%s.pem mode %v, want 0600", c, st.Mode().Perm())
		}
	}

	// A second run keeps the CA unless told.
	if msg, err := runCerts(t, "--out", out, "--hosts", "node1"); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("overwrote the CA without --force: %v %s", err, msg)
	}
	if got := readPEMCerts(t, filepath.Join(out, "ca.pem")); !got[0].Equal(cas[0]) {
		t.Fatal("the refused run changed ca.pem")
	}
	if _, err := runCerts(t, "--out", out, "--hosts", "node1,127.0.0.1", "--force"); err != nil {
		t.Fatal(err)
	}
	if got := readPEMCerts(t, filepath.Join(out, "ca.pem")); got[0].Equal(cas[0]) {
		t.Fatal("--force kept the old CA")
	}
}

func TestCertsCommandRefusals(t *testing.T) {
	out := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--hosts", "localhost,127.0.0.1"}, "names no node"},
		{[]string{"--hosts", "node1", "--days", "0"}, "--days 0"},
		{[]string{"--hosts", "node1", "--clients", "a/b"}, "plain name"},
		{[]string{"--hosts", "../x"}, "not a host name"},
		{[]string{"--hosts", "node1", "--mount-dir", "tls"}, "absolute path"},
	} {
		_, err := runCerts(t, append([]string{"--out", out}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
