package client_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/testkit/testutil"
)

// A producer with delivery.timeout.ms of 2 s that produces to a topic that
// does not exist fails the record at delivery.timeout.ms, not after
// max.block.ms (60 s) as it did, and the error keeps the error contract:
// it carries UNKNOWN_TOPIC_OR_PARTITION (errors.Is, errors.As, named once),
// matches ErrDeliveryTimeout and context.DeadlineExceeded, and is
// retriable (Kafka's producer retries an unknown partition until its
// delivery timeout).
func TestProduceToUnknownTopicHonoursDeliveryTimeout(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	p, err := client.NewProducer(client.Bootstrap(n.Addr()), client.Logger(testutil.Logger()),
		client.DeliveryTimeout(2*time.Second), client.RequestTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	defer p.Close(ctx)
	start := time.Now()
	err = p.ProduceSync(ctx, &client.Record{Topic: "no-such-topic", Value: []byte("v")}).FirstErr()
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the record failed after %v; delivery.timeout.ms is 2s", took.Round(time.Second))
	}
	if err == nil {
		t.Fatal("the record was acknowledged")
	}
	if !errors.Is(err, client.ErrUnknownTopicOrPartition) {
		t.Errorf("errors.Is(err, ErrUnknownTopicOrPartition) = false: %v", err)
	}
	var e *client.Error
	if !errors.As(err, &e) || e.Code.String() != "UNKNOWN_TOPIC_OR_PARTITION" {
		t.Errorf("errors.As(err, *client.Error) does not give UNKNOWN_TOPIC_OR_PARTITION: %v", err)
	}
	if !errors.Is(err, client.ErrDeliveryTimeout) {
		t.Errorf("errors.Is(err, ErrDeliveryTimeout) = false: %v", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("errors.Is(err, context.DeadlineExceeded) = false: %v", err)
	}
	if got := client.Classify(err); got != client.Retriable {
		t.Errorf("Classify = %v, want retriable: %v", got, err)
	}
	if c := strings.Count(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION"); c != 1 {
		t.Errorf("the message names the code %d times: %v", c, err)
	}
}
