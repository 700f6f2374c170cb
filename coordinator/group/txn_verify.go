package group

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// A transactional offset write runs the race a client's transactional
// produce runs (broker/storage: verification.go): the transaction
// coordinator says the __consumer_offsets partition is in the
// transaction, the transaction then ends (the producer aborts, it times
// out, a new instance fences it) and its marker reaches the partition,
// and only then is the write appended. Appended, it would open a
// transaction no marker ends: the partition's last stable offset would
// stay behind it, and with it read_committed readers and the load of
// every group on the partition. So, as Kafka's coordinator runtime does
// for its transactional writes, the partition makes the producer's
// verification guard before the transaction coordinator is asked, and
// the write appends with it (storage.OriginCoordinator): a marker in
// between clears the guard, the write is refused INVALID_TXN_STATE and
// nothing is written.

// verifyTxnWrite is the first step of a TxnOffsetCommit's write (Kafka's
// maybeStartTransactionVerification for a coordinator's write): it makes
// txn's verification guard on the shard's partition, then asks the
// transaction coordinator to add the partition to the transaction
// (transaction version 2) or whether it is there (version 1: the
// producer's AddOffsetsToTxn added it). A producer whose transaction is
// already open on the partition at its epoch needs no guard, and the
// coordinator is not asked: the open transaction vouches for the write
// until its marker. txn.guard is set for write.
func (c *Coordinator) verifyTxnWrite(ctx context.Context, s *shard, txn *txnProducer, txnVersion int32) error {
	needed, err := c.w.startTxnVerification(s, txn, txnVersion != 1)
	if err != nil || !needed {
		return err
	}
	add := c.txn.AddPartition
	if txnVersion == 1 {
		add = c.txn.Verify
	}
	// Bounded: the transaction client retries a coordinator that moves
	// or loads until its context ends, and a request's context may have
	// no deadline.
	actx, cancel := context.WithTimeout(ctx, c.cfg.TxnVerifyTimeout)
	err = add(actx, txn.id, txn.pid, txn.epoch, c.cfg.Topic.Name, s.partition)
	cancel()
	if err != nil {
		if errs.CodeOf(err) == pb.ErrorCode_UNKNOWN_SERVER_ERROR && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			// Kafka's group coordinator answers a timeout so.
			err = errs.New(pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, "the transaction coordinator of %q did not answer within %v: %v", txn.id, c.cfg.TxnVerifyTimeout, err)
		}
		if refusedForGood(err) {
			// Nothing will append with this guard; a producer id nobody
			// knows must not hold a verification until it expires.
			c.w.dropTxnVerification(s, txn)
		}
		return err
	}
	if f := txnVerifiedHook.Load(); f != nil {
		(*f)(c.cfg.Topic.Name, s.partition)
	}
	return nil
}

// refusedForGood reports whether the transaction coordinator's refusal is
// final for this write (an unknown producer, a fence, a partition outside
// the transaction) rather than a coordinator moving, loading or busy, or
// the request running out of time.
func refusedForGood(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	switch errs.CodeOf(err) {
	case pb.ErrorCode_NOT_COORDINATOR, pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS,
		pb.ErrorCode_CONCURRENT_TRANSACTIONS, pb.ErrorCode_NETWORK_EXCEPTION, pb.ErrorCode_REQUEST_TIMED_OUT:
		return false
	}
	return true
}

// startTxnVerification makes txn's verification guard on the shard's
// partition (storage.Log.StartTxnVerification, at no sequence: the
// coordinator numbers its own batches) and reports whether the
// transaction coordinator must be asked. An epoch older than the
// partition's is INVALID_PRODUCER_EPOCH at once.
func (w logWriter) startTxnVerification(s *shard, txn *txnProducer, epochBump bool) (bool, error) {
	guard, err := s.p.StartTxnVerification(txn.pid, record.NoSequence, txn.epoch, epochBump)
	if err != nil {
		return false, w.c.writeError(s, err)
	}
	txn.guard = guard
	return guard != nil, nil
}

// dropTxnVerification forgets txn's verification if its guard is still
// the producer's current one (storage.Log.DropTxnVerification).
func (w logWriter) dropTxnVerification(s *shard, txn *txnProducer) {
	if txn.guard != nil {
		s.p.Log.DropTxnVerification(txn.pid, txn.guard)
	}
}

// txnVerifiedHook, when set, runs after the transaction coordinator
// answered for a transactional offset write and before the write is
// appended: the window in which its transaction can end under it.
var txnVerifiedHook atomic.Pointer[func(topic string, partition int32)]

// SetTxnVerifiedHookForTesting makes f run between a TxnOffsetCommit's
// verification and its write, until restore is called. f runs on the
// request's goroutine with no lock of the coordinator held.
func SetTxnVerifiedHookForTesting(f func(topic string, partition int32)) (restore func()) {
	txnVerifiedHook.Store(&f)
	return func() { txnVerifiedHook.Store(nil) }
}

// guardOf is the verification guard a write of txn appends with (nil for
// a write outside a transaction, or one whose transaction was open).
func guardOf(txn *txnProducer) *storage.VerificationGuard {
	if txn == nil {
		return nil
	}
	return txn.guard
}
