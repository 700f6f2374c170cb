// Package quota enforces Kafka's client quotas per principal (issue 22):
// producer_byte_rate, consumer_byte_rate and request_percentage on the
// entity user (a named user, else the default user), measured as Kafka's
// ClientQuotaManager measures them: a rate over quota.window.num samples
// of quota.window.size.seconds each, and, when the observed rate is over
// the quota, a throttle time of (observed − quota) / quota × the span the
// samples cover. The front doors record what a request cost, put the
// throttle time in the answer's ThrottleTimeMs and stop reading the
// connection for that long (KIP-219).
//
// request_percentage is the share of one request-handling thread's time:
// here, the wall time of the handler calls of a principal (the request
// layer call, not the network I/O), as a percentage of the window span,
// so request_percentage=100 is one handler busy the whole time. Its
// throttle time is capped at one window, as Kafka caps the request quota;
// the byte-rate throttle times are not capped, as Kafka's are not.
//
// A request with no session in its context (the node's own calls, tests
// calling the request layer directly) is never recorded nor throttled; nor
// is a broker's session. A nil *Manager throttles nothing.
package quota

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/internal/auth"
)

// Kafka's quota keys.
const (
	ProducerByteRate  = "producer_byte_rate"
	ConsumerByteRate  = "consumer_byte_rate"
	RequestPercentage = "request_percentage"
)

// Keys are the quota keys, in Kafka's order.
var Keys = []string{ProducerByteRate, ConsumerByteRate, RequestPercentage}

// Defaults, with Kafka's names.
const (
	// DefaultWindows is quota.window.num.
	DefaultWindows = 11
	// DefaultWindow is quota.window.size.seconds.
	DefaultWindow = time.Second
)

// Type is what a quota measures; its String is Kafka's metric type.
type Type int

const (
	Produce Type = iota
	Fetch
	Request
)

func (t Type) String() string {
	switch t {
	case Produce:
		return "Produce"
	case Fetch:
		return "Fetch"
	}
	return "Request"
}

func (t Type) key() string {
	switch t {
	case Produce:
		return ProducerByteRate
	case Fetch:
		return ConsumerByteRate
	}
	return RequestPercentage
}

// Values are one entity's quotas by key (a key absent: no quota of it).
type Values map[string]float64

// Config configures a Manager.
type Config struct {
	// Clock measures the samples (nil: the wall clock).
	Clock clock.Clock
	// Windows is quota.window.num (0: DefaultWindows).
	Windows int
	// Window is quota.window.size.seconds (0: DefaultWindow).
	Window time.Duration
}

// Manager holds the quotas in force and each principal's samples.
type Manager struct {
	clk     clock.Clock
	windows int
	window  time.Duration

	mu      sync.Mutex
	users   map[string]Values // by user name
	def     Values            // the default user's
	samples map[statKey]*rate
	throttl map[statKey]float64 // throttle time given, ms, for the metric

	descRate, descThrottle *prometheus.Desc
}

type statKey struct {
	t    Type
	user string
}

