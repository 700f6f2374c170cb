package client

import (
	"context"
	"errors"
	"sync"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// txnState is a transactional producer's state (see transactions.go).
type txnState struct {
	mu         sync.Mutex
	inTxn      bool
	partitions map[TopicPartition]bool
	err        error // abortable or fatal error of the current transaction
	fatal      error
	acks       int
}

func newTxnState() *txnState { return &txnState{partitions: map[TopicPartition]bool{}} }

// checkProduce refuses records outside a transaction or after a failure.
func (t *txnState) checkProduce() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.fatal != nil:
		return t.fatal
	case !t.inTxn:
		return errors.New("strand: Produce on a transactional producer needs BeginTransaction first")
	case t.err != nil:
		return errors.Join(ErrAbortable, t.err)
	}
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
	t.fatal = err
	t.mu.Unlock()
}

func (t *txnState) abortable(err error) {
	t.mu.Lock()
	if t.err == nil {
		t.err = err
	}
	t.mu.Unlock()
}

func (t *txnState) produceFailed(err error) { t.abortable(err) }

// txnInitProducerID is InitProducerId through the coordinator.
func (p *Producer) txnInitProducerID(ctx context.Context) (*pb.InitProducerIdResponse, error) {
	return nil, errors.New("strand: transactions are not available yet")
}
