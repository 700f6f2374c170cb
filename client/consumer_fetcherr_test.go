package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

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
