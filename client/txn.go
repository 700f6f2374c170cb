package client

import (
	"errors"
	"fmt"
	"sync"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// txnState is a transactional producer's state (transactions.go drives it).
type txnState struct {
	mu          sync.Mutex
	initialized bool
	inTxn       bool
	produced    bool
	offsetsSent bool
	partitions  map[TopicPartition]bool
	err         error // why the current transaction must be aborted
	fatal       error // why the producer can only be closed
	acks        int
	// reinit: the coordinator no longer knows the producer id (its
	// transactional id expired: INVALID_PRODUCER_ID_MAPPING). The abort then
	// asks for a new producer id (KIP-360) instead of sending EndTxn.
	reinit bool
}

func newTxnState() *txnState { return &txnState{partitions: map[TopicPartition]bool{}} }

// checkProduce refuses records outside a transaction or after a failure.
func (t *txnState) checkProduce() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.fatal != nil:
		return t.fatal
	case !t.initialized:
		return errors.New("strand: a transactional producer needs InitTransactions before producing")
	case !t.inTxn:
		return errors.New("strand: Produce on a transactional producer needs BeginTransaction first")
	case t.err != nil:
		return fmt.Errorf("%w: %w", ErrAbortable, t.err)
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

func (t *txnState) canSend() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fatal == nil
}

func (t *txnState) fail(err error) {
	t.mu.Lock()
	if t.fatal == nil {
		t.fatal = err
	}
	t.mu.Unlock()
}

func (t *txnState) abortable(err error) {
	t.mu.Lock()
	if t.err == nil {
		t.err = err
	}
	if errs.CodeOf(err) == pb.ErrorCode_INVALID_PRODUCER_ID_MAPPING {
		t.reinit = true
	}
	t.mu.Unlock()
}

func (t *txnState) produceFailed(err error) { t.abortable(err) }
