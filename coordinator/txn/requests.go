package txn

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"time"

	"github.com/strand-io/strand/internal/errs"
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
// epoch, fencing any older instance. With a transaction open it fences
// (PREPARE_EPOCH_FENCE, then an abort) and answers CONCURRENT_TRANSACTIONS;
// the retry gets the new epoch once the abort is complete.
func (c *Coordinator) InitProducerId(ctx context.Context, id string, timeoutMs int32, reqPID int64, reqEpoch int16) (InitProducerIdResult, error) {
	if timeoutMs <= 0 || time.Duration(timeoutMs)*time.Millisecond > c.cfg.MaxTimeout {
		return InitProducerIdResult{}, errs.New(pb.ErrorCode_INVALID_TRANSACTION_TIMEOUT, "transaction.timeout.ms=%d must be positive and at most transaction.max.timeout.ms=%d", timeoutMs, c.cfg.MaxTimeout.Milliseconds())
	}
	c.mu.Lock()
	o, err := c.ownerLocked(id)
	if err != nil {
		c.mu.Unlock()
		return InitProducerIdResult{}, err
	}
	m := o.txns[id]
	if m == nil || m.State == Dead {
		c.mu.Unlock()
		pid, err := c.pids.Next(ctx)
		if err != nil {
			return InitProducerIdResult{}, err
		}
		c.mu.Lock()
		if o2, err := c.ownerLocked(id); err != nil || o2 != o {
			c.mu.Unlock()
			return InitProducerIdResult{}, errs.New(pb.ErrorCode_NOT_COORDINATOR, "coordinator moved while allocating a producer id")
		}
		if m = o.txns[id]; m == nil || m.State == Dead {
			m = newMetadata(id, pid, timeoutMs, c.now())
			o.txns[id] = m
		}
	}
	if !c.waitPending(ctx, m, pendingWait) {
		c.mu.Unlock()
		return InitProducerIdResult{}, errs.New(pb.ErrorCode_CONCURRENT_TRANSACTIONS, "another change of %q is in progress", id)
	}
	if reqPID >= 0 && (reqPID != m.ProducerID || (reqEpoch != m.ProducerEpoch && reqEpoch != m.LastProducerEpoch)) {
		c.mu.Unlock()
		return InitProducerIdResult{}, errs.New(pb.ErrorCode_PRODUCER_FENCED, "producerId=%d epoch %d is not the current instance of %q", reqPID, reqEpoch, id)
	}
	now := c.now()
	switch st := m.State; st {
	case PrepareCommit, PrepareAbort, PrepareEpochFence:
		c.mu.Unlock()
		return InitProducerIdResult{}, errs.New(pb.ErrorCode_CONCURRENT_TRANSACTIONS, "the previous transaction of %q is completing (%s)", id, st)
	case Ongoing:
		// Fence the running instance and abort its transaction.
		t := m.base(PrepareEpochFence, now)
		t.lastEpoch, t.reason = m.ProducerEpoch, reasonFenced
		t.epoch = m.ProducerEpoch + 1
		if !m.begin(t) {
			c.mu.Unlock()
			return InitProducerIdResult{}, errs.New(pb.ErrorCode_CONCURRENT_TRANSACTIONS, "another change of %q is in progress", id)
		}
		c.mu.Unlock()
		if err := c.write(o, m, t, func() { c.abortFencedLocked(o, m) }); err != nil {
			return InitProducerIdResult{}, err
		}
		c.lg.Info("fenced a running producer", "transactionalId", id, "producerId", t.producerID, "epoch", t.epoch)
		return InitProducerIdResult{}, errs.New(pb.ErrorCode_CONCURRENT_TRANSACTIONS, "the open transaction of %q is being aborted to fence its previous producer; retry", id)
	}
	t := m.base(Empty, now)
	t.timeoutMs, t.partitions, t.startTimeMs, t.reason, t.lastEpoch = timeoutMs, map[TopicPartition]bool{}, -1, reasonNone, -1
	if m.ProducerEpoch+1 >= maxEpoch {
		c.mu.Unlock()
		pid, err := c.pids.Next(ctx)
		if err != nil {
			return InitProducerIdResult{}, err
		}
		c.mu.Lock()
		t.prevPID, t.producerID, t.epoch = m.ProducerID, pid, 0
	} else {
		t.epoch = m.ProducerEpoch + 1
	}
	if !m.begin(t) {
		c.mu.Unlock()
		return InitProducerIdResult{}, errs.New(pb.ErrorCode_CONCURRENT_TRANSACTIONS, "another change of %q is in progress", id)
	}
	c.mu.Unlock()
	if err := c.write(o, m, t, nil); err != nil {
		return InitProducerIdResult{}, err
	}
	return InitProducerIdResult{ProducerID: t.producerID, Epoch: t.epoch}, nil
}

