package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/certs"
	"github.com/strand-io/strand/internal/planted"
)

type fixture struct {
	dir         string
	ca          *certs.CA
	node        *certs.Pair
	ks, ts, crl string
	sec         *Security
	// clk is the store's clock: a test moves it past ReloadInterval
	// instead of sleeping through it.
	clk *clock.Fake
}

func newFixture(t *testing.T, protos string, clientAuth ClientAuth, rules string) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir()}
	var err error
	if f.ca, err = certs.NewCA("strand-test-ca", time.Time{}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if f.node, err = f.ca.Issue(certs.Spec{CommonName: "broker", Hosts: []string{"127.0.0.1", "localhost"}, Server: true, Client: true}); err != nil {
		t.Fatal(err)
	}
	f.ks, f.ts, f.crl = filepath.Join(f.dir, "keystore.pem"), filepath.Join(f.dir, "truststore.pem"), filepath.Join(f.dir, "crl.pem")
	write(t, f.ks, f.node.KeystorePEM())
	write(t, f.ts, f.ca.CertPEM())
	crl, _ := f.ca.CRL()
	write(t, f.crl, crl)
	pm, err := ParseProtocolMap(protos)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseMappingRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	f.sec, err = New(Config{Protocols: pm, KeystoreLocation: f.ks, TruststoreLocation: f.ts, CRLLocation: f.crl, ClientAuth: clientAuth, Mapping: m}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.clk = clock.NewFake(time.Now())
	if st := f.sec.store; st != nil {
		st.mu.Lock()
		st.now, st.lastCheck = f.clk.Now, f.clk.Now()
		st.mu.Unlock()
	}
	return f
}

// write replaces a file and moves its modification time on, so a Store
// sees the change even within the file system's time granularity.
func write(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	mt := time.Now().Add(time.Duration(len(b)) * time.Millisecond)
	if fi, err := os.Stat(path); err == nil && !fi.ModTime().Before(mt) {
		mt = fi.ModTime().Add(time.Second)
	}
	os.Chtimes(path, mt, mt)
}

// serve runs one TLS server on listener and returns its address and the
// outcome of each handshake (the session or the error).
type outcome struct {
	sess auth.Session
	err  error
}

func serve(t *testing.T, sec *Security, listener string) (string, chan outcome) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	out := make(chan outcome, 16)
	cfg := sec.ServerTLS(listener)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tc := tls.Server(c, cfg)
				tc.SetDeadline(time.Now().Add(5 * time.Second))
				if err := tc.Handshake(); err != nil {
					out <- outcome{err: err}
					return
				}
				cs := tc.ConnectionState()
				s, err := sec.Session(listener, c.RemoteAddr(), &cs)
				out <- outcome{sess: s, err: err}
				tc.Write([]byte{1})
			}()
		}
	}()
	return ln.Addr().String(), out
}

func pairCert(t *testing.T, p *certs.Pair) []tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(p.KeystorePEM(), p.KeystorePEM())
	if err != nil {
		t.Fatal(err)
	}
	return []tls.Certificate{c}
}

func (f *fixture) roots() *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(f.ca.CertPEM())
	return p
}

// dial handshakes as a client with certs and reads the server's byte (in
// TLS 1.3 a refused client certificate shows on the first read).
func dial(addr string, roots *x509.CertPool, certs []tls.Certificate) error {
	cfg := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
	if len(certs) > 0 {
		// Sent whatever CAs the server names (crypto/tls would otherwise
		// send none that the server's CAs did not issue).
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &certs[0], nil }
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	_, err = c.Read(b[:])
	return err
}

