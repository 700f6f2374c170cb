package scram

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// RFC 7677 section 3: user "user", password "pencil".
func TestRFC7677Vector(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	cred := SHA256.NewCredential("pencil", salt, 4096)
	srv := SHA256.NewServer(func(u string) (Credential, bool) { return cred, u == "user" },
		func() string { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0" })
	cl := SHA256.NewClient("user", "pencil", "rOprNGfwEbeRWgbNEkqO")

	first, _, _ := cl.Step(nil)
	if string(first) != "n,,n=user,r=rOprNGfwEbeRWgbNEkqO" {
		t.Fatalf("client-first %q", first)
	}
	sfirst, err := srv.Step(first)
	if err != nil || string(sfirst) != "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096" {
		t.Fatalf("server-first %q %v", sfirst, err)
	}
	final, _, err := cl.Step(sfirst)
	if err != nil || string(final) != "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=" {
		t.Fatalf("client-final %q %v", final, err)
	}
	sfinal, err := srv.Step(final)
	if err != nil || string(sfinal) != "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=" {
		t.Fatalf("server-final %q %v", sfinal, err)
	}
	if !srv.Done() || srv.User() != "user" {
		t.Fatal("server not done")
	}
	if _, done, err := cl.Step(sfinal); !done || err != nil {
		t.Fatalf("client final check: %v", err)
	}
}

func run(m Mechanism, cred Credential, user, password string) error {
	srv := m.NewServer(func(u string) (Credential, bool) { return cred, u == "alice" }, nil)
	cl := m.NewClient(user, password, "")
	msg, _, _ := cl.Step(nil)
	for {
		out, err := srv.Step(msg)
		if err != nil {
			return err
		}
		next, done, err := cl.Step(out)
		if err != nil || done {
			return err
		}
		msg = next
	}
}

func TestConversations(t *testing.T) {
	for _, m := range []Mechanism{SHA256, SHA512} {
		cred := m.NewCredential("alice-secret", NewSalt(), 8192)
		for _, tc := range []struct {
			user, pw string
			ok       bool
		}{
			{"alice", "alice-secret", true},
			{"alice", "wrong", false},
			{"bob", "alice-secret", false},
		} {
			err := run(m, cred, tc.user, tc.pw)
			if tc.ok != (err == nil) {
				t.Errorf("%s %s/%s: %v", m.Name(), tc.user, tc.pw, err)
			}
			if err != nil && !errors.Is(err, ErrAuthFailed) {
				t.Errorf("%s: error %v is not ErrAuthFailed", m.Name(), err)
			}
		}
	}
}

func TestServerRefuses(t *testing.T) {
	cred := SHA256.NewCredential("pw", NewSalt(), 4096)
	lookup := func(u string) (Credential, bool) { return cred, true }
	for _, msg := range []string{
		"y,,n=alice,r=abc", // channel binding flags other than n
		"p=tls-unique,,n=alice,r=abc",
		"n,a=bob,n=alice,r=abc", // authzid other than the user
		"n,,r=abc,n=alice",
		"n,,n=al=2Xice,r=abc", // bad escape
		"n,,n=,r=abc",
		"garbage",
		"n,,m=ext,n=alice,r=abc",
	} {
		if _, err := SHA256.NewServer(lookup, nil).Step([]byte(msg)); err == nil {
			t.Errorf("%q accepted", msg)
		}
	}
	// A changed nonce in client-final is refused.
	srv := SHA256.NewServer(lookup, nil)
	if _, err := srv.Step([]byte("n,,n=alice,r=abc")); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Step([]byte("c=biws,r=abcXYZ,p=AAAA")); err == nil || srv.Done() {
		t.Fatal("wrong nonce accepted")
	}
}

// TestLibrdkafkaNonce: librdkafka's client-final repeats its own nonce in
// front of the server-first nonce ("r=" cnonce + cnonce + snonce); Kafka
// accepts a nonce that ends with the server-first one, and so does the
// server here, with the proof computed over the message as sent. A nonce
// that does not end with the server's part is still refused.
func TestLibrdkafkaNonce(t *testing.T) {
	m := SHA512
	cred := m.NewCredential("pw", NewSalt(), 4096)
	lookup := func(u string) (Credential, bool) { return cred, u == "judge" }
	final := func(srv *Server, nonce string) string {
		t.Helper()
		first := "n=judge,r=cli"
		sfirst, err := srv.Step([]byte("n,," + first))
		if err != nil {
			t.Fatal(err)
		}
		snonce, _, _ := strings.Cut(strings.TrimPrefix(string(sfirst), "r="), ",")
		without := "c=biws,r=" + strings.ReplaceAll(nonce, "SNONCE", snonce)
		clientKey := m.hmac(m.SaltedPassword("pw", cred.Salt, cred.Iterations), "Client Key")
		sig := m.hmac(m.sum(clientKey), first+","+string(sfirst)+","+without)
		for j := range sig {
			clientKey[j] ^= sig[j]
		}
		return without + ",p=" + base64.StdEncoding.EncodeToString(clientKey)
	}
	srv := m.NewServer(lookup, nil)
	if _, err := srv.Step([]byte(final(srv, "cliSNONCE"))); err != nil || !srv.Done() {
		t.Fatalf("librdkafka's doubled nonce refused: %v", err)
	}
	srv = m.NewServer(lookup, nil)
	if _, err := srv.Step([]byte(final(srv, "SNONCEx"))); err == nil || srv.Done() {
		t.Fatal("a nonce that does not end with the server's accepted")
	}
}

func TestEscape(t *testing.T) {
	for _, tc := range []struct{ raw, esc string }{{"a,b=c", "a=2Cb=3Dc"}, {"plain", "plain"}, {"==", "=3D=3D"}} {
		if got := EscapeName(tc.raw); got != tc.esc {
			t.Errorf("escape %q = %q", tc.raw, got)
		}
		if got, err := UnescapeName(tc.esc); err != nil || got != tc.raw {
			t.Errorf("unescape %q = %q %v", tc.esc, got, err)
		}
	}
	for _, bad := range []string{"a=", "a=2", "a=41", "a,b"} {
		if _, err := UnescapeName(bad); err == nil {
			t.Errorf("%q unescaped", bad)
		}
	}
	// A user with ',' and '=' in the name authenticates.
	cred := SHA512.NewCredential("pw", NewSalt(), 4096)
	srv := SHA512.NewServer(func(u string) (Credential, bool) { return cred, u == "a,b=c" }, nil)
	cl := SHA512.NewClient("a,b=c", "pw", "")
	m, _, _ := cl.Step(nil)
	if !strings.Contains(string(m), "n=a=2Cb=3Dc,") {
		t.Fatalf("client-first %q", m)
	}
	out, err := srv.Step(m)
	if err != nil {
		t.Fatal(err)
	}
	m, _, _ = cl.Step(out)
	if _, err := srv.Step(m); err != nil || srv.User() != "a,b=c" {
		t.Fatalf("%v %q", err, srv.User())
	}
}

func TestVerifyPlainAndSalted(t *testing.T) {
	salt := NewSalt()
	cred := SHA256.NewCredential("secret", salt, 4096)
	if !SHA256.VerifyPlain(cred, "secret") || SHA256.VerifyPlain(cred, "secreT") {
		t.Fatal("VerifyPlain")
	}
	// The salted password a Kafka client sends gives the same credential.
	c2 := SHA256.FromSalted(SHA256.SaltedPassword("secret", salt, 4096), salt, 4096)
	if string(c2.StoredKey) != string(cred.StoredKey) || string(c2.ServerKey) != string(cred.ServerKey) {
		t.Fatal("FromSalted differs")
	}
	if string(SHA256.hi([]byte("secret"), salt, 4096)) != string(SHA256.SaltedPassword("secret", salt, 4096)) {
		t.Fatal("hi differs from pbkdf2")
	}
	for n, ok := range map[int]bool{4095: false, 4096: true, 16384: true, 16385: false} {
		if ValidIterations(n) != ok {
			t.Errorf("ValidIterations(%d)", n)
		}
	}
}
