package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/wait"
)

// What keeps the console, served on the unauthenticated metrics
// listener, from turning page requests into broker load: one gather per
// page at a time, a short cache, a bounded refresh, capped rows and a
// bounded number of OffsetFetch calls in flight.

// testClock is a clock a test moves by hand.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(now.UnixNano())
	return c
}
func (c *testClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *testClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

func consoleWith(im *metadata.Image, brokers map[int32]*fakeBroker, timeout time.Duration, clock func() time.Time) *Console {
	return New(Config{
		NodeID: 2,
		Image:  func() *metadata.Image { return im },
		Broker: func(b *metadata.Broker) (BrokerAPI, error) {
			if f := brokers[b.ID]; f != nil {
				return f, nil
			}
			return nil, errors.New("connection refused")
		},
		Timeout: timeout,
		Now:     clock,
	})
}

// TestConcurrentRequestsShareAGather: ten requests for the same page at
// once cost the brokers one gather (at most two), not ten.
func TestConcurrentRequestsShareAGather(t *testing.T) {
	bs := defaultBrokers()
	bs[1].delay = 100 * time.Millisecond
	c := consoleWith(testImage(), bs, 5*time.Second, newTestClock().Now)
	var wg sync.WaitGroup
	codes := make([]int, 10)
	bodies := make([]string, 10)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := httptest.NewRecorder()
			c.ServeHTTP(rec, httptest.NewRequest("GET", "/topics/orders", nil))
			codes[i], bodies[i] = rec.Code, rec.Body.String()
		}()
	}
	wg.Wait()
	for i := range 10 {
		if codes[i] != 200 {
			t.Fatalf("request %d: %d\n%s", i, codes[i], bodies[i])
		}
		mustContain(t, bodies[i], `<td class="num hw">10</td>`)
	}
	// One gather asks broker 1 twice (HW and LSO).
	if n := bs[1].listOffs.Load(); n > 4 {
		t.Errorf("10 concurrent requests made %d ListOffsets calls to broker 1: %d gathers, want at most 2", n, n/2)
	}
}

// TestCacheTTL: a second request within the TTL asks no broker; once
// the TTL has passed on the console's clock, the page gathers again.
func TestCacheTTL(t *testing.T) {
	bs := defaultBrokers()
	clock := newTestClock()
	c := consoleWith(testImage(), bs, time.Second, clock.Now)
	for _, path := range []string{"/topics/orders", "/groups"} {
		get(t, c, path)
		before := bs[1].listOffs.Load() + bs[1].fetches.Load()
		clock.Advance(500 * time.Millisecond)
		if code, body := get(t, c, path); code != 200 {
			t.Fatalf("%s: %d\n%s", path, code, body)
		}
		if after := bs[1].listOffs.Load() + bs[1].fetches.Load(); after != before {
			t.Errorf("%s: a request within the TTL made %d broker calls", path, after-before)
		}
		clock.Advance(2 * time.Second)
		get(t, c, path)
		if after := bs[1].listOffs.Load() + bs[1].fetches.Load(); after == before {
			t.Errorf("%s: no new gather once the TTL had passed", path)
		}
	}
}

