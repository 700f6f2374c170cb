package judges

// Real cluster on real time: the judges are Kafka clients from outside this code
// (librdkafka, kcat, kafka-python, sarama, franz-go) that dial real TCP sockets,
// here with real TLS and SASL handshakes.

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/internal/auth"
	iscram "github.com/strand-io/strand/internal/scram"
	"github.com/strand-io/strand/internal/tlsconf"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testcluster"
)

// The judges over SASL_SSL. A Target is a cluster as the Kafka
// clients of these tests reach it: over plaintext, or over TLS with a SASL
// user whose every right comes from ACLs.

// Target is a test cluster and how a Kafka client authenticates to it.
type Target struct {
	*testcluster.Cluster
	// TLS, when set, is the client side of the Kafka listener's TLS
	// (trusting the cluster's CA, no client certificate); CAFile is that
	// CA as PEM, for clients that read it from a file.
	TLS    *tls.Config
	CAFile string
	// User, Password and Mechanism (SCRAM-SHA-256, SCRAM-SHA-512 or
	// PLAIN) are the SASL credentials; User "" is no SASL.
	User, Password, Mechanism string
}

// Plain is a cluster whose Kafka listener is PLAINTEXT, with no
// authorizer.
func Plain(c *testcluster.Cluster) *Target { return &Target{Cluster: c} }

// As is the target with other SASL credentials.
func (t *Target) As(user, password, mechanism string) *Target {
	o := *t
	o.User, o.Password, o.Mechanism = user, password, mechanism
	return &o
}

// saslMechanism is franz-go's side of the target's SASL (nil: none).
func (t *Target) saslMechanism() sasl.Mechanism {
	switch t.Mechanism {
	case "":
		return nil
	case iscram.NameSHA256:
		return scram.Auth{User: t.User, Pass: t.Password}.AsSha256Mechanism()
	case iscram.NameSHA512:
		return scram.Auth{User: t.User, Pass: t.Password}.AsSha512Mechanism()
	case "PLAIN":
		return plain.Auth{User: t.User, Pass: t.Password}.AsMechanism()
	}
	panic("judges: unknown SASL mechanism " + t.Mechanism)
}

// Librdkafka is the target's security settings as librdkafka names them,
// KEY=VALUE (none for a plaintext target).
func (t *Target) Librdkafka() []string {
	var out []string
	switch {
	case t.TLS != nil && t.User != "":
		out = append(out, "security.protocol=SASL_SSL")
	case t.TLS != nil:
		out = append(out, "security.protocol=SSL")
	case t.User != "":
		out = append(out, "security.protocol=SASL_PLAINTEXT")
	}
	if t.TLS != nil {
		// librdkafka 2.x checks the broker's name (here its IP) against
		// the certificate by default; said here so an older one does too.
		out = append(out, "ssl.ca.location="+t.CAFile, "ssl.endpoint.identification.algorithm=https")
	}
	if t.User != "" {
		out = append(out, "sasl.mechanisms="+t.Mechanism, "sasl.username="+t.User, "sasl.password="+t.Password)
	}
	return out
}

// dialTLS completes a dial with the target's TLS handshake. franz-go's
// DialTLSConfig cannot be combined with the fault network's Dialer, so the
// dialer does what DialTLSConfig would: the handshake, naming the host
// dialled.
func (t *Target) dialTLS(ctx context.Context, conn net.Conn, addr string) (net.Conn, error) {
	if t.TLS == nil {
		return conn, nil
	}
	cfg := t.TLS.Clone()
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			conn.Close()
			return nil, err
		}
		cfg.ServerName = host
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}

// The SASL_SSL cluster's user and the ones the short cases use.
const (
	// SASLUser holds the ACLs the tests grant (SCRAM-SHA-512 and -256).
	SASLUser     = "judge"
	SASLPassword = "judge-secret"
	// NoACLUser authenticates (SCRAM-SHA-512) and is granted nothing.
	NoACLUser     = "nobody"
	NoACLPassword = "nobody-secret"
)

