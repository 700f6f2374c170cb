// Package scram is SCRAM (RFC 5802) with SHA-256 and SHA-512 (RFC 7677)
// as Kafka uses it: the server and client conversations, the stored form
// of a credential (salt, StoredKey, ServerKey, iterations; never the
// password), and checking a PLAIN password against that stored form.
//
// Kafka's rules: no channel binding (the gs2 header is "n,," or
// "n,a=<authzid>," with the authzid equal to the user), no SASLprep of
// the password (its UTF-8 bytes are used as they are, as Kafka's
// ScramFormatter does), iterations between MinIterations and
// MaxIterations, extensions after the client nonce ignored.
// Every comparison of secret material is constant-time.
package scram

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// Kafka's iteration bounds (ScramMechanism.minIterations/maxIterations).
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// Mechanism names, as SASL and Kafka spell them.
const (
	NameSHA256 = "SCRAM-SHA-256"
	NameSHA512 = "SCRAM-SHA-512"
)

// Mechanism is one SCRAM hash.
type Mechanism struct {
	name string
	h    func() hash.Hash
	// KafkaType is the mechanism's code in AlterUserScramCredentials /
	// DescribeUserScramCredentials (1: SHA-256, 2: SHA-512).
	KafkaType int8
}

// The two mechanisms.
var (
	SHA256 = Mechanism{name: NameSHA256, h: sha256.New, KafkaType: 1}
	SHA512 = Mechanism{name: NameSHA512, h: sha512.New, KafkaType: 2}
)

// Name is "SCRAM-SHA-256" or "SCRAM-SHA-512".
func (m Mechanism) Name() string { return m.name }

// Valid reports whether m is one of the two mechanisms.
func (m Mechanism) Valid() bool { return m.h != nil }

// ByName returns the mechanism of that name.
func ByName(name string) (Mechanism, bool) {
	switch name {
	case NameSHA256:
		return SHA256, true
	case NameSHA512:
		return SHA512, true
	}
	return Mechanism{}, false
}

// ByKafkaType returns the mechanism of Kafka's code (1, 2).
func ByKafkaType(t int8) (Mechanism, bool) {
	switch t {
	case 1:
		return SHA256, true
	case 2:
		return SHA512, true
	}
	return Mechanism{}, false
}

// Credential is what a server keeps of a user's password.
type Credential struct {
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int
}

// ValidIterations reports whether n is within Kafka's bounds.
func ValidIterations(n int) bool { return n >= MinIterations && n <= MaxIterations }

func (m Mechanism) hmac(key []byte, parts ...string) []byte {
	mac := hmac.New(m.h, key)
	for _, p := range parts {
		mac.Write([]byte(p))
	}
	return mac.Sum(nil)
}

func (m Mechanism) sum(b []byte) []byte {
	h := m.h()
	h.Write(b)
	return h.Sum(nil)
}

// SaltedPassword is Hi(password, salt, iterations) (PBKDF2 with HMAC-H):
// what a Kafka client sends in AlterUserScramCredentials.
func (m Mechanism) SaltedPassword(password string, salt []byte, iterations int) []byte {
	k, err := pbkdf2.Key(m.h, password, salt, iterations, m.h().Size())
	if err != nil {
		// Only for a key length over FIPS limits or an empty password in FIPS
		// mode; derive by hand rather than fail.
		return m.hi([]byte(password), salt, iterations)
	}
	return k
}

// hi is RFC 5802's Hi written out (used only where pbkdf2.Key refuses).
func (m Mechanism) hi(password, salt []byte, iterations int) []byte {
	mac := hmac.New(m.h, password)
	mac.Write(salt)
	mac.Write([]byte{0, 0, 0, 1})
	u := mac.Sum(nil)
	out := append([]byte(nil), u...)
	for i := 1; i < iterations; i++ {
		mac.Reset()
		mac.Write(u)
		u = mac.Sum(u[:0])
		for j := range out {
			out[j] ^= u[j]
		}
	}
	return out
}

// FromSalted derives the stored credential from a salted password.
func (m Mechanism) FromSalted(salted, salt []byte, iterations int) Credential {
	clientKey := m.hmac(salted, "Client Key")
	return Credential{
		Salt:       append([]byte(nil), salt...),
		StoredKey:  m.sum(clientKey),
		ServerKey:  m.hmac(salted, "Server Key"),
		Iterations: iterations,
	}
}

// NewCredential derives the stored credential from a password.
func (m Mechanism) NewCredential(password string, salt []byte, iterations int) Credential {
	return m.FromSalted(m.SaltedPassword(password, salt, iterations), salt, iterations)
}

// NewSalt returns 32 random bytes for a salt.
func NewSalt() []byte {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return b
}

// VerifyPlain reports whether password is the one c was derived from
// (SASL/PLAIN against SCRAM-stored credentials).
func (m Mechanism) VerifyPlain(c Credential, password string) bool {
	got := m.NewCredential(password, c.Salt, c.Iterations)
	return subtle.ConstantTimeCompare(got.StoredKey, c.StoredKey) == 1 &&
		subtle.ConstantTimeCompare(got.ServerKey, c.ServerKey) == 1
}

