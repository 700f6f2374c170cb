package client

import (
	"errors"
	"fmt"
	"sync"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// txnPhase is where a transactional producer is in its life, after the
// states of Kafka's TransactionManager. Every change goes through
// txnState.moveLocked, which refuses one txnTransitions does not list.
type txnPhase int

const (
	// txnUninitialized: made, InitTransactions not (successfully) called.
	txnUninitialized txnPhase = iota
	// txnInitializing: InitTransactions is asking for a producer id.
	txnInitializing
	// txnReady: a producer id and epoch, no transaction open.
	txnReady
	// txnInTransaction: BeginTransaction was called; records and offsets
	// may join the transaction.
	txnInTransaction
	// txnCommitting: CommitTransaction started. A commit that failed
	// without a definite answer (ErrCommitOutcomeUnknown) stays here: only
	// another CommitTransaction, or AbortTransaction, may follow.
	txnCommitting
	// txnAborting: AbortTransaction started; a failed abort stays here
	// until AbortTransaction is called again.
	txnAborting
	// txnAbortableError: something doomed the open transaction (a record
	// failed, the coordinator timed it out); only AbortTransaction, or
	// InitTransactions, may follow.
	txnAbortableError
	// txnFatalError: the producer can only be closed (another producer
	// took over the transactional id, or a fatal answer).
	txnFatalError
)

func (s txnPhase) String() string {
	switch s {
	case txnUninitialized:
		return "Uninitialized"
	case txnInitializing:
		return "Initializing"
	case txnReady:
		return "Ready"
	case txnInTransaction:
		return "InTransaction"
	case txnCommitting:
		return "CommittingTransaction"
	case txnAborting:
		return "AbortingTransaction"
	case txnAbortableError:
		return "AbortableError"
	case txnFatalError:
		return "FatalError"
	}
	return fmt.Sprintf("txnPhase(%d)", int(s))
}

// txnTransitions lists, for each phase, the phases it may move to. A phase
// moving to itself is a retry (CommitTransaction or AbortTransaction again)
// and is listed where it is allowed. Every phase but txnFatalError may
// become txnFatalError; nothing leaves it.
var txnTransitions = map[txnPhase][]txnPhase{
	txnUninitialized:  {txnInitializing, txnFatalError},
	txnInitializing:   {txnReady, txnUninitialized, txnFatalError},
	txnReady:          {txnInTransaction, txnInitializing, txnFatalError},
	txnInTransaction:  {txnCommitting, txnAborting, txnAbortableError, txnInitializing, txnFatalError},
	txnCommitting:     {txnReady, txnCommitting, txnAborting, txnAbortableError, txnFatalError},
	txnAborting:       {txnReady, txnAborting, txnAbortableError, txnFatalError},
	txnAbortableError: {txnAborting, txnInitializing, txnFatalError},
	txnFatalError:     nil,
}

// errIllegalTxnTransition is the error of a transition the table refuses.
var errIllegalTxnTransition = errors.New("strand: illegal transaction state transition")

// txnTransition reports whether from may move to to, and if not an error
// naming both (it matches errIllegalTxnTransition).
func txnTransition(from, to txnPhase) error {
	for _, ok := range txnTransitions[from] {
		if ok == to {
			return nil
		}
	}
	return fmt.Errorf("%w from %v to %v", errIllegalTxnTransition, from, to)
}

// txnState is a transactional producer's state (transactions.go drives it).
type txnState struct {
	mu    sync.Mutex
	phase txnPhase
	// abortErr: why the transaction must be aborted (txnAbortableError).
	abortErr error
	// fatal: why the producer can only be closed (txnFatalError).
	fatal error
	// produced and offsetsSent: the open transaction has something to end
	// with EndTxn.
	produced    bool
	offsetsSent bool
	partitions  map[TopicPartition]bool
	acks        int
	// reinit: the coordinator no longer knows the producer id (its
	// transactional id expired: INVALID_PRODUCER_ID_MAPPING). The abort then
	// asks for a new producer id (KIP-360) instead of sending EndTxn.
	reinit bool
}

func newTxnState() *txnState { return &txnState{partitions: map[TopicPartition]bool{}} }

// moveLocked moves to phase to, or refuses with the transition's error.
func (t *txnState) moveLocked(to txnPhase) error {
	if err := txnTransition(t.phase, to); err != nil {
		return err
	}
	t.phase = to
	return nil
}

// current is the phase now.
func (t *txnState) current() txnPhase {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.phase
}

// isOpen reports whether a transaction is open: begun and not yet ended.
func (t *txnState) isOpen() bool {
	switch t.current() {
	case txnInTransaction, txnCommitting, txnAborting, txnAbortableError:
		return true
	}
	return false
}

// abortableLocked is the error a call gets in txnAbortableError.
func (t *txnState) abortableLocked() error {
	return fmt.Errorf("%w: %w", ErrAbortable, t.abortErr)
}

// checkProduce refuses records outside a transaction or after a failure.
func (t *txnState) checkProduce() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch t.phase {
	case txnFatalError:
		return t.fatal
	case txnUninitialized, txnInitializing:
		return errors.New("strand: a transactional producer needs InitTransactions before producing")
	case txnReady:
		return errors.New("strand: Produce on a transactional producer needs BeginTransaction first")
	case txnAbortableError:
		return t.abortableLocked()
	case txnCommitting, txnAborting:
		return fmt.Errorf("strand: Produce while the transaction is ending (%v)", t.phase)
	}
	t.produced = true
	return nil
}

func (t *txnState) addPartition(tp TopicPartition) {
	t.mu.Lock()
	t.partitions[tp] = true
	t.mu.Unlock()
}

func (t *txnState) acked(n int) {
	t.mu.Lock()
	t.acks += n
	t.mu.Unlock()
}

// fatalErr is why the producer can only be closed, or nil.
func (t *txnState) fatalErr() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fatal
}

func (t *txnState) canSend() bool { return t.fatalErr() == nil }

// fail moves to txnFatalError for err (the first cause is kept).
func (t *txnState) fail(err error) {
	t.mu.Lock()
	if t.moveLocked(txnFatalError) == nil {
		t.fatal = err
	}
	t.mu.Unlock()
}

// abortable dooms the open transaction for err (the first cause is kept).
// Outside a transaction (a late answer of an ended one) there is nothing
// to doom; during an abort the abort goes on.
func (t *txnState) abortable(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if errs.CodeOf(err) == pb.ErrorCode_INVALID_PRODUCER_ID_MAPPING {
		t.reinit = true
	}
	switch t.phase {
	case txnInTransaction, txnCommitting:
		if t.moveLocked(txnAbortableError) == nil {
			t.abortErr = err
		}
	case txnAborting:
		if t.abortErr == nil {
			t.abortErr = err
		}
	}
}

func (t *txnState) produceFailed(err error) { t.abortable(err) }

// endedLocked moves to txnReady with an empty transaction.
func (t *txnState) endedLocked() error {
	if err := t.moveLocked(txnReady); err != nil {
		return err
	}
	t.abortErr, t.produced, t.offsetsSent = nil, false, false
	return nil
}
