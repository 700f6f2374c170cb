// Package tlsconf is a node's transport security: the Kafka-named
// settings (listener.security.protocol.map, ssl.keystore.location,
// ssl.truststore.location, ssl.client.auth, ssl.crl.location,
// ssl.principal.mapping.rules, inter.broker.principals), the key and trust
// material read from PEM files and reloaded when the files change, the
// *tls.Config of each listener and of the node's own outgoing
// connections, and the session a verified peer certificate proves.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/planted"
)

// Protocol is a listener's security protocol.
type Protocol string

// Kafka's security protocols.
const (
	Plaintext     Protocol = "PLAINTEXT"
	SSL           Protocol = "SSL"
	SASLPlaintext Protocol = "SASL_PLAINTEXT"
	SASLSSL       Protocol = "SASL_SSL"
)

// TLS reports whether the protocol encrypts.
func (p Protocol) TLS() bool { return p == SSL || p == SASLSSL }

// SASL reports whether the protocol authenticates with SASL.
func (p Protocol) SASL() bool { return p == SASLPlaintext || p == SASLSSL }

// ClientAuth is ssl.client.auth.
type ClientAuth string

// ssl.client.auth values.
const (
	ClientAuthNone      ClientAuth = "none"
	ClientAuthRequested ClientAuth = "requested"
	ClientAuthRequired  ClientAuth = "required"
)

// ParseClientAuth reads ssl.client.auth.
func ParseClientAuth(s string) (ClientAuth, error) {
	switch ClientAuth(strings.ToLower(strings.TrimSpace(s))) {
	case "", ClientAuthNone:
		return ClientAuthNone, nil
	case ClientAuthRequested:
		return ClientAuthRequested, nil
	case ClientAuthRequired:
		return ClientAuthRequired, nil
	}
	return "", fmt.Errorf("ssl.client.auth %q: want none, requested or required", s)
}

// listeners are the listener names the protocol map may name.
var listeners = []string{auth.ListenerClient, auth.ListenerExternal, auth.ListenerKafka, auth.ListenerInterBroker, auth.ListenerController, auth.ListenerHTTP}