// Errors a conversation ends with. ErrAuthFailed is a wrong password or
// an unknown user (the two are not told apart); ErrProtocol is a message
// that breaks the exchange.
var (
	ErrAuthFailed = errors.New("scram: invalid credentials")
	ErrProtocol   = errors.New("scram: malformed message")
)

func protoErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

// EscapeName escapes a saslname: "," as "=2C" and "=" as "=3D".
func EscapeName(s string) string {
	return strings.NewReplacer("=", "=3D", ",", "=2C").Replace(s)
}

// UnescapeName reverses EscapeName; any other "=" sequence is an error.
func UnescapeName(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ',':
			return "", protoErr("unescaped ',' in saslname")
		case '=':
			if len(s)-i < 3 {
				return "", protoErr("bad escape in saslname")
			}
			switch s[i+1 : i+3] {
			case "2C":
				b.WriteByte(',')
			case "3D":
				b.WriteByte('=')
			default:
				return "", protoErr("bad escape %q in saslname", s[i:i+3])
			}
			i += 2
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

// Nonce returns a fresh printable nonce (base64 of 24 random bytes: no ',').
func Nonce() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawStdEncoding.EncodeToString(b)
}

// attrs splits "k=v,k=v" into its pairs, in order.
func attrs(msg string) ([][2]string, error) {
	var out [][2]string
	for _, f := range strings.Split(msg, ",") {
		if len(f) < 2 || f[1] != '=' {
			return nil, protoErr("attribute %q", f)
		}
		out = append(out, [2]string{f[:1], f[2:]})
	}
	return out, nil
}

// Lookup finds a user's stored credential for the mechanism being run.
type Lookup func(user string) (Credential, bool)

// Server is the server side of one conversation: Step it with each client
// message until done.
type Server struct {
	m        Mechanism
	lookup   Lookup
	nonce    func() string
	step     int
	user     string
	cred     Credential
	first    string // client-first-message-bare
	sfirst   string // server-first-message
	nonceAll string
	done     bool
}

// NewServer starts a server conversation. nonce may be nil (Nonce).
func (m Mechanism) NewServer(lookup Lookup, nonce func() string) *Server {
	if nonce == nil {
		nonce = Nonce
	}
	return &Server{m: m, lookup: lookup, nonce: nonce}
}

// User is the authenticated user once Done.
func (s *Server) User() string { return s.user }

// Done reports whether the client proved its password.
func (s *Server) Done() bool { return s.done }

// Step takes the client's next message and returns the server's answer.
// After the client-final message it returns the server-final one and the
// conversation is done. Any error ends the conversation.
func (s *Server) Step(msg []byte) ([]byte, error) {
	switch s.step {
	case 0:
		s.step = 1
		return s.clientFirst(string(msg))
	case 1:
		s.step = 2
		return s.clientFinal(string(msg))
	}
	return nil, protoErr("conversation already ended")
}

func (s *Server) clientFirst(msg string) ([]byte, error) {
	// gs2-header: cbind-flag "," [authzid] ","
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return nil, protoErr("no gs2 header")
	}
	if flag != "n" {
		// "y" (client supports binding, thinks we do not) and "p=…"
		// (binding required) are refused: Kafka supports none.
		return nil, protoErr("channel binding flag %q: only \"n\" is supported", flag)
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, protoErr("no gs2 header")
	}
	var authzid string
	if authz != "" {
		if !strings.HasPrefix(authz, "a=") {
			return nil, protoErr("gs2 authzid %q", authz)
		}
		var err error
		if authzid, err = UnescapeName(authz[2:]); err != nil {
			return nil, err
		}
	}
	as, err := attrs(bare)
	if err != nil {
		return nil, err
	}
	if len(as) < 2 || as[0][0] != "n" || as[1][0] != "r" {
		return nil, protoErr("client-first-message must start n=…,r=…")
	}
	if strings.HasPrefix(bare, "m=") {
		return nil, protoErr("mandatory extension not supported")
	}
	user, err := UnescapeName(as[0][1])
	if err != nil {
		return nil, err
	}
	if user == "" || as[1][1] == "" {
		return nil, protoErr("empty user name or nonce")
	}
	if authzid != "" && authzid != user {
		return nil, fmt.Errorf("%w: authorization id %q differs from user %q", ErrAuthFailed, authzid, user)
	}
	cred, ok := s.lookup(user)
	if !ok {
		return nil, ErrAuthFailed
	}
	s.user, s.cred, s.first = user, cred, bare
	s.nonceAll = as[1][1] + s.nonce()
	s.sfirst = "r=" + s.nonceAll + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(cred.Iterations)
	return []byte(s.sfirst), nil
}

