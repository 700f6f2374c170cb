package api

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ConnLimits are the connection caps of one group of listeners (Kafka's
// max.connections, max.connections.per.ip and
// max.connections.per.ip.overrides). A connection over a cap is closed as
// soon as it is accepted, before gRPC reads a byte of it, so a flood of
// idle connections costs the node at most the caps in file descriptors.
type ConnLimits struct {
	// MaxConnections caps the connections open at once on the group's
	// listeners together.
	MaxConnections int
	// MaxPerIP caps the connections from one source address.
	MaxPerIP int
	// PerIPOverrides replaces MaxPerIP for the addresses it names.
	PerIPOverrides map[netip.Addr]int
}

// Reasons a connection is refused (the reason label of
// strand_connections_rejected_total).
const (
	RejectMaxConnections = "max_connections"
	RejectMaxPerIP       = "max_connections_per_ip"
)

// ConnMetrics are the connection metrics of a node, shared by its
// listeners: the connections open now per listener, and those refused per
// listener and reason.
type ConnMetrics struct {
	current  *prometheus.GaugeVec
	rejected *prometheus.CounterVec
	// counts mirrors both for Current and Rejected: key listener, or
	// listener/reason; values *atomic.Int64.
	counts sync.Map
}

func (m *ConnMetrics) count(key string) *atomic.Int64 {
	if v, ok := m.counts.Load(key); ok {
		return v.(*atomic.Int64)
	}
	v, _ := m.counts.LoadOrStore(key, new(atomic.Int64))
	return v.(*atomic.Int64)
}

// NewConnMetrics returns the node's connection metrics.
func NewConnMetrics() *ConnMetrics {
	return &ConnMetrics{
		current: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_connections",
			Help: "Connections open now, per listener (connection-count)."}, []string{"listener"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_connections_rejected_total",
			Help: "Connections closed as soon as they were accepted because a cap was reached, per listener and reason: max_connections or max_connections_per_ip."}, []string{"listener", "reason"}),
	}
}

// Collectors lists the metrics to register.
func (m *ConnMetrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.current, m.rejected}
}

// Current is the number of connections open on listener.
func (m *ConnMetrics) Current(listener string) int { return int(m.count(listener).Load()) }

// Rejected is the number of connections listener refused for reason.
func (m *ConnMetrics) Rejected(listener, reason string) int {
	return int(m.count(listener + "/" + reason).Load())
}

// ConnLimiter counts the connections of a group of listeners (a node's
// client listeners share one; the inter-broker listener has its own, so
// that clients can never take the connections its peers need) and
// refuses those over its caps.
//
// An admitted TCP connection is handed to gRPC as the *net.TCPConn it is,
// not wrapped: only then does gRPC read it without pinning a read buffer
// per connection (an idle connection then holds none; wrapped, each held
// 256 KiB). Its slot is freed by the reaper, which checks the tracked
// connections every reapEvery and frees those closed. Connections of
// other types are wrapped and freed when closed.
type ConnLimiter struct {
	limits  ConnLimits
	metrics *ConnMetrics
	lg      *slog.Logger

	mu        sync.Mutex
	total     int
	perIP     map[netip.Addr]int
	tcp       map[*net.TCPConn]*slot
	listeners int           // wrapped listeners still open
	stop      chan struct{} // closes when the last listener closes
	// reaped closes when the reaper that stop stops has returned. Each
	// run of listeners (from the first wrapped to the last closed) has
	// its own pair: a wrap may start the next reaper while the last close
	// of the previous run still waits for its own to end.
	reaped chan struct{}
	logged atomic.Int64 // when a refusal was last logged (Unix ms)
}

// slot is an admitted connection's place in the counts.
type slot struct {
	ip   netip.Addr
	open *atomic.Int64
	gv   prometheus.Gauge
	once sync.Once
	rc   syscall.RawConn
}

// reapEvery is how often closed TCP connections are looked for: a slot
// is free at most this long after its connection closed.
const reapEvery = 100 * time.Millisecond

// NewConnLimiter returns a limiter enforcing limits; metrics may be nil.
func NewConnLimiter(limits ConnLimits, metrics *ConnMetrics, lg *slog.Logger) *ConnLimiter {
	if metrics == nil {
		metrics = NewConnMetrics()
	}
	if lg == nil {
		lg = slog.Default()
	}
	return &ConnLimiter{limits: limits, metrics: metrics, lg: lg, perIP: map[netip.Addr]int{}, tcp: map[*net.TCPConn]*slot{}}
}

// Limits are the caps the limiter enforces.
func (l *ConnLimiter) Limits() ConnLimits { return l.limits }

// perIPCap is the cap for connections from ip.
func (l *ConnLimiter) perIPCap(ip netip.Addr) int {
	if n, ok := l.limits.PerIPOverrides[ip]; ok {
		return n
	}
	return l.limits.MaxPerIP
}

// admit takes a slot for a connection from ip (invalid when the
// connection has no IP address: it then counts toward the total only),
// or returns why it may not have one.
func (l *ConnLimiter) admit(ip netip.Addr) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total >= l.limits.MaxConnections {
		return RejectMaxConnections
	}
	if ip.IsValid() {
		if l.perIP[ip] >= l.perIPCap(ip) {
			return RejectMaxPerIP
		}
		l.perIP[ip]++
	}
	l.total++
	return ""
}

