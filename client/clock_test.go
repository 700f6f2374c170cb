package client

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/testkit/testutil"
)

// linger.ms runs on the client's clock: under a fake clock a batch waits
// exactly linger.ms of fake time, however long the test really takes, and
// is sent as soon as the clock is advanced past it. Records take their
// timestamp from the same clock.
func TestLingerRunsOnTheClientClock(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm, err := NewAdmin(Bootstrap(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if err := adm.CreateTopic(ctx, TopicSpec{Name: "clocked", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}

	start := time.Now().Add(-time.Minute).Truncate(time.Second) // within the broker's timestamp bounds
	fake := clock.NewFake(start)
	const linger = 10 * time.Second
	p, err := NewProducer(Bootstrap(n.Addr()), WithClock(fake), Linger(linger), EnableIdempotence(IdempotenceOff))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)

	done := make(chan error, 1)
	rec := &Record{Topic: "clocked", Value: []byte("v")}
	p.Produce(ctx, rec, func(_ *Record, err error) { done <- err })

	// The batch was made at the fake start and the fake clock has not
	// moved: it is due in exactly linger.ms.
	if next := p.drain(); next != linger {
		t.Fatalf("drain: next look in %v, want exactly linger.ms (%v) of the fake clock", next, linger)
	}
	select {
	case err := <-done:
		t.Fatalf("the record completed (%v) before linger.ms passed on the client's clock", err)
	default:
	}
	if !rec.Timestamp.Equal(start) {
		t.Fatalf("record timestamp %v, want the fake clock's %v", rec.Timestamp, start)
	}

	fake.Advance(linger - time.Millisecond)
	if next := p.drain(); next != time.Millisecond {
		t.Fatalf("after advancing linger.ms-1ms: next look in %v, want 1ms", next)
	}
	fake.Advance(time.Millisecond)
	p.drain() // due now: sent (the run loop may have sent it already)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("produce: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the record was not sent once the fake clock passed linger.ms")
	}
	if rec.Offset != 0 {
		t.Fatalf("offset %d, want 0", rec.Offset)
	}
}

// The wait between retries (retry.backoff.ms) runs on the client's clock:
// it ends exactly when the fake clock has passed the backoff, not before,
// however long the test really takes. (synctest.Wait lets the sleeper reach
// its timer before the clock moves.)
func TestRetryBackoffRunsOnTheClientClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := clock.NewFake(time.Unix(1_000_000, 0))
		cfg := newConfig([]Opt{WithClock(fake), RetryBackoff(time.Second, time.Second)})
		d := backoff(&cfg, 3) // capped at retry.backoff.max.ms, ±20% jitter
		if d < 800*time.Millisecond || d > 1200*time.Millisecond {
			t.Fatalf("backoff %v outside retry.backoff.max.ms ±20%%", d)
		}
		slept := make(chan error, 1)
		go func() { slept <- cfg.sleep(context.Background(), d) }()
		synctest.Wait()
		fake.Advance(d - time.Nanosecond)
		synctest.Wait()
		select {
		case err := <-slept:
			t.Fatalf("the backoff of %v ended (%v) after %v of the client's clock", d, err, d-time.Nanosecond)
		default:
		}
		fake.Advance(time.Nanosecond)
		synctest.Wait()
		select {
		case err := <-slept:
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("the backoff of %v did not end once the client's clock passed it", d)
		}
	})
}
