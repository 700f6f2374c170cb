package node_test

// Real node on real time: the metrics and debug HTTP endpoints listen on real TCP;
// MemNet does not carry them.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testutil"
)

func httpDo(t *testing.T, method, url string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// TestHTTPListenerReadOnly: by default /debug/pprof is not served (404),
// and every page answers only GET and HEAD: another method is 405 with an
// Allow header, on /metrics, the console and pprof alike.
func TestHTTPListenerReadOnly(t *testing.T) {
	addr := testutil.FreeAddr(t)
	testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) { cfg.MetricsListen = addr })
	base := "http://" + addr
	if r := httpDo(t, "GET", base+"/debug/pprof/", nil); r.StatusCode != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/ by default: %d, want 404", r.StatusCode)
	}
	for _, path := range []string{"/metrics", "/", "/topics"} {
		for _, m := range []string{"GET", "HEAD"} {
			if r := httpDo(t, m, base+path, nil); r.StatusCode != http.StatusOK {
				t.Errorf("%s %s: %d, want 200", m, path, r.StatusCode)
			}
		}
		for _, m := range []string{"POST", "PUT", "DELETE", "PATCH"} {
			r := httpDo(t, m, base+path, nil)
			if r.StatusCode != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %d Allow %q, want 405 with Allow: GET, HEAD", m, path, r.StatusCode, r.Header.Get("Allow"))
			}
		}
	}
}

// TestDebugEndpointsPrivileged: with debug.endpoints.enable, pprof answers
// a super user or a broker; a request with no session gets 401, another
// principal 403, and a non-GET 405 whoever sends it.
func TestDebugEndpointsPrivileged(t *testing.T) {
	for _, m := range debugRefusals(t) {
		t.Error(m)
	}
}

// TestDebugEndpointsCatchPlantedBug: with pprof open to everyone, the
// check above finds the refusals missing.
func TestDebugEndpointsCatchPlantedBug(t *testing.T) {
	defer planted.Set(planted.DebugEndpointsUnauthenticated)()
	if len(debugRefusals(t)) == 0 {
		t.Fatal("the planted bug (pprof unauthenticated) went unnoticed")
	}
}

// debugRefusals starts a node with the debug endpoints on and lists what
// it answered wrong.
func debugRefusals(t *testing.T) []string {
	addr := testutil.FreeAddr(t)
	// TEST-ONLY session: the TLS wiring builds it from the client
	// certificate; here a header names it.
	session := func(r *http.Request) (auth.Session, bool) {
		switch r.Header.Get("X-Test-Principal") {
		case "admin":
			return auth.Session{Principal: auth.User("admin")}, true
		case "bob":
			return auth.Session{Principal: auth.User("bob")}, true
		case "broker":
			return auth.Session{Principal: auth.User("CN=broker"), Broker: true}, true
		}
		return auth.Session{}, false
	}
	testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) {
		cfg.MetricsListen, cfg.DebugEndpoints, cfg.DebugSession = addr, true, session
		cfg.Authorizer.SuperUsers = []auth.Principal{auth.User("admin")}
	})
	var wrong []string
	url := "http://" + addr + "/debug/pprof/cmdline"
	for who, want := range map[string]int{"": http.StatusUnauthorized, "bob": http.StatusForbidden, "admin": http.StatusOK, "broker": http.StatusOK} {
		if r := httpDo(t, "GET", url, map[string]string{"X-Test-Principal": who}); r.StatusCode != want {
			wrong = append(wrong, fmt.Sprintf("GET pprof as %q: %d, want %d", who, r.StatusCode, want))
		}
	}
	if r := httpDo(t, "POST", url, map[string]string{"X-Test-Principal": "admin"}); r.StatusCode != http.StatusMethodNotAllowed {
		wrong = append(wrong, fmt.Sprintf("POST pprof as a super user: %d, want 405", r.StatusCode))
	}
	return wrong
}

// TestFaultEndpointsPrivileged: once the HTTP listener authenticates its
// clients, the test-only fault endpoints answer only a super user or a
// broker (the drills call them with the admin's certificate); a request
// with no session gets 401, another principal (the verify workload's)
// 403. Without authentication (a plaintext listener) they stay open.
func TestFaultEndpointsPrivileged(t *testing.T) {
	session := func(r *http.Request) (auth.Session, bool) {
		switch r.Header.Get("X-Test-Principal") {
		case "admin":
			return auth.Session{Principal: auth.User("CN=admin")}, true
		case "verify":
			return auth.Session{Principal: auth.User("CN=verify")}, true
		case "broker":
			return auth.Session{Principal: auth.User("CN=broker"), Broker: true}, true
		}
		return auth.Session{}, false
	}
	const path = "/debug/faults/release-follower-fetch?topic=t&partition=0"
	addr := testutil.FreeAddr(t)
	testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) {
		cfg.MetricsListen, cfg.TestingFaults, cfg.DebugSession = addr, true, session
		cfg.Authorizer.SuperUsers = []auth.Principal{auth.User("CN=admin")}
	})
	for who, want := range map[string]int{"": http.StatusUnauthorized, "verify": http.StatusForbidden, "admin": http.StatusOK, "broker": http.StatusOK} {
		if r := httpDo(t, "POST", "http://"+addr+path, map[string]string{"X-Test-Principal": who}); r.StatusCode != want {
			t.Errorf("POST %s as %q: %d, want %d", path, who, r.StatusCode, want)
		}
	}
	open := testutil.FreeAddr(t)
	testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) { cfg.MetricsListen, cfg.TestingFaults = open, true })
	if r := httpDo(t, "POST", "http://"+open+path, nil); r.StatusCode != http.StatusOK {
		t.Errorf("POST %s on a plaintext listener: %d, want 200", path, r.StatusCode)
	}
}

