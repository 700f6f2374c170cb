package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/strand-io/strand/errs"
)

// TransactSession runs the consume-transform-produce loop exactly once: a
// read_committed group consumer and a transactional producer that commits
// what it wrote together with the consumer's offsets (KIP-447).
//
// Use one transactional id per process, stable across restarts: a
// restarted process fences its previous incarnation (whose open
// transaction is aborted), and the group generation fences zombies of
// older generations. If partitions are revoked or lost while a transaction
// is open, End aborts it; after any abort the consumer is rewound to the
// group's committed offsets, so the aborted input is read again (unlike
// Kafka's consumer, KAFKA-17582).
//
// Like any group, the session's group starts a partition that has no
// committed offset at its end (auto.offset.reset=latest): add
// AutoOffsetReset(ResetEarliest) to process what the input topics already
// hold when the group is new.
//
//	s, err := client.NewTransactSession(ctx, client.Bootstrap(addrs...),
//		client.GroupID("etl"), client.Topics("in"), client.TransactionalID("etl-1"),
//		client.AutoOffsetReset(client.ResetEarliest))
//	if err != nil {
//		return err
//	}
//	defer s.Close(ctx)
//	for {
//		recs, err := s.Poll(ctx)
//		if err != nil {
//			return err
//		}
//		if len(recs) == 0 {
//			continue // no transaction for nothing
//		}
//		if err := s.Begin(); err != nil {
//			return err
//		}
//		for _, r := range recs {
//			s.Produce(ctx, transform(r), nil)
//		}
//		if _, err := s.End(ctx, client.TryCommit); err != nil {
//			return err // fenced, or the commit's outcome is unknown: see End
//		}
//	}
type TransactSession struct {
	c *Consumer
	p *Producer

	mu sync.Mutex
	// revoked: partitions were revoked or lost while a transaction was
	// open (whether one is open is the producer's transaction phase).
	revoked bool
}

// EndAction says how End should end a transaction.
type EndAction bool

const (
	// TryCommit commits unless something made the transaction abortable.
	TryCommit EndAction = true
	// TryAbort aborts.
	TryAbort EndAction = false
)

// NewTransactSession builds the consumer (forced to read_committed without
// auto-commit) and the producer from the same options; GroupID, Topics and
// TransactionalID are required. It initialises the producer's
// transactions, so it returns InitTransactions' errors (see
// Producer.InitTransactions), and the constructors' refusals.
func NewTransactSession(ctx context.Context, opts ...Opt) (*TransactSession, error) {
	cfg := newConfig(opts)
	if cfg.groupID == "" || len(cfg.topics) == 0 || cfg.transactionalID == "" {
		return nil, errors.New("strand: a TransactSession needs GroupID, Topics and TransactionalID")
	}
	s := &TransactSession{}
	userRevoked, userLost := cfg.onRevoked, cfg.onLost
	copts := append(append([]Opt(nil), opts...), Isolation(ReadCommitted), AutoCommit(0),
		OnPartitionsRevoked(func(tps []TopicPartition) {
			s.markRevoked()
			if userRevoked != nil {
				userRevoked(tps)
			}
		}),
		OnPartitionsLost(func(tps []TopicPartition) {
			s.markRevoked()
			if userLost != nil {
				userLost(tps)
			}
		}))
	c, err := NewConsumer(copts...)
	if err != nil {
		return nil, err
	}
	p, err := NewProducer(opts...)
	if err != nil {
		c.Close(ctx)
		return nil, err
	}
	if err := p.InitTransactions(ctx); err != nil {
		c.Close(ctx)
		p.Close(ctx)
		return nil, err
	}
	s.c, s.p = c, p
	return s, nil
}

func (s *TransactSession) markRevoked() {
	s.mu.Lock()
	if s.p != nil && s.p.txn.isOpen() {
		s.revoked = true
	}
	s.mu.Unlock()
}

// Consumer is the session's consumer.
func (s *TransactSession) Consumer() *Consumer { return s.c }

// Producer is the session's producer.
func (s *TransactSession) Producer() *Producer { return s.p }

// Poll returns the next records (read_committed), with Consumer.Poll's
// errors. When it returns none, there is no need for a transaction.
func (s *TransactSession) Poll(ctx context.Context) ([]*Record, error) { return s.c.Poll(ctx) }

// Begin starts a transaction. Its errors are Producer.BeginTransaction's:
// a transaction is already open, or the producer is unusable
// (ErrProducerFenced).
func (s *TransactSession) Begin() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.p.BeginTransaction(); err != nil {
		return err
	}
	s.revoked = false
	return nil
}

