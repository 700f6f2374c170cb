package client

import (
	"context"
	"testing"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/fakebroker"
)

// TestProducerMetadataRefreshesBackOff: while a partition has no leader,
// the producer asks the cluster for metadata again at most once per
// retry.backoff (one refresh at a time), as Kafka's producer does. Before,
// every drain that found no leader started a refresh, and each refresh's
// answer (still no leader) started the next drain at once: a loop that
// sent Metadata requests as fast as they were answered for as long as
// the election took (the cluster simulation found it: its virtual clock
// stood still). In half a second with a 50 ms backoff that is about ten
// refreshes; without the backoff, hundreds.
func TestProducerMetadataRefreshesBackOff(t *testing.T) {
	b := fakebroker.Start(t, fakebroker.Topic{Name: "t"})
	// Every answer has the partition without a leader (an election that
	// takes longer than the record may wait).
	b.Intercept("Metadata", func(ctx context.Context, _ int, req any) (any, error) {
		resp, err := b.Metadata(ctx, req.(*pb.MetadataRequest))
		if err != nil {
			return nil, err
		}
		for _, tm := range resp.Topics {
			for _, pm := range tm.Partitions {
				pm.LeaderId = -1
			}
		}
		return resp, nil
	})
	const backoff = 50 * time.Millisecond
	// The record expires after half a second (delivery.timeout.ms), the
	// window the refreshes are counted in.
	p, err := NewProducer(Bootstrap(b.Addr()), RetryBackoff(backoff, backoff), RequestTimeout(200*time.Millisecond), DeliveryTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := b.Calls("Metadata")
	if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("v")}).FirstErr(); err == nil {
		t.Fatal("a record for a partition without a leader was delivered")
	}
	if n := b.Calls("Metadata") - before; n > 30 {
		t.Fatalf("%d Metadata requests in half a second while the partition had no leader: no retry.backoff (%v) between refreshes", n, backoff)
	}
}
