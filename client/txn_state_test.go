package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

var allTxnPhases = []txnPhase{txnUninitialized, txnInitializing, txnReady, txnInTransaction,
	txnCommitting, txnAborting, txnAbortableError, txnFatalError}

// The transitions the transactional producer may make, written out once
// more by hand: the table must allow exactly these.
var legalTxnTransitions = map[[2]txnPhase]bool{
	{txnUninitialized, txnInitializing}:   true, // InitTransactions
	{txnUninitialized, txnFatalError}:     true,
	{txnInitializing, txnReady}:           true, // a producer id
	{txnInitializing, txnUninitialized}:   true, // InitTransactions failed: call it again
	{txnInitializing, txnFatalError}:      true, // fenced
	{txnReady, txnInTransaction}:          true, // BeginTransaction
	{txnReady, txnInitializing}:           true, // InitTransactions again
	{txnReady, txnFatalError}:             true,
	{txnInTransaction, txnCommitting}:     true,
	{txnInTransaction, txnAborting}:       true,
	{txnInTransaction, txnAbortableError}: true, // a record failed
	{txnInTransaction, txnInitializing}:   true, // InitTransactions fences the open one
	{txnInTransaction, txnFatalError}:     true,
	{txnCommitting, txnReady}:             true, // committed
	{txnCommitting, txnCommitting}:        true, // commit outcome unknown: commit again
	{txnCommitting, txnAborting}:          true,
	{txnCommitting, txnAbortableError}:    true, // a record failed, or TRANSACTION_TIMED_OUT
	{txnCommitting, txnFatalError}:        true,
	{txnAborting, txnReady}:               true, // aborted
	{txnAborting, txnAborting}:            true, // the abort failed: abort again
	{txnAborting, txnAbortableError}:      true,
	{txnAborting, txnFatalError}:          true,
	{txnAbortableError, txnAborting}:      true,
	{txnAbortableError, txnInitializing}:  true,
	{txnAbortableError, txnFatalError}:    true,
}

// Every pair of phases: the legal transitions are accepted, every other
// one (Ready -> Committing, AbortableError -> Committing, FatalError ->
// anything, …) is refused with an error naming both phases.
func TestTxnTransitionTable(t *testing.T) {
	for _, from := range allTxnPhases {
		for _, to := range allTxnPhases {
			err := txnTransition(from, to)
			if legalTxnTransitions[[2]txnPhase{from, to}] {
				if err != nil {
					t.Errorf("%v -> %v refused: %v", from, to, err)
				}
				continue
			}
			if err == nil {
				t.Errorf("%v -> %v accepted, want refused", from, to)
				continue
			}
			if !errors.Is(err, errIllegalTxnTransition) || Classify(err) != Fatal {
				t.Errorf("%v -> %v: %v (%v), want errIllegalTxnTransition, Fatal", from, to, err, Classify(err))
			}
			if want := fmt.Sprintf("from %v to %v", from, to); !strings.Contains(err.Error(), want) {
				t.Errorf("%v -> %v: %q does not say %q", from, to, err, want)
			}
		}
	}
}

// A sample of illegal transitions, by name, so a table edit that allowed
// one shows up here too.
func TestTxnIllegalTransitionsRefused(t *testing.T) {
	for _, c := range [][2]txnPhase{
		{txnUninitialized, txnInTransaction}, // Begin before Init
		{txnReady, txnCommitting},            // Commit without Begin
		{txnReady, txnAborting},
		{txnAbortableError, txnCommitting}, // Commit a doomed transaction
		{txnAbortableError, txnReady},
		{txnAborting, txnCommitting}, // Commit after the abort started
		{txnInTransaction, txnInTransaction},
		{txnFatalError, txnReady},
		{txnFatalError, txnInitializing},
	} {
		tx := &txnState{phase: c[0]}
		if err := tx.moveLocked(c[1]); err == nil || tx.phase != c[0] {
			t.Errorf("%v -> %v: err %v, phase now %v; want refused and unchanged", c[0], c[1], err, tx.phase)
		}
	}
}

