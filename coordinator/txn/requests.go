package txn

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// pendingWait is how long a request waits for another transition of the
// same id to finish before answering CONCURRENT_TRANSACTIONS.
const pendingWait = 500 * time.Millisecond

// InitProducerIdResult is what InitProducerId answers.
type InitProducerIdResult struct {
	ProducerID int64
	Epoch      int16
}

// InitProducerId gives a transactional id its producer id with a bumped
// epoch, fencing any older instance. With a transaction open it fences (the
// open transaction is aborted at a bumped epoch) and answers
// CONCURRENT_TRANSACTIONS; the retry gets the new epoch once the abort is
// complete. reqPID/reqEpoch are the producer's current id and epoch when it
// re-initialises (KIP-360), or -1.
func (c *Coordinator) InitProducerId(ctx context.Context, id string, timeoutMs int32, reqPID int64, reqEpoch int16) (InitProducerIdResult, error) {
	if timeoutMs <= 0 || time.Duration(timeoutMs)*time.Millisecond > c.cfg.MaxTimeout {
		return InitProducerIdResult{}, errs.New(pb.ErrorCode_INVALID_TRANSACTION_TIMEOUT, "transaction.timeout.ms=%d must be positive and at most transaction.max.timeout.ms=%d", timeoutMs, c.cfg.MaxTimeout.Milliseconds())
	}
	d, err := c.handle(ctx, id, Request{Kind: KindInitProducerId, TxnVersion: 2, ProducerID: reqPID, Epoch: reqEpoch, TimeoutMs: timeoutMs})
	if err != nil {
		return InitProducerIdResult{}, err
	}
	if d.SendMarkers {
		c.lg.Info("fenced a running producer", "transactionalId", id, "producerId", d.Write.producerID, "epoch", d.Write.epoch)
	}
	c.remember(ctx, id) // open_cap.go
	return InitProducerIdResult{ProducerID: d.ProducerID, Epoch: d.Epoch}, nil
}

// AddPartitions adds partitions to a producer's transaction, starting one
// when none is open; with verifyOnly it only checks they are already in
// it. Partition leaders call it before appending a transactional batch of
// a version 2 producer, the group coordinator before a TxnOffsetCommit,
// and a version 1 Kafka client itself (AddPartitionsToTxn v0-v3,
// AddOffsetsToTxn). txnVersion is the adder's transaction version (0
// means 2); the transaction keeps the version of the add that started it.
// A previous transaction still writing its markers is waited for
// (briefly); if it takes longer the answer is CONCURRENT_TRANSACTIONS and
// the caller retries.
func (c *Coordinator) AddPartitions(ctx context.Context, id string, pid int64, epoch int16, verifyOnly bool, tps []TopicPartition, txnVersion int16) error {
	kind := KindAddPartitions
	if verifyOnly {
		kind = KindVerifyPartitions
	}
	_, err := c.handle(ctx, id, Request{Kind: kind, TxnVersion: clientVersion(txnVersion), ProducerID: pid, Epoch: epoch, Partitions: tps})
	return err
}

// clientVersion is the transaction version a request carries: unset (0)
// is 2, the gRPC SDK's; anything else below 2 is 1.
func clientVersion(v int16) int16 {
	switch {
	case v == 0 || v >= 2:
		return 2
	}
	return 1
}

// EndTxnResult is the producer id and epoch for the next transaction.
type EndTxnResult struct {
	ProducerID int64
	Epoch      int16
}

// EndTxn commits or aborts. Under transaction version 2 (txnVersion 2, or
// 0: unset) PREPARE_* with the epoch bumped is written and replicated
// before it answers, and the answer is the epoch for the next transaction;
// markers follow. A retry of an EndTxn whose answer was lost (the epoch
// before the bump, or the last epoch of a producer id that rotated) gets
// the same answer; a commit retried after the coordinator aborted the
// transaction is refused, never turned into an abort. An abort or commit
// with no partition in the transaction is allowed, and bumps the epoch
// like any other. Under version 1 (a Kafka client's EndTxn below v5) the
// epoch stays, the markers carry it unbumped, and only an open
// transaction may be ended (a repeat of a completed end is answered NONE).
func (c *Coordinator) EndTxn(ctx context.Context, id string, pid int64, epoch int16, commit bool, txnVersion int16) (EndTxnResult, error) {
	d, err := c.handle(ctx, id, Request{Kind: KindEndTxn, TxnVersion: clientVersion(txnVersion), ProducerID: pid, Epoch: epoch, Commit: commit})
	if err != nil {
		return EndTxnResult{}, err
	}
	return EndTxnResult{ProducerID: d.ProducerID, Epoch: d.Epoch}, nil
}

