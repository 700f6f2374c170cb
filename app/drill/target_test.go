package drill

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFaultCall: the fault endpoint's answers as the targets see them: a
// node without it (404) cannot do the fault (ErrUnsupported, a skipped
// drill); a refusal is an error; 200 is done.
func TestFaultCall(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.String())
		switch r.URL.Query().Get("topic") {
		case "missing":
			http.NotFound(w, r)
		case "refused":
			http.Error(w, "broker 2 is not the leader", http.StatusConflict)
		default:
			w.Write([]byte("{}"))
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	if err := holdFollowerFetch(ctx, nil, addr, "t", 3, 8*time.Second); err != nil {
		t.Errorf("hold: %v", err)
	}
	if err := releaseFollowerFetch(ctx, nil, addr, "t", 3); err != nil {
		t.Errorf("release: %v", err)
	}
	if err := holdFollowerFetch(ctx, nil, addr, "missing", 0, time.Second); !errors.Is(err, ErrUnsupported) {
		t.Errorf("404: %v, want ErrUnsupported", err)
	}
	if err := holdFollowerFetch(ctx, nil, addr, "refused", 0, time.Second); err == nil || errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "not the leader") {
		t.Errorf("409: %v", err)
	}
	want := []string{"POST /debug/faults/hold-follower-fetch?duration=8s&partition=3&topic=t", "POST /debug/faults/release-follower-fetch?partition=3&topic=t"}
	for i, w := range want {
		if i >= len(got) || got[i] != w {
			t.Errorf("request %d: %q, want %q", i, got, w)
		}
	}
}

// TestProcessMetricsAddress: a process node's metrics listener comes from
// its recorded command line: --metrics-listen, else --listen's port + 3.
func TestProcessMetricsAddress(t *testing.T) {
	dir := t.TempDir()
	write := func(id int, args ...string) {
		if err := os.WriteFile(filepath.Join(dir, "node"+string(rune('0'+id))+".cmd"), []byte(strings.Join(args, "\x00")+"\x00"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(1, "/bin/strand", "server", "--listen", "127.0.0.1:9600", "--metrics-listen", "127.0.0.1:9700")
	write(2, "/bin/strand", "server", "--listen=127.0.0.1:9610")
	write(3, "/bin/strand", "server")
	p := &Process{Dir: dir, N: 3}
	for id, want := range map[int32]string{1: "127.0.0.1:9700", 2: "127.0.0.1:9613"} {
		if got, err := p.metrics(id); err != nil || got != want {
			t.Errorf("node %d: %q %v, want %q", id, got, err, want)
		}
	}
	if _, err := p.metrics(3); err == nil {
		t.Error("node 3 has neither flag, yet an address")
	}
}

// TestFaultCallTLS: with the metrics listener on TLS (HTTP:SSL) the fault
// endpoint is called over https with the given configuration.
func TestFaultCallTLS(t *testing.T) {
	var got []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.Path)
		w.Write([]byte("{}"))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "https://")
	ctx := context.Background()
	if err := holdFollowerFetch(ctx, nil, addr, "t", 0, time.Second); err == nil {
		t.Error("plain http to a TLS listener succeeded")
	}
	tc := srv.Client().Transport.(*http.Transport).TLSClientConfig
	c := &Compose{Metrics: func(int32) string { return addr }, HTTPTLS: tc}
	if err := c.HoldFollowerFetch(ctx, 1, "t", 0, time.Second); err != nil {
		t.Fatalf("https: %v", err)
	}
	if len(got) != 1 || got[0] != "POST /debug/faults/hold-follower-fetch" {
		t.Fatalf("requests %q", got)
	}
}