// txnProducer is a transactional producer that never reaches a broker,
// put in phase ph.
func txnProducer(t *testing.T, ph txnPhase) *Producer {
	t.Helper()
	p := offlineProducer(t, TransactionalID("tx-state"))
	p.txn.mu.Lock()
	p.txn.phase = ph
	p.txn.mu.Unlock()
	return p
}

// produceErr is the error Produce reports at once (the promise runs before
// Produce returns when the transaction state refuses the record).
func produceErr(t *testing.T, p *Producer) error {
	t.Helper()
	got := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p.Produce(ctx, &Record{Topic: "bench", Value: []byte("x")}, func(_ *Record, err error) { got <- err })
	p.txn.mu.Lock()
	ph := p.txn.phase
	p.txn.mu.Unlock()
	if ph == txnInTransaction {
		return nil // accepted into a batch; it is never sent
	}
	return <-got
}

// The public behaviour of each phase: which calls are refused, without a
// broker, and how Classify classes the refusal.
func TestTxnPhasePublicBehaviour(t *testing.T) {
	doom := &Error{Code: pb.ErrorCode_TRANSACTION_TIMED_OUT, Message: "open too long"}
	fenced := &Error{Code: pb.ErrorCode_PRODUCER_FENCED, Message: "newer epoch"}
	ctx := context.Background()

	t.Run("Produce before InitTransactions", func(t *testing.T) {
		p := txnProducer(t, txnUninitialized)
		if err := produceErr(t, p); err == nil || Classify(err) != Fatal {
			t.Fatalf("Produce: %v (%v), want a Fatal refusal", err, Classify(err))
		}
	})
	t.Run("Produce outside a transaction", func(t *testing.T) {
		p := txnProducer(t, txnReady)
		err := produceErr(t, p)
		if err == nil || Classify(err) != Fatal || !strings.Contains(err.Error(), "BeginTransaction") {
			t.Fatalf("Produce: %v (%v), want a Fatal refusal naming BeginTransaction", err, Classify(err))
		}
	})
	t.Run("Produce in a transaction", func(t *testing.T) {
		p := txnProducer(t, txnInTransaction)
		if err := produceErr(t, p); err != nil {
			t.Fatalf("Produce: %v", err)
		}
		if !p.txn.produced {
			t.Fatal("the transaction does not know it has records")
		}
	})
	t.Run("Commit and Begin outside a transaction", func(t *testing.T) {
		p := txnProducer(t, txnReady)
		if err := p.CommitTransaction(ctx); err == nil || Classify(err) != Fatal {
			t.Fatalf("CommitTransaction: %v (%v), want Fatal", err, Classify(err))
		}
		if err := p.AbortTransaction(ctx); err == nil || Classify(err) != Fatal {
			t.Fatalf("AbortTransaction: %v (%v), want Fatal", err, Classify(err))
		}
		if err := p.BeginTransaction(); err != nil || p.txn.current() != txnInTransaction {
			t.Fatalf("BeginTransaction: %v, phase %v", err, p.txn.current())
		}
		if err := p.BeginTransaction(); err == nil || Classify(err) != Fatal {
			t.Fatalf("second BeginTransaction: %v (%v), want Fatal", err, Classify(err))
		}
	})
	t.Run("Commit after an abortable error", func(t *testing.T) {
		p := txnProducer(t, txnInTransaction)
		p.txn.abortable(doom)
		if ph := p.txn.current(); ph != txnAbortableError {
			t.Fatalf("phase %v after an abortable error", ph)
		}
		err := p.CommitTransaction(ctx)
		if Classify(err) != Abortable || !errors.Is(err, ErrTransactionTimedOut) {
			t.Fatalf("CommitTransaction: %v (%v), want Abortable carrying TRANSACTION_TIMED_OUT", err, Classify(err))
		}
		if err := p.SendOffsetsToTransaction(ctx, nil, GroupMetadata{GroupID: "g"}); Classify(err) != Abortable {
			t.Fatalf("SendOffsetsToTransaction: %v (%v), want Abortable", err, Classify(err))
		}
		if err := produceErr(t, p); Classify(err) != Abortable {
			t.Fatalf("Produce: %v (%v), want Abortable", err, Classify(err))
		}
		if ph := p.txn.current(); ph != txnAbortableError {
			t.Fatalf("phase %v after the refusals, want AbortableError", ph)
		}
		// Nothing was produced or sent: the abort ends it locally.
		if err := p.AbortTransaction(ctx); err != nil || p.txn.current() != txnReady {
			t.Fatalf("AbortTransaction: %v, phase %v", err, p.txn.current())
		}
	})
	t.Run("a record failed before it is sent dooms the transaction", func(t *testing.T) {
		// Kafka's producer moves to an abortable error on any failure of
		// send() in a transaction; a commit would leave the record out.
		p := offlineProducer(t, TransactionalID("tx-doom"), WithPartitioner(ManualPartitioner{}))
		p.txn.mu.Lock()
		p.txn.phase = txnInTransaction
		p.txn.mu.Unlock()
		got := make(chan error, 1)
		p.Produce(ctx, &Record{Topic: "bench", Partition: 3, Value: []byte("x")}, func(_ *Record, err error) { got <- err })
		if err := <-got; errs.CodeOf(err) != pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION {
			t.Fatalf("Produce to partition 3 of a one-partition topic: %v", err)
		}
		if ph := p.txn.current(); ph != txnAbortableError {
			t.Fatalf("phase %v after a record failed, want AbortableError", ph)
		}
		if err := p.CommitTransaction(ctx); Classify(err) != Abortable {
			t.Fatalf("CommitTransaction: %v (%v), want Abortable", err, Classify(err))
		}
	})
	t.Run("everything after a fence", func(t *testing.T) {
		p := txnProducer(t, txnInTransaction)
		p.txn.fail(fenced)
		p.txn.abortable(doom) // a late record failure changes nothing
		for name, err := range map[string]error{
			"Commit": p.CommitTransaction(ctx), "Abort": p.AbortTransaction(ctx), "Begin": p.BeginTransaction(),
			"Init": p.InitTransactions(ctx), "Produce": produceErr(t, p),
		} {
			if Classify(err) != ApplicationRecoverable || !errors.Is(err, ErrProducerFenced) {
				t.Errorf("%s: %v (%v), want ApplicationRecoverable", name, err, Classify(err))
			}
		}
		if p.txn.current() != txnFatalError {
			t.Fatalf("phase %v", p.txn.current())
		}
	})
	t.Run("a commit whose outcome is unknown is retried, not joined", func(t *testing.T) {
		p := txnProducer(t, txnCommitting)
		if err := produceErr(t, p); err == nil || Classify(err) != Fatal {
			t.Fatalf("Produce while committing: %v (%v), want Fatal", err, Classify(err))
		}
		if err := p.BeginTransaction(); err == nil {
			t.Fatal("BeginTransaction while committing accepted")
		}
		if _, err := p.endingTxn("CommitTransaction", txnCommitting); err != nil {
			t.Fatalf("retrying the commit refused: %v", err)
		}
	})
	t.Run("a commit after the abort started", func(t *testing.T) {
		p := txnProducer(t, txnAborting)
		if err := p.CommitTransaction(ctx); err == nil || !errors.Is(err, errIllegalTxnTransition) || Classify(err) != Fatal {
			t.Fatalf("CommitTransaction while aborting: %v (%v), want the illegal transition, Fatal", err, Classify(err))
		}
	})
}

// TransactSession.End called again after ErrCommitOutcomeUnknown retries
// the commit: it does not send the offsets again (the phase refuses them
// while committing, which would turn the retry into an abort).
func TestSessionEndRetriesAnUnknownCommit(t *testing.T) {
	c, err := NewConsumer(Bootstrap("127.0.0.1:1"), GroupID("g"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	defer c.Close(ctx)
	s := &TransactSession{c: c, p: txnProducer(t, txnCommitting)}
	committed, err := s.End(context.Background(), TryCommit)
	if err != nil || !committed {
		t.Fatalf("End after an unknown commit: committed=%v, %v; want the commit retried", committed, err)
	}
	if ph := s.p.txn.current(); ph != txnReady {
		t.Fatalf("phase %v after the commit, want Ready", ph)
	}
}
