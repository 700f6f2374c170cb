package testcluster

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/certs"
	"github.com/strand-io/strand/internal/tlsconf"
	"github.com/strand-io/strand/node"
)

// TLSOptions start the cluster with TLS on every listener:
// CLIENT, EXTERNAL, KAFKA, INTER_BROKER, CONTROLLER and HTTP are SSL,
// with a test CA's certificates written to a temp dir; gossip is
// encrypted with a random key.
type TLSOptions struct {
	// ClientAuth is ssl.client.auth (default required).
	ClientAuth tlsconf.ClientAuth
	// Protocols overrides listeners' protocols (KAFKA: SASL_SSL, …).
	Protocols map[string]tlsconf.Protocol
	// MappingRules is ssl.principal.mapping.rules ("" DEFAULT).
	MappingRules string
	// ClientCN is the subject CN of the certificate ClientOpts presents
	// (default "client"; "-" presents none).
	ClientCN string
}

// ClusterTLS is a TLS cluster's certificate material.
type ClusterTLS struct {
	CA *certs.CA
	// Dir holds the PEM files: truststore.pem (the CA), crl.pem, and
	// node<id>-keystore.pem per node.
	Dir            string
	TruststoreFile string
	CRLFile        string
	// GossipKeyFile holds the key gossip is encrypted with.
	GossipKeyFile string
	opts          TLSOptions

	mu      sync.Mutex
	revoked []*x509.Certificate
}

func newClusterTLS(t testing.TB, base string, o TLSOptions) *ClusterTLS {
	t.Helper()
	if o.ClientAuth == "" {
		o.ClientAuth = tlsconf.ClientAuthRequired
	}
	if o.ClientCN == "" {
		o.ClientCN = "client"
	}
	ca, err := certs.NewCA("strand-testcluster-ca", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	ct := &ClusterTLS{CA: ca, Dir: filepath.Join(base, "tls"), opts: o}
	if err := os.MkdirAll(ct.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ct.TruststoreFile = filepath.Join(ct.Dir, "truststore.pem")
	ct.CRLFile = filepath.Join(ct.Dir, "crl.pem")
	if err := os.WriteFile(ct.TruststoreFile, ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ct.Revoke(); err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	ct.GossipKeyFile = filepath.Join(ct.Dir, "gossip.key")
	if err := os.WriteFile(ct.GossipKeyFile, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return ct
}

// Revoke writes a CRL listing these certificates and those revoked
// before (nodes take it within tlsconf.ReloadInterval).
func (ct *ClusterTLS) Revoke(revoked ...*x509.Certificate) error {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	ct.revoked = append(ct.revoked, revoked...)
	crl, err := ct.CA.CRL(ct.revoked...)
	if err != nil {
		return err
	}
	return WriteFileAtomic(ct.CRLFile, crl)
}

// WriteFileAtomic replaces path with b through a rename, and moves its
// modification time on by at least a second so a reloading reader sees
// the change whatever the file system's time granularity.
func WriteFileAtomic(path string, b []byte) error {
	var prev time.Time
	if fi, err := os.Stat(path); err == nil {
		prev = fi.ModTime()
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if !prev.IsZero() {
		mt := time.Now()
		if !mt.After(prev.Add(time.Second)) {
			mt = prev.Add(time.Second)
		}
		return os.Chtimes(path, mt, mt)
	}
	return nil
}

// configure gives a node its keystore and the cluster's security settings.
func (ct *ClusterTLS) configure(t testing.TB, id int32, cfg *node.Config) {
	t.Helper()
	pair, err := ct.CA.Issue(certs.Spec{CommonName: "broker", Hosts: []string{"127.0.0.1", "localhost", "::1"}, Server: true, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	ks := filepath.Join(ct.Dir, fmt.Sprintf("node%d-keystore.pem", id))
	if err := WriteFileAtomic(ks, pair.KeystorePEM()); err != nil {
		t.Fatal(err)
	}
	protos := map[string]tlsconf.Protocol{}
	for _, l := range []string{auth.ListenerClient, auth.ListenerExternal, auth.ListenerKafka, auth.ListenerInterBroker, auth.ListenerController, auth.ListenerHTTP} {
		protos[l] = tlsconf.SSL
	}
	for l, p := range ct.opts.Protocols {
		protos[l] = p
	}
	m, err := tlsconf.ParseMappingRules(ct.opts.MappingRules)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Security.Config = tlsconf.Config{
		Protocols: protos, KeystoreLocation: ks, TruststoreLocation: ct.TruststoreFile, CRLLocation: ct.CRLFile,
		ClientAuth: ct.opts.ClientAuth, Mapping: m, GossipKeyLocation: ct.GossipKeyFile,
	}
}

// KeystoreFile is node id's keystore.
func (ct *ClusterTLS) KeystoreFile(id int32) string {
	return filepath.Join(ct.Dir, fmt.Sprintf("node%d-keystore.pem", id))
}

// Roots is a pool holding the cluster's CA.
func (ct *ClusterTLS) Roots() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ct.CA.Cert)
	return p
}

// Client issues a client certificate with subject CN=cn.
func (ct *ClusterTLS) Client(t testing.TB, cn string) *certs.Pair {
	t.Helper()
	p, err := ct.CA.Issue(certs.Spec{CommonName: cn, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ClientConfig is a client *tls.Config trusting the cluster's CA and
// presenting pair (nil: no certificate).
func (ct *ClusterTLS) ClientConfig(t testing.TB, pair *certs.Pair) *tls.Config {
	t.Helper()
	c := &tls.Config{RootCAs: ct.Roots(), MinVersion: tls.VersionTLS12}
	if pair != nil {
		kp, err := tls.X509KeyPair(pair.KeystorePEM(), pair.KeystorePEM())
		if err != nil {
			t.Fatal(err)
		}
		c.Certificates = []tls.Certificate{kp}
	}
	return c
}

// clientOpts is what ClientOpts adds on a TLS cluster: gRPC over TLS with
// the configured client certificate.
func (ct *ClusterTLS) clientOpts(t testing.TB) []client.Opt {
	var pair *certs.Pair
	if ct.opts.ClientCN != "-" {
		pair = ct.Client(t, ct.opts.ClientCN)
	}
	return []client.Opt{client.DialOptions(grpc.WithTransportCredentials(credentials.NewTLS(ct.ClientConfig(t, pair))))}
}
