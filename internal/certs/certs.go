// Package certs makes the X.509 material a TLS cluster needs: a
// certificate authority, certificates it signs for nodes and clients, and
// revocation lists. Keys are ECDSA P-256. Everything comes out as PEM, in
// the shapes Kafka's PEM key and trust stores take (a keystore is the
// certificate chain followed by the private key). Tests, the test cluster
// and `strand certs` use it; the running node only reads files.
package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"sync"
	"time"
)

// CA is a self-signed certificate authority and its key.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	der  []byte

	mu     sync.Mutex
	crlNum int64
}

// Spec describes a certificate to issue.
type Spec struct {
	// CommonName is the subject's CN ("broker", "alice").
	CommonName string
	// Hosts are the subject alternative names: entries that parse as IP
	// addresses become IP SANs, the rest DNS names.
	Hosts []string
	// Server and Client choose the extended key usages (both may be set;
	// a node certificate is both, since a node dials its peers).
	Server, Client bool
	// NotBefore and NotAfter bound the validity; zero values mean one
	// hour ago and a year from now.
	NotBefore, NotAfter time.Time
}

// Pair is an issued certificate and its private key.
type Pair struct {
	Cert    *x509.Certificate
	CertPEM []byte // the leaf certificate
	KeyPEM  []byte // PKCS#8 private key
	chain   []byte // leaf then the issuing CA
}

// NewCA makes a self-signed CA valid from notBefore to notAfter (zero
// values: an hour ago, ten years from now).
func NewCA(commonName string, notBefore, notAfter time.Time) (*CA, error) {
	if commonName == "" {
		return nil, errors.New("certs: a CA needs a common name")
	}
	notBefore, notAfter = window(notBefore, notAfter, 10*365*24*time.Hour)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("certs: CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, key: key, der: der}, nil
}

// CertPEM is the CA certificate in PEM: the truststore.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.der})
}

// Issue signs a certificate for spec.
func (ca *CA) Issue(spec Spec) (*Pair, error) {
	if spec.CommonName == "" {
		return nil, errors.New("certs: a certificate needs a common name")
	}
	notBefore, notAfter := window(spec.NotBefore, spec.NotAfter, 365*24*time.Hour)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: spec.CommonName},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	if spec.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if spec.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	for _, h := range spec.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("certs: %s: %w", spec.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return &Pair{
		Cert:    cert,
		CertPEM: certPEM,
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		chain:   append(append([]byte{}, certPEM...), ca.CertPEM()...),
	}, nil
}

// ChainPEM is the leaf certificate followed by the CA that signed it.
func (p *Pair) ChainPEM() []byte { return bytes.Clone(p.chain) }

// KeystorePEM is the certificate chain followed by the private key, the
// one-file PEM keystore ssl.keystore.location names.
func (p *Pair) KeystorePEM() []byte {
	out := p.ChainPEM()
	return append(out, p.KeyPEM...)
}

// CRL is a PEM certificate revocation list signed by the CA, listing
// revoked (which may be none), valid from now for a week. Each call gets
// a higher CRL number.
func (ca *CA) CRL(revoked ...*x509.Certificate) ([]byte, error) {
	ca.mu.Lock()
	ca.crlNum++
	num := ca.crlNum
	ca.mu.Unlock()
	now := time.Now()
	tmpl := &x509.RevocationList{
		Number:     big.NewInt(num),
		ThisUpdate: now.Add(-time.Minute),
		NextUpdate: now.Add(7 * 24 * time.Hour),
	}
	for _, c := range revoked {
		if c == nil {
			continue
		}
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries, x509.RevocationListEntry{
			SerialNumber:   c.SerialNumber,
			RevocationTime: now.Add(-time.Minute),
		})
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, ca.Cert, ca.key)
	if err != nil {
		return nil, fmt.Errorf("certs: CRL: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}), nil
}

func window(notBefore, notAfter time.Time, life time.Duration) (time.Time, time.Time) {
	now := time.Now()
	if notBefore.IsZero() {
		notBefore = now.Add(-time.Hour)
	}
	if notAfter.IsZero() {
		notAfter = now.Add(life)
	}
	return notBefore, notAfter
}

func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}