// release frees the slot of a connection from ip.
func (l *ConnLimiter) release(ip netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if ip.IsValid() {
		if l.perIP[ip]--; l.perIP[ip] <= 0 {
			delete(l.perIP, ip)
		}
	}
}

// Wrap returns ln with the limiter's caps applied to the connections it
// accepts; name is the listener label of the metrics ("client",
// "external", "inter_broker"). Closing the returned listener (gRPC's Stop
// does) stops the reaper once every listener of the limiter is closed.
func (l *ConnLimiter) Wrap(ln net.Listener, name string) net.Listener {
	l.metrics.current.WithLabelValues(name).Set(0)
	l.metrics.rejected.WithLabelValues(name, RejectMaxConnections).Add(0)
	l.metrics.rejected.WithLabelValues(name, RejectMaxPerIP).Add(0)
	l.mu.Lock()
	if l.listeners == 0 {
		l.stop, l.reaped = make(chan struct{}), make(chan struct{})
		go l.reap(l.stop, l.reaped)
	}
	l.listeners++
	l.mu.Unlock()
	return &limitListener{Listener: ln, l: l, name: name,
		current: l.metrics.current.WithLabelValues(name), open: l.metrics.count(name)}
}

type limitListener struct {
	net.Listener
	l         *ConnLimiter
	name      string
	current   prometheus.Gauge
	open      *atomic.Int64
	closeOnce sync.Once
}

// Close closes the listener; the last one of the limiter to close stops
// the reaper and waits for it.
func (ll *limitListener) Close() error {
	err := ll.Listener.Close()
	ll.closeOnce.Do(func() {
		l := ll.l
		l.mu.Lock()
		l.listeners--
		var reaped chan struct{}
		if l.listeners == 0 {
			close(l.stop)
			reaped = l.reaped
		}
		l.mu.Unlock()
		if reaped != nil {
			<-reaped
		}
	})
	return err
}

// Accept returns the next connection within the caps; those over them are
// closed here and never reach the server.
func (ll *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		if reason := ll.l.admit(ip); reason != "" {
			ll.l.metrics.rejected.WithLabelValues(ll.name, reason).Inc()
			ll.l.metrics.count(ll.name + "/" + reason).Add(1)
			// A reset ends at once what the client waits on, and leaves
			// no TIME_WAIT here; the descriptor is freed now.
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
			ll.l.logRefusal(ll.name, reason, ip)
			continue
		}
		ll.current.Inc()
		ll.open.Add(1)
		sl := &slot{ip: ip, open: ll.open, gv: ll.current}
		if tc, ok := c.(*net.TCPConn); ok {
			if rc, err := tc.SyscallConn(); err == nil {
				sl.rc = rc
				ll.l.mu.Lock()
				ll.l.tcp[tc] = sl
				ll.l.mu.Unlock()
				return tc, nil
			}
		}
		return &limitedConn{Conn: c, free: func() { ll.l.free(sl) }}, nil
	}
}

// free gives a connection's slot back, once.
func (l *ConnLimiter) free(sl *slot) {
	sl.once.Do(func() {
		l.release(sl.ip)
		sl.gv.Dec()
		sl.open.Add(-1)
	})
}

// reap frees the slots of the tracked TCP connections that are closed,
// every reapEvery, until stop closes.
func (l *ConnLimiter) reap(stop, reaped chan struct{}) {
	defer close(reaped)
	t := time.NewTicker(reapEvery)
	defer t.Stop()
	var snap []*net.TCPConn
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		snap = snap[:0]
		l.mu.Lock()
		for c := range l.tcp {
			snap = append(snap, c)
		}
		l.mu.Unlock()
		for _, c := range snap {
			l.mu.Lock()
			sl := l.tcp[c]
			l.mu.Unlock()
			// Control fails once the descriptor is closed.
			if sl == nil || sl.rc.Control(func(uintptr) {}) == nil {
				continue
			}
			// The reaper of the previous run of listeners may still be
			// finishing: whichever takes the slot out frees it.
			l.mu.Lock()
			mine := l.tcp[c] == sl
			if mine {
				delete(l.tcp, c)
			}
			l.mu.Unlock()
			if mine {
				l.free(sl)
			}
		}
	}
}

func (l *ConnLimiter) logRefusal(listener, reason string, ip netip.Addr) {
	now := time.Now().UnixMilli()
	if last := l.logged.Load(); now-last < 10_000 || !l.logged.CompareAndSwap(last, now) {
		return
	}
	limit := l.limits.MaxConnections
	setting := "max.connections"
	if reason == RejectMaxPerIP {
		limit, setting = l.perIPCap(ip), "max.connections.per.ip"
	}
	l.lg.Warn("refused a connection: the listener is at its connection cap (logged at most every 10s; strand_connections_rejected_total counts them)",
		"listener", listener, "from", ip.String(), "setting", setting, "limit", limit)
}

// remoteIP is a connection's source address (invalid when it has none).
func remoteIP(c net.Conn) netip.Addr {
	switch a := c.RemoteAddr().(type) {
	case *net.TCPAddr:
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	case nil:
		return netip.Addr{}
	default:
		ap, err := netip.ParseAddrPort(a.String())
		if err != nil {
			return netip.Addr{}
		}
		return ap.Addr().Unmap()
	}
}

// limitedConn is a connection that is no *net.TCPConn: it frees its
// slot when it is closed.
type limitedConn struct {
	net.Conn
	free func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.free()
	return err
}
