package certs

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"testing"
	"time"
)

func pool(t *testing.T, ca *CA) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(ca.CertPEM()) {
		t.Fatal("CA PEM does not parse")
	}
	return p
}

func TestIssueVerifies(t *testing.T) {
	ca, err := NewCA("strand-ca", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ca.Issue(Spec{CommonName: "broker", Hosts: []string{"node1", "127.0.0.1"}, Server: true, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.Cert.Subject.CommonName != "broker" || len(p.Cert.DNSNames) != 1 || p.Cert.DNSNames[0] != "node1" ||
		len(p.Cert.IPAddresses) != 1 || !p.Cert.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) {
		t.Fatalf("subject/SANs: %v %v %v", p.Cert.Subject, p.Cert.DNSNames, p.Cert.IPAddresses)
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := p.Cert.Verify(x509.VerifyOptions{Roots: pool(t, ca), DNSName: "node1", KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Fatalf("usage %v: %v", usage, err)
		}
	}
	// A client-only certificate is not a server certificate.
	c, err := ca.Issue(Spec{CommonName: "alice", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cert.Verify(x509.VerifyOptions{Roots: pool(t, ca), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Fatal("a client certificate verified as a server one")
	}
	// Another CA's certificate does not verify.
	other, _ := NewCA("other", time.Time{}, time.Time{})
	if _, err := c.Cert.Verify(x509.VerifyOptions{Roots: pool(t, other), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Fatal("verified against the wrong CA")
	}
}

func TestExpired(t *testing.T) {
	ca, _ := NewCA("strand-ca", time.Time{}, time.Time{})
	now := time.Now()
	p, err := ca.Issue(Spec{CommonName: "old", Client: true, NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Cert.Verify(x509.VerifyOptions{Roots: pool(t, ca), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Fatal("an expired certificate verified")
	}
}

func TestKeystorePEM(t *testing.T) {
	ca, _ := NewCA("strand-ca", time.Time{}, time.Time{})
	p, _ := ca.Issue(Spec{CommonName: "broker", Server: true})
	ks := p.KeystorePEM()
	// Chain first (leaf, CA), then the key.
	var types []string
	for rest := ks; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		types = append(types, b.Type)
	}
	if len(types) != 3 || types[0] != "CERTIFICATE" || types[1] != "CERTIFICATE" || types[2] != "PRIVATE KEY" {
		t.Fatalf("keystore blocks %v", types)
	}
	cert, err := tls.X509KeyPair(ks, ks)
	if err != nil {
		t.Fatal(err)
	}
	if len(cert.Certificate) != 2 {
		t.Fatalf("chain of %d", len(cert.Certificate))
	}
}

func TestCRL(t *testing.T) {
	ca, _ := NewCA("strand-ca", time.Time{}, time.Time{})
	bad, _ := ca.Issue(Spec{CommonName: "mallory", Client: true})
	good, _ := ca.Issue(Spec{CommonName: "alice", Client: true})
	p, err := ca.CRL(bad.Cert)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(p)
	if b == nil || b.Type != "X509 CRL" {
		t.Fatalf("not a PEM CRL: %q", p)
	}
	crl, err := x509.ParseRevocationList(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := crl.CheckSignatureFrom(ca.Cert); err != nil {
		t.Fatal(err)
	}
	if len(crl.RevokedCertificateEntries) != 1 || crl.RevokedCertificateEntries[0].SerialNumber.Cmp(bad.Cert.SerialNumber) != 0 {
		t.Fatalf("revoked %v", crl.RevokedCertificateEntries)
	}
	if good.Cert.SerialNumber.Cmp(bad.Cert.SerialNumber) == 0 {
		t.Fatal("two certificates share a serial")
	}
	p2, _ := ca.CRL()
	b2, _ := pem.Decode(p2)
	crl2, _ := x509.ParseRevocationList(b2.Bytes)
	if crl2.Number.Cmp(crl.Number) <= 0 || len(crl2.RevokedCertificateEntries) != 0 {
		t.Fatalf("second CRL number %v, entries %d", crl2.Number, len(crl2.RevokedCertificateEntries))
	}
}

func TestHandshake(t *testing.T) {
	ca, _ := NewCA("strand-ca", time.Time{}, time.Time{})
	srv, _ := ca.Issue(Spec{CommonName: "broker", Hosts: []string{"127.0.0.1"}, Server: true, Client: true})
	cli, _ := ca.Issue(Spec{CommonName: "alice", Client: true})
	sc, err := tls.X509KeyPair(srv.KeystorePEM(), srv.KeystorePEM())
	if err != nil {
		t.Fatal(err)
	}
	cc, err := tls.X509KeyPair(cli.CertPEM, cli.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{sc}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool(t, ca)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		if err := tc.Handshake(); err != nil {
			got <- err.Error()
			return
		}
		got <- tc.ConnectionState().PeerCertificates[0].Subject.CommonName
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool(t, ca), Certificates: []tls.Certificate{cc}, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if s := <-got; s != "alice" {
		t.Fatalf("server saw %q", s)
	}
}
