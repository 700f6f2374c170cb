// Package quota enforces Kafka's client quotas: producer_byte_rate,
// consumer_byte_rate and request_percentage on the entities user,
// client-id and user + client-id (each a name or its type's default),
// measured as Kafka's ClientQuotaManager measures them: a rate over
// quota.window.num samples of quota.window.size.seconds each, and, when
// the observed rate is over the quota, a throttle time of
// (observed − quota) / quota × the span the samples cover. The front doors
// record what a request cost, put the throttle time in the answer's
// ThrottleTimeMs and stop reading the connection for that long (KIP-219).
//
// Which quota applies to a request of user u with client id c, key by key,
// is the first of Kafka's eight that sets the key: user u and client c;
// user u and the default client; user u; the default user and client c;
// the default user and the default client; the default user; client c;
// the default client. The level found also decides whose samples the
// request adds to (Kafka's quota metric tags): a user level measures the
// user's requests from all clients together, a user + client level each
// (user, client) pair, a client level each client id across users.
//
// request_percentage is the share of one request-handling thread's time:
// here, the wall time of the handler calls (the request layer call, not
// the network I/O), as a percentage of the window span, so
// request_percentage=100 is one handler busy the whole time. Its throttle
// time is capped at one window, as Kafka caps the request quota; the
// byte-rate throttle times are not capped, as Kafka's are not.
//
// A request with no session in its context (the node's own calls, tests
// calling the request layer directly) is never recorded nor throttled; nor
// is a broker's session. A nil *Manager throttles nothing. Samples nobody
// added to for an hour are dropped (Kafka expires its quota sensors so).
package quota

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/metadata"
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

// Entity is a quota entity: a user part, a client-id part, or both.
type Entity = metadata.QuotaEntity

// Config configures a Manager.
type Config struct {
	// Clock measures the samples (nil: the wall clock).
	Clock clock.Clock
	// Windows is quota.window.num (0: DefaultWindows).
	Windows int
	// Window is quota.window.size.seconds (0: DefaultWindow).
	Window time.Duration
}

// inactiveExpiry is how long samples nobody adds to are kept (Kafka's
// quota sensors expire after an hour without a recording); sweepEvery how
// often the manager looks for them.
const (
	inactiveExpiry = time.Hour
	sweepEvery     = time.Minute
)

// Manager holds the quotas in force and the samples of what they measure.
type Manager struct {
	clk     clock.Clock
	windows int
	window  time.Duration

	mu        sync.Mutex
	quotas    map[Entity]Values
	samples   map[statKey]*rate
	throttl   map[statKey]float64 // throttle time given, ms, for the metric
	lastSweep time.Time

	descRate, descThrottle *prometheus.Desc
}

// statKey is whose samples a recording adds to: the type and Kafka's
// quota metric tags (user, client id; either may be "").
type statKey struct {
	t      Type
	user   string
	client string
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
		quotas: map[Entity]Values{}, samples: map[statKey]*rate{}, throttl: map[statKey]float64{},
		descRate: prometheus.NewDesc("strand_quota_rate",
			"What a client quota measures, over the quota windows (kafka.server:type=Produce|Fetch byte-rate in bytes/s; type=Request request-time in percent of one handler), by Kafka's quota metric tags: user and client_id as the quota in force groups requests, \"\" when it does not group by that part.",
			[]string{"type", "user", "client_id"}, nil),
		descThrottle: prometheus.NewDesc("strand_quota_throttle_time_ms_total",
			"Throttle time given (kafka.server:type=Produce|Fetch|Request throttle-time), summed, by the same tags.",
			[]string{"type", "user", "client_id"}, nil),
	}
}

// Set replaces every quota. The node calls it when the metadata image's
// quotas change.
func (m *Manager) Set(quotas map[Entity]Values) {
	if m == nil {
		return
	}
	cp := make(map[Entity]Values, len(quotas))
	for e, v := range quotas {
		cp[e] = v
	}
	m.mu.Lock()
	m.quotas = cp
	m.mu.Unlock()
}

// SetUsers is Set with user entities only: users by name and the default
// user's (nil: none).
func (m *Manager) SetUsers(users map[string]Values, def Values) {
	q := make(map[Entity]Values, len(users)+1)
	for u, v := range users {
		q[metadata.QuotaUser(u, false)] = v
	}
	if def != nil {
		q[metadata.QuotaUser("", true)] = def
	}
	m.Set(q)
}

