package client

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/fakebroker"
	"github.com/strand-io/strand/testkit/testutil"
)

// TestFirstBatchGoesAlone: until a partition has acknowledged a batch under
// the producer's id, the producer sends it one batch at a time. Otherwise,
// when the first batch is refused retriably, the batches in flight behind it
// are accepted by a leader that does not know the producer, and the retried
// first batch lands behind them or is refused OUT_OF_ORDER_SEQUENCE_NUMBER.
func TestFirstBatchGoesAlone(t *testing.T) {
	// The fake broker keeps producer state as Kafka 4 does: a producer id
	// it does not know is accepted at any sequence (its state may have
	// expired, KIP-360); a known one must go on at its last sequence plus
	// one. Its first produce request is answered NOT_LEADER_OR_FOLLOWER
	// (the leader had not applied the topic yet), and that answer is held
	// until four more requests arrived (or 300 ms passed), as when a
	// producer has several batches in flight; the requests behind it are
	// appended as they arrive.
	b := fakebroker.Start(t, fakebroker.Topic{Name: "t"})
	more := make(chan struct{}, 16) // a request after the first arrived
	b.ControlProduce(func(n int, _ *pb.ProduceRequest) fakebroker.ProduceAction {
		if n > 1 {
			select {
			case more <- struct{}{}:
			default:
			}
			return fakebroker.ProduceAction{}
		}
		hold := make(chan struct{})
		go func() { // ends after four more requests or 300 ms
			defer close(hold)
			deadline := time.After(300 * time.Millisecond)
			for k := 0; k < 4; k++ {
				select {
				case <-more:
				case <-deadline:
					return
				}
			}
		}()
		return fakebroker.ProduceAction{Code: pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, Message: "test: the topic is not applied yet", Hold: hold}
	})

	p, err := NewProducer(Bootstrap(b.Addr()), Logger(testutil.Logger()), Linger(0), BatchSize(64), MaxInFlight(5), RetryBackoff(10*time.Millisecond, 50*time.Millisecond),
		RequestTimeout(2*time.Second), DeliveryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	defer p.Close(ctx)
	const n = 40
	var recs []*Record
	for i := 0; i < n; i++ {
		recs = append(recs, &Record{Topic: "t", Value: []byte(fmt.Sprintf("v%02d", i))})
	}
	if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	if k := b.OutOfOrder(); k != 0 {
		t.Errorf("%d batches were refused OUT_OF_ORDER_SEQUENCE_NUMBER", k)
	}
	values := b.Values("t", 0)
	if len(values) != n {
		t.Fatalf("the broker has %d records, want %d: %v", len(values), n, values)
	}
	for i, v := range values {
		if want := fmt.Sprintf("v%02d", i); v != want {
			t.Fatalf("record %d is %s, want %s (order: %v)", i, v, want, values)
		}
	}
}
