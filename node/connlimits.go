package node

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"

	"github.com/strand-io/strand/api"
)

// DefaultMaxConnectionsPerIP is the most max.connections.per.ip defaults
// to (Kafka's default is unlimited).
const DefaultMaxConnectionsPerIP = 1000

// DefaultConnectionLimits derives the connection caps from nofile, the
// process's limit on open descriptors (RLIMIT_NOFILE), so that clients
// can never take the descriptors the node needs for its own files:
//
//   - max.connections (the client listeners together): half of nofile;
//   - max.connections.per.ip: a quarter of that, and at most
//     DefaultMaxConnectionsPerIP, so no one address can fill the node;
//   - the inter-broker listener: an eighth of nofile, counted apart from
//     max.connections (as Kafka exempts its inter-broker listener), so a
//     client flood never locks out the peers;
//
// which leaves three eighths: a quarter for segment files (fdBudget) and
// an eighth for indexes, checkpoints and Raft.
func DefaultConnectionLimits(nofile uint64) (maxConns, perIP, interBroker int) {
	nofile = min(nofile, 1<<32) // unlimited: Kafka's Int.MaxValue
	maxConns = max(int(nofile/2), 1)
	perIP = max(min(maxConns/4, DefaultMaxConnectionsPerIP), 1)
	interBroker = max(int(nofile/8), 1)
	return maxConns, perIP, interBroker
}

// fileLimit is the process's RLIMIT_NOFILE (Go raises the soft limit to
// the hard one at start).
func fileLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 1024
	}
	return rl.Cur
}

// maxIdle is connections.max.idle.ms.
func (n *Node) maxIdle() time.Duration { return maxIdle(n.cfg) }

func maxIdle(cfg Config) time.Duration {
	if cfg.ConnectionsMaxIdle <= 0 {
		return 10 * time.Minute
	}
	return cfg.ConnectionsMaxIdle
}

// connectionLimits settles the caps of the client listeners and of the
// inter-broker listener from the config and the descriptor limit.
func (n *Node) connectionLimits() (client, interBroker api.ConnLimits, err error) {
	nofile := fileLimit()
	maxConns, perIP, ib := DefaultConnectionLimits(nofile)
	if n.cfg.MaxConnections > 0 {
		maxConns = n.cfg.MaxConnections
		perIP = max(min(maxConns/4, DefaultMaxConnectionsPerIP), 1)
	}
	if n.cfg.MaxConnectionsPerIP > 0 {
		perIP = n.cfg.MaxConnectionsPerIP
	}
	overrides := map[netip.Addr]int{}
	for host, limit := range n.cfg.MaxConnectionsPerIPOverrides {
		addrs, err := resolveHost(host)
		if err != nil {
			return client, interBroker, fmt.Errorf("max.connections.per.ip.overrides: %s: %w", host, err)
		}
		for _, a := range addrs {
			overrides[a] = limit
		}
	}
	client = api.ConnLimits{MaxConnections: maxConns, MaxPerIP: perIP, PerIPOverrides: overrides}
	interBroker = api.ConnLimits{MaxConnections: ib, MaxPerIP: min(perIP, ib), PerIPOverrides: overrides}
	n.lg.Info("connection limits", "max.connections", maxConns, "max.connections.per.ip", perIP, "overrides", len(n.cfg.MaxConnectionsPerIPOverrides),
		"interBrokerMaxConnections", ib, "connections.max.idle.ms", n.maxIdle().Milliseconds(), "RLIMIT_NOFILE", nofile)
	if uint64(maxConns)+uint64(ib) >= nofile {
		n.lg.Warn("max.connections leaves the node no descriptors for its own files: connections can make log and checkpoint writes fail (EMFILE); raise the open-files limit (ulimit -n) or lower max.connections",
			"max.connections", maxConns, "interBrokerMaxConnections", ib, "RLIMIT_NOFILE", nofile)
	}
	return client, interBroker, nil
}

func resolveHost(host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a.Unmap()}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	as, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	for i := range as {
		as[i] = as[i].Unmap()
	}
	return as, nil
}

// ConnMetrics are the node's connection counts (strand_connections,
// strand_connections_rejected_total).
func (n *Node) ConnMetrics() *api.ConnMetrics { return n.connMetrics }
