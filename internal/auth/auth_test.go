package auth

import (
	"context"
	"testing"
)

func TestParsePrincipal(t *testing.T) {
	p, err := ParsePrincipal("User:CN=node1,O=strand")
	if err != nil || p.Type != "User" || p.Name != "CN=node1,O=strand" || p.String() != "User:CN=node1,O=strand" {
		t.Fatalf("got %+v, %v", p, err)
	}
	for _, bad := range []string{"", "alice", ":alice", "User:"} {
		if _, err := ParsePrincipal(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestSessionContext(t *testing.T) {
	if _, ok := FromContext(context.Background()); ok {
		t.Fatal("a bare context has a session")
	}
	ctx := NewContext(context.Background(), Session{Principal: User("alice"), Host: "10.0.0.1"})
	s, ok := FromContext(ctx)
	if !ok || s.Principal != User("alice") || s.Host != "10.0.0.1" {
		t.Fatalf("got %+v %v", s, ok)
	}
}
