package api

import (
	"context"
	"net"

	"google.golang.org/grpc/peer"
)

// peerHost is where a gRPC call comes from, as Kafka shows a group
// member's host ("/10.0.0.7"); empty when unknown. The gRPC door sets a
// JoinGroup's client_host with it, as the Kafka door does from its
// connection, so DescribeGroups (and `strand consumer-groups`) show it.
func peerHost(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(p.Addr.String())
	if err != nil {
		host = p.Addr.String()
	}
	return "/" + host
}