// Produce writes a record in the open transaction; the promise gets
// Producer.Produce's outcome. A failed record makes End abort.
func (s *TransactSession) Produce(ctx context.Context, r *Record, promise Promise) {
	s.p.Produce(ctx, r, promise)
}

// End commits (TryCommit) the records produced since Begin together with
// the consumer's position as the group's offsets, or aborts. It aborts
// instead of committing when partitions were revoked during the
// transaction or anything made it abortable, and then rewinds the consumer
// to the committed offsets. committed reports what happened; err is set
// when neither commit nor abort could be completed:
//   - ErrProducerFenced: another instance took over the transactional id;
//     close the session;
//   - ErrCommitOutcomeUnknown (Retriable): the commit was sent and its
//     answer lost, or it was still retried when max.block.ms ran out; call
//     End again;
//   - an error starting "abort:": the abort failed (it was retried within
//     max.block.ms; a timeout matches context.DeadlineExceeded); call
//     End(ctx, TryAbort), or close the session (the coordinator aborts the
//     transaction after transaction.timeout.ms);
//   - an error starting "rewind after abort:": the transaction was aborted
//     but the committed offsets could not be read (Consumer.Committed's
//     errors); the consumer did not move.
//
// Each carries the broker's error, if there was one.
func (s *TransactSession) End(ctx context.Context, action EndAction) (committed bool, err error) {
	s.mu.Lock()
	revoked := s.revoked
	s.mu.Unlock()
	if action == TryCommit && !revoked {
		offsets := map[TopicPartition]int64{}
		for _, tp := range s.c.Assignment() {
			if pos := s.c.Position(tp); pos >= 0 {
				offsets[tp] = pos
			}
		}
		var err error
		if s.p.txn.current() != txnCommitting {
			// A commit whose outcome was unknown is being retried: its
			// offsets are in the transaction already.
			gm := s.c.GroupMetadata()
			err = s.p.SendOffsetsToTransaction(ctx, offsets, gm)
			if s.c.group != nil && gm.GenerationID >= 0 {
				// The group no longer knows this generation (the member's
				// session expired, say): the consumer rejoins before it
				// reads again, as a heartbeat with that answer would make
				// it, instead of handing the same records to transaction
				// after transaction that can only abort, as fast as the
				// brokers answer, until its next heartbeat.
				s.c.group.generationRefused(gm.GenerationID, gm.MemberID, errs.CodeOf(err))
			}
		}
		if err == nil {
			err = s.p.CommitTransaction(ctx)
		}
		switch {
		case err == nil:
			s.done()
			return true, nil
		case errors.Is(err, ErrCommitOutcomeUnknown), errors.Is(err, ErrProducerFenced):
			return false, err
		}
		// Abortable: fall through to the abort.
	}
	if aerr := s.p.AbortTransaction(ctx); aerr != nil {
		return false, fmt.Errorf("abort: %w", aerr)
	}
	s.done()
	return false, s.rewind(ctx)
}

func (s *TransactSession) done() {
	s.mu.Lock()
	s.revoked = false
	s.mu.Unlock()
}

// rewind seeks every assigned partition back to the group's committed
// offset (or the reset policy's start when none is committed).
func (s *TransactSession) rewind(ctx context.Context) error {
	tps := s.c.Assignment()
	if len(tps) == 0 {
		return nil
	}
	committed, err := s.c.Committed(ctx, tps)
	if err != nil {
		return fmt.Errorf("rewind after abort: %w", err)
	}
	for _, tp := range tps {
		off, ok := committed[tp]
		if !ok || off < 0 {
			off = OffsetEarliest
			if s.c.cfg.offsetReset == ResetLatest {
				off = OffsetLatest
			}
		}
		s.c.cl.lg.Debug("rewind after abort", "partition", tp.String(), "committed", committed[tp], "known", ok, "position", off)
		if err := s.c.Seek(tp, off); err != nil {
			return err
		}
	}
	return nil
}

// Close aborts an open transaction, leaves the group and closes both
// clients, and returns what failed of that, joined (the abort's error, the
// consumer's and the producer's Close errors).
func (s *TransactSession) Close(ctx context.Context) error {
	var errs []error
	if s.p.txn.isOpen() {
		if err := s.p.AbortTransaction(ctx); err != nil && !errors.Is(err, ErrProducerFenced) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, s.c.Close(ctx), s.p.Close(ctx))
	return errors.Join(errs...)
}
