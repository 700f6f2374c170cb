package client

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// Idempotence and delivery: producer ids and epochs, per-partition
// sequence numbers, and the delivery.timeout.ms expiry of batches.

// prepareLocked builds the batch bytes the first time and stamps producer
// fields: the sequence is assigned when a batch is first sent and kept.
func (p *Producer) prepareLocked(pp *ppart, b *pbatch) error {
	if b.bytes == nil {
		out, err := b.b.Build()
		if err != nil {
			return err
		}
		if p.cfg.compression != record.None {
			p.bufs.put(b.b.TakeBuffer()) // the records were compressed out of it
		}
		b.bytes, b.b = out, nil
	}
	if p.idempotent() && b.seq < 0 {
		b.seq = pp.nextSeq
		pp.nextSeq = record.IncrementSequence(pp.nextSeq, b.count())
	}
	if p.idempotent() {
		record.SetProducerFields(b.bytes, p.pid, p.epoch, b.seq, p.txn != nil)
		b.pid = p.pid
	}
	return nil
}

// renumberLocked closes the sequence gap a definitely failed batch left:
// the batches after it (none of which can have been written: a leader that
// knows the producer refuses anything past a gap, and one that does not is
// sent only the first batch until it is acknowledged) move down to follow
// what precedes it.
func (p *Producer) renumberLocked(pp *ppart) {
	if !p.idempotent() || pp.renumberFrom < 0 {
		return
	}
	next := pp.renumberFrom
	for _, b := range pp.window {
		if b.seq < 0 || b.acked || seqAfter(pp.renumberFrom, b.seq) {
			continue
		}
		b.seq = next
		next = record.IncrementSequence(next, b.count())
	}
	pp.nextSeq = next
	pp.renumberFrom = -1
}

// restartSequencesLocked numbers every unacknowledged batch from 0 under a
// new producer id (nothing is in flight).
func (p *Producer) restartSequencesLocked(pp *ppart) {
	keep := pp.window[:0]
	next := int32(0)
	for _, b := range pp.window {
		if b.acked {
			b.inWindow = false
			continue
		}
		b.seq = next
		next = record.IncrementSequence(next, b.count())
		keep = append(keep, b)
	}
	pp.window = keep
	pp.nextSeq = next
	pp.renumberFrom = -1
}

// initProducerID obtains a producer id and epoch (KIP-360: after a reset,
// a new id), then renumbers every partition from sequence 0.
func (p *Producer) initProducerID() {
	var resp *pb.InitProducerIdResponse
	var err error
	for attempt := 0; p.ctx.Err() == nil; attempt++ {
		err = p.cl.any(p.ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
			var e error
			resp, e = pb.NewTransactionsClient(cc).InitProducerId(ctx, &pb.InitProducerIdRequest{ProducerId: -1, ProducerEpoch: -1})
			return e
		})
		if err == nil {
			err = errs.FromCode(resp.ErrorCode, resp.ErrorMessage)
		}
		if err == nil {
			break
		}
		p.cl.lg.Debug("InitProducerId failed; retrying", "err", err)
		if p.cfg.sleep(p.ctx, backoff(&p.cfg, attempt)) != nil {
			return
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.pidErr = err
		p.pidState = pidNone
		return
	}
	if resp == nil { // closed before the first attempt
		p.pidState = pidNone
		return
	}
	p.pid, p.epoch = resp.ProducerId, int16(resp.ProducerEpoch)
	p.pidState = pidReady
	p.resetting = false
	for _, pp := range p.parts {
		p.restartSequencesLocked(pp)
	}
	p.kick()
}

// expireLocked fails batches that waited longer than delivery.timeout.ms
// and are not in flight.
//
// It runs on every drain, and a full buffer holds thousands of queued
// batches, so it looks only once the oldest batch can have expired:
// nextExpiry is the earliest deadline of every batch open, queued or in
// flight at the last look (the only ones that can be queued before a batch
// created since, whose deadline is later still).
func (p *Producer) expireLocked(now time.Time) {
	if now.Before(p.nextExpiry) {
		return
	}
	next := now.Add(p.cfg.deliveryTimeout)
	earliest := func(b *pbatch) {
		if d := b.created.Add(p.cfg.deliveryTimeout); d.Before(next) {
			next = d
		}
	}
	var expired []*pbatch
	for _, pp := range p.parts {
		keep := pp.queued[:0]
		expired = expired[:0]
		for _, b := range pp.queued {
			if now.Sub(b.created) < p.cfg.deliveryTimeout {
				keep = append(keep, b)
				earliest(b)
				continue
			}
			expired = append(expired, b)
		}
		pp.queued = keep
		for _, b := range expired {
			err := deliveryExpired(b, fmt.Sprintf("after %d attempts", b.attempts))
			if b.sentOnce {
				err = &indefiniteError{err}
				p.needResetLocked(err)
			}
			p.dropLocked(pp, b)
			p.completeLocked(b, -1, err)
		}
		for _, b := range pp.inflight {
			earliest(b)
		}
		// The open batch, never sent, can wait past its deadline while
		// the window stays full (a leader gone, a producer id being
		// fetched): it fails like a queued one.
		if b := pp.open; b != nil {
			if now.Sub(b.created) >= p.cfg.deliveryTimeout {
				pp.open = nil
				p.completeLocked(b, -1, deliveryExpired(b, "never sent (the partition's window stayed full)"))
			} else {
				earliest(b)
			}
		}
	}
	p.nextExpiry = next
}

// deliveryExpired is the error of a batch that reached delivery.timeout.ms:
// ErrDeliveryTimeout (so context.DeadlineExceeded) and the last error the
// batch was retried for, both matchable.
func deliveryExpired(b *pbatch, how string) error {
	if b.lastErr == nil {
		return fmt.Errorf("%w: %s, %d records, %s", ErrDeliveryTimeout, b.tp, len(b.recs), how)
	}
	return fmt.Errorf("%w: %s, %d records, %s (last error: %w)", ErrDeliveryTimeout, b.tp, len(b.recs), how, b.lastErr)
}

// needResetLocked: a sent batch is given up without a definite answer
// (err), so its sequence may be taken; the producer continues under a new
// id, or a transaction must abort.
func (p *Producer) needResetLocked(err error) {
	if !p.idempotent() {
		return
	}
	if p.txn != nil {
		p.txn.abortable(fmt.Errorf("a batch of the transaction failed without a definite answer: %w", err))
		return
	}
	p.resetting = true
}
