package tlsconf

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"sync"
	"time"

	"github.com/strand-io/strand/internal/planted"
)

// ReloadInterval is how often, at most, a Store looks at its files again.
const ReloadInterval = time.Second

// Store holds the keystore, truststore and CRL read from their files and
// reads them again, on a handshake at most once per ReloadInterval, when
// a file's size or modification time changed. New files that do not parse
// are logged and the material in use is kept.
type Store struct {
	keystore, truststore, crl string
	lg                        *slog.Logger

	mu        sync.Mutex
	cur       *material
	stamps    [3]stamp
	lastCheck time.Time
	now       func() time.Time
}

type stamp struct {
	size int64
	mod  time.Time
}

// material is one consistent load of the three files.
type material struct {
	cert    tls.Certificate
	roots   *x509.CertPool
	revoked map[string]bool // issuer DER subject + serial
	crl     bool
}

// NewStore reads the files (crl may be ""); an error if they do not load.
func NewStore(keystore, truststore, crl string, lg *slog.Logger) (*Store, error) {
	if lg == nil {
		lg = slog.Default()
	}
	s := &Store{keystore: keystore, truststore: truststore, crl: crl, lg: lg, now: time.Now}
	s.stamps = s.stat()
	m, err := s.load()
	if err != nil {
		return nil, err
	}
	s.cur = m
	s.lastCheck = s.now()
	return s, nil
}

func (s *Store) stat() [3]stamp {
	var out [3]stamp
	for i, p := range []string{s.keystore, s.truststore, s.crl} {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil {
			out[i] = stamp{size: fi.Size(), mod: fi.ModTime()}
		}
	}
	return out
}

func (s *Store) load() (*material, error) {
	ks, err := os.ReadFile(s.keystore)
	if err != nil {
		return nil, fmt.Errorf("ssl.keystore.location: %w", err)
	}
	cert, err := tls.X509KeyPair(ks, ks)
	if err != nil {
		return nil, fmt.Errorf("ssl.keystore.location %s: %w", s.keystore, err)
	}
	ts, err := os.ReadFile(s.truststore)
	if err != nil {
		return nil, fmt.Errorf("ssl.truststore.location: %w", err)
	}
	roots := x509.NewCertPool()
	var cas []*x509.Certificate
	for rest := ts; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("ssl.truststore.location %s: %w", s.truststore, err)
		}
		roots.AddCert(c)
		cas = append(cas, c)
	}
	if len(cas) == 0 {
		return nil, fmt.Errorf("ssl.truststore.location %s: no PEM certificate in it", s.truststore)
	}
	m := &material{cert: cert, roots: roots}
	if s.crl != "" {
		raw, err := os.ReadFile(s.crl)
		if err != nil {
			return nil, fmt.Errorf("ssl.crl.location: %w", err)
		}
		m.revoked, err = parseCRLs(raw, cas)
		if err != nil {
			return nil, fmt.Errorf("ssl.crl.location %s: %w", s.crl, err)
		}
		m.crl = true
	}
	return m, nil
}

// parseCRLs reads PEM CRLs, each signed by one of cas.
func parseCRLs(raw []byte, cas []*x509.Certificate) (map[string]bool, error) {
	out := map[string]bool{}
	n := 0
	for rest := raw; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "X509 CRL" {
			continue
		}
		crl, err := x509.ParseRevocationList(b.Bytes)
		if err != nil {
			return nil, err
		}
		signed := false
		for _, ca := range cas {
			if bytes.Equal(ca.RawSubject, crl.RawIssuer) && crl.CheckSignatureFrom(ca) == nil {
				signed = true
				break
			}
		}
		if !signed {
			return nil, errors.New("a CRL not signed by a truststore CA")
		}
		for _, e := range crl.RevokedCertificateEntries {
			out[revKey(crl.RawIssuer, e.SerialNumber)] = true
		}
		n++
	}
	if n == 0 {
		return nil, errors.New("no PEM CRL in it")
	}
	return out, nil
}

func revKey(issuer []byte, serial *big.Int) string {
	return string(issuer) + "/" + serial.String()
}

