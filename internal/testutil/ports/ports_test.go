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