// ParseProtocolMap reads listener.security.protocol.map:
// "CLIENT:SSL,INTER_BROKER:SSL". INTER_BROKER and CONTROLLER may be only
// PLAINTEXT or SSL; HTTP has no SASL either.
func ParseProtocolMap(s string) (map[string]Protocol, error) {
	out := map[string]Protocol{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, proto, ok := strings.Cut(item, ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok {
			return nil, fmt.Errorf("listener.security.protocol.map: %q: want LISTENER:PROTOCOL", item)
		}
		if !slices.Contains(listeners, name) {
			return nil, fmt.Errorf("listener.security.protocol.map: unknown listener %q (want one of %s)", name, strings.Join(listeners, ", "))
		}
		p := Protocol(proto)
		switch p {
		case Plaintext, SSL:
		case SASLPlaintext, SASLSSL:
			if name == auth.ListenerInterBroker || name == auth.ListenerController || name == auth.ListenerHTTP {
				return nil, fmt.Errorf("listener.security.protocol.map: %s may be PLAINTEXT or SSL, not %s", name, p)
			}
		default:
			return nil, fmt.Errorf("listener.security.protocol.map: %s: unknown protocol %q (want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", name, proto)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("listener.security.protocol.map: %s named twice", name)
		}
		out[name] = p
	}
	return out, nil
}

// ParsePrincipals reads inter.broker.principals: a comma- or
// semicolon-separated list of Type:Name ("User:CN=broker"). Since a
// distinguished name holds commas, an item that does not start with a
// Type: prefix continues the one before it.
func ParsePrincipals(s string) ([]auth.Principal, error) {
	var out []auth.Principal
	var parts []string
	for _, semi := range strings.Split(s, ";") {
		for _, p := range strings.Split(semi, ",") {
			p = strings.TrimSpace(p)
			if p == "" {
				continue
			}
			if t, _, ok := strings.Cut(p, ":"); ok && !strings.Contains(t, "=") {
				parts = append(parts, p)
			} else if len(parts) > 0 {
				parts[len(parts)-1] += "," + p
			} else {
				return nil, fmt.Errorf("inter.broker.principals: %q: want Type:Name, such as User:CN=broker", p)
			}
		}
	}
	for _, p := range parts {
		pr, err := auth.ParsePrincipal(p)
		if err != nil {
			return nil, fmt.Errorf("inter.broker.principals: %w", err)
		}
		out = append(out, pr)
	}
	return out, nil
}

// DefaultInterBrokerPrincipal is inter.broker.principals' default.
var DefaultInterBrokerPrincipal = auth.User("CN=broker")

// Config is the parsed settings.
type Config struct {
	// Protocols is listener.security.protocol.map; a listener not in it
	// is PLAINTEXT.
	Protocols map[string]Protocol
	// KeystoreLocation is ssl.keystore.location: a PEM file with the
	// certificate chain, then the private key.
	KeystoreLocation string
	// TruststoreLocation is ssl.truststore.location: PEM CA certificates.
	TruststoreLocation string
	// CRLLocation is ssl.crl.location: an optional PEM CRL.
	CRLLocation string
	// ClientAuth is ssl.client.auth for the client listeners (CLIENT,
	// EXTERNAL, KAFKA, HTTP); INTER_BROKER and CONTROLLER always require
	// a certificate.
	ClientAuth ClientAuth
	// Mapping is ssl.principal.mapping.rules (nil: DEFAULT).
	Mapping *Mapper
	// InterBrokerPrincipals is inter.broker.principals (nil: User:CN=broker).
	InterBrokerPrincipals []auth.Principal
	// GossipKeyLocation is gossip.encryption.key.location: a file with a
	// base64 AES key (16, 24 or 32 bytes) memberlist encrypts with.
	GossipKeyLocation string
}

// Protocol is the listener's protocol (PLAINTEXT when not named).
func (c *Config) Protocol(listener string) Protocol {
	if p, ok := c.Protocols[listener]; ok {
		return p
	}
	return Plaintext
}

// AnyTLS reports whether some listener uses TLS.
func (c *Config) AnyTLS() bool {
	for _, p := range c.Protocols {
		if p.TLS() {
			return true
		}
	}
	return false
}

// clientAuth is the client authentication the listener asks for.
func (c *Config) clientAuth(listener string) ClientAuth {
	if listener == auth.ListenerInterBroker || listener == auth.ListenerController {
		return ClientAuthRequired
	}
	// KIP-684: the broker-wide ssl.client.auth does not apply to a SASL_SSL
	// listener (SASL proves the principal; Kafka reads only a
	// listener-prefixed setting there, which Strand does not have).
	if c.Protocol(listener) == SASLSSL {
		return ClientAuthNone
	}
	if c.ClientAuth == "" {
		return ClientAuthNone
	}
	return c.ClientAuth
}

// Security is a node's transport security at run time.
type Security struct {
	cfg   Config
	store *Store // nil when no listener uses TLS

	// principals caches the principal of each peer certificate seen
	// lately (every RPC on a connection brings the same one), bounded.
	pmu        sync.Mutex
	principals map[*x509.Certificate]auth.Principal

	gossipKey []byte
}

// GossipKey is the key read from gossip.encryption.key.location (nil:
// gossip is not encrypted).
func (s *Security) GossipKey() []byte {
	if s == nil {
		return nil
	}
	return s.gossipKey
}

// principalCacheSize bounds Security.principals; the map is emptied when
// it is full.
const principalCacheSize = 4096

// New loads the key and trust material if some listener uses TLS (an
// error if it does not load) and returns the node's Security.
func New(cfg Config, lg *slog.Logger) (*Security, error) {
	if cfg.Mapping == nil {
		cfg.Mapping, _ = ParseMappingRules("")
	}
	if cfg.InterBrokerPrincipals == nil {
		cfg.InterBrokerPrincipals = []auth.Principal{DefaultInterBrokerPrincipal}
	}
	s := &Security{cfg: cfg}
	if cfg.GossipKeyLocation != "" {
		key, err := ReadGossipKey(cfg.GossipKeyLocation)
		if err != nil {
			return nil, err
		}
		s.gossipKey = key
	}
	if cfg.AnyTLS() {
		if cfg.KeystoreLocation == "" || cfg.TruststoreLocation == "" {
			return nil, errors.New("a listener uses SSL: ssl.keystore.location and ssl.truststore.location are required")
		}
		st, err := NewStore(cfg.KeystoreLocation, cfg.TruststoreLocation, cfg.CRLLocation, lg)
		if err != nil {
			return nil, err
		}
		s.store = st
	}
	return s, nil
}

// Config returns the settings.
func (s *Security) Config() Config { return s.cfg }

// Protocol is the listener's protocol (a nil Security: PLAINTEXT).
func (s *Security) Protocol(listener string) Protocol {
	if s == nil {
		return Plaintext
	}
	return s.cfg.Protocol(listener)
}

// ServerTLS is the listener's server *tls.Config, nil if it does not use
// TLS. nextProtos are the ALPN protocols it offers ("h2" for gRPC).
func (s *Security) ServerTLS(listener string, nextProtos ...string) *tls.Config {
	if s == nil || s.store == nil || !s.Protocol(listener).TLS() {
		return nil
	}
	return s.store.ServerConfig(s.cfg.clientAuth(listener), nextProtos)
}

// ClientTLS is the *tls.Config of this node's connections to a peer's
// listener, nil if that listener does not use TLS: its keystore as client
// certificate, its truststore (and CRL) to verify the peer's.
func (s *Security) ClientTLS(listener string, nextProtos ...string) *tls.Config {
	if s == nil || s.store == nil || !s.Protocol(listener).TLS() {
		return nil
	}
	return s.store.ClientConfig(nextProtos)
}

// Session is the session of a connection to listener from remote: the
// principal the verified peer certificate maps to (Mechanism "SSL"), else
// Anonymous (always, for a nil Security). An error means the certificate maps to no principal (the
// connection fails authentication, as Kafka's).
func (s *Security) Session(listener string, remote net.Addr, cs *tls.ConnectionState) (auth.Session, error) {
	sess := auth.Session{Principal: auth.Anonymous, Listener: listener, Host: hostOf(remote)}
	if cs == nil {
		return sess, nil
	}
	sess.TLS = true
	if s == nil || len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return sess, nil
	}
	p, err := s.cachedPrincipal(cs.PeerCertificates[0])
	if err != nil {
		return sess, err
	}
	sess.Principal, sess.Mechanism = p, "SSL"
	sess.Broker = s.IsBroker(p)
	return sess, nil
}