// epochError explains a request from an epoch that is not the current one.
func epochError(m *Metadata, pid int64, epoch int16) error {
	if epoch == m.LastProducerEpoch {
		switch m.Reason {
		case reasonTimeout:
			return errs.New(pb.ErrorCode_TRANSACTION_TIMED_OUT, "the transaction of %q was aborted by the coordinator after transaction.timeout.ms=%d", m.TransactionalID, m.TimeoutMs)
		case reasonFenced:
			return errs.New(pb.ErrorCode_PRODUCER_FENCED, "producerId=%d epoch %d of %q was fenced by a newer producer with the same transactional.id", pid, epoch, m.TransactionalID)
		}
	}
	if epoch < m.ProducerEpoch {
		return errs.New(pb.ErrorCode_PRODUCER_FENCED, "producerId=%d epoch %d of %q is older than the current epoch %d: a newer producer took over", pid, epoch, m.TransactionalID, m.ProducerEpoch)
	}
	return errs.New(pb.ErrorCode_INVALID_PRODUCER_EPOCH, "producerId=%d epoch %d of %q is newer than the coordinator's %d", pid, epoch, m.TransactionalID, m.ProducerEpoch)
}

// AddPartitions adds partitions to a producer's transaction, starting one
// (version 2) when none is open; with verifyOnly it only checks they are
// already in it. Partition leaders call it before appending a
// transactional batch; the group coordinator before a TxnOffsetCommit.
func (c *Coordinator) AddPartitions(ctx context.Context, id string, pid int64, epoch int16, verifyOnly bool, tps []TopicPartition) error {
	c.mu.Lock()
	o, err := c.ownerLocked(id)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	m := o.txns[id]
	if m == nil || m.State == Dead {
		c.mu.Unlock()
		return errs.New(pb.ErrorCode_INVALID_PRODUCER_ID_MAPPING, "no producer is initialised for transactional id %q", id)
	}
	// A previous transaction still writing its markers is waited for
	// (briefly); if it takes longer the answer below is
	// CONCURRENT_TRANSACTIONS and the caller retries.
	c.waitSettled(ctx, m, pendingWait)
	if !c.waitPending(ctx, m, pendingWait) {
		c.mu.Unlock()
		return errs.New(pb.ErrorCode_CONCURRENT_TRANSACTIONS, "another change of %q is in progress", id)
	}
	if o2, err := c.ownerLocked(id); err != nil || o2 != o || o.txns[id] != m {
		c.mu.Unlock()
		return errs.New(pb.ErrorCode_NOT_COORDINATOR, "the coordinator of %q moved while waiting", id)
	}
	if pid != m.ProducerID {
		err := errs.New(pb.ErrorCode_INVALID_PRODUCER_ID_MAPPING, "transactional id %q belongs to producerId=%d, not %d", id, m.ProducerID, pid)
		if pid == m.PrevProducerID {
			err = errs.New(pb.ErrorCode_PRODUCER_FENCED, "producerId=%d of %q was replaced by %d", pid, id, m.ProducerID)
		}
		c.mu.Unlock()
		return err
	}
	if epoch != m.ProducerEpoch {
		err := epochError(m, pid, epoch)
		c.mu.Unlock()
		return err
	}
	switch st := m.State; st {
	case PrepareCommit, PrepareAbort, PrepareEpochFence:
		c.mu.Unlock()
		return errs.New(pb.ErrorCode_CONCURRENT_TRANSACTIONS, "the previous transaction of %q is completing (%s)", id, st)
	}
	missing := false
	for _, tp := range tps {
		if !m.Partitions[tp] {
			missing = true
		}
	}
	if verifyOnly {
		ongoing := m.State == Ongoing
		c.mu.Unlock()
		if !ongoing || missing {
			return errs.New(pb.ErrorCode_INVALID_TXN_STATE, "the partitions are not part of an open transaction of %q", id)
		}
		return nil
	}
	if m.State == Ongoing && !missing {
		c.mu.Unlock()
		return nil
	}
	now := c.now()
	t := m.base(Ongoing, now)
	if m.State != Ongoing {
		t.partitions, t.startTimeMs, t.reason, t.lastEpoch = map[TopicPartition]bool{}, now, reasonNone, m.LastProducerEpoch
	}
	for _, tp := range tps {
		t.partitions[tp] = true
	}
	if !m.begin(t) {
		c.mu.Unlock()
		return errs.New(pb.ErrorCode_CONCURRENT_TRANSACTIONS, "another change of %q is in progress", id)
	}
	c.mu.Unlock()
	return c.write(o, m, t, nil)
}

// EndTxnResult is the producer id and epoch for the next transaction.
type EndTxnResult struct {
	ProducerID int64
	Epoch      int16
}