// Quota is the quota of key in force for a request of user with client
// id clientID (Kafka's precedence, see the package comment); ok is false
// if none applies.
func (m *Manager) Quota(user, clientID, key string) (float64, bool) {
	if m == nil {
		return 0, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	tu, tc := m.tagsLocked(key, user, clientID)
	return m.limitLocked(key, tu, tc)
}

func (m *Manager) has(key string, e Entity) bool {
	_, ok := m.quotas[e][key]
	return ok
}

// tagsLocked is Kafka's quota metric tags of a request of user with
// client id c for key: the first of the eight levels that sets key
// decides which parts group the samples.
func (m *Manager) tagsLocked(key, user, c string) (string, string) {
	u, cl, def := metadata.QuotaNamed(user), metadata.QuotaNamed(c), metadata.QuotaDefault
	switch {
	case m.has(key, Entity{User: u, ClientID: cl}), m.has(key, Entity{User: u, ClientID: def}):
		return user, c
	case m.has(key, Entity{User: u}):
		return user, ""
	case m.has(key, Entity{User: def, ClientID: cl}), m.has(key, Entity{User: def, ClientID: def}):
		return user, c
	case m.has(key, Entity{User: def}):
		return user, ""
	}
	return "", c
}

// limitLocked is Kafka's quota limit for the tags: the levels that group
// by both parts when both are set, the user levels when only the user
// is, the client-id levels when only the client id is.
func (m *Manager) limitLocked(key, user, c string) (float64, bool) {
	u, cl, def := metadata.QuotaNamed(user), metadata.QuotaNamed(c), metadata.QuotaDefault
	var order []Entity
	switch {
	case user != "" && c != "":
		order = []Entity{{User: u, ClientID: cl}, {User: u, ClientID: def}, {User: def, ClientID: cl}, {User: def, ClientID: def}}
	case user != "":
		order = []Entity{{User: u}, {User: def}}
	case c != "":
		order = []Entity{{ClientID: cl}, {ClientID: def}}
	}
	for _, e := range order {
		if v, ok := m.quotas[e][key]; ok {
			return v, true
		}
	}
	return 0, false
}

// subject is the user and client id a request is measured as (false: not
// measured).
func subject(ctx context.Context) (string, string, bool) {
	s, ok := auth.FromContext(ctx)
	if !ok || s.Broker {
		return "", "", false
	}
	return s.Principal.Name, auth.ClientIDFrom(ctx), true
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
	user, client, ok := subject(ctx)
	if !ok {
		return 0
	}
	now := m.clk.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweepLocked(now)
	tu, tc := m.tagsLocked(t.key(), user, client)
	k := statKey{t, tu, tc}
	r := m.samples[k]
	if r == nil {
		r = &rate{}
		m.samples[k] = r
	}
	r.record(now, v, m.windows, m.window)
	q, ok := m.limitLocked(t.key(), tu, tc)
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

// sweepLocked drops, at most once per sweepEvery, the samples nobody has
// added to for inactiveExpiry, so client ids that come and go do not
// accumulate.
func (m *Manager) sweepLocked(now time.Time) {
	if now.Sub(m.lastSweep) < sweepEvery {
		return
	}
	m.lastSweep = now
	for k, r := range m.samples {
		if now.Sub(r.last) >= inactiveExpiry {
			delete(m.samples, k)
			delete(m.throttl, k)
		}
	}
}

// Rate is the measured rate of t now (bytes/s, or percent) of the samples
// tagged user and clientID (see the package comment: "" for a part the
// quota in force does not group by).
func (m *Manager) Rate(t Type, user, clientID string) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.samples[statKey{t, user, clientID}]
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
		a, b := keys[i], keys[j]
		if a.t != b.t {
			return a.t < b.t
		}
		if a.user != b.user {
			return a.user < b.user
		}
		return a.client < b.client
	})
	for _, k := range keys {
		v, _ := m.samples[k].measure(now, m.windows, m.window)
		ch <- prometheus.MustNewConstMetric(m.descRate, prometheus.GaugeValue, v, k.t.String(), k.user, k.client)
		ch <- prometheus.MustNewConstMetric(m.descThrottle, prometheus.CounterValue, m.throttl[k], k.t.String(), k.user, k.client)
	}
}

// rate is Kafka's SampledStat Rate: samples of one window each, the
// oldest dropped once more than n are kept.
type rate struct {
	samples []sample
	last    time.Time // the last recording
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
	r.last = now
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