func (s *Security) cachedPrincipal(cert *x509.Certificate) (auth.Principal, error) {
	s.pmu.Lock()
	p, ok := s.principals[cert]
	s.pmu.Unlock()
	if ok {
		return p, nil
	}
	p, err := s.Principal(cert)
	if err != nil {
		return p, err
	}
	s.pmu.Lock()
	if s.principals == nil || len(s.principals) >= principalCacheSize {
		s.principals = make(map[*x509.Certificate]auth.Principal)
	}
	s.principals[cert] = p
	s.pmu.Unlock()
	return p, nil
}

// Principal maps cert's subject through ssl.principal.mapping.rules.
func (s *Security) Principal(cert *x509.Certificate) (auth.Principal, error) {
	dn, err := SubjectDN(cert)
	if err != nil {
		return auth.Principal{}, err
	}
	m := s.cfg.Mapping
	if m == nil {
		m, _ = ParseMappingRules("")
	}
	name, err := m.Map(dn)
	if err != nil {
		return auth.Principal{}, err
	}
	return auth.User(name), nil
}

// IsBroker reports whether p is one of inter.broker.principals.
func (s *Security) IsBroker(p auth.Principal) bool {
	return slices.Contains(s.cfg.InterBrokerPrincipals, p)
}

// CheckBroker is the broker-principal check of an SSL INTER_BROKER or
// CONTROLLER connection: nil when cs's verified certificate maps to one
// of inter.broker.principals.
func (s *Security) CheckBroker(cs tls.ConnectionState) error {
	if len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return errors.New("no verified client certificate")
	}
	p, err := s.Principal(cs.PeerCertificates[0])
	if err != nil {
		return err
	}
	if !s.IsBroker(p) && !planted.On(planted.BrokerPrincipalUnchecked) {
		return fmt.Errorf("principal %s is not one of inter.broker.principals", p)
	}
	return nil
}

func hostOf(a net.Addr) string {
	if a == nil {
		return ""
	}
	if h, _, err := net.SplitHostPort(a.String()); err == nil {
		return h
	}
	return a.String()
}

// ReadGossipKey reads gossip.encryption.key.location: a base64 AES key of
// 16, 24 or 32 bytes.
func ReadGossipKey(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gossip.encryption.key.location: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		return nil, fmt.Errorf("gossip.encryption.key.location %s: not base64: %w", path, err)
	}
	switch len(key) {
	case 16, 24, 32:
		return key, nil
	}
	return nil, fmt.Errorf("gossip.encryption.key.location %s: a %d-byte key; want 16, 24 or 32 bytes (AES-128, -192, -256)", path, len(key))
}
