package quota

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/internal/auth"
)

func as(user string) context.Context {
	return auth.NewContext(context.Background(), auth.Session{Principal: auth.User(user)})
}

// TestThrottleTimeIsKafkas: a burst over producer_byte_rate is throttled
// by (observed − quota) / quota × the samples' span; within it, by nothing.
func TestThrottleTimeIsKafkas(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	m := New(Config{Clock: clk})
	m.Set(map[string]Values{"alice": {ProducerByteRate: 1000}}, nil)
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
	m.Set(map[string]Values{"alice": {ProducerByteRate: 1000}}, Values{ConsumerByteRate: 10})
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
	m.Set(nil, Values{ProducerByteRate: 1})
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
	m.Set(map[string]Values{"alice": {RequestPercentage: 10}}, nil)
	if d := m.RecordRequest(as("alice"), 500*time.Millisecond); d != 0 {
		t.Fatalf("5%% of a handler: throttled %v", d)
	}
	// 1.5 s over 10 s = 15%: (15−10)/10 × 10 s = 5 s, capped at 1 s.
	if d := m.RecordRequest(as("alice"), time.Second); d != time.Second {
		t.Fatalf("throttle %v, want the 1 s cap", d)
	}
	if r := m.Rate(Request, "alice"); r < 14.9 || r > 15.1 {
		t.Fatalf("rate %v, want 15%%", r)
	}
}

// TestMetricsByTypeAndUser: the manager exports Kafka's
// type=Produce|Fetch|Request, user=… byte-rate / request-time and
// throttle-time as Prometheus series.
func TestMetricsByTypeAndUser(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	m := New(Config{Clock: clk})
	m.Set(map[string]Values{"alice": {ProducerByteRate: 1000}}, nil)
	m.RecordProduce(as("alice"), 20000)
	m.RecordFetch(as("bob"), 500)
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
	if got["strand_quota_rate,type=Produce,user=alice"] != 2000 || got["strand_quota_rate,type=Fetch,user=bob"] != 50 {
		t.Errorf("rates: %v", got)
	}
	if got["strand_quota_throttle_time_ms_total,type=Produce,user=alice"] != 10000 || got["strand_quota_throttle_time_ms_total,type=Fetch,user=bob"] != 0 {
		t.Errorf("throttle times: %v", got)
	}
}
