// Package kafka is Strand's second front door: a listener speaking Kafka's
// binary wire protocol, so Kafka's own clients and tools (the Java
// client, librdkafka and what is built on it, franz-go, sarama,
// kafka-python, kcat) work against a Strand cluster unchanged.
//
// Each request is decoded with franz-go's kmsg codec, translated to the
// request layer's message (package request, the same methods the gRPC
// front door calls), and the answer translated back. Nothing here decides
// what a request means: a rule both front doors need lives in request or
// below. Record batches pass through as bytes: Strand's log already holds
// Kafka's v2 batches.
//
// One file per family of APIs registers what it serves (register, from
// init): apis.go (ApiVersions), metadata.go (Metadata, FindCoordinator),
// produce.go, fetch.go (Fetch with KIP-227 sessions, ListOffsets,
// OffsetForLeaderEpoch), and the group, admin and transaction files. An
// API not registered is absent from ApiVersions, so clients never send
// it.
//
// Connections (conn.go): requests of one connection are decoded and
// handed to the request layer in the order they arrive, so a producer's
// sequence checks see them in order; answers are written in that order
// too, by a writer that waits for acks=all produce answers while the
// reader carries on (at most MaxInFlight answers pending per
// connection). What breaks the protocol (a frame over
// socket.request.max.bytes, a header or body that does not decode, an
// unknown API key, a version outside the range served where the answer
// has no error field to say so) closes that connection with a log line
// and a metric; other connections and the node carry on.
package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/tlsconf"
	"github.com/strand-io/strand/quota"
	"github.com/strand-io/strand/request"
)

// Defaults, with Kafka's names.
const (
	// DefaultMaxRequestBytes is socket.request.max.bytes (100 MiB).
	DefaultMaxRequestBytes = 100 * 1024 * 1024
	// DefaultMaxInFlight is how many answers one connection may have
	// pending (decoded, not yet written) before its reader waits.
	DefaultMaxInFlight = 16
	// DefaultIdleTimeout is connections.max.idle.ms (10 minutes).
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultSessionSlots is max.incremental.fetch.session.cache.slots.
	DefaultSessionSlots = 1000
	// DefaultFailedAuthenticationDelay is
	// connection.failed.authentication.delay.ms's default (Kafka's, 100).
	DefaultFailedAuthenticationDelay = 100 * time.Millisecond
)

// Config configures a Server.
type Config struct {
	// Handler is the request layer; the server answers as
	// request.ListenerKafka (Metadata hands out brokers' Kafka addresses).
	Handler *request.Handler
	Logger  *slog.Logger
	// MaxRequestBytes is socket.request.max.bytes: a larger frame closes
	// the connection (0: DefaultMaxRequestBytes).
	MaxRequestBytes int32
	// MaxInFlight bounds the answers pending per connection (0: default).
	MaxInFlight int
	// IdleTimeout is connections.max.idle.ms (0: default; <0: none).
	IdleTimeout time.Duration
	// SessionSlots is max.incremental.fetch.session.cache.slots (0:
	// default; <0: no sessions, every fetch is a full one).
	SessionSlots int
	// Metrics counts requests and closed connections (nil: NewMetrics, unregistered).
	Metrics *Metrics
	// TestSession, TEST-ONLY: when set, every request of every connection
	// carries this session (auth.NewContext), as if the connection had
	// authenticated as it (tests drive the authorizer through
	// this door before it authenticates connections itself). A server
	// never sets it.
	TestSession *auth.Session
	// Security gives the listener's TLS (when KAFKA is SSL or SASL_SSL in
	// listener.security.protocol.map) and each connection's session (nil:
	// PLAINTEXT, every connection anonymous).
	Security *tlsconf.Security
	// SecurityProtocol is this listener's protocol in
	// listener.security.protocol.map ("" or PLAINTEXT: none); SASL_PLAINTEXT
	// and SASL_SSL require SASL authentication first (sasl.go).
	SecurityProtocol string
	// SASLMechanisms is sasl.enabled.mechanisms (nil: DefaultSASLMechanisms).
	SASLMechanisms []string
	// FailedAuthenticationDelay is connection.failed.authentication.delay.ms
	// (0: DefaultFailedAuthenticationDelay; <0: none): a connection whose
	// SASL authentication failed gets its answer, and is closed, that much
	// later (sasl.go).
	FailedAuthenticationDelay time.Duration
	// Quotas enforces client quotas (quota.go; nil: none).
	Quotas *quota.Manager
	// Clock times a throttled connection's mute and a failed
	// authentication's delay (nil: the wall clock);
	// the node gives the quotas' clock.
	Clock clock.Clock
	// TestingSession, TEST-ONLY, gives each connection an auth.Session
	// (until the Kafka door authenticates connections itself).
	TestingSession TestingSessionFunc
}