func (s *Server) clientFinal(msg string) ([]byte, error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return nil, protoErr("client-final-message without proof")
	}
	without, proofB64 := msg[:i], msg[i+3:]
	as, err := attrs(without)
	if err != nil {
		return nil, err
	}
	if len(as) < 2 || as[0][0] != "c" || as[1][0] != "r" {
		return nil, protoErr("client-final-message must start c=…,r=…")
	}
	cb, err := base64.StdEncoding.DecodeString(as[0][1])
	if err != nil || !strings.HasPrefix(string(cb), "n,") {
		return nil, protoErr("channel binding %q", as[0][1])
	}
	// RFC 5802 wants the nonce of server-first back exactly; Kafka's
	// server accepts any nonce that ends with it, and librdkafka relies on
	// that: it sends its own nonce again in front (client nonce + the
	// whole server-first nonce). The proof covers the nonce as sent, and
	// the server's fresh part is still required at the end.
	if got := as[1][1]; len(got) < len(s.nonceAll) ||
		subtle.ConstantTimeCompare([]byte(got[len(got)-len(s.nonceAll):]), []byte(s.nonceAll)) != 1 {
		return nil, protoErr("nonce does not match")
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil {
		return nil, protoErr("proof is not base64")
	}
	authMsg := s.first + "," + s.sfirst + "," + without
	sig := s.m.hmac(s.cred.StoredKey, authMsg)
	if len(proof) != len(sig) {
		return nil, ErrAuthFailed
	}
	clientKey := make([]byte, len(sig))
	for j := range sig {
		clientKey[j] = proof[j] ^ sig[j]
	}
	if subtle.ConstantTimeCompare(s.m.sum(clientKey), s.cred.StoredKey) != 1 {
		return nil, ErrAuthFailed
	}
	s.done = true
	return []byte("v=" + base64.StdEncoding.EncodeToString(s.m.hmac(s.cred.ServerKey, authMsg))), nil
}

// Client is the client side of one conversation: Step(nil) gives the
// client-first message; Step each server message until done.
type Client struct {
	m        Mechanism
	user     string
	password string
	nonce    string
	step     int
	first    string
	authMsg  string
	salted   []byte
}

// NewClient starts a client conversation; nonce may be "" (a fresh one).
func (m Mechanism) NewClient(user, password, nonce string) *Client {
	if nonce == "" {
		nonce = Nonce()
	}
	return &Client{m: m, user: user, password: password, nonce: nonce}
}

// Step returns the next client message (done once the server's final
// message is verified: the returned message is then nil).
func (c *Client) Step(in []byte) (out []byte, done bool, err error) {
	switch c.step {
	case 0:
		c.step = 1
		c.first = "n=" + EscapeName(c.user) + ",r=" + c.nonce
		return []byte("n,," + c.first), false, nil
	case 1:
		c.step = 2
		return c.serverFirst(string(in))
	case 2:
		c.step = 3
		return nil, true, c.serverFinal(string(in))
	}
	return nil, false, protoErr("conversation already ended")
}

func (c *Client) serverFirst(msg string) ([]byte, bool, error) {
	as, err := attrs(msg)
	if err != nil {
		return nil, false, err
	}
	if len(as) < 3 || as[0][0] != "r" || as[1][0] != "s" || as[2][0] != "i" {
		return nil, false, protoErr("server-first-message %q", msg)
	}
	nonce := as[0][1]
	if !strings.HasPrefix(nonce, c.nonce) || len(nonce) == len(c.nonce) {
		return nil, false, protoErr("server nonce does not extend ours")
	}
	salt, err := base64.StdEncoding.DecodeString(as[1][1])
	if err != nil {
		return nil, false, protoErr("salt is not base64")
	}
	iter, err := strconv.Atoi(as[2][1])
	if err != nil || iter < 1 {
		return nil, false, protoErr("iterations %q", as[2][1])
	}
	c.salted = c.m.SaltedPassword(c.password, salt, iter)
	without := "c=biws,r=" + nonce
	c.authMsg = c.first + "," + msg + "," + without
	clientKey := c.m.hmac(c.salted, "Client Key")
	sig := c.m.hmac(c.m.sum(clientKey), c.authMsg)
	for j := range sig {
		clientKey[j] ^= sig[j]
	}
	return []byte(without + ",p=" + base64.StdEncoding.EncodeToString(clientKey)), false, nil
}

func (c *Client) serverFinal(msg string) error {
	if e, ok := strings.CutPrefix(msg, "e="); ok {
		return fmt.Errorf("%w: server says %s", ErrAuthFailed, e)
	}
	v, ok := strings.CutPrefix(msg, "v=")
	if !ok {
		return protoErr("server-final-message %q", msg)
	}
	got, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return protoErr("server signature is not base64")
	}
	want := c.m.hmac(c.m.hmac(c.salted, "Server Key"), c.authMsg)
	if subtle.ConstantTimeCompare(got, want) != 1 {
		return fmt.Errorf("%w: the server's signature does not match (it does not know the password)", ErrAuthFailed)
	}
	return nil
}

// HashSize is the hash's output length: a salted password's, a key's.
func (m Mechanism) HashSize() int { return m.h().Size() }