func TestRequiredClientAuth(t *testing.T) {
	f := newFixture(t, "CLIENT:SSL", ClientAuthRequired, "")
	addr, out := serve(t, f.sec, auth.ListenerClient)
	alice, _ := f.ca.Issue(certs.Spec{CommonName: "alice", Client: true})
	if err := dial(addr, f.roots(), pairCert(t, alice)); err != nil {
		t.Fatalf("alice: %v", err)
	}
	o := <-out
	if o.err != nil || o.sess.Principal != auth.User("CN=alice") || o.sess.Mechanism != "SSL" || !o.sess.TLS || o.sess.Broker || o.sess.Host != "127.0.0.1" || o.sess.Listener != auth.ListenerClient {
		t.Fatalf("alice's session %+v %v", o.sess, o.err)
	}

	refused := func(name string, cs []tls.Certificate) {
		t.Helper()
		if err := dial(addr, f.roots(), cs); err == nil {
			t.Errorf("%s: the client got through", name)
		}
		if o := <-out; o.err == nil {
			t.Errorf("%s: the server took the handshake: %+v", name, o.sess)
		}
	}
	refused("no certificate", nil)
	other, _ := certs.NewCA("other-ca", time.Time{}, time.Time{})
	eve, _ := other.Issue(certs.Spec{CommonName: "alice", Client: true})
	refused("another CA", pairCert(t, eve))
	now := time.Now()
	old, _ := f.ca.Issue(certs.Spec{CommonName: "old", Client: true, NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-time.Hour)})
	refused("expired", pairCert(t, old))

	// Revoked: a new CRL, picked up without a restart.
	mallory, _ := f.ca.Issue(certs.Spec{CommonName: "mallory", Client: true})
	if err := dial(addr, f.roots(), pairCert(t, mallory)); err != nil {
		t.Fatalf("mallory before the CRL: %v", err)
	}
	<-out
	crl, _ := f.ca.CRL(mallory.Cert)
	write(t, f.crl, crl)
	f.clk.Advance(ReloadInterval + 100*time.Millisecond)
	refused("revoked", pairCert(t, mallory))
	// The CRL check is what refused it.
	restore := planted.Set(planted.TLSRevocationIgnored)
	err := dial(addr, f.roots(), pairCert(t, mallory))
	restore()
	if o := <-out; err != nil || o.err != nil {
		t.Fatalf("with the CRL check planted away mallory is still refused: %v %v", err, o.err)
	}
	if err := dial(addr, f.roots(), pairCert(t, alice)); err != nil {
		t.Fatalf("alice after the CRL: %v", err)
	}
	<-out
}

func TestRequestedAndNone(t *testing.T) {
	f := newFixture(t, "CLIENT:SSL,KAFKA:SSL", ClientAuthRequested, "")
	addr, out := serve(t, f.sec, auth.ListenerClient)
	if err := dial(addr, f.roots(), nil); err != nil {
		t.Fatal(err)
	}
	if o := <-out; o.err != nil || o.sess.Principal != auth.Anonymous || o.sess.Mechanism != "" || !o.sess.TLS {
		t.Fatalf("%+v %v", o.sess, o.err)
	}
	// Requested: a certificate given must still verify.
	other, _ := certs.NewCA("other-ca", time.Time{}, time.Time{})
	eve, _ := other.Issue(certs.Spec{CommonName: "eve", Client: true})
	if err := dial(addr, f.roots(), pairCert(t, eve)); err == nil {
		t.Fatal("another CA's certificate got through on requested")
	}
	<-out
}

func TestInterBrokerRequiresCertAndBroker(t *testing.T) {
	f := newFixture(t, "INTER_BROKER:SSL", ClientAuthNone, "")
	addr, out := serve(t, f.sec, auth.ListenerInterBroker)
	if err := dial(addr, f.roots(), nil); err == nil {
		t.Fatal("no certificate on INTER_BROKER got through")
	}
	<-out
	if err := dial(addr, f.roots(), pairCert(t, f.node)); err != nil {
		t.Fatal(err)
	}
	o := <-out
	if o.err != nil || !o.sess.Broker || o.sess.Principal != auth.User("CN=broker") {
		t.Fatalf("%+v %v", o.sess, o.err)
	}
	mallory, _ := f.ca.Issue(certs.Spec{CommonName: "mallory", Client: true})
	if err := dial(addr, f.roots(), pairCert(t, mallory)); err != nil {
		t.Fatal(err)
	}
	o = <-out
	if o.sess.Broker {
		t.Fatal("mallory is a broker")
	}
	c, _ := tls.X509KeyPair(mallory.KeystorePEM(), mallory.KeystorePEM())
	leaf, _ := x509.ParseCertificate(c.Certificate[0])
	if err := f.sec.CheckBroker(tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf}}}); err == nil {
		t.Fatal("CheckBroker let mallory in")
	}
	defer planted.Set(planted.BrokerPrincipalUnchecked)()
	if err := f.sec.CheckBroker(tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf}}}); err != nil {
		t.Fatalf("planted: %v", err)
	}
}

