package tlsconf

import (
	"crypto/x509/pkix"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/certs"
)

func TestMappingRules(t *testing.T) {
	cases := []struct{ rules, dn, want string }{
		{"", "CN=alice,O=strand", "CN=alice,O=strand"},
		{"DEFAULT", "CN=alice,O=strand", "CN=alice,O=strand"},
		{"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=kafka-server1,OU=ServiceUsers,O=Org,C=US", "kafka-server1"},
		{"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=duke,OU=JavaSoft,O=Sun Microsystems", "CN=duke,OU=JavaSoft,O=Sun Microsystems"},
		{"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L", "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=CA,C=US", "duke@javasoft"},
		{"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/U", "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=CA,C=US", "DUKE@JAVASOFT"},
		{"RULE:^CN=([^,]*).*$/$1x/", "CN=bob,O=strand", "bobx"},
		{"RULE:^CN=([^,]*)\\/(.*)$/$1/", "CN=a/b", "a"},
		{"RULE:^CN=(.*)$/user\\$$1/", "CN=bob", "user$bob"},
		{" RULE:^CN=(.*?),O=.*$/$1/L ,\n DEFAULT ", "CN=Alice,O=x", "alice"},
	}
	for _, c := range cases {
		m, err := ParseMappingRules(c.rules)
		if err != nil {
			t.Fatalf("%q: %v", c.rules, err)
		}
		got, err := m.Map(c.dn)
		if err != nil || got != c.want {
			t.Errorf("rules %q on %q: got %q, %v; want %q", c.rules, c.dn, got, err, c.want)
		}
	}
	m, _ := ParseMappingRules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
	if _, err := m.Map("CN=duke,OU=JavaSoft"); !errors.Is(err, ErrNoMatchingRule) {
		t.Fatalf("no rule matches: got %v", err)
	}
	for _, bad := range []string{"RULE:abc", "RULE:^CN=(.*$/x/", "DEFAULTS", "RULE:a/b/X"} {
		if _, err := ParseMappingRules(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestSubjectDN(t *testing.T) {
	ca, _ := certs.NewCA("ca", time.Time{}, time.Time{})
	p, _ := ca.Issue(certs.Spec{CommonName: "alice", Client: true})
	dn, err := SubjectDN(p.Cert)
	if err != nil || dn != "CN=alice" {
		t.Fatalf("got %q %v", dn, err)
	}
	// Java's order: the last RDN first; O before CN in the encoding.
	seq := pkix.Name{CommonName: "alice", Organization: []string{"strand"}, OrganizationalUnit: []string{"a,b"}}.ToRDNSequence()
	p.Cert.RawSubject = mustMarshal(t, seq)
	dn, err = SubjectDN(p.Cert)
	if err != nil || dn != `CN=alice,OU=a\,b,O=strand` {
		t.Fatalf("got %q %v", dn, err)
	}
}

func TestParseProtocolMap(t *testing.T) {
	m, err := ParseProtocolMap("CLIENT:SSL, external:ssl,KAFKA:SASL_SSL,INTER_BROKER:SSL,CONTROLLER:SSL,HTTP:PLAINTEXT")
	if err != nil {
		t.Fatal(err)
	}
	c := Config{Protocols: m}
	if c.Protocol(auth.ListenerExternal) != SSL || c.Protocol(auth.ListenerKafka) != SASLSSL || c.Protocol(auth.ListenerHTTP) != Plaintext {
		t.Fatalf("%v", m)
	}
	if (&Config{}).Protocol(auth.ListenerClient) != Plaintext {
		t.Fatal("an unnamed listener is not PLAINTEXT")
	}
	for _, bad := range []string{"CLIENT", "NOPE:SSL", "CLIENT:TLS", "INTER_BROKER:SASL_SSL", "CONTROLLER:SASL_PLAINTEXT", "CLIENT:SSL,CLIENT:PLAINTEXT"} {
		if _, err := ParseProtocolMap(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestParsePrincipals(t *testing.T) {
	ps, err := ParsePrincipals("User:CN=broker,O=strand;User:CN=node2, User:admin")
	if err != nil {
		t.Fatal(err)
	}
	want := []auth.Principal{auth.User("CN=broker,O=strand"), auth.User("CN=node2"), auth.User("admin")}
	if len(ps) != len(want) {
		t.Fatalf("got %v", ps)
	}
	for i := range want {
		if ps[i] != want[i] {
			t.Fatalf("got %v", ps)
		}
	}
	if _, err := ParsePrincipals("CN=broker"); err == nil {
		t.Fatal("a principal without a type parsed")
	}
}

func TestReadGossipKey(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		body string
		n    int
	}{{"AAAAAAAAAAAAAAAAAAAAAA==\n", 16}, {"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", 32}, {"AAAA", 0}, {"not base64!", 0}} {
		p := dir + "/key"
		if err := os.WriteFile(p, []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		k, err := ReadGossipKey(p)
		if c.n == 0 {
			if err == nil {
				t.Errorf("%q: no error", c.body)
			}
		} else if err != nil || len(k) != c.n {
			t.Errorf("%q: %d bytes, %v", c.body, len(k), err)
		}
	}
	if _, err := ReadGossipKey(dir + "/missing"); err == nil {
		t.Error("a missing file read")
	}
}

// TestClientAuthPerListener: ssl.client.auth applies to the SSL client
// listeners; INTER_BROKER and CONTROLLER always require a certificate; a
// SASL_SSL listener asks for none (KIP-684: SASL proves the principal).
func TestClientAuthPerListener(t *testing.T) {
	m, err := ParseProtocolMap("CLIENT:SSL,KAFKA:SASL_SSL,INTER_BROKER:SSL,CONTROLLER:SSL")
	if err != nil {
		t.Fatal(err)
	}
	c := Config{Protocols: m, ClientAuth: ClientAuthRequired}
	for l, want := range map[string]ClientAuth{
		auth.ListenerClient: ClientAuthRequired, auth.ListenerKafka: ClientAuthNone,
		auth.ListenerInterBroker: ClientAuthRequired, auth.ListenerController: ClientAuthRequired,
	} {
		if got := c.clientAuth(l); got != want {
			t.Errorf("%s: %s, want %s", l, got, want)
		}
	}
}
