package client

import (
	"context"
	"testing"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/fakebroker"
)

// TestCommitsReuseTheCoordinator: a transactional producer looks its
// coordinator up once, not before every EndTxn: ten transactions cost one
// FindCoordinator (InitTransactions'), so a commit is one round trip.
func TestCommitsReuseTheCoordinator(t *testing.T) {
	b := fakebroker.Start(t, fakebroker.Topic{Name: "t"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := NewProducer(Bootstrap(b.Addr()), TransactionalID("cache"), RetryBackoff(time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := p.CommitTransaction(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.Calls("FindCoordinator"); n != 1 {
		t.Errorf("InitTransactions and 10 commits sent %d FindCoordinator requests, want 1", n)
	}
	if n := b.Calls("EndTxn"); n != 10 {
		t.Errorf("10 commits sent %d EndTxn requests, want 10", n)
	}
}

// TestMovedCoordinatorIsLookedUpAgain: once the cached coordinator answers
// NOT_COORDINATOR, the producer asks FindCoordinator again before retrying,
// and the commit goes through once the coordinator answers.
func TestMovedCoordinatorIsLookedUpAgain(t *testing.T) {
	b := fakebroker.Start(t, fakebroker.Topic{Name: "t"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := NewProducer(Bootstrap(b.Addr()), TransactionalID("moved"), RetryBackoff(time.Millisecond, 10*time.Millisecond))
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
	finds := b.Calls("FindCoordinator")
	b.Refuse("EndTxn", pb.ErrorCode_NOT_COORDINATOR)
	b.OnRefusal(func(n int64) {
		if n == 2 {
			b.Refuse("EndTxn", pb.ErrorCode_NONE)
		}
	})
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	// Two NOT_COORDINATOR answers, each followed by a new look-up.
	if n := b.Calls("FindCoordinator") - finds; n != 2 {
		t.Errorf("a commit answered NOT_COORDINATOR twice sent %d FindCoordinator requests, want 2", n)
	}
	if n := b.Calls("EndTxn"); n != 3 {
		t.Errorf("EndTxn sent %d times, want 3", n)
	}
}
