package quota

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/metadata"
)

func as(user string) context.Context {
	return auth.NewContext(context.Background(), auth.Session{Principal: auth.User(user)})
}

func asClient(user, clientID string) context.Context {
	return auth.WithClientID(as(user), clientID)
}

// TestThrottleTimeIsKafkas: a burst over producer_byte_rate is throttled
// by (observed − quota) / quota × the samples' span; within it, by nothing.
func TestThrottleTimeIsKafkas(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	m := New(Config{Clock: clk})
	m.SetUsers(map[string]Values{"alice": {ProducerByteRate: 1000}}, nil)
	if d := m.RecordProduce(as("alice"), 5000); d != 0 {
		t.Fatalf("5000 bytes over a 10 s span at 1000 B/s: throttled %v", d)
	}
	// 20000 bytes over the minimum span of 10 windows: 2000 B/s, twice the
	// quota: throttled for one span, 10 s.
	if d := m.RecordProduce(as("alice"), 15000); d != 10*time.Second {
		t.Fatalf("throttle %v, want 10s", d)
	}
	// Samples older than 11 windows are forgotten.
	clk.Advance(12 * time.Second)
	if d := m.RecordProduce(as("alice"), 100); d != 0 {
		t.Fatalf("after the windows passed: throttled %v", d)
	}
}

// TestPrincipalsApart: one user's bytes never throttle another, the
// default user's quota applies to a user without one of its own, and a
// request with no session (the node's own) or a broker's is never throttled.
func TestPrincipalsApart(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	m := New(Config{Clock: clk})
	m.SetUsers(map[string]Values{"alice": {ProducerByteRate: 1000}}, Values{ConsumerByteRate: 10})
	if d := m.RecordProduce(as("alice"), 1<<20); d <= 0 {
		t.Fatal("alice over her quota not throttled")
	}
	if d := m.RecordProduce(as("bob"), 1<<20); d != 0 {
		t.Fatalf("bob (no produce quota) throttled %v", d)
	}
	if d := m.RecordFetch(as("bob"), 1000); d <= 0 {
		t.Fatal("bob over the default user's consumer_byte_rate not throttled")
	}
	if d := m.RecordProduce(context.Background(), 1<<30); d != 0 {
		t.Fatalf("no session throttled %v", d)
	}
	broker := auth.NewContext(context.Background(), auth.Session{Principal: auth.User("CN=broker"), Broker: true})
	m.SetUsers(nil, Values{ProducerByteRate: 1})
	if d := m.RecordProduce(broker, 1<<30); d != 0 {
		t.Fatalf("a broker throttled %v", d)
	}
	var nilm *Manager
	if d := nilm.RecordProduce(as("alice"), 1<<30); d != 0 {
		t.Fatal("nil manager throttled")
	}
}

// TestRequestPercentageCapped: handler time over request_percentage is
// throttled, never longer than one window.
func TestRequestPercentageCapped(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	m := New(Config{Clock: clk})
	m.SetUsers(map[string]Values{"alice": {RequestPercentage: 10}}, nil)
	if d := m.RecordRequest(as("alice"), 500*time.Millisecond); d != 0 {
		t.Fatalf("5%% of a handler: throttled %v", d)
	}
	// 1.5 s over 10 s = 15%: (15−10)/10 × 10 s = 5 s, capped at 1 s.
	if d := m.RecordRequest(as("alice"), time.Second); d != time.Second {
		t.Fatalf("throttle %v, want the 1 s cap", d)
	}
	if r := m.Rate(Request, "alice", ""); r < 14.9 || r > 15.1 {
		t.Fatalf("rate %v, want 15%%", r)
	}
}

// TestMetricsByTypeAndUser: the manager exports Kafka's
// type=Produce|Fetch|Request, user=… byte-rate / request-time and
// throttle-time as Prometheus series.
func TestMetricsByTypeAndUser(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	m := New(Config{Clock: clk})
	m.SetUsers(map[string]Values{"alice": {ProducerByteRate: 1000}}, nil)
	m.RecordProduce(as("alice"), 20000)
	m.RecordFetch(asClient("bob", "app"), 500)
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, mt := range f.Metric {
			key := f.GetName()
			for _, l := range mt.Label {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			if mt.Gauge != nil {
				got[key] = mt.Gauge.GetValue()
			} else {
				got[key] = mt.Counter.GetValue()
			}
		}
	}
	// alice's user quota groups her requests by user; bob, under no
	// quota, is measured by client id (Kafka's tags: user "", client-id).
	if got["strand_quota_rate,client_id=,type=Produce,user=alice"] != 2000 || got["strand_quota_rate,client_id=app,type=Fetch,user="] != 50 {
		t.Errorf("rates: %v", got)
	}
	if got["strand_quota_throttle_time_ms_total,client_id=,type=Produce,user=alice"] != 10000 || got["strand_quota_throttle_time_ms_total,client_id=app,type=Fetch,user="] != 0 {
		t.Errorf("throttle times: %v", got)
	}
}