// TestBusyIs503: with every gather slot held by a page whose brokers do
// not answer, a request for another page waits a bounded time and gets
// 503 with Retry-After.
func TestBusyIs503(t *testing.T) {
	bs := defaultBrokers()
	block := make(chan struct{})
	for _, b := range bs {
		b.block = block
	}
	c := consoleWith(testImage(), bs, 1*time.Second, newTestClock().Now)
	var wg sync.WaitGroup
	for _, path := range []string{"/topics/orders", "/transactions"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			get(t, c, path)
		}()
	}
	defer wg.Wait()
	defer close(block)
	wait.Eventually(t, 5*time.Second, "the two gathers to reach broker 1", func() bool { return bs[1].inCalls.Load() >= 2 })
	rec := httptest.NewRecorder()
	start := time.Now()
	c.ServeHTTP(rec, httptest.NewRequest("GET", "/groups", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("/groups with every slot busy: %d, Retry-After %q; want 503 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	if took := time.Since(start); took > 900*time.Millisecond {
		t.Errorf("/groups waited %v for a slot, more than the page budget allows", took)
	}
}

func TestRefreshClamped(t *testing.T) {
	c := testConsole(t, defaultBrokers())
	for q, want := range map[string]string{"1": "2", "2": "2", "30": "30", "100000": "300", "-3": "5", "x": "5"} {
		_, body := get(t, c, "/?refresh="+q)
		mustContain(t, body, `<meta http-equiv="refresh" content="`+want+`">`)
	}
}

// TestRowCaps: the topics, topic and groups pages show at most 500 rows
// and say how many there are; the topic and groups pages ask the brokers
// only about the rows they show.
func TestRowCaps(t *testing.T) {
	im := testImage()
	big := &metadata.Topic{Name: "big", ID: "t3"}
	for i := range int32(600) {
		big.Partitions = append(big.Partitions, &metadata.Partition{Topic: "big", Partition: i, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1})
	}
	im.Topics["big"] = big
	for i := range 600 {
		name := fmt.Sprintf("t%04d", i)
		im.Topics[name] = &metadata.Topic{Name: name, ID: name}
	}
	bs := defaultBrokers()
	for i := range 600 {
		bs[2].groups = append(bs[2].groups, &pb.GroupDescription{GroupId: fmt.Sprintf("g%04d", i), State: "Empty", ProtocolType: "consumer"})
	}
	c := consoleWith(im, bs, 5*time.Second, newTestClock().Now)

	_, body := get(t, c, "/topics")
	if n := strings.Count(body, `<tr><td><a href="/topics/`); n != 500 {
		t.Errorf("/topics shows %d rows, want 500", n)
	}
	mustContain(t, body, "showing 500 of 603")

	_, body = get(t, c, "/topics/big")
	if n := strings.Count(body, `<tr id="p-`); n != 500 {
		t.Errorf("/topics/big shows %d partitions, want 500", n)
	}
	mustContain(t, body, "showing 500 of 600")
	if n := bs[1].listOffs.Load(); n > 2 {
		t.Errorf("/topics/big: %d ListOffsets calls", n)
	}

	_, body = get(t, c, "/groups")
	if n := strings.Count(body, `<tr id="g-`); n != 500 {
		t.Errorf("/groups shows %d rows, want 500", n)
	}
	mustContain(t, body, "showing 500 of 601")
	if n := bs[2].fetches.Load(); n > 500 {
		t.Errorf("/groups made %d OffsetFetch calls for 500 rows", n)
	}
}

// TestOffsetFetchBounded: the groups page fetches the groups' offsets in
// parallel, at most 8 at once.
func TestOffsetFetchBounded(t *testing.T) {
	bs := defaultBrokers()
	bs[2].delay = 10 * time.Millisecond
	for i := range 40 {
		bs[2].groups = append(bs[2].groups, &pb.GroupDescription{GroupId: fmt.Sprintf("g%04d", i), State: "Empty", ProtocolType: "consumer"})
	}
	c := consoleWith(testImage(), bs, 10*time.Second, newTestClock().Now)
	code, body := get(t, c, "/groups")
	if code != 200 {
		t.Fatalf("%d\n%s", code, body)
	}
	if strings.Contains(body, `id="errors"`) {
		t.Errorf("errors on the page:\n%s", body)
	}
	if n := bs[2].fetches.Load(); n != 40 {
		t.Errorf("%d OffsetFetch calls, want 40", n)
	}
	if m := bs[2].maxFetch.Load(); m < 2 || m > 8 {
		t.Errorf("at most %d OffsetFetch calls in flight at once, want 2..8", m)
	}
}
