package client_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/strand-io/strand/client"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// testPKI is a CA and certificates it signed, made for one test.
type testPKI struct {
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPEM  []byte
}

func newTestPKI(t *testing.T, name string) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &testPKI{caCert: c, caKey: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a leaf's certificate PEM and its key's PEM.
func (p *testPKI) issue(t *testing.T, cn string, hosts ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

func writeFile(t *testing.T, dir, name string, parts ...[]byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	var b []byte
	for _, x := range parts {
		b = append(b, x...)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func checkLoaded(t *testing.T, cfg *tls.Config, p *testPKI, cn string) {
	t.Helper()
	if cfg.RootCAs == nil {
		t.Fatal("no RootCAs from the truststore")
	}
	if len(cfg.Certificates) != 1 {
		t.Fatalf("%d certificates, want 1", len(cfg.Certificates))
	}
	leaf, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if leaf.Subject.CommonName != cn {
		t.Fatalf("leaf CN %q, want %q", leaf.Subject.CommonName, cn)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: cfg.RootCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("the leaf does not verify against the loaded truststore: %v", err)
	}
	if cfg.Certificates[0].PrivateKey == nil {
		t.Fatal("no private key loaded")
	}
}

// Kafka's PEM keystore shape: the chain then the key in one file, read
// with the key's file unset or naming the same file.
func TestLoadTLSCombinedPEM(t *testing.T) {
	dir := t.TempDir()
	p := newTestPKI(t, "test-ca")
	cert, key := p.issue(t, "alice")
	ca := writeFile(t, dir, "ca.pem", p.caPEM)
	ks := writeFile(t, dir, "alice.pem", cert, key)
	for _, keyFile := range []string{"", ks} {
		cfg, err := client.LoadTLS(ca, ks, keyFile)
		if err != nil {
			t.Fatalf("LoadTLS(keyFile=%q): %v", keyFile, err)
		}
		checkLoaded(t, cfg, p, "alice")
	}
}

func TestLoadTLSSeparateFiles(t *testing.T) {
	dir := t.TempDir()
	p := newTestPKI(t, "test-ca")
	cert, key := p.issue(t, "bob")
	other := newTestPKI(t, "other-ca")
	// A truststore of two CAs: either one verifies.
	ca := writeFile(t, dir, "ca.pem", other.caPEM, p.caPEM)
	cfg, err := client.LoadTLS(ca, writeFile(t, dir, "bob.crt", cert), writeFile(t, dir, "bob.key", key))
	if err != nil {
		t.Fatal(err)
	}
	checkLoaded(t, cfg, p, "bob")

	// A truststore alone: no client certificate.
	cfg, err = client.LoadTLS(ca, "", "")
	if err != nil || cfg.RootCAs == nil || len(cfg.Certificates) != 0 {
		t.Fatalf("truststore only: %v, %+v", err, cfg)
	}
}

func TestLoadTLSErrors(t *testing.T) {
	dir := t.TempDir()
	p := newTestPKI(t, "test-ca")
	cert, key := p.issue(t, "carol")
	_, otherKey := p.issue(t, "dave")
	ca := writeFile(t, dir, "ca.pem", p.caPEM)
	certOnly := writeFile(t, dir, "cert-only.pem", cert)
	for _, tc := range []struct {
		name          string
		ca, cert, key string
		want          []string
	}{
		{"missing truststore", filepath.Join(dir, "nope.pem"), "", "", []string{"truststore", "nope.pem"}},
		{"truststore without certificates", writeFile(t, dir, "junk.pem", []byte("not pem\n")), "", "", []string{"truststore", "junk.pem", "no PEM certificate"}},
		{"missing keystore", ca, filepath.Join(dir, "gone.pem"), "", []string{"keystore", "gone.pem"}},
		{"keystore without its key", ca, certOnly, "", []string{"cert-only.pem", "no PEM private key"}},
		{"key of another certificate", ca, certOnly, writeFile(t, dir, "dave.key", otherKey), []string{"cert-only.pem", "dave.key"}},
		{"key without a certificate", ca, "", writeFile(t, dir, "k.pem", key), []string{"without a certificate"}},
		{"keystore that is a key", ca, writeFile(t, dir, "key-only.pem", key), "", []string{"key-only.pem", "no PEM certificate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.LoadTLS(tc.ca, tc.cert, tc.key)
			if err == nil {
				t.Fatal("LoadTLS accepted it")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// metadataServer answers Metadata with itself as the one broker and
// remembers the client certificate's subject it saw.
type metadataServer struct {
	pb.UnimplementedMetadataServer
	addr string
	seen chan string
}

func (s *metadataServer) Metadata(ctx context.Context, _ *pb.MetadataRequest) (*pb.MetadataResponse, error) {
	cn := "(no client certificate)"
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
			cn = ti.State.PeerCertificates[0].Subject.CommonName
		}
	}
	select {
	case s.seen <- cn:
	default:
	}
	return &pb.MetadataResponse{ClusterId: "tls-test", ControllerId: 1, Brokers: []*pb.BrokerInfo{{NodeId: 1, Address: s.addr}}}, nil
}

// WithTLS: the SDK's connections are TLS ones, with the client's
// certificate, to a server that requires one; without it, or trusting
// another CA, the call fails.
func TestWithTLSConnects(t *testing.T) {
	dir := t.TempDir()
	p := newTestPKI(t, "test-ca")
	srvCert, srvKey := p.issue(t, "broker", "127.0.0.1", "localhost")
	pair, err := tls.X509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(p.caCert)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ms := &metadataServer{addr: lis.Addr().String(), seen: make(chan string, 8)}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})))
	pb.RegisterMetadataServer(srv, ms)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)

	cert, key := p.issue(t, "alice")
	ca := writeFile(t, dir, "ca.pem", p.caPEM)
	cfg, err := client.LoadTLS(ca, writeFile(t, dir, "alice.pem", cert, key), "")
	if err != nil {
		t.Fatal(err)
	}
	call := func(opts ...client.Opt) error {
		adm, err := client.NewAdmin(append([]client.Opt{client.Bootstrap(ms.addr), client.RequestTimeout(2 * time.Second)}, opts...)...)
		if err != nil {
			return err
		}
		defer adm.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err = adm.Metadata(ctx, false)
		return err
	}
	if err := call(client.WithTLS(cfg)); err != nil {
		t.Fatalf("with TLS: %v", err)
	}
	if cn := <-ms.seen; cn != "alice" {
		t.Fatalf("the server saw %q, want alice's certificate", cn)
	}
	if err := call(); err == nil {
		t.Fatal("a plaintext client got an answer from a TLS server")
	}
	other := newTestPKI(t, "other-ca")
	wrong, err := client.LoadTLS(writeFile(t, dir, "other.pem", other.caPEM), filepath.Join(dir, "alice.pem"), "")
	if err != nil {
		t.Fatal(err)
	}
	err = call(client.WithTLS(wrong))
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("trusting another CA: %v, want a certificate error", err)
	}
}
