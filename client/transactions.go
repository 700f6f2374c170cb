package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Transactions (Kafka's protocol, version 2): InitTransactions once, then
// for each transaction BeginTransaction, Produce, optionally
// SendOffsetsToTransaction, and CommitTransaction or AbortTransaction.
//
// Errors fall in the four categories of Classify: retriable ones are
// retried within max.block.ms; an abortable one (the transaction is
// doomed: a record failed, the coordinator timed it out) leaves only
// AbortTransaction; ErrProducerFenced (another instance with the same
// transactional.id took over) leaves only Close; ErrCommitOutcomeUnknown
// means retry CommitTransaction.

// ErrAborted fails records that were still buffered when the transaction
// was aborted; they were never sent.
var ErrAborted = errors.New("strand: the transaction was aborted before the record was sent")

func (p *Producer) requireTxn() (*txnState, error) {
	if p.txn == nil {
		return nil, errors.New("strand: this producer has no transactional.id (use client.TransactionalID)")
	}
	return p.txn, nil
}

// coordCache remembers the coordinator of each key coordinatorCall found,
// so that a transaction's requests (EndTxn every commit,
// TxnOffsetCommit) do not each cost a FindCoordinator round trip first.
// An entry is dropped when a request to it fails in a way that says the
// coordinator may have moved (no answer, or coordinatorMoved's codes), and
// the next attempt asks again, as Kafka's producer looks its coordinator
// up again only then.
type coordCache struct {
	mu    sync.Mutex
	addrs map[coordKey]string
}

type coordKey struct {
	typ pb.CoordinatorType
	key string
}

func (c *coordCache) get(k coordKey) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addrs[k]
}

func (c *coordCache) set(k coordKey, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.addrs == nil {
		c.addrs = map[coordKey]string{}
	}
	c.addrs[k] = addr
}

func (c *coordCache) drop(k coordKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.addrs, k)
}

// coordinatorCall runs fn against the coordinator of key (of typ),
// retrying coordinator moves and loads, CONCURRENT_TRANSACTIONS and every
// other retriable answer within max.block.ms (or ctx); an answer that is
// not retriable, from FindCoordinator or fn, ends it at once. sent
// reports whether some attempt reached a coordinator, so an unanswered
// commit is known to be in doubt. Once the time is up the error matches
// context.DeadlineExceeded (or ctx's error) and the last error retried.
// The coordinator found is cached (coordCache): FindCoordinator is asked
// only the first time and after the coordinator failed to answer or
// answered that it is not (or no longer) the coordinator.
func (p *Producer) coordinatorCall(ctx context.Context, typ pb.CoordinatorType, key string, fn func(ctx context.Context, cc *grpc.ClientConn) (pb.ErrorCode, string, error)) (sent bool, err error) {
	bctx, cancel := context.WithTimeoutCause(ctx, p.cfg.maxBlock, maxBlockExpired(p.cfg.maxBlock))
	defer cancel()
	ck := coordKey{typ, key}
	var last error
	// gone is the coordinator that last failed to answer or answered that
	// it no longer coordinates key. FindCoordinator is asked again at once
	// then: a new coordinator is tried without a backoff (as KIP-951 does
	// for a partition's new leader); while it still names the one gone,
	// it is asked every retry.backoff.ms, not on a backoff that grows to
	// retry.backoff.max.ms, so that the new coordinator is found within
	// about 100 ms of the cluster electing it.
	gone := ""
	atOnce := false // the last retry after a coordinator went was immediate
	goneRetry := func(addr string) error {
		gone = addr
		if !atOnce {
			atOnce = true
			return nil
		}
		atOnce = false
		return p.cfg.sleep(bctx, p.cfg.retryBackoff)
	}
	for attempt := 0; ; attempt++ {
		addr := p.coords.get(ck)
		if addr != "" && p.cl.addrFenced(addr) {
			p.coords.drop(ck) // the cluster fenced it since: look again
			addr = ""
		}
		var ferr error
		var co *pb.Coordinator
		if addr == "" {
			ferr = p.cl.any(bctx, func(ctx context.Context, cc *grpc.ClientConn) error {
				r, err := pb.NewMetadataClient(cc).FindCoordinator(ctx, &pb.FindCoordinatorRequest{KeyType: typ, Keys: []string{key}})
				if err == nil {
					co = r.Coordinators[0]
				}
				return err
			})
			if ferr == nil && co.ErrorCode == pb.ErrorCode_NONE {
				addr = co.Address
			}
		}
		if addr != "" && addr == gone {
			// Still the coordinator that went: try it again a
			// retry.backoff.ms later.
			gone = ""
			if p.cfg.sleep(bctx, p.cfg.retryBackoff) != nil {
				return sent, expired(bctx, last)
			}
		}
		switch {
		case ferr != nil:
			last = keepLast(last, ferr)
		case addr == "":
			e := errs.FromCode(co.ErrorCode, co.ErrorMessage)
			if !errs.IsRetriable(e) {
				return sent, fmt.Errorf("finding the coordinator of %q: %w", key, e)
			}
			last = e
		default:
			cc, err := p.cl.conn(addr)
			if err != nil {
				p.coords.drop(ck)
				return sent, err
			}
			rctx, rcancel := context.WithTimeout(bctx, p.cfg.requestTimeout)
			wctx, stop := p.cl.watch(rctx, addr) // a stopped coordinator, fenced meanwhile (stopped.go)
			code, msg, err := fn(wctx, cc)
			stop()
			rcancel()
			if err != nil {
				sent = true
				p.coords.drop(ck)
				last = keepLast(last, err)
				if bctx.Err() == nil {
					attempt--
					if goneRetry(addr) != nil {
						return sent, expired(bctx, last)
					}
					continue
				}
				break
			}
			sent = true
			e := errs.FromCode(code, msg)
			if e == nil {
				p.coords.set(ck, addr)
				return sent, nil
			}
			last = e
			if coordinatorMoved(e) {
				p.coords.drop(ck)
				attempt--
				if goneRetry(addr) != nil {
					return sent, expired(bctx, last)
				}
				continue
			}
			p.coords.set(ck, addr)
			if !errs.IsRetriable(e) {
				return sent, e
			}
		}
		if p.cfg.sleep(bctx, backoff(&p.cfg, attempt)) != nil {
			return sent, expired(bctx, last)
		}
	}
}

