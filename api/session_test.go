package api

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/certs"
	"github.com/strand-io/strand/internal/tlsconf"
	"github.com/strand-io/strand/internal/wire"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// sessionServer serves health on a loopback listener with the session
// interceptors of listener; each call's session is sent on seen.
func sessionServer(t *testing.T, sec *tlsconf.Security, listener string) (string, chan auth.Session) {
	t.Helper()
	seen := make(chan auth.Session, 8)
	record := func(ctx context.Context) {
		s, ok := auth.FromContext(ctx)
		if !ok {
			s = auth.Session{Listener: "none"}
		}
		seen <- s
	}
	opts := SessionInterceptors(sec, listener)
	if c := sec.ServerTLS(listener, "h2"); c != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(c)))
	}
	opts = append(opts,
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			record(ctx)
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			record(ss.Context())
			return h(srv, ss)
		}))
	s := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(s, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return ln.Addr().String(), seen
}

func healthCalls(t *testing.T, addr string, cfg *tls.Config) (unary, stream error) {
	t.Helper()
	creds := insecure.NewCredentials()
	if cfg != nil {
		creds = credentials.NewTLS(cfg)
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, wire.ErrorCodeDialOptions()...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hc := healthpb.NewHealthClient(cc)
	_, unary = hc.Check(ctx, &healthpb.HealthCheckRequest{})
	w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = w.Recv()
	}
	return unary, err
}

func TestSessionPlaintext(t *testing.T) {
	sec, err := tlsconf.New(tlsconf.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, seen := sessionServer(t, sec, auth.ListenerClient)
	if u, s := healthCalls(t, addr, nil); u != nil || s != nil {
		t.Fatal(u, s)
	}
	for range 2 { // the unary call, then the stream
		s := <-seen
		if s.Principal != auth.Anonymous || s.Host != "127.0.0.1" || s.Listener != auth.ListenerClient || s.TLS || s.Mechanism != "" || s.Broker {
			t.Fatalf("session %+v", s)
		}
	}
}

type pki struct {
	ca  *certs.CA
	sec *tlsconf.Security
}

func newPKI(t *testing.T, protos string) *pki {
	t.Helper()
	ca, err := certs.NewCA("api-test-ca", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	node, _ := ca.Issue(certs.Spec{CommonName: "broker", Hosts: []string{"127.0.0.1"}, Server: true, Client: true})
	dir := t.TempDir()
	ks, ts := filepath.Join(dir, "ks.pem"), filepath.Join(dir, "ts.pem")
	os.WriteFile(ks, node.KeystorePEM(), 0o600)
	os.WriteFile(ts, ca.CertPEM(), 0o600)
	pm, err := tlsconf.ParseProtocolMap(protos)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := tlsconf.New(tlsconf.Config{Protocols: pm, KeystoreLocation: ks, TruststoreLocation: ts, ClientAuth: tlsconf.ClientAuthRequested}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &pki{ca: ca, sec: sec}
}

func (p *pki) client(t *testing.T, cn string) *tls.Config {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(p.ca.Cert)
	c := &tls.Config{RootCAs: roots}
	if cn != "" {
		pair, _ := p.ca.Issue(certs.Spec{CommonName: cn, Client: true})
		kp, err := tls.X509KeyPair(pair.KeystorePEM(), pair.KeystorePEM())
		if err != nil {
			t.Fatal(err)
		}
		c.Certificates = []tls.Certificate{kp}
	}
	return c
}

func TestSessionFromClientCertificate(t *testing.T) {
	p := newPKI(t, "CLIENT:SSL")
	addr, seen := sessionServer(t, p.sec, auth.ListenerClient)
	if u, s := healthCalls(t, addr, p.client(t, "alice")); u != nil || s != nil {
		t.Fatal(u, s)
	}
	for range 2 {
		s := <-seen
		if s.Principal != auth.User("CN=alice") || s.Mechanism != "SSL" || !s.TLS || s.Broker || s.Listener != auth.ListenerClient {
			t.Fatalf("session %+v", s)
		}
	}
	// ssl.client.auth=requested: no certificate is an anonymous TLS session.
	if u, _ := healthCalls(t, addr, p.client(t, "")); u != nil {
		t.Fatal(u)
	}
	if s := <-seen; s.Principal != auth.Anonymous || !s.TLS || s.Mechanism != "" {
		t.Fatalf("session %+v", s)
	}
}

func TestInterBrokerRefusesNonBrokerPrincipal(t *testing.T) {
	p := newPKI(t, "INTER_BROKER:SSL")
	addr, seen := sessionServer(t, p.sec, auth.ListenerInterBroker)
	u, s := healthCalls(t, addr, p.client(t, "mallory"))
	for _, err := range []error{u, s} {
		if status.Code(err) != codes.PermissionDenied || errs.CodeOf(err) != pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED {
			t.Fatalf("mallory: %v (code %v)", err, errs.CodeOf(err))
		}
	}
	if len(seen) != 0 {
		t.Fatal("mallory's call reached the handler")
	}
	if u, s := healthCalls(t, addr, p.client(t, "broker")); u != nil || s != nil {
		t.Fatal(u, s)
	}
	if s := <-seen; !s.Broker || s.Principal != auth.User("CN=broker") {
		t.Fatalf("session %+v", s)
	}
}