// Describe reports transactional ids this broker coordinates.
func (c *Coordinator) Describe(ids []string) []*pb.TransactionState {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*pb.TransactionState
	for _, id := range ids {
		st := &pb.TransactionState{TransactionalId: id, CoordinatorId: c.cfg.NodeID, ProducerId: -1, ProducerEpoch: -1, TransactionStartTimeMs: -1}
		out = append(out, st)
		o, err := c.ownerLocked(id)
		if err != nil {
			st.ErrorCode, st.ErrorMessage = errs.Split(err)
			continue
		}
		m := o.txns[id]
		if m == nil || m.State == Dead {
			st.ErrorCode, st.ErrorMessage = pb.ErrorCode_TRANSACTIONAL_ID_NOT_FOUND, fmt.Sprintf("transactional id %q is not known (never used, or expired after transactional.id.expiration.ms)", id)
			continue
		}
		fillState(st, m)
	}
	return out
}

func fillState(st *pb.TransactionState, m *Metadata) {
	st.State, st.TransactionTimeoutMs, st.TransactionStartTimeMs = m.State.String(), m.TimeoutMs, m.StartTimeMs
	st.ProducerId, st.ProducerEpoch, st.LastUpdateTimeMs = m.ProducerID, int32(m.ProducerEpoch), m.LastUpdateMs
	for _, tp := range sortedPartitions(m.Partitions) {
		st.Partitions = append(st.Partitions, &pb.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
}

// List lists this broker's transactional ids, filtered like Kafka's
// ListTransactions (states, producer ids, running longer than, id pattern).
//
// The answer is one page in transactional id order, starting after
// req.AfterTransactionalId: listings are added while the page stays within
// pageBytes (at least one listing per page), and More says whether
// listings remain; pageBytes <= 0 answers everything at once.
func (c *Coordinator) List(req *pb.ListTransactionsRequest, pageBytes int) (*pb.ListTransactionsResponse, error) {
	var re *regexp.Regexp
	if req.TransactionalIdPattern != "" {
		var err error
		if re, err = regexp.Compile(req.TransactionalIdPattern); err != nil {
			return &pb.ListTransactionsResponse{ErrorCode: pb.ErrorCode_INVALID_REQUEST}, nil
		}
	}
	states := map[string]bool{}
	for _, s := range req.StateFilters {
		states[s] = true
	}
	pids := map[int64]bool{}
	for _, p := range req.ProducerIdFilters {
		pids[p] = true
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := &pb.ListTransactionsResponse{CoordinatorId: c.cfg.NodeID}
	for _, o := range c.parts {
		if !o.loaded {
			resp.ErrorCode = pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS
			continue
		}
		for id, m := range o.txns {
			if m.State == Dead || (len(states) > 0 && !states[m.State.String()]) || (len(pids) > 0 && !pids[m.ProducerID]) || (re != nil && !re.MatchString(id)) {
				continue
			}
			// Kafka's filter: transactions running longer than the duration
			// (a start time of -1, no transaction, never matches).
			if req.DurationFilterMs > 0 && (m.StartTimeMs < 0 || now-m.StartTimeMs <= req.DurationFilterMs) {
				continue
			}
			if req.AfterTransactionalId != "" && id <= req.AfterTransactionalId {
				continue
			}
			resp.Transactions = append(resp.Transactions, &pb.TransactionListing{TransactionalId: id, ProducerId: m.ProducerID, State: m.State.String()})
		}
	}
	sort.Slice(resp.Transactions, func(i, j int) bool {
		return resp.Transactions[i].TransactionalId < resp.Transactions[j].TransactionalId
	})
	if pageBytes > 0 {
		size := proto.Size(&pb.ListTransactionsResponse{ErrorCode: resp.ErrorCode, CoordinatorId: resp.CoordinatorId, More: true})
		for i, l := range resp.Transactions {
			n := proto.Size(l)
			size += 1 + protowire.SizeVarint(uint64(n)) + n // field tag, length, listing
			if size > pageBytes && i > 0 {
				resp.Transactions, resp.More = resp.Transactions[:i], true
				break
			}
		}
	}
	return resp, nil
}

// LoadedPartition is one transaction log partition a coordinator has
// loaded: its coordinator epoch and each transaction's state by producer
// id.
type LoadedPartition struct {
	Partition        int32
	CoordinatorEpoch int32
	States           map[int64]State
}

// Loaded lists the partitions this coordinator has loaded, with their
// transactions' states: what a checker compares with the partition logs
// (the cluster simulation's monitor checks that no transaction is
// complete while a marker of it is not in the ISR yet).
func (c *Coordinator) Loaded() []LoadedPartition {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []LoadedPartition
	for _, o := range c.parts {
		if !o.loaded {
			continue
		}
		lp := LoadedPartition{Partition: o.id, CoordinatorEpoch: o.epoch, States: make(map[int64]State, len(o.txns))}
		for _, m := range o.txns {
			lp.States[m.ProducerID] = m.State
		}
		out = append(out, lp)
	}
	return out
}

// PendingMarkers is the marker queue size.
func (c *Coordinator) PendingMarkers() int { return c.markers.Pending() }
