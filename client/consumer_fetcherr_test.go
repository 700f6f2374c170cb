package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/fakebroker"
	"github.com/strand-io/strand/testkit/wait"
)

// TestOnFetchErrorShowsRetriedErrors: a partition answering
// KAFKA_STORAGE_ERROR is retried by the consumer (Poll returns no error),
// and OnFetchError is told each time, with the broker's error; once the
// partition answers cleanly it is told so (a nil error), and the records
// flow again.
func TestOnFetchErrorShowsRetriedErrors(t *testing.T) {
	b := fakebroker.Start(t, fakebroker.Topic{Name: "t"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := NewProducer(Bootstrap(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p.Close(ctx)

	var mu sync.Mutex
	var reports []error
	c, err := NewConsumer(Bootstrap(b.Addr()), OnFetchError(func(tp TopicPartition, err error) {
		if tp != (TopicPartition{Topic: "t"}) {
			t.Errorf("reported %v", tp)
		}
		mu.Lock()
		reports = append(reports, err)
		mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	c.Assign(map[TopicPartition]int64{{Topic: "t"}: OffsetEarliest})
	b.Refuse("Fetch", pb.ErrorCode_KAFKA_STORAGE_ERROR)
	count := func() (int, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(reports) == 0 {
			return 0, nil
		}
		return len(reports), reports[len(reports)-1]
	}
	wait.Eventually(t, 10*time.Second, "KAFKA_STORAGE_ERROR reported", func() bool {
		recs, err := c.Poll(ctx)
		if err != nil || len(recs) != 0 {
			t.Fatalf("Poll while the partition fails: %v %v, want nothing and no error (retried)", recs, err)
		}
		n, last := count()
		return n > 0 && errors.Is(last, &errs.Error{Code: pb.ErrorCode_KAFKA_STORAGE_ERROR})
	})
	b.Refuse("Fetch", pb.ErrorCode_NONE)
	var got []*Record
	wait.Eventually(t, 10*time.Second, "the record once the partition reads again", func() bool {
		recs, err := c.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, recs...)
		return len(got) == 1
	})
	if n, last := count(); last != nil {
		t.Fatalf("after %d reports the last is %v, want nil (read again)", n, last)
	}
}

// TestFailedFetchRoundsBackOff: while every fetch of a round fails (the
// leader unreachable), Poll waits retry.backoff before returning, as Kafka's
// consumer backs off a partition whose fetch failed. Before, Poll returned
// at once, so a reader polling in a loop sent fetches, and started a
// metadata refresh per failed fetch, as fast as the CPU allowed (the
// cluster simulation found it: 80 000 refresh goroutines while a leader
// was down). Ten polls must take at least nine backoffs; without the
// pause they take a few milliseconds.
func TestFailedFetchRoundsBackOff(t *testing.T) {
	b := fakebroker.Start(t, fakebroker.Topic{Name: "t"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const backoff = 50 * time.Millisecond
	c, err := NewConsumer(Bootstrap(b.Addr()), RetryBackoff(backoff, backoff))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	c.Assign(map[TopicPartition]int64{{Topic: "t"}: 0})
	// The leader's fetches fail at the transport, as a node that is down
	// fails them (its metadata still names it the leader).
	b.Intercept("Fetch", func(context.Context, int, any) (any, error) {
		return nil, status.Error(codes.Unavailable, "connection refused")
	})
	start := time.Now()
	for range 10 {
		if recs, err := c.Poll(ctx); err != nil || len(recs) != 0 {
			t.Fatalf("Poll = %d records, %v; want none and no error (the error is retried)", len(recs), err)
		}
	}
	if el := time.Since(start); el < 9*backoff {
		t.Fatalf("ten polls of a failing partition took %v: no retry.backoff (%v) between failed rounds", el, backoff)
	}
	if n := b.Calls("Fetch"); n > 12 {
		t.Fatalf("%d fetches for ten polls", n)
	}
}