// EndTxn commits or aborts (version 2): PREPARE_* with the epoch bumped is
// written and replicated before it answers; markers follow. A retry of an
// EndTxn whose answer was lost (same epoch as the one bumped) gets the same
// answer; a commit retried after the coordinator aborted the transaction is
// refused, never turned into an abort.
func (c *Coordinator) EndTxn(ctx context.Context, id string, pid int64, epoch int16, commit bool) (EndTxnResult, error) {
	c.mu.Lock()
	o, err := c.ownerLocked(id)
	if err != nil {
		c.mu.Unlock()
		return EndTxnResult{}, err
	}
	m := o.txns[id]
	if m == nil || m.State == Dead {
		c.mu.Unlock()
		return EndTxnResult{}, errs.New(pb.ErrorCode_INVALID_PRODUCER_ID_MAPPING, "no producer is initialised for transactional id %q", id)
	}
	if !c.waitPending(ctx, m, pendingWait) {
		c.mu.Unlock()
		return EndTxnResult{}, errs.New(pb.ErrorCode_CONCURRENT_TRANSACTIONS, "another change of %q is in progress", id)
	}
	if pid != m.ProducerID && !(pid == m.PrevProducerID && epoch == m.LastProducerEpoch) {
		err := errs.New(pb.ErrorCode_INVALID_PRODUCER_ID_MAPPING, "transactional id %q belongs to producerId=%d, not %d", id, m.ProducerID, pid)
		c.mu.Unlock()
		return EndTxnResult{}, err
	}
	next := EndTxnResult{ProducerID: m.ProducerID, Epoch: m.ProducerEpoch}
	if m.NextProducerID >= 0 {
		next = EndTxnResult{ProducerID: m.NextProducerID, Epoch: 0}
	}
	if epoch != m.ProducerEpoch || pid != m.ProducerID {
		defer c.mu.Unlock()
		if epoch == m.LastProducerEpoch && m.Reason == reasonNone {
			// A retry of the EndTxn that bumped the epoch.
			switch {
			case commit && (m.State == PrepareCommit || m.State == CompleteCommit):
				return next, nil
			case !commit && (m.State == PrepareAbort || m.State == CompleteAbort):
				return next, nil
			}
			return EndTxnResult{}, errs.New(pb.ErrorCode_INVALID_TXN_STATE, "the transaction of %q already ended as %s", id, m.State)
		}
		if epoch == m.LastProducerEpoch && m.Reason == reasonTimeout && !commit && (m.State == PrepareAbort || m.State == CompleteAbort) {
			// Aborting what the coordinator already aborted: done.
			return next, nil
		}
		return EndTxnResult{}, epochError(m, pid, epoch)
	}
	if st := m.State; st != Ongoing {
		c.mu.Unlock()
		if st.IsPrepare() || st == PrepareEpochFence {
			return EndTxnResult{}, errs.New(pb.ErrorCode_CONCURRENT_TRANSACTIONS, "the previous transaction of %q is completing (%s)", id, st)
		}
		return EndTxnResult{}, errs.New(pb.ErrorCode_INVALID_TXN_STATE, "%q has no open transaction to %s (state %s)", id, map[bool]string{true: "commit", false: "abort"}[commit], st)
	}
	to := PrepareAbort
	if commit {
		to = PrepareCommit
	}
	t := m.base(to, c.now())
	t.lastEpoch, t.reason = m.ProducerEpoch, reasonNone
	t.epoch = m.ProducerEpoch + 1
	if t.epoch >= maxEpoch {
		c.mu.Unlock()
		np, err := c.pids.Next(ctx)
		if err != nil {
			return EndTxnResult{}, err
		}
		c.mu.Lock()
		t.nextPID = np
	}
	if !m.begin(t) {
		c.mu.Unlock()
		return EndTxnResult{}, errs.New(pb.ErrorCode_CONCURRENT_TRANSACTIONS, "another change of %q is in progress", id)
	}
	c.mu.Unlock()
	if err := c.write(o, m, t, func() { c.sendMarkersLocked(o, m) }); err != nil {
		return EndTxnResult{}, err
	}
	if t.nextPID >= 0 {
		return EndTxnResult{ProducerID: t.nextPID, Epoch: 0}, nil
	}
	return EndTxnResult{ProducerID: t.producerID, Epoch: t.epoch}, nil
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
func (c *Coordinator) List(req *pb.ListTransactionsRequest) (*pb.ListTransactionsResponse, error) {
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
			if req.DurationFilterMs > 0 && (m.State != Ongoing || now-m.StartTimeMs < req.DurationFilterMs) {
				continue
			}
			resp.Transactions = append(resp.Transactions, &pb.TransactionListing{TransactionalId: id, ProducerId: m.ProducerID, State: m.State.String()})
		}
	}
	sort.Slice(resp.Transactions, func(i, j int) bool {
		return resp.Transactions[i].TransactionalId < resp.Transactions[j].TransactionalId
	})
	return resp, nil
}

// PendingMarkers is the marker queue size.
func (c *Coordinator) PendingMarkers() int { return c.markers.Pending() }
