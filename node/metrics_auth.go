package node

import (
	"net/http"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/strand-io/strand/authz"
)

// /metrics behind the authorizer. Its series name topics, partitions,
// consumer groups, users and client ids; without an authorizer nothing is
// hidden and it stays open. With one, /metrics answers only a request
// whose session is proved (a verified client certificate on HTTP:SSL, as
// for the console and pprof; 401 otherwise) and whose principal may
// Describe the cluster (403 otherwise); super users and brokers may. That
// is the authorization under which Kafka shows the same names through its
// own APIs: DescribeLogDirs (every partition of the broker, with sizes)
// and ListPartitionReassignments need Describe on the cluster, ListGroups
// lists every group to a principal that may Describe the cluster, and
// DescribeUserScramCredentials every user. The client quota series
// (strand_quota_*, by user and client id) are Kafka's DescribeClientQuotas'
// information, which needs DescribeConfigs on the cluster: a principal
// without it gets every other series. Filtering each series by Describe on
// its own topic or group instead would leave the cluster-wide counts
// (offline partitions, ISR changes, flush times) with no authorization
// of their own and make every scrape ask the authorizer once per series;
// a monitoring principal is granted Describe on the cluster in Kafka too.

// metricsHandlers are /metrics' two answers: everything, and everything
// but the client quota series.
func (n *Node) metricsHandlers() (full, withoutQuotas http.Handler) {
	registry := func(quotas bool) http.Handler {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collector{n}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		reg.MustRegister(n.metrics.Collectors()...)
		reg.MustRegister(n.connMetrics.Collectors()...)
		reg.MustRegister(n.kafkaMetrics.Collectors()...)
		if quotas {
			reg.MustRegister(n.quotas)
		}
		return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	return registry(true), registry(false)
}

// metricsAuth is /metrics' guard (see above): full for those who may
// see everything, withoutQuotas for a principal that may Describe the
// cluster but not DescribeConfigs it.
func (n *Node) metricsAuth(full, withoutQuotas http.Handler) http.Handler {
	if n.cfg.Authorizer.ClassName == "" && n.cfg.TestAuthorizer == nil {
		return full
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, ok := n.httpSession(r)
		if !ok {
			http.Error(w, "/metrics needs a client certificate (TLS on the HTTP listener) once an authorizer is configured", http.StatusUnauthorized)
			return
		}
		if s.Broker || slices.Contains(n.cfg.Authorizer.SuperUsers, s.Principal) {
			full.ServeHTTP(w, r)
			return
		}
		var chk authz.Checker
		if n.handler != nil {
			chk = n.handler.Authorizer
		}
		may := func(op authz.Operation) bool {
			return chk != nil && chk.Authorize(r.Context(), s, authz.Action{Op: op, Type: authz.ResourceCluster, Name: authz.ClusterName, Request: "Metrics"})
		}
		switch {
		case !may(authz.OpDescribe):
			n.lg.Warn("HTTP request refused", "principal", s.Principal.String(), "host", s.Host, "path", r.URL.Path)
			http.Error(w, "/metrics is for principals that may Describe the cluster", http.StatusForbidden)
		case may(authz.OpDescribeConfigs):
			full.ServeHTTP(w, r)
		default:
			withoutQuotas.ServeHTTP(w, r)
		}
	})
}
