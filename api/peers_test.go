package api

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// fakeDNS resolves names from a table the test changes, and counts lookups.
type fakeDNS struct {
	mu      sync.Mutex
	table   map[string][]netip.Addr
	lookups int
}

func (d *fakeDNS) resolve(_ context.Context, host string) ([]netip.Addr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lookups++
	if as, ok := d.table[host]; ok {
		return append([]netip.Addr(nil), as...), nil
	}
	return nil, errors.New("no such host")
}

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

// TestPeerFilter: the filter admits the resolved addresses of the hosts it
// is given (names and literals, IPv4-mapped IPv6 as IPv4), refuses others,
// follows the hosts as their version changes, and looks names up again on
// a miss at most once per second (a node whose container got a new
// address), not on every call.
func TestPeerFilter(t *testing.T) {
	dns := &fakeDNS{table: map[string][]netip.Addr{"node1": {ip("10.0.0.1")}, "node2": {ip("10.0.0.2")}}}
	var version int64 = 1
	hosts := []string{"node1", "10.0.0.7", "node1"}
	now := time.Unix(1000, 0)
	f := NewPeerFilter(func() (int64, []string) { return version, hosts }, nil)
	f.resolve, f.now = dns.resolve, func() time.Time { return now }

	for a, want := range map[string]bool{"10.0.0.1": true, "10.0.0.7": true, "::ffff:10.0.0.1": true, "10.0.0.2": false, "127.0.0.1": false} {
		if got := f.Admits(ip(a)); got != want {
			t.Errorf("Admits(%s) = %v, want %v", a, got, want)
		}
	}
	if dns.lookups != 1 {
		t.Errorf("%d lookups for one host name within a second, want 1", dns.lookups)
	}
	// A new broker registers: the hosts move on.
	version, hosts = 2, []string{"node1", "node2"}
	if !f.Admits(ip("10.0.0.2")) || f.Admits(ip("10.0.0.7")) {
		t.Error("the filter did not follow the new hosts")
	}
	// node1 comes back at another address: looked up again once a second
	// has passed since the last lookup, not before.
	dns.mu.Lock()
	dns.table["node1"] = []netip.Addr{ip("10.0.0.9")}
	dns.mu.Unlock()
	if f.Admits(ip("10.0.0.9")) {
		t.Error("looked up again within a second")
	}
	now = now.Add(reresolveEvery)
	if !f.Admits(ip("10.0.0.9")) {
		t.Error("node1's new address refused after a second")
	}
	before := dns.lookups
	for range 100 {
		f.Admits(ip("192.0.2.1")) // a stranger knocking
	}
	if dns.lookups-before > 2 {
		t.Errorf("a stranger's 100 calls within a second made %d lookups", dns.lookups-before)
	}
	// A registration in the caller's own name passes; in another's, not.
	if !f.selfRegistration(ip("10.0.0.2"), &pb.RegisterBrokerRequest{InterBrokerAddress: "node2:9096"}) ||
		f.selfRegistration(ip("10.0.0.3"), &pb.RegisterBrokerRequest{InterBrokerAddress: "node2:9096"}) ||
		f.selfRegistration(ip("10.0.0.3"), &pb.RegisterBrokerRequest{InterBrokerAddress: "0.0.0.0:9096"}) {
		t.Error("selfRegistration")
	}
	if HostOf("0.0.0.0:9096") != "" || HostOf("[::]:9096") != "" || HostOf("node1:9096") != "node1" || HostOf("nonsense") != "" {
		t.Error("HostOf")
	}
}
