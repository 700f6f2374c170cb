package client

import (
	"errors"
	"fmt"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// onResponse settles every batch of a request: acknowledged, retried in
// sequence order, or failed.
func (p *Producer) onResponse(sr *sentReq, resp *pb.ProduceResponse, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.kick()
	results := map[TopicPartition]*pb.ProducePartitionResponse{}
	if resp != nil {
		for _, r := range resp.Partitions {
			results[TopicPartition{r.Topic, r.Partition}] = r
		}
	}
	refresh := false
	defer func() {
		if refresh {
			go p.refreshMeta()
		}
	}()
	for _, b := range sr.batches {
		pp := p.parts[b.tp]
		if pp == nil || !removeBatch(&pp.inflight, b) {
			continue // already settled (the producer closed)
		}
		switch {
		case err != nil:
			// The broker may be gone: look up the leader again.
			var ns *notSentError
			p.cl.markStale(b.tp)
			refresh = true
			b.leaderLost = true
			p.retryLocked(pp, b, err, !errors.As(err, &ns))
		case sr.req.Acks == 0:
			p.ackLocked(pp, b, -1)
		default:
			r := results[b.tp]
			if r == nil {
				p.retryLocked(pp, b, fmt.Errorf("broker %d answered without partition %s", b.broker, b.tp), true)
				continue
			}
			switch r.ErrorCode {
			case pb.ErrorCode_NONE:
				p.ackLocked(pp, b, r.BaseOffset)
			case pb.ErrorCode_DUPLICATE_SEQUENCE_NUMBER:
				p.ackLocked(pp, b, -1)
			default:
				p.failOrRetryLocked(pp, b, errs.FromCode(r.ErrorCode, r.ErrorMessage))
			}
		}
	}
}

func removeBatch(s *[]*pbatch, b *pbatch) bool {
	for i, x := range *s {
		if x == b {
			*s = append((*s)[:i], (*s)[i+1:]...)
			return true
		}
	}
	return false
}

func (p *Producer) ackLocked(pp *ppart, b *pbatch, base int64) {
	b.acked = true
	if b.pid >= 0 && p.cfg.acks != NoAck {
		pp.ackedPID = b.pid
	}
	// The broker answered the request that carried b, so its bytes are not
	// needed again. Not with acks=0 (answered as soon as it is handed to
	// the stream, where a codec from DialOptions might still hold it), nor
	// compressed batches (exact-size copies, too small to build in).
	if p.cfg.acks != NoAck && p.cfg.compression == record.None {
		p.bufs.put(b.bytes)
	}
	b.bytes = nil
	for len(pp.window) > 0 && pp.window[0].acked {
		pp.window[0].inWindow = false
		pp.window = pp.window[1:]
	}
	p.completeLocked(b, base, nil)
}

// dropLocked takes a batch that definitely failed (or is given up) out of
// the partition: later batches will be renumbered to close its gap.
func (p *Producer) dropLocked(pp *ppart, b *pbatch) {
	pp.blocked = true
	removeBatch(&pp.queued, b)
	if b.inWindow {
		removeBatch(&pp.window, b)
		b.inWindow = false
		if b.seq >= 0 && (pp.renumberFrom < 0 || seqAfter(pp.renumberFrom, b.seq)) {
			pp.renumberFrom = b.seq
		}
	}
}

// seqAfter reports whether a comes after b, allowing for the wrap at MaxInt32.
func seqAfter(a, b int32) bool {
	d := int64(a) - int64(b)
	if d < -(1 << 30) {
		d += 1 << 31
	} else if d > 1<<30 {
		d -= 1 << 31
	}
	return d > 0
}

// isHead reports whether b is the oldest unacknowledged batch of the partition.
func (p *Producer) isHead(pp *ppart, b *pbatch) bool {
	return len(pp.window) > 0 && pp.window[0] == b
}

func (p *Producer) failOrRetryLocked(pp *ppart, b *pbatch, err error) {
	code := errs.CodeOf(err)
	switch code {
	case pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER, pb.ErrorCode_UNKNOWN_PRODUCER_ID:
		if code == pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER && !p.isHead(pp, b) {
			// An earlier batch of this partition failed; this one follows it.
			p.retryLocked(pp, b, err, false)
			return
		}
		// The broker has no usable state for this producer here (it expired,
		// or was lost with an unclean election). The batch was not written.
		b.lastErr = err
		if p.txn != nil {
			p.dropLocked(pp, b)
			p.txn.abortable(err)
			p.completeLocked(b, -1, fmt.Errorf("%w: %w", ErrAbortable, err))
			return
		}
		p.cl.lg.Warn("broker lost this producer's state; continuing under a new producer id", "partition", b.tp.String(), "err", err)
		p.requeueLocked(pp, b)
		p.resetting = true
		return
	case pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, pb.ErrorCode_LEADER_NOT_AVAILABLE,
		pb.ErrorCode_FENCED_LEADER_EPOCH, pb.ErrorCode_UNKNOWN_LEADER_EPOCH:
		p.cl.markStale(b.tp)
		b.leaderLost = true
		go p.refreshMeta()
	}
	if errs.IsRetriable(err) {
		// NOT_ENOUGH_REPLICAS was refused before the append; the others may
		// have been written.
		p.retryLocked(pp, b, err, code != pb.ErrorCode_NOT_ENOUGH_REPLICAS && code != pb.ErrorCode_CORRUPT_MESSAGE)
		return
	}
	p.dropLocked(pp, b)
	if p.txn != nil && code == pb.ErrorCode_PRODUCER_FENCED {
		// Another producer took over the transactional id: as in Kafka,
		// this one can only be closed.
		p.txn.fail(err)
	} else if p.txn != nil {
		p.txn.produceFailed(err)
		if codeCategory(err) == errs.Abortable || code == pb.ErrorCode_INVALID_PRODUCER_EPOCH {
			err = fmt.Errorf("%w: %w", ErrAbortable, err)
		}
	}
	p.completeLocked(b, -1, err)
}

// retryLocked puts b back in front of the partition's queue, in sequence
// order, unless retries or delivery.timeout.ms ran out. mayHaveLanded says
// whether the write could have happened.
func (p *Producer) retryLocked(pp *ppart, b *pbatch, err error, mayHaveLanded bool) {
	pp.blocked = true
	b.lastErr = err
	if mayHaveLanded {
		b.sentOnce = true
	}
	expired := p.cfg.clock.Now().Sub(b.created) >= p.cfg.deliveryTimeout
	if b.attempts > p.cfg.retries || expired || p.closed {
		var out error = err
		if b.sentOnce {
			out = &indefiniteError{err}
		}
		if expired {
			out = fmt.Errorf("%w: %w", ErrDeliveryTimeout, out)
		}
		if b.sentOnce {
			p.needResetLocked(out)
		}
		p.dropLocked(pp, b)
		p.completeLocked(b, -1, out)
		return
	}
	b.retryAt = p.cfg.clock.Now().Add(backoff(&p.cfg, b.attempts-1-b.movedAt))
	p.requeueLocked(pp, b)
}

// requeueLocked inserts b among the queued batches by sequence (batches
// without one come last).
func (p *Producer) requeueLocked(pp *ppart, b *pbatch) {
	i := 0
	for i < len(pp.queued) {
		q := pp.queued[i]
		if q.seq < 0 || (b.seq >= 0 && seqAfter(q.seq, b.seq)) {
			break
		}
		i++
	}
	pp.queued = append(pp.queued, nil)
	copy(pp.queued[i+1:], pp.queued[i:])
	pp.queued[i] = b
}
