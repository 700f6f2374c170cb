package txn

import (
	"context"
	"fmt"
	"time"

	"github.com/strand-io/strand/coordinator"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/wire"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Client is how a partition leader (on the produce path) and the group
// coordinator (for TxnOffsetCommit) add a partition to a transaction: an
// AddPartitionsToTxn to the transaction's coordinator, wherever it runs.
type Client struct {
	loc  *coordinator.Locator
	pool *wire.Pool
}

// NewClient returns a client.
func NewClient(loc *coordinator.Locator, pool *wire.Pool) *Client {
	return &Client{loc: loc, pool: pool}
}

// AddPartition adds topic-partition to the producer's open transaction
// (starting one in version 2 if none is open). Coordinator moves and loads
// are retried within ctx; every other error is the coordinator's answer.
func (c *Client) AddPartition(ctx context.Context, transactionalID string, pid int64, epoch int16, topic string, partition int32) error {
	return c.call(ctx, transactionalID, pid, epoch, false, topic, partition)
}

// Verify checks that topic-partition is already in the producer's
// transaction (the verify-only mode for clients older than version 2).
func (c *Client) Verify(ctx context.Context, transactionalID string, pid int64, epoch int16, topic string, partition int32) error {
	return c.call(ctx, transactionalID, pid, epoch, true, topic, partition)
}

func (c *Client) call(ctx context.Context, transactionalID string, pid int64, epoch int16, verifyOnly bool, topic string, partition int32) error {
	req := &pb.AddPartitionsToTxnRequest{Transactions: []*pb.AddPartitionsToTxnTransaction{{
		TransactionalId: transactionalID, ProducerId: pid, ProducerEpoch: int32(epoch), VerifyOnly: verifyOnly,
		Partitions: []*pb.TopicPartition{{Topic: topic, Partition: partition}},
	}}}
	var last error
	began := time.Now()
	for attempt := 0; ; attempt++ {
		err := c.once(ctx, transactionalID, req)
		if err == nil {
			return nil
		}
		code := errs.CodeOf(err)
		// CONCURRENT_TRANSACTIONS: the producer's previous transaction is
		// still being completed (its markers written), usually for a few
		// milliseconds, longer after a coordinator failover, when the new
		// coordinator finishes it. Asking again here for up to
		// concurrentRetryFor spares the client its own backoff, which has
		// grown during the failover.
		concurrent := code == pb.ErrorCode_CONCURRENT_TRANSACTIONS && time.Since(began) < concurrentRetryFor
		if code != pb.ErrorCode_NOT_COORDINATOR && code != pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS && code != pb.ErrorCode_COORDINATOR_NOT_AVAILABLE && !concurrent {
			return err
		}
		last = err
		d := time.Duration(min(attempt+1, 10)) * 20 * time.Millisecond
		select {
		case <-ctx.Done():
			return fmt.Errorf("add %s-%d to transaction %q: %w", topic, partition, transactionalID, last)
		case <-time.After(d):
		}
	}
}

// concurrentRetryFor bounds how long call keeps asking while the answer is
// CONCURRENT_TRANSACTIONS.
const concurrentRetryFor = time.Second

func (c *Client) once(ctx context.Context, transactionalID string, req *pb.AddPartitionsToTxnRequest) error {
	co := c.loc.Find(ctx, pb.CoordinatorType_TRANSACTION, transactionalID)
	if err := errs.FromCode(co.ErrorCode, co.ErrorMessage); err != nil {
		return err
	}
	addr := c.loc.PeerAddress(co.NodeId) // the coordinator's inter-broker listener
	if addr == "" {
		return errs.New(pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, "coordinator %d of %q is not registered here yet", co.NodeId, transactionalID)
	}
	conn, err := c.pool.Get(addr)
	if err != nil {
		return errs.New(pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, "%v", err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// A coordinator whose node stopped (not died: its connection stays
	// open) and was fenced meanwhile will not answer; the transaction's
	// new coordinator is asked instead, rather than after the timeout.
	watched := make(chan struct{})
	defer close(watched)
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-watched:
				return
			case <-rctx.Done():
				return
			case <-t.C:
				if c.loc.Fenced(co.NodeId) {
					cancel()
					return
				}
			}
		}
	}()
	resp, err := pb.NewTransactionsClient(conn).AddPartitionsToTxn(rctx, req)
	if err != nil {
		return errs.New(pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, "AddPartitionsToTxn to node %d: %v", co.NodeId, err)
	}
	for _, r := range resp.Results {
		for _, p := range r.Partitions {
			if err := errs.FromCode(p.ErrorCode, p.ErrorMessage); err != nil {
				return err
			}
		}
	}
	return nil
}
