package node

import (
	"context"
	"crypto/tls"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/tlsconf"
	"github.com/strand-io/strand/internal/wire"
)

// SecurityConfig is the node's security settings: the
// listeners' protocols (listener.security.protocol.map; a listener not
// named is PLAINTEXT), the ssl.* files and rules, inter.broker.principals
// and gossip.encryption.key.location. Its zero value is today's
// behaviour: every listener PLAINTEXT.
type SecurityConfig struct {
	tlsconf.Config
}

// serverCreds are the gRPC server options of listener: TLS credentials
// when it uses TLS, nothing for PLAINTEXT.
func (n *Node) serverCreds(listener string) []grpc.ServerOption {
	if c := n.sec.ServerTLS(listener, "h2"); c != nil {
		return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(c))}
	}
	return nil
}

// poolFor returns a connection pool whose connections speak the security
// protocol of listener (the node's keystore as client certificate when it
// is SSL).
func (n *Node) newPool(dial wire.DialFunc, listener string) *wire.Pool {
	if c := n.sec.ClientTLS(listener, "h2"); c != nil {
		return wire.NewPool(dial, grpc.WithTransportCredentials(hostCreds{TransportCredentials: credentials.NewTLS(c), cfg: c}))
	}
	return wire.NewPool(dial)
}

// sameWire reports whether the client and inter-broker listeners speak
// the same protocol, so one pool reaches both.
func (n *Node) sameWire() bool {
	return n.sec.Protocol(auth.ListenerClient).TLS() == n.sec.Protocol(auth.ListenerInterBroker).TLS()
}

// raftTLS returns the Raft transport's server and client TLS configs
// (nil, nil when CONTROLLER is PLAINTEXT).
func (n *Node) raftTLS() (server, client *tls.Config) {
	return n.sec.ServerTLS(auth.ListenerController), n.sec.ClientTLS(auth.ListenerController)
}

// hostCreds are TLS credentials whose handshake checks the server's
// certificate against the host dialled, an IP address included
// (tlsconf.ForHost): gRPC's own would check no name for an IP.
type hostCreds struct {
	credentials.TransportCredentials
	cfg *tls.Config
}

func (h hostCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	host := authority
	if hh, _, err := net.SplitHostPort(authority); err == nil {
		host = hh
	}
	return credentials.NewTLS(tlsconf.ForHost(h.cfg, host)).ClientHandshake(ctx, authority, conn)
}

func (h hostCreds) Clone() credentials.TransportCredentials {
	return hostCreds{TransportCredentials: h.TransportCredentials.Clone(), cfg: h.cfg}
}