// InitTransactions obtains the producer id and epoch of the transactional
// id, fencing any older producer with the same id (its open transaction is
// aborted). It blocks up to max.block.ms.
//
// It retries retriable answers (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS, …); when
// max.block.ms or ctx ends first, the error matches
// context.DeadlineExceeded (or ctx's error) and the last answer. Other
// answers end it at once: INVALID_TRANSACTION_TIMEOUT (transaction.timeout.ms
// above the broker's maximum), PRODUCER_FENCED, TRANSACTIONAL_ID_NOT_FOUND,
// …. A producer without TransactionalID gets a plain error.
func (p *Producer) InitTransactions(ctx context.Context) error {
	t, err := p.requireTxn()
	if err != nil {
		return err
	}
	t.mu.Lock()
	if t.phase == txnFatalError {
		t.mu.Unlock()
		return t.fatal
	}
	err = t.moveLocked(txnInitializing)
	t.mu.Unlock()
	if err != nil {
		return fmt.Errorf("InitTransactions: %w", err)
	}
	if err := p.initTxnProducerID(ctx, -1, -1); err != nil {
		if errors.Is(err, ErrProducerFenced) {
			t.fail(err)
		} else {
			t.mu.Lock()
			t.moveLocked(txnUninitialized)
			t.mu.Unlock()
		}
		return fmt.Errorf("InitTransactions for %q: %w", p.cfg.transactionalID, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.moveLocked(txnReady); err != nil {
		return t.fatal // failed meanwhile
	}
	t.abortErr, t.reinit, t.produced, t.offsetsSent = nil, false, false, false
	return nil
}

// initTxnProducerID sends InitProducerId for the transactional id (with the
// producer's current id and epoch, or -1 for a new producer) and moves to
// the answer's id and epoch, every partition's sequences from 0.
func (p *Producer) initTxnProducerID(ctx context.Context, pid int64, epoch int16) error {
	var resp *pb.InitProducerIdResponse
	_, err := p.coordinatorCall(ctx, pb.CoordinatorType_TRANSACTION, p.cfg.transactionalID, func(ctx context.Context, cc *grpc.ClientConn) (pb.ErrorCode, string, error) {
		r, err := pb.NewTransactionsClient(cc).InitProducerId(ctx, &pb.InitProducerIdRequest{TransactionalId: p.cfg.transactionalID,
			TransactionTimeoutMs: int32(p.cfg.txnTimeout / time.Millisecond), ProducerId: pid, ProducerEpoch: int32(epoch)})
		if err != nil {
			return 0, "", err
		}
		resp = r
		return r.ErrorCode, r.ErrorMessage, nil
	})
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.pid, p.epoch, p.pidState = resp.ProducerId, int16(resp.ProducerEpoch), pidReady
	for _, pp := range p.parts {
		p.restartSequencesLocked(pp)
	}
	p.mu.Unlock()
	return nil
}

// BeginTransaction starts a transaction (locally: the partitions join it as
// records reach their leaders). It fails, without a broker, before
// InitTransactions or with a transaction open, and with the error that
// made the producer unusable (ErrProducerFenced, or a fatal one).
func (p *Producer) BeginTransaction() error {
	t, err := p.requireTxn()
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch t.phase {
	case txnFatalError:
		return t.fatal
	case txnUninitialized, txnInitializing:
		return errors.New("strand: BeginTransaction before InitTransactions")
	case txnInTransaction, txnCommitting, txnAborting, txnAbortableError:
		return fmt.Errorf("strand: a transaction is already open (%v)", t.phase)
	}
	if err := t.moveLocked(txnInTransaction); err != nil {
		return err
	}
	t.produced, t.offsetsSent, t.abortErr, t.acks = false, false, nil, 0
	t.partitions = map[TopicPartition]bool{}
	return nil
}

// SendOffsetsToTransaction commits a consumer group's offsets (the next
// offset to read per partition) as part of the transaction: they become
// visible only if it commits. gm is the consumer's GroupMetadata, which
// fences zombies of older generations (KIP-447).
//
// It retries retriable answers within max.block.ms. Any failure but these
// two makes the transaction abortable and returns an error wrapping
// ErrAbortable (ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID: the consumer's
// generation is gone; FENCED_INSTANCE_ID; running out of time, which also
// matches context.DeadlineExceeded): PRODUCER_FENCED makes the producer
// unusable (ErrProducerFenced), and an answer of the Fatal category
// (INVALID_TXN_STATE, …) too. Outside an open transaction it returns a
// plain error.
func (p *Producer) SendOffsetsToTransaction(ctx context.Context, offsets map[TopicPartition]int64, gm GroupMetadata) error {
	t, err := p.requireTxn()
	if err != nil {
		return err
	}
	t.mu.Lock()
	switch t.phase {
	case txnFatalError:
		t.mu.Unlock()
		return t.fatal
	case txnAbortableError:
		err := t.abortableLocked()
		t.mu.Unlock()
		return err
	case txnInTransaction:
	case txnCommitting, txnAborting:
		t.mu.Unlock()
		return fmt.Errorf("strand: SendOffsetsToTransaction while the transaction is ending (%v)", t.phase)
	default:
		t.mu.Unlock()
		return errors.New("strand: SendOffsetsToTransaction outside a transaction")
	}
	t.offsetsSent = true
	t.mu.Unlock()
	p.mu.Lock()
	pid, epoch := p.pid, p.epoch
	p.mu.Unlock()
	req := &pb.TxnOffsetCommitRequest{TransactionalId: p.cfg.transactionalID, GroupId: gm.GroupID, ProducerId: pid, ProducerEpoch: int32(epoch),
		GenerationId: gm.GenerationID, MemberId: gm.MemberID, GroupInstanceId: gm.GroupInstanceID}
	for tp, off := range offsets {
		req.Offsets = append(req.Offsets, &pb.PartitionOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: off, LeaderEpoch: -1})
	}
	_, err = p.coordinatorCall(ctx, pb.CoordinatorType_GROUP, gm.GroupID, func(ctx context.Context, cc *grpc.ClientConn) (pb.ErrorCode, string, error) {
		r, err := pb.NewGroupsClient(cc).TxnOffsetCommit(ctx, req)
		if err != nil {
			return 0, "", err
		}
		if r.ErrorCode != pb.ErrorCode_NONE {
			return r.ErrorCode, r.ErrorMessage, nil
		}
		for _, pe := range r.Partitions {
			if pe.ErrorCode != pb.ErrorCode_NONE {
				return pe.ErrorCode, pe.ErrorMessage, nil
			}
		}
		return pb.ErrorCode_NONE, "", nil
	})
	if err != nil {
		return p.txnFailed(err)
	}
	return nil
}

// txnFailed files a coordinator error: fenced is fatal, others doom the transaction.
func (p *Producer) txnFailed(err error) error {
	if errors.Is(err, ErrProducerFenced) {
		p.txn.fail(err)
		return err
	}
	if codeCategory(err) == errs.Fatal && errs.CodeOf(err) != pb.ErrorCode_UNKNOWN_SERVER_ERROR {
		p.txn.fail(err)
		return err
	}
	p.txn.abortable(err)
	return fmt.Errorf("%w: %w", ErrAbortable, err)
}

// endingTxn moves an open transaction to phase to (txnCommitting or
// txnAborting) for op, or refuses: the fatal error; a plain error without
// an open transaction; for a commit, the abortable error of a doomed
// transaction; the transition table's refusal otherwise (a commit after
// an abort started).
func (p *Producer) endingTxn(op string, to txnPhase) (*txnState, error) {
	t, err := p.requireTxn()
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch t.phase {
	case txnFatalError:
		return nil, t.fatal
	case txnUninitialized, txnInitializing, txnReady:
		return nil, fmt.Errorf("strand: %s without an open transaction", op)
	case txnAbortableError:
		if to == txnCommitting {
			return nil, fmt.Errorf("%w: a record of the transaction failed, abort it: %w", ErrAbortable, t.abortErr)
		}
	}
	if err := t.moveLocked(to); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return t, nil
}

// CommitTransaction flushes every record of the transaction, waits for all
// of them, then commits. If any record failed it returns an error wrapping
// ErrAbortable and the record's error, and commits nothing: call
// AbortTransaction. A commit that was sent and whose answer was lost, or
// still retriable when max.block.ms ran out, or UNKNOWN_SERVER_ERROR, is
// ErrCommitOutcomeUnknown (wrapping what happened): call CommitTransaction
// again. TRANSACTION_TIMED_OUT (the coordinator aborted it) wraps
// ErrAbortable; PRODUCER_FENCED is ErrProducerFenced; an answer of the
// Fatal category leaves the producer unusable. If ctx ends while it waits
// for the records, the error wraps ctx's (nothing was committed yet).
func (p *Producer) CommitTransaction(ctx context.Context) error {
	t, err := p.endingTxn("CommitTransaction", txnCommitting)
	if err != nil {
		return err
	}
	if err := p.Flush(ctx); err != nil {
		return fmt.Errorf("commit: waiting for the transaction's records: %w", err)
	}
	t.mu.Lock()
	switch t.phase {
	case txnAbortableError:
		err := t.abortErr
		t.mu.Unlock()
		return fmt.Errorf("%w: a record of the transaction failed, abort it: %w", ErrAbortable, err)
	case txnFatalError:
		err := t.fatal
		t.mu.Unlock()
		return err
	}
	if !t.produced && !t.offsetsSent {
		err := t.endedLocked()
		t.mu.Unlock()
		return err
	}
	t.mu.Unlock()
	return p.endTxn(ctx, true)
}

// AbortTransaction fails the records still buffered (ErrAborted), waits
// for those in flight, and aborts: no record of this transaction becomes
// visible to read_committed readers, and none can land in the next one.
// It retries retriable answers within max.block.ms (then the error matches
// context.DeadlineExceeded and the last answer: call it again);
// PRODUCER_FENCED is ErrProducerFenced; TRANSACTION_TIMED_OUT wraps
// ErrAbortable; other answers are returned as they are. If ctx ends while
// it waits for the records in flight, the error wraps ctx's.
func (p *Producer) AbortTransaction(ctx context.Context) error {
	t, err := p.endingTxn("AbortTransaction", txnAborting)
	if err != nil {
		return err
	}
	p.abortBuffered()
	if err := p.Flush(ctx); err != nil {
		return fmt.Errorf("abort: waiting for records in flight: %w", err)
	}
	t.mu.Lock()
	if t.phase == txnFatalError {
		t.mu.Unlock()
		return t.fatal
	}
	needEnd, reinit := t.produced || t.offsetsSent, t.reinit
	if !needEnd && !reinit {
		err := t.endedLocked()
		t.mu.Unlock()
		return err
	}
	t.mu.Unlock()
	if reinit {
		// The coordinator forgot this producer id (the transactional id
		// expired): there is no transaction of it to end. As Kafka's
		// producer does, ask for a new producer id naming the old one
		// (KIP-360) and carry on with it.
		p.mu.Lock()
		pid, epoch := p.pid, p.epoch
		p.mu.Unlock()
		if err := p.initTxnProducerID(ctx, pid, epoch); err != nil {
			if errors.Is(err, ErrProducerFenced) {
				t.fail(err)
			}
			return fmt.Errorf("abort: a new producer id for %q: %w", p.cfg.transactionalID, err)
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		t.reinit = false
		return t.endedLocked()
	}
	if !needEnd {
		return nil
	}
	return p.endTxn(ctx, false)
}

// abortBuffered fails every batch not yet sent.
func (p *Producer) abortBuffered() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pp := range p.parts {
		if pp.open != nil {
			p.closeOpen(pp)
		}
		keep := pp.queued[:0]
		for _, b := range pp.queued {
			if b.sentOnce {
				keep = append(keep, b) // it may have landed: let it finish
				continue
			}
			if b.inWindow {
				removeBatch(&pp.window, b)
				b.inWindow = false
			}
			p.completeLocked(b, -1, ErrAborted)
		}
		pp.queued = keep
	}
}

// endTxn sends EndTxn and, on success, moves to the epoch it returns: every
// partition's sequences start again at 0.
func (p *Producer) endTxn(ctx context.Context, commit bool) error {
	p.mu.Lock()
	pid, epoch := p.pid, p.epoch
	p.mu.Unlock()
	var resp *pb.EndTxnResponse
	sent, err := p.coordinatorCall(ctx, pb.CoordinatorType_TRANSACTION, p.cfg.transactionalID, func(ctx context.Context, cc *grpc.ClientConn) (pb.ErrorCode, string, error) {
		r, err := pb.NewTransactionsClient(cc).EndTxn(ctx, &pb.EndTxnRequest{TransactionalId: p.cfg.transactionalID, ProducerId: pid, ProducerEpoch: int32(epoch), Committed: commit})
		if err != nil {
			return 0, "", err
		}
		resp = r
		return r.ErrorCode, r.ErrorMessage, nil
	})
	if err != nil {
		switch {
		case errors.Is(err, ErrProducerFenced), errs.CodeOf(err) == pb.ErrorCode_INVALID_PRODUCER_EPOCH:
			// On EndTxn an epoch the coordinator refuses is a fence (Kafka's
			// EndTxnHandler treats both alike).
			p.txn.fail(err)
			return err
		case errs.CodeOf(err) == pb.ErrorCode_TRANSACTION_TIMED_OUT, errs.CodeOf(err) == pb.ErrorCode_INVALID_PRODUCER_ID_MAPPING:
			p.txn.abortable(err)
			return fmt.Errorf("%w: %w", ErrAbortable, err)
		case commit && sent && (errs.IsRetriable(err) || errs.CodeOf(err) == pb.ErrorCode_UNKNOWN_SERVER_ERROR):
			return fmt.Errorf("%w: %w", ErrCommitOutcomeUnknown, err)
		case codeCategory(err) == errs.Fatal && errs.CodeOf(err) != pb.ErrorCode_UNKNOWN_SERVER_ERROR:
			p.txn.fail(err)
			return err
		}
		return err
	}
	p.mu.Lock()
	p.pid, p.epoch = resp.ProducerId, int16(resp.ProducerEpoch)
	for _, pp := range p.parts {
		p.restartSequencesLocked(pp)
	}
	p.mu.Unlock()
	p.txn.mu.Lock()
	defer p.txn.mu.Unlock()
	return p.txn.endedLocked()
}

// ProducerID returns the current producer id and epoch (-1 before init).
func (p *Producer) ProducerID() (int64, int16) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid, p.epoch
}
