package ports

import (
	"net"
	"strconv"
	"testing"
)

func TestAddrsAreDistinctBindableAndOutsideEphemeralRange(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		a, err := Addr()
		if err != nil {
			t.Fatal(err)
		}
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
		_, ps, _ := net.SplitHostPort(a)
		p, _ := strconv.Atoi(ps)
		if p < lo || p >= hi {
			t.Fatalf("port %d outside [%d, %d)", p, lo, hi)
		}
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("bind %s: %v", a, err)
		}
		l.Close()
	}
}

func TestBlockIsConsecutiveAndDistinct(t *testing.T) {
	base, err := Block(24)
	if err != nil {
		t.Fatal(err)
	}
	for p := base; p < base+24; p++ {
		if !bindable(net.JoinHostPort("127.0.0.1", strconv.Itoa(p))) {
			t.Fatalf("port %d of the block does not bind", p)
		}
	}
	for range 20 {
		a, err := Addr()
		if err != nil {
			t.Fatal(err)
		}
		_, ps, _ := net.SplitHostPort(a)
		if p, _ := strconv.Atoi(ps); p >= base && p < base+24 {
			t.Fatalf("Addr handed out %d, inside the block at %d", p, base)
		}
	}
}
