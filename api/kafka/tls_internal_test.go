package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/certs"
	"github.com/strand-io/strand/internal/tlsconf"
	"github.com/strand-io/strand/request"
	"github.com/strand-io/strand/testkit/wait"
)

// TestTLSSessionInHandlerContext: on a KAFKA:SSL listener the TLS
// handshake runs per connection, and every handler call's context carries
// the connection's session (the principal of the client certificate); a
// plaintext client and one without a certificate (ssl.client.auth
// required) get no answer.
func TestTLSSessionInHandlerContext(t *testing.T) {
	ca, _ := certs.NewCA("kafka-test-ca", time.Time{}, time.Time{})
	node, _ := ca.Issue(certs.Spec{CommonName: "broker", Hosts: []string{"127.0.0.1"}, Server: true, Client: true})
	dir := t.TempDir()
	ks, ts := filepath.Join(dir, "ks.pem"), filepath.Join(dir, "ts.pem")
	os.WriteFile(ks, node.KeystorePEM(), 0o600)
	os.WriteFile(ts, ca.CertPEM(), 0o600)
	sec, err := tlsconf.New(tlsconf.Config{Protocols: map[string]tlsconf.Protocol{auth.ListenerKafka: tlsconf.SSL},
		KeystoreLocation: ks, TruststoreLocation: ts, ClientAuth: tlsconf.ClientAuthRequired}, nil)
	if err != nil {
		t.Fatal(err)
	}

	seen := make(chan auth.Session, 4)
	key := int16(kmsg.ApiVersions)
	orig := apis[key]
	apis[key] = api{name: orig.name, min: orig.min, max: orig.max, fn: func(ctx context.Context, c *Conn, req kmsg.Request) (kmsg.Response, error) {
		s, _ := auth.FromContext(ctx)
		seen <- s
		return kmsg.NewPtrApiVersionsResponse(), nil
	}}
	t.Cleanup(func() { apis[key] = orig })

	srv := NewServer(Config{Handler: &request.Handler{}, Security: sec})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	alice, _ := ca.Issue(certs.Spec{CommonName: "alice", Client: true})
	kp, _ := tls.X509KeyPair(alice.KeystorePEM(), alice.KeystorePEM())

	// apiVersions sends ApiVersions v0 on conn and reads the answer's
	// correlation id.
	apiVersions := func(conn net.Conn) error {
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		body := binary.BigEndian.AppendUint16(nil, uint16(key))
		body = binary.BigEndian.AppendUint16(body, 0)
		body = binary.BigEndian.AppendUint32(body, 7)
		body = binary.BigEndian.AppendUint16(body, 1)
		body = append(body, 'c')
		frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
		if _, err := conn.Write(append(frame, body...)); err != nil {
			return err
		}
		var hdr [8]byte
		if _, err := io.ReadFull(conn, hdr[:]); err != nil {
			return err
		}
		if corr := binary.BigEndian.Uint32(hdr[4:]); corr != 7 {
			t.Fatalf("correlation id %d", corr)
		}
		return nil
	}
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", Certificates: []tls.Certificate{kp}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := apiVersions(conn); err != nil {
		t.Fatal(err)
	}
	s := <-seen
	if s.Principal != auth.User("CN=alice") || s.Mechanism != "SSL" || !s.TLS || s.Listener != auth.ListenerKafka || s.Host != "127.0.0.1" {
		t.Fatalf("session %+v", s)
	}

	noCert, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	if err == nil {
		if err := apiVersions(noCert); err == nil {
			t.Fatal("a client without a certificate was answered")
		}
		noCert.Close()
	}
	plain, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := apiVersions(plain); err == nil {
		t.Fatal("a plaintext client was answered on a TLS listener")
	}
	if len(seen) != 0 {
		t.Fatal("a refused connection reached a handler")
	}
	_ = wait.Until(5*time.Second, "both refused connections counted", func() bool { return srv.metrics.Closed("tls_handshake") >= 2 })
	if got := srv.metrics.Closed("tls_handshake"); got != 2 {
		t.Fatalf("strand_kafka_connections_closed_total{reason=tls_handshake} = %v, want 2", got)
	}
}