// New returns a manager with no quotas.
func New(cfg Config) *Manager {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	if cfg.Windows <= 0 {
		cfg.Windows = DefaultWindows
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	return &Manager{
		clk: cfg.Clock, windows: cfg.Windows, window: cfg.Window,
		users: map[string]Values{}, samples: map[statKey]*rate{}, throttl: map[statKey]float64{},
		descRate: prometheus.NewDesc("strand_quota_rate",
			"What a user's quota measures, over the quota windows (kafka.server:type=Produce|Fetch byte-rate in bytes/s; type=Request request-time in percent of one handler).",
			[]string{"type", "user"}, nil),
		descThrottle: prometheus.NewDesc("strand_quota_throttle_time_ms_total",
			"Throttle time given to a user's requests (kafka.server:type=Produce|Fetch|Request throttle-time), summed.",
			[]string{"type", "user"}, nil),
	}
}

// Set replaces every quota: users by name, and the default user's (nil:
// none). The node calls it when the metadata image's quotas change.
func (m *Manager) Set(users map[string]Values, def Values) {
	if m == nil {
		return
	}
	cp := make(map[string]Values, len(users))
	for u, v := range users {
		cp[u] = v
	}
	m.mu.Lock()
	m.users, m.def = cp, def
	m.mu.Unlock()
}

// Quota is the quota of key in force for user: the user's own, else the
// default user's (Kafka resolves each key so); ok is false if neither.
func (m *Manager) Quota(user, key string) (float64, bool) {
	if m == nil {
		return 0, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.quotaLocked(user, key)
}

func (m *Manager) quotaLocked(user, key string) (float64, bool) {
	if v, ok := m.users[user][key]; ok {
		return v, true
	}
	v, ok := m.def[key]
	return v, ok
}

// subject is the user a request is measured as (false: not measured).
func subject(ctx context.Context) (string, bool) {
	s, ok := auth.FromContext(ctx)
	if !ok || s.Broker {
		return "", false
	}
	return s.Principal.Name, true
}

// RecordProduce records bytes produced by ctx's principal and returns the
// throttle time its answer carries (0: within its quota).
func (m *Manager) RecordProduce(ctx context.Context, bytes int) time.Duration {
	return m.record(ctx, Produce, float64(bytes))
}

// RecordFetch records bytes a consumer fetch of ctx's principal answered.
func (m *Manager) RecordFetch(ctx context.Context, bytes int) time.Duration {
	return m.record(ctx, Fetch, float64(bytes))
}

// RecordRequest records d of request handling by ctx's principal.
func (m *Manager) RecordRequest(ctx context.Context, d time.Duration) time.Duration {
	// In percent of one handler over a second: d in seconds × 100.
	return m.record(ctx, Request, d.Seconds()*100)
}

func (m *Manager) record(ctx context.Context, t Type, v float64) time.Duration {
	if m == nil {
		return 0
	}
	user, ok := subject(ctx)
	if !ok {
		return 0
	}
	now := m.clk.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	k := statKey{t, user}
	r := m.samples[k]
	if r == nil {
		r = &rate{}
		m.samples[k] = r
	}
	r.record(now, v, m.windows, m.window)
	q, ok := m.quotaLocked(user, t.key())
	if !ok || q <= 0 {
		return 0
	}
	observed, span := r.measure(now, m.windows, m.window)
	if observed <= q {
		return 0
	}
	d := time.Duration((observed - q) / q * float64(span))
	if t == Request && d > m.window {
		d = m.window // Kafka bounds the request quota's throttle at one window
	}
	d = d.Truncate(time.Millisecond)
	m.throttl[k] += float64(d.Milliseconds())
	return d
}

// Rate is user's measured rate of t now (bytes/s, or percent).
func (m *Manager) Rate(t Type, user string) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.samples[statKey{t, user}]
	if r == nil {
		return 0
	}
	v, _ := r.measure(m.clk.Now(), m.windows, m.window)
	return v
}

// Describe and Collect make the manager a prometheus.Collector.
func (m *Manager) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.descRate
	ch <- m.descThrottle
}

func (m *Manager) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clk.Now()
	keys := make([]statKey, 0, len(m.samples))
	for k := range m.samples {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].t != keys[j].t {
			return keys[i].t < keys[j].t
		}
		return keys[i].user < keys[j].user
	})
	for _, k := range keys {
		v, _ := m.samples[k].measure(now, m.windows, m.window)
		ch <- prometheus.MustNewConstMetric(m.descRate, prometheus.GaugeValue, v, k.t.String(), k.user)
		ch <- prometheus.MustNewConstMetric(m.descThrottle, prometheus.CounterValue, m.throttl[k], k.t.String(), k.user)
	}
}

// rate is Kafka's SampledStat Rate: samples of one window each, the
// oldest dropped once more than n are kept.
type rate struct {
	samples []sample
}

type sample struct {
	start time.Time
	v     float64
}

func (r *rate) purge(now time.Time, n int, w time.Duration) {
	cut := 0
	for cut < len(r.samples) && now.Sub(r.samples[cut].start) >= time.Duration(n)*w {
		cut++
	}
	r.samples = r.samples[cut:]
}

func (r *rate) record(now time.Time, v float64, n int, w time.Duration) {
	r.purge(now, n, w)
	if k := len(r.samples); k == 0 || now.Sub(r.samples[k-1].start) >= w {
		r.samples = append(r.samples, sample{start: now})
	}
	r.samples[len(r.samples)-1].v += v
}

// measure is the rate per second and the span it is taken over: from the
// oldest sample's start to now, but at least n−1 windows (Kafka's Rate,
// so a first burst is not measured over a few milliseconds).
func (r *rate) measure(now time.Time, n int, w time.Duration) (float64, time.Duration) {
	r.purge(now, n, w)
	total := 0.0
	for _, s := range r.samples {
		total += s.v
	}
	span := time.Duration(n-1) * w
	if len(r.samples) > 0 {
		if e := now.Sub(r.samples[0].start); e > span {
			span = e
		}
	}
	return total / span.Seconds(), span
}