// StartSASLCluster starts three nodes with TLS on every listener and the
// Kafka listener SASL_SSL (SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN
// enabled), the standard authorizer on with the gRPC test client's
// certificate (User:CN=client) the only super user. Through the SDK it
// creates SASLUser's and NoACLUser's SCRAM credentials, and grants
// SASLUser, for each prefix, Read and Write on the topics, Read on the
// groups and Write on the transactional ids named with it (PREFIXED
// ACLs); Describe comes from those, as Kafka implies it. It returns once
// every broker's metadata holds them, as the target of SASLUser with
// SCRAM-SHA-512.
//
// The Kafka listener is SASL_SSL, which asks for no client certificate
// (KIP-684): SASL names the Kafka clients; the gRPC test client presents
// its certificate on the SSL client listener.
func StartSASLCluster(t testing.TB, prefixes ...string) *Target {
	t.Helper()
	c := testcluster.New(t, testcluster.Options{
		Nodes: 3,
		TLS: &testcluster.TLSOptions{
			ClientAuth: tlsconf.ClientAuthRequested,
			Protocols:  map[string]tlsconf.Protocol{auth.ListenerKafka: tlsconf.SASLSSL},
		},
		Mutate: func(_ int32, cfg *node.Config) {
			cfg.SASL.EnabledMechanisms = []string{iscram.NameSHA256, iscram.NameSHA512, "PLAIN"}
			cfg.Authorizer = node.AuthorizerConfig{ClassName: authz.StandardClassName,
				SuperUsers: []auth.Principal{auth.User("CN=client")}}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm, err := client.NewAdmin(c.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	res, err := adm.AlterUserScramCredentials(ctx, []client.ScramUpsertion{
		{User: SASLUser, Mechanism: iscram.NameSHA512, Password: SASLPassword},
		{User: NoACLUser, Mechanism: iscram.NameSHA512, Password: NoACLPassword},
	}, nil)
	if err != nil || res[SASLUser] != nil || res[NoACLUser] != nil {
		t.Fatalf("AlterUserScramCredentials: %v %v", res, err)
	}
	// A second mechanism for the same user, in a request of its own (a
	// user is named once per request).
	res, err = adm.AlterUserScramCredentials(ctx, []client.ScramUpsertion{
		{User: SASLUser, Mechanism: iscram.NameSHA256, Password: SASLPassword},
	}, nil)
	if err != nil || res[SASLUser] != nil {
		t.Fatalf("AlterUserScramCredentials (SHA-256): %v %v", res, err)
	}
	principal := auth.User(SASLUser).String()
	var acls []client.ACLBinding
	grant := func(typ client.ACLResourceType, prefix string, op client.ACLOperation) {
		acls = append(acls, client.ACLBinding{ResourceType: typ, ResourceName: prefix, PatternType: client.ACLPatternPrefixed,
			Principal: principal, Host: "*", Operation: op, Permission: client.ACLPermissionAllow})
	}
	for _, p := range prefixes {
		grant(client.ACLResourceTopic, p, client.ACLOpRead)
		grant(client.ACLResourceTopic, p, client.ACLOpWrite)
		grant(client.ACLResourceGroup, p, client.ACLOpRead)
		grant(client.ACLResourceTransactionalID, p, client.ACLOpWrite)
	}
	errs, err := adm.CreateACLs(ctx, acls)
	if err != nil {
		t.Fatalf("CreateACLs: %v", err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("CreateACLs %+v: %v", acls[i], e)
		}
	}
	c.Eventually(20*time.Second, "the SCRAM credentials and ACLs on every broker", func() bool {
		for _, m := range c.Running() {
			if m.Node.Repl == nil {
				continue
			}
			img := m.Node.Repl.Image()
			if len(img.Scram[SASLUser]) != 2 || len(img.Scram[NoACLUser]) != 1 || img.ACLs.Len() != len(acls) {
				return false
			}
		}
		return true
	})
	return &Target{
		Cluster:   c,
		TLS:       c.TLS.ClientConfig(t, nil),
		CAFile:    c.TLS.TruststoreFile,
		User:      SASLUser,
		Password:  SASLPassword,
		Mechanism: iscram.NameSHA512,
	}
}
