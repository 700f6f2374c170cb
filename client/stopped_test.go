package client

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/fakebroker"
)

// fenceable makes b's Metadata answers show it fenced while fenced is set.
func fenceable(b *fakebroker.Broker, fenced *atomic.Bool) {
	b.Intercept("Metadata", func(ctx context.Context, _ int, req any) (any, error) {
		resp, err := b.Metadata(ctx, req.(*pb.MetadataRequest))
		if err == nil {
			for _, br := range resp.Brokers {
				br.Fenced = fenced.Load()
			}
		}
		return resp, err
	})
}

// TestCommitLeavesAStoppedFencedCoordinator: a coordinator that leaves
// an EndTxn unanswered (a stopped process: its connection stays open)
// and that the cluster fences meanwhile is given up after about a second,
// when the producer's fresh metadata shows it fenced, not after
// request.timeout.ms; the commit goes through the coordinator found next.
// Without the watch the commit waits out the 30 s request timeout.
func TestCommitLeavesAStoppedFencedCoordinator(t *testing.T) {
	b := fakebroker.Start(t, fakebroker.Topic{Name: "t"})
	var fenced atomic.Bool
	fenceable(b, &fenced)
	b.Intercept("EndTxn", func(ctx context.Context, n int, _ any) (any, error) {
		if n == 1 {
			fenced.Store(true) // the cluster fences the stopped node
			<-ctx.Done()       // which never answers
			return nil, ctx.Err()
		}
		fenced.Store(false)
		return nil, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := NewProducer(Bootstrap(b.Addr()), TransactionalID("stopped"), RequestTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("the commit took %v: the call to the fenced coordinator was not given up early", took)
	}
	if n := b.Calls("EndTxn"); n != 2 {
		t.Fatalf("EndTxn sent %d times, want 2 (the unanswered one, then its retry)", n)
	}
}

// TestProduceLeavesAStoppedFencedLeader: a produce left unanswered by a
// leader the cluster fences meanwhile is sent again once the producer's
// fresh metadata shows the broker fenced, not after request.timeout.ms;
// the retry is the same batch (same sequence), which the broker
// deduplicates.
func TestProduceLeavesAStoppedFencedLeader(t *testing.T) {
	b := fakebroker.Start(t, fakebroker.Topic{Name: "t"})
	var fenced atomic.Bool
	fenceable(b, &fenced)
	b.ControlProduce(func(n int, _ *pb.ProduceRequest) fakebroker.ProduceAction {
		if n == 1 {
			fenced.Store(true)
			return fakebroker.ProduceAction{Drop: true}
		}
		fenced.Store(false)
		return fakebroker.ProduceAction{}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := NewProducer(Bootstrap(b.Addr()), RequestTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	began := time.Now()
	if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("the produce took %v: the request to the fenced leader was not given up early", took)
	}
	if v := b.Values("t", 0); len(v) != 1 {
		t.Fatalf("partition holds %q, want the one record once", v)
	}
}
