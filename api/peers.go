package api

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/wire"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// PeerFilter admits calls on the inter-broker listener only from the
// cluster's own addresses: the hosts of the registered brokers (their
// inter-broker and client addresses), of the controller voters, and of
// this node, resolved to IP addresses. It is what keeps the internal RPCs
// from anyone who can merely reach the port until nodes authenticate each
// other (the security issue will add identities).
//
// The check is by the connection's source IP, so it is only as strong as
// the network lets addresses be told apart. On a NAT-free network where
// every node has an address of its own (a Docker bridge network, hosts of
// a LAN) a process elsewhere is refused. Where nodes share one address
// (every node of a 127.0.0.1 cluster, or nodes behind one NAT) anything
// else on that address passes too: there the check is weak, and the
// inter-broker listener should be bound where only the nodes reach it.
//
// One call passes from an address not yet known: a RegisterBroker whose
// own inter-broker address resolves to the caller's address (a new broker
// must register before its address is known; it cannot register in
// another host's name). The controller refuses it if the id is held by a
// live session (DUPLICATE_BROKER_REGISTRATION).
type PeerFilter struct {
	hosts   func() (version int64, hosts []string)
	resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	now     func() time.Time
	lg      *slog.Logger

	set     atomic.Pointer[peerSet]
	rebuild sync.Mutex   // one rebuild (and its lookups) at a time
	logged  atomic.Int64 // when a refusal was last logged (Unix ms)
}

// peerSet is the admitted addresses as built from one version of the hosts.
type peerSet struct {
	version  int64
	names    []string // the sorted hosts allowed was built from
	allowed  map[netip.Addr]bool
	resolved time.Time // when its host names were looked up
}

// NewPeerFilter returns a filter over the hosts hosts reports; version
// changes whenever the hosts may have (a metadata offset).
func NewPeerFilter(hosts func() (version int64, hosts []string), lg *slog.Logger) *PeerFilter {
	if lg == nil {
		lg = slog.Default()
	}
	return &PeerFilter{hosts: hosts, lg: lg, now: time.Now, resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
		return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}}
}

// reresolveEvery bounds how often an unknown caller makes the filter look
// host names up again (a node's address may have changed, as after a
// container is reconnected to its network).
const reresolveEvery = time.Second

// Admits reports whether a call from ip may be served. The common case
// (a known caller, hosts unchanged) takes no lock; lookups run with no
// caller waiting on them but the one that needs the new set.
func (f *PeerFilter) Admits(ip netip.Addr) bool {
	ip = ip.Unmap()
	v, hs := f.hosts()
	st := f.set.Load()
	if st != nil && st.version == v && st.allowed[ip] {
		return true
	}
	if st == nil || st.version != v {
		f.rebuild.Lock()
		if st = f.set.Load(); st == nil || st.version != v {
			st = f.build(v, hs, st, false)
			f.set.Store(st)
		}
		f.rebuild.Unlock()
		if st.allowed[ip] {
			return true
		}
	}
	// Unknown: look the names up again, at most once a second, and never
	// while another rebuild runs (a stranger knocking waits for nothing).
	if !hasName(st.names) || f.now().Sub(st.resolved) < reresolveEvery || !f.rebuild.TryLock() {
		return false
	}
	defer f.rebuild.Unlock()
	if cur := f.set.Load(); cur != st {
		return cur.allowed[ip]
	}
	st = f.build(st.version, st.names, st, true)
	f.set.Store(st)
	return st.allowed[ip]
}

// build makes the set for hosts at version; names are looked up again
// only when they differ from prev's or force is set.
func (f *PeerFilter) build(version int64, hosts []string, prev *peerSet, force bool) *peerSet {
	names := slices.Clone(hosts)
	slices.Sort(names)
	names = slices.Compact(names)
	if !force && prev != nil && slices.Equal(names, prev.names) {
		return &peerSet{version: version, names: prev.names, allowed: prev.allowed, resolved: prev.resolved}
	}
	st := &peerSet{version: version, names: names, allowed: map[netip.Addr]bool{}}
	for _, h := range names {
		for _, a := range f.lookup(h) {
			st.allowed[a] = true
		}
	}
	if hasName(names) {
		st.resolved = f.now()
	}
	return st
}

func hasName(hosts []string) bool {
	for _, h := range hosts {
		if _, err := netip.ParseAddr(h); err != nil {
			return true
		}
	}
	return false
}

// lookup resolves one host (an IP literal needs no lookup).
func (f *PeerFilter) lookup(host string) []netip.Addr {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a.Unmap()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	as, err := f.resolve(ctx, host)
	if err != nil {
		f.lg.Debug("inter-broker listener: a node's host name does not resolve", "host", host, "err", err)
		return nil
	}
	for i := range as {
		as[i] = as[i].Unmap()
	}
	return as
}

// HostOf is the host part of an address ("" when it has none, or names
// every interface, as 0.0.0.0 does).
func HostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if a, err := netip.ParseAddr(h); err == nil && a.IsUnspecified() {
		return ""
	}
	return h
}

// callerIP is the source IP of the call's connection (false when the
// transport has none, as an in-process pipe has not).
func callerIP(ctx context.Context) (netip.Addr, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return netip.Addr{}, false
	}
	ta, ok := p.Addr.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	a, ok := netip.AddrFromSlice(ta.IP)
	return a.Unmap(), ok
}

// selfRegistration reports whether req is a RegisterBroker whose own
// inter-broker address is ip's.
func (f *PeerFilter) selfRegistration(ip netip.Addr, req any) bool {
	r, ok := req.(*pb.RegisterBrokerRequest)
	if !ok {
		return false
	}
	host := HostOf(r.InterBrokerAddress)
	if host == "" {
		return false
	}
	return slices.Contains(f.lookup(host), ip)
}

func (f *PeerFilter) check(ctx context.Context, method string, req any) error {
	ip, ok := callerIP(ctx)
	if !ok || f.Admits(ip) {
		return nil
	}
	if method == pb.Controller_RegisterBroker_FullMethodName && f.selfRegistration(ip, req) {
		return nil
	}
	if now, last := f.now().UnixMilli(), f.logged.Load(); now-last >= 10_000 && f.logged.CompareAndSwap(last, now) {
		f.lg.Warn("inter-broker listener: refused a call from an address that is no node of this cluster (logged at most every 10s)", "from", ip.String(), "method", method)
	}
	return wire.StatusError(codes.PermissionDenied, errs.New(pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED,
		"the inter-broker listener serves this cluster's nodes only, and %s is not the address of a registered broker or a controller voter", ip))
}

// Interceptors are the server options that enforce the filter.
func (f *PeerFilter) Interceptors() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			if err := f.check(ctx, info.FullMethod, req); err != nil {
				return nil, err
			}
			return handler(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			if err := f.check(ss.Context(), info.FullMethod, nil); err != nil {
				return err
			}
			return handler(srv, ss)
		}),
	}
}