// TestPrecedenceIsKafkas: for a request of user alice with client id app,
// the quota in force is the first of Kafka's eight levels that sets the
// key; each level, removed in turn, hands over to the next.
func TestPrecedenceIsKafkas(t *testing.T) {
	u, c, def := metadata.QuotaNamed("alice"), metadata.QuotaNamed("app"), metadata.QuotaDefault
	levels := []Entity{
		{User: u, ClientID: c},
		{User: u, ClientID: def},
		{User: u},
		{User: def, ClientID: c},
		{User: def, ClientID: def},
		{User: def},
		{ClientID: c},
		{ClientID: def},
	}
	m := New(Config{Clock: clock.NewFake(time.Unix(1000, 0))})
	for first := range levels {
		q := map[Entity]Values{}
		for i := first; i < len(levels); i++ {
			q[levels[i]] = Values{ProducerByteRate: float64(100 * (i + 1))}
		}
		// Other users' and clients' quotas never apply to alice/app.
		q[Entity{User: metadata.QuotaNamed("bob"), ClientID: c}] = Values{ProducerByteRate: 1}
		q[Entity{User: u, ClientID: metadata.QuotaNamed("other")}] = Values{ProducerByteRate: 1}
		q[Entity{ClientID: metadata.QuotaNamed("other")}] = Values{ProducerByteRate: 1}
		m.Set(q)
		got, ok := m.Quota("alice", "app", ProducerByteRate)
		if want := float64(100 * (first + 1)); !ok || got != want {
			t.Errorf("from level %d (%v) on: quota %v %v, want %v", first+1, levels[first], got, ok, want)
		}
	}
	m.Set(map[Entity]Values{{User: u}: {ConsumerByteRate: 5}})
	if _, ok := m.Quota("alice", "app", ProducerByteRate); ok {
		t.Error("a quota of another key applied")
	}
	// Kafka keys each level by key: a user + client level without the key
	// does not hide the user level that has it.
	m.Set(map[Entity]Values{{User: u, ClientID: c}: {ConsumerByteRate: 5}, {User: u}: {ProducerByteRate: 7}})
	if got, ok := m.Quota("alice", "app", ProducerByteRate); !ok || got != 7 {
		t.Errorf("producer_byte_rate past a user+client entity without it: %v %v, want 7", got, ok)
	}
}

// TestClientIDQuotasGroupAsKafka: a client-id quota measures each client
// id across users (alice and bob with client app share one budget); a
// user + default client quota measures each (user, client) pair apart.
func TestClientIDQuotasGroupAsKafka(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	m := New(Config{Clock: clk})
	m.Set(map[Entity]Values{{ClientID: metadata.QuotaNamed("app")}: {ProducerByteRate: 1000}})
	if d := m.RecordProduce(asClient("alice", "app"), 8000); d != 0 {
		t.Fatalf("alice/app within app's quota: throttled %v", d)
	}
	// bob/app adds to the same samples: 16000 B over 10 s is over 1000 B/s.
	if d := m.RecordProduce(asClient("bob", "app"), 8000); d <= 0 {
		t.Fatal("bob/app not throttled: the client id's budget is shared")
	}
	if d := m.RecordProduce(asClient("bob", "tool"), 1<<20); d != 0 {
		t.Fatalf("client tool (no quota) throttled %v", d)
	}
	if r := m.Rate(Produce, "", "app"); r != 1600 {
		t.Errorf("app's rate %v, want 1600", r)
	}

	m.Set(map[Entity]Values{{User: metadata.QuotaNamed("carol"), ClientID: metadata.QuotaDefault}: {ProducerByteRate: 1000}})
	if d := m.RecordProduce(asClient("carol", "a"), 8000); d != 0 {
		t.Fatalf("carol/a: throttled %v", d)
	}
	if d := m.RecordProduce(asClient("carol", "b"), 8000); d != 0 {
		t.Fatalf("carol/b throttled %v: each of carol's clients has its own budget", d)
	}
	if d := m.RecordProduce(asClient("carol", "a"), 8000); d <= 0 {
		t.Fatal("carol/a over her per-client quota not throttled")
	}
	// A request with an empty client id is grouped (user, "") and so
	// checked against the user levels only, as Kafka's quotaLimit does.
	if d := m.RecordProduce(asClient("carol", ""), 1<<20); d != 0 {
		t.Fatalf("carol with no client id throttled %v by a user + client quota", d)
	}
}

// TestIdleSamplesExpire: samples of a client id nobody used for an hour
// are dropped (client ids that come and go do not pile up).
func TestIdleSamplesExpire(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	m := New(Config{Clock: clk})
	for i := range 100 {
		m.RecordProduce(asClient("alice", fmt.Sprintf("c%d", i)), 10)
	}
	if n := len(m.samples); n != 100 {
		t.Fatalf("%d samples kept, want 100", n)
	}
	clk.Advance(30 * time.Minute)
	m.RecordProduce(asClient("alice", "c0"), 10)
	clk.Advance(31 * time.Minute)
	m.RecordProduce(asClient("alice", "new"), 10)
	if n := len(m.samples); n != 2 {
		t.Fatalf("%d samples kept after an hour, want 2 (c0, used 31 minutes ago, and new)", n)
	}
}