// TestConsoleBehindAuthorizer: the console asks the brokers as this node,
// which the authorizer allows everything; so with an authorizer on, only
// a super user or a broker sees its pages (401 without a session, 403
// for another principal), and /metrics asks for a session too
// (TestMetricsBehindAuthorizer). Without an authorizer the console is
// open.
func TestConsoleBehindAuthorizer(t *testing.T) {
	session := func(r *http.Request) (auth.Session, bool) {
		switch r.Header.Get("X-Test-Principal") {
		case "admin":
			return auth.Session{Principal: auth.User("CN=admin")}, true
		case "bob":
			return auth.Session{Principal: auth.User("CN=bob")}, true
		}
		return auth.Session{}, false
	}
	addr := testutil.FreeAddr(t)
	testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) {
		cfg.MetricsListen, cfg.DebugSession = addr, session
		cfg.Authorizer = node.AuthorizerConfig{ClassName: authz.StandardClassName, SuperUsers: []auth.Principal{auth.User("CN=admin")}}
	})
	for who, want := range map[string]int{"": http.StatusUnauthorized, "bob": http.StatusForbidden, "admin": http.StatusOK} {
		if r := httpDo(t, "GET", "http://"+addr+"/topics", map[string]string{"X-Test-Principal": who}); r.StatusCode != want {
			t.Errorf("GET /topics as %q: %d, want %d", who, r.StatusCode, want)
		}
	}
	if r := httpDo(t, "GET", "http://"+addr+"/metrics", nil); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /metrics without a session: %d, want 401", r.StatusCode)
	}
	open := testutil.FreeAddr(t)
	testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) { cfg.MetricsListen = open })
	if r := httpDo(t, "GET", "http://"+open+"/topics", nil); r.StatusCode != http.StatusOK {
		t.Errorf("GET /topics with no authorizer: %d, want 200", r.StatusCode)
	}
}

// clusterGrants is a TEST-ONLY authz.Checker: each principal may do the
// cluster operations it lists, nothing else.
type clusterGrants map[string][]authz.Operation

func (g clusterGrants) Authorize(_ context.Context, s auth.Session, a authz.Action) bool {
	return a.Type == authz.ResourceCluster && slices.Contains(g[s.Principal.Name], a.Op)
}

func (g clusterGrants) AuthorizeAny(context.Context, auth.Session, authz.Operation, authz.ResourceType, string) bool {
	return false
}

// TestMetricsBehindAuthorizer: /metrics names topics, groups, users and
// client ids, so with an authorizer it answers only a proved session
// (401 otherwise) whose principal may Describe the cluster (403
// otherwise), as Kafka shows those names to such a principal
// (DescribeLogDirs, ListGroups); the client quota series (by user and
// client id) only with DescribeConfigs on the cluster too, as
// DescribeClientQuotas. Super users and brokers see everything. Without
// an authorizer it stays open (TestHTTPListenerReadOnly).
func TestMetricsBehindAuthorizer(t *testing.T) {
	session := func(r *http.Request) (auth.Session, bool) {
		switch who := r.Header.Get("X-Test-Principal"); who {
		case "":
			return auth.Session{}, false
		case "broker":
			return auth.Session{Principal: auth.User("CN=broker"), Broker: true}, true
		default:
			return auth.Session{Principal: auth.User(who)}, true
		}
	}
	addr := testutil.FreeAddr(t)
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) {
		cfg.MetricsListen, cfg.DebugSession = addr, session
		cfg.Authorizer.SuperUsers = []auth.Principal{auth.User("admin")}
		cfg.TestAuthorizer = clusterGrants{"monitor": {authz.OpDescribe}, "ops": {authz.OpDescribe, authz.OpDescribeConfigs}, "cfg": {authz.OpDescribeConfigs}}
	})
	// A quota series to see: alice's produce, measured.
	n.Quotas().RecordProduce(auth.WithClientID(auth.NewContext(context.Background(), auth.Session{Principal: auth.User("alice")}), "app"), 100)
	get := func(who string) (int, string) {
		req, err := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Test-Principal", who)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, tc := range []struct {
		who    string
		code   int
		quotas bool
	}{
		{"", http.StatusUnauthorized, false},
		{"bob", http.StatusForbidden, false},
		{"cfg", http.StatusForbidden, false},
		{"monitor", http.StatusOK, false},
		{"ops", http.StatusOK, true},
		{"admin", http.StatusOK, true},
		{"broker", http.StatusOK, true},
	} {
		code, body := get(tc.who)
		if code != tc.code {
			t.Errorf("GET /metrics as %q: %d, want %d", tc.who, code, tc.code)
			continue
		}
		if code != http.StatusOK {
			if strings.Contains(body, "strand_") {
				t.Errorf("GET /metrics as %q refused, yet with metrics", tc.who)
			}
			continue
		}
		if !strings.Contains(body, "strand_leader_partitions") {
			t.Errorf("GET /metrics as %q: no strand_leader_partitions", tc.who)
		}
		if got := strings.Contains(body, `strand_quota_rate{client_id="app"`); got != tc.quotas {
			t.Errorf("GET /metrics as %q: the quota series shown %v, want %v", tc.who, got, tc.quotas)
		}
	}
}
