package node

import (
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"strings"

	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/planted"
)

// The HTTP listener (nothing open that should not be). It is
// read-only: every handler answers only GET and HEAD (405 with an Allow
// header otherwise), the console and /metrics included; only the test-only
// /debug/faults/ endpoints, served with Config.TestingFaults alone, take
// POST. /debug/pprof is served only with debug.endpoints.enable=true
// (404 otherwise), and then only to a super user (super.users) or a
// broker (inter.broker.principals), as proved by the request's verified
// TLS client certificate (Config.DebugSession): a request with no such
// session is answered 401, another principal 403. There is no plaintext
// opt-out: without TLS on the HTTP listener no request has a session, so
// pprof stays refused even when enabled.

// readOnly refuses every method but GET and HEAD, except on the fault
// endpoints when they are served.
func readOnly(h http.Handler, faults bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !(faults && strings.HasPrefix(r.URL.Path, "/debug/faults/")) {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the HTTP listener is read-only: GET and HEAD only", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// registerDebug mounts pprof behind debugAuth.
func (n *Node) registerDebug(mux *http.ServeMux) {
	for path, h := range map[string]http.HandlerFunc{
		"/debug/pprof/":        pprof.Index,
		"/debug/pprof/cmdline": pprof.Cmdline,
		"/debug/pprof/profile": pprof.Profile,
		"/debug/pprof/symbol":  pprof.Symbol,
		"/debug/pprof/trace":   pprof.Trace,
	} {
		mux.Handle(path, n.debugAuth(h))
	}
}

// debugAuth admits a request whose session is a broker's or a super
// user's.
func (n *Node) debugAuth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if planted.On(planted.DebugEndpointsUnauthenticated) || n.privileged(w, r, "the debug endpoints") {
			h.ServeHTTP(w, r)
		}
	})
}

// privileged reports whether the request's session is a broker's or a
// super user's; if not, it has answered 401 (no session) or 403. what
// names the pages for the answer.
func (n *Node) privileged(w http.ResponseWriter, r *http.Request, what string) bool {
	s, ok := n.httpSession(r)
	switch {
	case !ok:
		http.Error(w, what+" need a client certificate (TLS on the HTTP listener)", http.StatusUnauthorized)
		return false
	case !s.Broker && !slices.Contains(n.cfg.Authorizer.SuperUsers, s.Principal):
		n.lg.Warn("HTTP request refused", "principal", s.Principal.String(), "host", s.Host, "path", r.URL.Path)
		http.Error(w, what+" are for super users and brokers", http.StatusForbidden)
		return false
	}
	return true
}

// consoleAuth guards the web console once an authorizer is configured:
// the console asks the brokers as this node (a broker, allowed
// everything), so it would show any viewer the topics, groups and
// transactional ids the ACLs hide; only a super user or a broker may see
// it then. Without an authorizer nothing is hidden and it stays open.
func (n *Node) consoleAuth(h http.Handler) http.Handler {
	if n.cfg.Authorizer.ClassName == "" && n.cfg.TestAuthorizer == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.privileged(w, r, "the console's pages") {
			h.ServeHTTP(w, r)
		}
	})
}

// faultAuth guards the test-only fault endpoints (faults.go) as pprof is
// guarded once the HTTP listener authenticates its clients (HTTP:SSL, or a
// test's DebugSession): only a super user or a broker may hold a
// partition's replication. On a plaintext listener (the process drills)
// they stay open: no request has a principal there, and they exist only
// with Config.TestingFaults.
func (n *Node) faultAuth(h http.HandlerFunc) http.HandlerFunc {
	if n.cfg.DebugSession == nil && n.sec.ServerTLS(auth.ListenerHTTP, "http/1.1") == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if n.privileged(w, r, "the fault endpoints") {
			h(w, r)
		}
	}
}

// httpSession is the session of an HTTP request: the principal of its
// verified TLS client certificate (HTTP:SSL and a certificate sent), else
// none. Config.DebugSession replaces it in tests.
func (n *Node) httpSession(r *http.Request) (auth.Session, bool) {
	if f := n.cfg.DebugSession; f != nil {
		return f(r)
	}
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return auth.Session{}, false
	}
	addr, err := net.ResolveTCPAddr("tcp", r.RemoteAddr)
	if err != nil {
		return auth.Session{}, false
	}
	sess, err := n.sec.Session(auth.ListenerHTTP, addr, r.TLS)
	if err != nil || sess.Mechanism == "" {
		return auth.Session{}, false
	}
	return sess, true
}