func TestMappedPrincipal(t *testing.T) {
	f := newFixture(t, "CLIENT:SSL", ClientAuthRequired, "RULE:^CN=([a-z]+)$/$1/U")
	addr, out := serve(t, f.sec, auth.ListenerClient)
	alice, _ := f.ca.Issue(certs.Spec{CommonName: "alice", Client: true})
	dial(addr, f.roots(), pairCert(t, alice))
	if o := <-out; o.err != nil || o.sess.Principal != auth.User("ALICE") {
		t.Fatalf("%+v %v", o.sess, o.err)
	}
	odd, _ := f.ca.Issue(certs.Spec{CommonName: "Bob1", Client: true})
	dial(addr, f.roots(), pairCert(t, odd))
	if o := <-out; o.err == nil {
		t.Fatalf("no rule matches, yet a session: %+v", o.sess)
	}
}

func TestKeystoreRotation(t *testing.T) {
	f := newFixture(t, "CLIENT:SSL", ClientAuthNone, "")
	addr, out := serve(t, f.sec, auth.ListenerClient)
	serial := func() string {
		t.Helper()
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: f.roots(), ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		<-out
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	first := serial()
	next, _ := f.ca.Issue(certs.Spec{CommonName: "broker", Hosts: []string{"127.0.0.1"}, Server: true, Client: true})
	write(t, f.ks, next.KeystorePEM())
	f.clk.Advance(ReloadInterval + 100*time.Millisecond)
	if got := serial(); got != next.Cert.SerialNumber.String() || got == first {
		t.Fatalf("served serial %s; the new keystore's is %s (old %s)", got, next.Cert.SerialNumber, first)
	}
	// A broken keystore is not taken: the one in use stays.
	write(t, f.ks, []byte("-----BEGIN CERTIFICATE-----\nbroken\n"))
	f.clk.Advance(ReloadInterval + 100*time.Millisecond)
	if got := serial(); got != next.Cert.SerialNumber.String() {
		t.Fatalf("after a broken keystore the server serves %s", got)
	}
}

func TestClientConfigVerifiesServer(t *testing.T) {
	f := newFixture(t, "INTER_BROKER:SSL", ClientAuthNone, "")
	addr, out := serve(t, f.sec, auth.ListenerInterBroker)
	cc := f.sec.ClientTLS(auth.ListenerInterBroker)
	cc.ServerName = "127.0.0.1"
	c, err := tls.Dial("tcp", addr, cc)
	if err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if o := <-out; !o.sess.Broker {
		t.Fatalf("%+v %v", o.sess, o.err)
	}
	// A server from another CA, or named otherwise, is refused by the node.
	g := newFixture(t, "INTER_BROKER:SSL", ClientAuthNone, "")
	addr2, out2 := serve(t, g.sec, auth.ListenerInterBroker)
	if c, err := tls.Dial("tcp", addr2, cc); err == nil {
		c.Close()
		t.Fatal("a server of another CA was trusted")
	}
	<-out2
	cc2 := f.sec.ClientTLS(auth.ListenerInterBroker)
	cc2.ServerName = "node9.example"
	if c, err := tls.Dial("tcp", addr, cc2); err == nil || !strings.Contains(err.Error(), "node9") {
		if c != nil {
			c.Close()
		}
		t.Fatalf("a wrong server name: %v", err)
	}
	<-out
	if f.sec.ClientTLS(auth.ListenerClient) != nil || f.sec.ServerTLS(auth.ListenerClient) != nil {
		t.Fatal("PLAINTEXT CLIENT has a TLS config")
	}
}

func TestNewNeedsMaterial(t *testing.T) {
	ssl := map[string]Protocol{auth.ListenerClient: SSL}
	if _, err := New(Config{Protocols: ssl}, nil); err == nil {
		t.Fatal("SSL without a keystore started")
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pem")
	write(t, bad, []byte("not PEM"))
	if _, err := New(Config{Protocols: ssl, KeystoreLocation: bad, TruststoreLocation: bad}, nil); err == nil {
		t.Fatal("an unreadable keystore started")
	}
	// PLAINTEXT everywhere needs nothing and has no TLS config.
	s, err := New(Config{}, nil)
	if err != nil || s.ServerTLS(auth.ListenerClient) != nil || s.ClientTLS(auth.ListenerInterBroker) != nil {
		t.Fatalf("%v", err)
	}
	// A gossip key that does not read stops the start.
	if _, err := New(Config{GossipKeyLocation: bad}, nil); err == nil {
		t.Fatal("an unreadable gossip key started")
	}
	// A CRL signed by another CA is refused.
	f := newFixture(t, "CLIENT:SSL", ClientAuthNone, "")
	other, _ := certs.NewCA("other", time.Time{}, time.Time{})
	crl, _ := other.CRL()
	write(t, f.crl, crl)
	if _, err := New(Config{Protocols: ssl, KeystoreLocation: f.ks, TruststoreLocation: f.ts, CRLLocation: f.crl}, nil); err == nil {
		t.Fatal("a CRL from another CA was taken")
	}
}

// TestTruststoreReload: a CA added to the truststore file is trusted on
// the next handshake (after ReloadInterval), without a restart; a server
// gives out no session tickets, so no handshake skips the checks.
func TestTruststoreReload(t *testing.T) {
	f := newFixture(t, "CLIENT:SSL", ClientAuthRequired, "")
	addr, out := serve(t, f.sec, auth.ListenerClient)
	ca2, _ := certs.NewCA("second-ca", time.Time{}, time.Time{})
	carol, _ := ca2.Issue(certs.Spec{CommonName: "carol", Client: true})
	if err := dial(addr, f.roots(), pairCert(t, carol)); err == nil {
		t.Fatal("a certificate of a CA not yet trusted got through")
	}
	<-out
	write(t, f.ts, append(f.ca.CertPEM(), ca2.CertPEM()...))
	f.clk.Advance(ReloadInterval + 100*time.Millisecond)
	if err := dial(addr, f.roots(), pairCert(t, carol)); err != nil {
		t.Fatalf("carol after her CA joined the truststore: %v", err)
	}
	if o := <-out; o.err != nil || o.sess.Principal != auth.User("CN=carol") {
		t.Fatalf("%+v %v", o.sess, o.err)
	}
	if f.sec.ServerTLS(auth.ListenerClient) == nil {
		t.Fatal("no server config")
	}
	c, _ := f.sec.ServerTLS(auth.ListenerClient).GetConfigForClient(&tls.ClientHelloInfo{})
	if !c.SessionTicketsDisabled {
		t.Fatal("session tickets on")
	}
}

// TestClientConfigForHostChecksIP: a node dialling a peer by IP address
// refuses a certificate that does not name that IP (the node certificate
// names 127.0.0.1 and localhost), as it refuses a wrong DNS name. Without
// ForHost crypto/tls leaves the IP out of ConnectionState.ServerName and
// no name is checked.
func TestClientConfigForHostChecksIP(t *testing.T) {
	f := newFixture(t, "INTER_BROKER:SSL", ClientAuthNone, "")
	addr, out := serve(t, f.sec, auth.ListenerInterBroker)
	cc := f.sec.ClientTLS(auth.ListenerInterBroker)
	for _, tc := range []struct {
		host string
		ok   bool
	}{{"127.0.0.1", true}, {"10.9.9.9", false}, {"localhost", true}, {"node9.example", false}} {
		c, err := tls.Dial("tcp", addr, ForHost(cc, tc.host))
		if err == nil {
			var b [1]byte
			c.SetDeadline(time.Now().Add(5 * time.Second))
			_, err = c.Read(b[:])
			c.Close()
		}
		if (err == nil) != tc.ok {
			t.Errorf("dialled as %s: %v, want ok=%v", tc.host, err, tc.ok)
		}
		<-out
	}
}
