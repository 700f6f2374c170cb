package client

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"strings"
)

// WithTLS makes every connection the client opens a TLS connection with
// this configuration (security.protocol=SSL): the brokers' certificates
// are checked against cfg.RootCAs (the system's roots when nil), and
// cfg.Certificates, when set, is the client's own certificate for brokers
// that ask for one (ssl.client.auth=required). The server name checked is
// the host of the address dialled (a bootstrap server or a broker's
// advertised address) unless cfg.ServerName names one. LoadTLS builds a
// cfg from PEM files. Without WithTLS the connections are plaintext.
func WithTLS(cfg *tls.Config) Opt {
	return func(c *config) {
		if cfg == nil {
			c.tls = nil
			return
		}
		c.tls = cfg.Clone()
	}
}

// LoadTLS reads PEM files into a client TLS configuration, as Kafka's
// clients read theirs: caFile is the truststore (ssl.truststore.location:
// one or more CA certificates; "" for the system's roots), certFile the
// keystore (ssl.keystore.location: the client's certificate chain, leaf
// first, then its private key, Kafka's PEM keystore shape; "" for no client
// certificate) and keyFile the private key when it is in a file of its own
// (ssl.key.location; "" when certFile holds it, and keyFile may also be
// the same file as certFile). Encrypted private keys are not read.
func LoadTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("strand: truststore: %w", err)
		}
		pool := x509.NewCertPool()
		n := 0
		for rest := b; ; {
			var blk *pem.Block
			blk, rest = pem.Decode(rest)
			if blk == nil {
				break
			}
			if blk.Type != "CERTIFICATE" {
				continue
			}
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				return nil, fmt.Errorf("strand: truststore %s: certificate %d: %w", caFile, n+1, err)
			}
			pool.AddCert(c)
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("strand: truststore %s holds no PEM certificate", caFile)
		}
		cfg.RootCAs = pool
	}
	if certFile == "" {
		if keyFile != "" {
			return nil, fmt.Errorf("strand: a private key (%s) without a certificate: set the keystore too", keyFile)
		}
		return cfg, nil
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("strand: keystore: %w", err)
	}
	keyPEM, keyFrom := certPEM, certFile
	if keyFile != "" && keyFile != certFile {
		if keyPEM, err = os.ReadFile(keyFile); err != nil {
			return nil, fmt.Errorf("strand: private key: %w", err)
		}
		keyFrom = keyFile
	}
	if !hasPEM(certPEM, func(t string) bool { return t == "CERTIFICATE" }) {
		return nil, fmt.Errorf("strand: keystore %s holds no PEM certificate", certFile)
	}
	if !hasPEM(keyPEM, func(t string) bool { return t == "PRIVATE KEY" || strings.HasSuffix(t, " PRIVATE KEY") }) {
		if keyFile == "" {
			return nil, fmt.Errorf("strand: keystore %s holds no PEM private key after its certificates (give the key's file as well)", certFile)
		}
		return nil, fmt.Errorf("strand: %s holds no PEM private key", keyFrom)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("strand: keystore %s with the key of %s: %w", certFile, keyFrom, err)
	}
	if pair.Leaf == nil && len(pair.Certificate) > 0 {
		pair.Leaf, _ = x509.ParseCertificate(pair.Certificate[0])
	}
	cfg.Certificates = []tls.Certificate{pair}
	return cfg, nil
}

func hasPEM(b []byte, want func(string) bool) bool {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return false
		}
		if want(blk.Type) {
			return true
		}
	}
}
