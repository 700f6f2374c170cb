// Package auth holds who sent a request: Kafka's principal (a type and a
// name, "User:alice") and the session it arrived on (from which host,
// through which listener, authenticated how). The front doors put a
// Session into the request's context once the connection has proved who
// it is; the request layer, the authorizer and the quotas read it from
// there. Nothing here decides what a principal may do.
package auth

import (
	"context"
	"fmt"
	"strings"
)

// Principal is Kafka's KafkaPrincipal: "User:CN=node1,O=strand" has the
// type "User" and the name "CN=node1,O=strand".
type Principal struct {
	Type, Name string
}

// UserType is the principal type every authenticated client has.
const UserType = "User"

// Anonymous is the principal of a connection that proved nothing
// (PLAINTEXT, or TLS without a client certificate), as Kafka's.
var Anonymous = Principal{Type: UserType, Name: "ANONYMOUS"}

// User is the principal User:name.
func User(name string) Principal { return Principal{Type: UserType, Name: name} }

// String is "Type:Name", the form Kafka's tools print and read.
func (p Principal) String() string { return p.Type + ":" + p.Name }

// IsZero reports whether p was never set.
func (p Principal) IsZero() bool { return p.Type == "" && p.Name == "" }

// ParsePrincipal reads "Type:Name". The name may itself hold colons; the
// type may not be empty, and neither may the name.
func ParsePrincipal(s string) (Principal, error) {
	t, n, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || t == "" || n == "" {
		return Principal{}, fmt.Errorf("principal %q: want Type:Name, such as User:alice", s)
	}
	return Principal{Type: t, Name: n}, nil
}

// Listener names, as a Session carries them and as
// listener.security.protocol.map spells them.
const (
	ListenerClient      = "CLIENT"
	ListenerExternal    = "EXTERNAL"
	ListenerKafka       = "KAFKA"
	ListenerInterBroker = "INTER_BROKER"
	ListenerController  = "CONTROLLER"
	ListenerHTTP        = "HTTP"
)

// Session is one request's sender.
type Session struct {
	// Principal is who the connection authenticated as (Anonymous if it
	// proved nothing).
	Principal Principal
	// Host is the client's address without the port.
	Host string
	// Listener is one of the Listener names.
	Listener string
	// Mechanism is how the principal was proved: "" (nothing), "SSL"
	// (a client certificate), or a SASL mechanism ("SCRAM-SHA-256",
	// "SCRAM-SHA-512", "PLAIN").
	Mechanism string
	// TLS is true when the connection is encrypted.
	TLS bool
	// Broker is true when the principal is one of the cluster's broker
	// principals (inter.broker.principals), proved by certificate.
	Broker bool
}

type sessionKey struct{}

// NewContext returns ctx carrying s.
func NewContext(ctx context.Context, s Session) context.Context {
	return context.WithValue(ctx, sessionKey{}, s)
}

// FromContext returns the session ctx carries, if any. A request with no
// session came from inside the process (tests calling the request layer,
// the node's own calls).
func FromContext(ctx context.Context) (Session, bool) {
	s, ok := ctx.Value(sessionKey{}).(Session)
	return s, ok
}

type clientIDKey struct{}

// WithClientID returns ctx carrying the client id a request was sent
// with: Kafka's request header client.id on the Kafka door, the SDK's
// client-id call metadata on gRPC. Client quotas are resolved by it.
func WithClientID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, clientIDKey{}, id)
}

// ClientIDFrom is the client id ctx carries ("" if none).
func ClientIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(clientIDKey{}).(string)
	return id
}