// current returns the material, reading the files again if one changed
// and the last look is ReloadInterval old.
func (s *Store) current() *material {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if now.Sub(s.lastCheck) < ReloadInterval {
		return s.cur
	}
	s.lastCheck = now
	st := s.stat()
	if st == s.stamps {
		return s.cur
	}
	s.stamps = st
	m, err := s.load()
	if err != nil {
		s.lg.Error("TLS material changed on disk but does not load; keeping the material in use", "err", err)
		return s.cur
	}
	s.lg.Info("TLS material reloaded", "keystore", s.keystore, "truststore", s.truststore, "crl", s.crl)
	s.cur = m
	return m
}

// checkRevoked fails if a certificate of the verified chains is on the CRL.
func (m *material) checkRevoked(chains [][]*x509.Certificate) error {
	if !m.crl || planted.On(planted.TLSRevocationIgnored) {
		return nil
	}
	for _, ch := range chains {
		for _, c := range ch {
			if m.revoked[revKey(c.RawIssuer, c.SerialNumber)] {
				return fmt.Errorf("certificate %q (serial %s) is revoked", c.Subject.String(), c.SerialNumber)
			}
		}
	}
	return nil
}

// ServerConfig is a server *tls.Config taking the material in use at each
// handshake.
func (s *Store) ServerConfig(ca ClientAuth, nextProtos []string) *tls.Config {
	np := append([]string(nil), nextProtos...)
	// One config per load of the material, shared by the handshakes
	// until the files change (crypto/tls does not modify it).
	var mu sync.Mutex
	var built *material
	var cached *tls.Config
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: np,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := s.current()
			mu.Lock()
			defer mu.Unlock()
			if built == m {
				return cached, nil
			}
			c := &tls.Config{
				MinVersion:   tls.VersionTLS12,
				NextProtos:   np,
				Certificates: []tls.Certificate{m.cert},
				ClientCAs:    m.roots,
				// No resumed sessions: a resumed handshake skips the
				// checks below, and would let a certificate revoked (or a
				// CA removed from the truststore) since keep connecting.
				SessionTicketsDisabled: true,
				VerifyPeerCertificate: func(_ [][]byte, chains [][]*x509.Certificate) error {
					return m.checkRevoked(chains)
				},
			}
			switch ca {
			case ClientAuthRequired:
				c.ClientAuth = tls.RequireAndVerifyClientCert
			case ClientAuthRequested:
				c.ClientAuth = tls.VerifyClientCertIfGiven
			default:
				c.ClientAuth = tls.NoClientCert
			}
			built, cached = m, c
			return c, nil
		},
	}
}

// ClientConfig is a client *tls.Config for this node's outgoing
// connections: the keystore's certificate as client certificate, the
// server's chain verified against the truststore (and the CRL) and its
// name against the dialled host, all with the material in use at each
// handshake.
func (s *Store) ClientConfig(nextProtos []string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: append([]string(nil), nextProtos...),
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			m := s.current()
			return &m.cert, nil
		},
		// The roots change with the truststore file, so the chain is
		// verified here rather than by crypto/tls against fixed RootCAs.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			m := s.current()
			return VerifyServer(cs, m.roots, m.checkRevoked)
		},
	}
}

// VerifyServer verifies a server's chain against roots and its name
// against cs.ServerName, then runs extra over the verified chains.
func VerifyServer(cs tls.ConnectionState, roots *x509.CertPool, extra func([][]*x509.Certificate) error) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the server sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	chains, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots: roots, Intermediates: inter, DNSName: cs.ServerName,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return err
	}
	if extra != nil {
		return extra(chains)
	}
	return nil
}

// ForHost is cfg (a ClientConfig) for a connection dialled to host: the
// server's certificate is checked against host even when host is an IP
// address. crypto/tls leaves an IP out of the handshake's server name, so
// ConnectionState.ServerName is empty for it and VerifyServer alone would
// check no name at all; any certificate of a truststore CA with server
// usage would then pass for any node.
func ForHost(cfg *tls.Config, host string) *tls.Config {
	c := cfg.Clone()
	if c.ServerName == "" {
		c.ServerName = host
	}
	name := c.ServerName
	if verify := c.VerifyConnection; verify != nil {
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			if cs.ServerName == "" {
				cs.ServerName = name
			}
			return verify(cs)
		}
	}
	return c
}