// Server serves Kafka's protocol on listeners given to Serve.
type Server struct {
	cfg      Config
	h        *request.Handler
	lg       *slog.Logger
	metrics  *Metrics
	sessions *sessionCache
	tls      *tls.Config // nil: PLAINTEXT

	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	lns    map[net.Listener]bool
	conns  map[*Conn]bool
	closed bool
	wg     sync.WaitGroup
}

// NewServer returns a server; Serve starts it on a listener.
func NewServer(cfg Config) *Server {
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.FailedAuthenticationDelay == 0 {
		cfg.FailedAuthenticationDelay = DefaultFailedAuthenticationDelay
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.SessionSlots == 0 {
		cfg.SessionSlots = DefaultSessionSlots
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	ctx, cancel := context.WithCancel(context.Background())
	var tc *tls.Config
	if cfg.Security != nil {
		tc = cfg.Security.ServerTLS(auth.ListenerKafka)
	}
	return &Server{tls: tc,
		cfg: cfg, h: cfg.Handler.ForListener(request.ListenerKafka), lg: cfg.Logger.With("listener", "kafka"),
		metrics: cfg.Metrics, sessions: newSessionCache(cfg.SessionSlots),
		ctx: ctx, cancel: cancel, lns: map[net.Listener]bool{}, conns: map[*Conn]bool{},
	}
}

// ErrServerClosed is what Serve returns once Close was called.
var ErrServerClosed = errors.New("kafka: server closed")

// Serve accepts connections on ln until Close (then ErrServerClosed) or
// until accepting fails; either way ln is closed when it returns. Each
// connection is served by goroutines the server owns; Close stops them.
func (s *Server) Serve(ln net.Listener) error {
	defer ln.Close()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.lns[ln] = true
	s.mu.Unlock()
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			delete(s.lns, ln)
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("kafka: accept: %w", err)
		}
		c := newConn(s, nc)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return ErrServerClosed
		}
		s.conns[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		s.metrics.connections.Inc()
		go func() {
			defer s.wg.Done()
			c.serve(s.ctx)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			s.metrics.connections.Dec()
		}()
	}
}

// Close stops accepting, closes every connection (answers not yet
// written are dropped, as when a broker stops) and waits for the
// server's goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	for ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.raw.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

// Metrics counts the Kafka listener's requests and the connections it
// closed, under names that say which listener (the request layer's byte
// counters are shared with the gRPC front door).
type Metrics struct {
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	closed      *prometheus.CounterVec
	connections prometheus.Gauge
	throttled   prometheus.Counter
}

// NewMetrics returns unregistered metrics (Collectors).
func NewMetrics() *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_kafka_requests_total",
			Help: "Requests served on the Kafka listener, per API (RequestsPerSec)."}, []string{"request"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "strand_kafka_request_duration_seconds",
			Help:    "Time from a Kafka request's decoding to its answer being written, per API (TotalTimeMs).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"request"}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_kafka_connections_closed_total",
			Help: "Kafka-listener connections the broker closed for breaking the protocol, per reason (oversized, malformed, unknown_api, unsupported_version, idle, tls_handshake: a TLS handshake or certificate authentication that failed)."}, []string{"reason"}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "strand_kafka_connections",
			Help: "Open connections on the Kafka listener (connection-count)."}),
		throttled: prometheus.NewCounter(prometheus.CounterOpts{Name: "strand_kafka_throttled_requests_total",
			Help: "Kafka-listener requests over a client quota whose connection was muted for the throttle time."}),
	}
	// Every reason is served from the start, at 0 until a connection is
	// closed for it (as strand_connections_rejected_total is), so the
	// metric is there to alert on before the first violation.
	for _, reason := range []string{"oversized", "malformed", "unknown_api", "unsupported_version", "idle", "tls_handshake"} {
		m.closed.WithLabelValues(reason).Add(0)
	}
	return m
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.latency, m.closed, m.connections, m.throttled}
}

// Throttled is how many requests muted their connection for a quota.
func (m *Metrics) Throttled() float64 { return counterValue(m.throttled) }

func (s *Server) clock() clock.Clock {
	if s.cfg.Clock != nil {
		return s.cfg.Clock
	}
	return clock.Real
}

// Closed is how many connections were closed for reason.
func (m *Metrics) Closed(reason string) float64 {
	return counterValue(m.closed.WithLabelValues(reason))
}

// Requests is how many requests of api (Kafka's name, e.g. "Produce") were answered.
func (m *Metrics) Requests(api string) float64 {
	return counterValue(m.requests.WithLabelValues(api))
}

// session is the session of a connection from remote (cs: its TLS state,
// nil for PLAINTEXT).
func (s *Server) session(remote net.Addr, cs *tls.ConnectionState) (auth.Session, error) {
	if s.cfg.Security == nil {
		host, _, err := net.SplitHostPort(remote.String())
		if err != nil {
			host = remote.String()
		}
		return auth.Session{Principal: auth.Anonymous, Host: host, Listener: auth.ListenerKafka}, nil
	}
	return s.cfg.Security.Session(auth.ListenerKafka, remote, cs)
}
