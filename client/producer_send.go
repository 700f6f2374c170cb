package client

import (
	"context"
	"time"

	"github.com/strand-io/strand/record"
)

// The sender: the loop that drains ready batches into per-broker sinks,
// and the promise goroutine that reports their outcomes.

type completion struct {
	b     *pbatch
	base  int64
	err   error
	pid   int64
	epoch int16
}

// completeLocked queues a batch's outcome for its promises, which run in
// order on the promise goroutine (never under the producer's lock, so a
// promise may produce again).
func (p *Producer) completeLocked(b *pbatch, base int64, err error) {
	p.bufUsed -= b.size
	close(p.bufFreed)
	p.bufFreed = make(chan struct{})
	p.compMu.Lock()
	p.compQ = append(p.compQ, completion{b: b, base: base, err: err, pid: p.pid, epoch: p.epoch})
	p.compMu.Unlock()
	select {
	case p.compCh <- struct{}{}:
	default:
	}
}

// promiser runs promises, then marks their records done.
func (p *Producer) promiser() {
	defer close(p.compDone)
	for {
		p.compMu.Lock()
		q := p.compQ
		p.compQ = nil
		p.compMu.Unlock()
		if len(q) == 0 {
			select {
			case <-p.compCh:
				continue
			case <-p.compStop:
				p.compMu.Lock()
				empty := len(p.compQ) == 0
				p.compMu.Unlock()
				if empty {
					return
				}
				continue
			}
		}
		for _, c := range q {
			for i, r := range c.b.recs {
				if c.err == nil {
					// base -1: acks=0, or a duplicate whose offset the broker
					// no longer knows; every record's offset is unknown, as
					// in Kafka's RecordMetadata.
					r.Offset = -1
					if c.base >= 0 {
						r.Offset = c.base + int64(i)
					}
					r.ProducerID, r.ProducerEpoch = c.pid, c.epoch
				}
				c.b.proms[i](r, c.err)
			}
			p.mu.Lock()
			p.pending -= len(c.b.recs)
			if p.pending == 0 {
				close(p.idle)
			}
			if c.err == nil && p.txn != nil {
				p.txn.acked(len(c.b.recs))
			}
			p.mu.Unlock()
		}
	}
}

func (p *Producer) run() {
	defer p.wg.Done()
	timer := p.cfg.clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := p.drain()
		if next <= 0 {
			next = time.Hour
		}
		if !timer.Stop() {
			select {
			case <-timer.C():
			default:
			}
		}
		timer.Reset(next)
		select {
		case <-p.ctx.Done():
			return
		case <-p.wake:
		case <-timer.C():
		}
	}
}

// drain sends whatever is ready, one batch per partition per request, and
// returns when it next needs to look (linger, backoff).
func (p *Producer) drain() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0
	}
	now := p.cfg.clock.Now()
	wait := time.Duration(0)
	soon := func(d time.Duration) {
		if d > 0 && (wait == 0 || d < wait) {
			wait = d
		}
	}
	p.expireLocked(now)
	if p.idempotent() {
		if p.resetting && p.totalInflight() == 0 {
			p.pidState = pidNone
		}
		if p.pidState != pidReady {
			if p.pidState == pidNone && p.pending > 0 && p.txn == nil {
				p.pidState = pidFetching
				go p.initProducerID()
			}
			return 100 * time.Millisecond
		}
	}
	if p.txn != nil && !p.txn.canSend() {
		p.failAllLocked(p.txn.fatalErr())
		return 0
	}
	needMeta := false
	// The partitions in order, kept sorted as they are added (sorting them
	// on every drain was a tenth of a 1 000-partition producer's CPU).
	keys := p.partKeys
	// One batch per partition per request, but as many requests as the
	// windows allow: rounds go on until a round sends nothing. (With one
	// round per wake-up, each answer sent just one batch, and a window
	// that once emptied never filled again until the application produced
	// more: a Flush or a transaction's commit drained at half speed.)
	for {
		byBroker := map[int32][]*pbatch{}
		reqBytes := map[int32]int{}
		// Each round starts one partition further on: when max.request.size
		// leaves some partitions for the next request, the first ones in
		// the order do not take every request (Kafka's drainIndex).
		start := 0
		if len(keys) > 0 {
			start = p.drainFrom % len(keys)
		}
		for i := range keys {
			tp := keys[(start+i)%len(keys)]
			pp := p.parts[tp]
			if pp.blocked && len(pp.inflight) == 0 {
				p.renumberLocked(pp)
				pp.blocked = false
			}
			if pp.blocked || p.resetting {
				continue
			}
			var head *pbatch
			if len(pp.queued) > 0 {
				head = pp.queued[0]
			} else if b := pp.open; b != nil {
				// Due: lingered enough, flushed, or full. A due batch
				// that could not be sent yet (the window is full) stays
				// open and takes more records; the answer that frees a
				// place in the window sends it.
				due := b.created.Add(p.cfg.linger)
				ready := p.flushing > 0 || !now.Before(due) || b.size >= p.cfg.batchSize
				switch {
				case !ready:
					soon(due.Sub(now))
				case !p.windowFullLocked(pp):
					p.closeOpen(pp)
					head = pp.queued[0]
				}
			}
			if head == nil {
				continue
			}
			if !head.inWindow && len(pp.window) >= p.cfg.maxInFlight {
				continue
			}
			if !head.inWindow && len(pp.window) > 0 && p.idempotent() && pp.ackedPID != p.pid {
				continue // the first batch under this producer id goes alone
			}
			leader, _ := p.cl.leader(tp)
			if now.Before(head.retryAt) {
				if !head.leaderLost {
					soon(head.retryAt.Sub(now))
					continue
				}
				if leader < 0 || leader == head.broker {
					// Its leader is gone: look again every retry.backoff.ms
					// (refreshMeta spaces refreshes so) rather than once
					// per attempt, whose backoff grows to a second.
					needMeta = true
					soon(min(head.retryAt.Sub(now), p.cfg.retryBackoff))
					continue
				}
				// A new leader is known: send now (KIP-951).
			}
			if leader < 0 {
				needMeta = true
				soon(p.cfg.retryBackoff)
				continue
			}
			if len(pp.inflight) > 0 && pp.inflight[0].broker != leader {
				continue // let the old leader answer first
			}
			// A request stays within max.request.size (its first batch
			// always goes); the next round takes what did not fit.
			if len(byBroker[leader]) > 0 && reqBytes[leader]+head.size+record.HeaderSize > p.cfg.maxRequestSize {
				continue
			}
			s := p.sinkLocked(leader)
			if !s.canSend(len(byBroker[leader]) > 0) {
				continue
			}
			if err := p.prepareLocked(pp, head); err != nil {
				pp.queued = pp.queued[1:]
				p.completeLocked(head, -1, err)
				continue
			}
			pp.queued = pp.queued[1:]
			if head.leaderLost && leader != head.broker {
				head.movedAt = head.attempts
			}
			head.broker = leader
			head.leaderLost = false
			head.sentOnce = true
			head.attempts++
			if !head.inWindow {
				head.inWindow = true
				pp.window = append(pp.window, head)
			}
			pp.inflight = append(pp.inflight, head)
			byBroker[leader] = append(byBroker[leader], head)
			reqBytes[leader] += head.size + record.HeaderSize
		}
		if len(byBroker) == 0 {
			break
		}
		p.drainFrom++
		for id, bs := range byBroker {
			p.sinks[id].send(bs)
		}
	}
	if needMeta {
		go p.refreshMeta()
	}
	return wait
}

// failAllLocked fails every batch not yet sent (a fenced producer).
func (p *Producer) failAllLocked(err error) {
	for _, pp := range p.parts {
		if pp.open != nil {
			p.closeOpen(pp)
		}
		for _, b := range pp.queued {
			if b.inWindow {
				removeBatch(&pp.window, b)
				b.inWindow = false
			}
			p.completeLocked(b, -1, err)
		}
		pp.queued = nil
	}
}

func (p *Producer) totalInflight() int {
	n := 0
	for _, pp := range p.parts {
		n += len(pp.inflight)
	}
	return n
}

func (p *Producer) sinkLocked(id int32) *sink {
	s := p.sinks[id]
	if s == nil {
		s = newSink(p, id)
		p.sinks[id] = s
	}
	return s
}

// refreshMeta refreshes the metadata for partitions without a leader.
// One refresh runs at a time, and a refresh starts no sooner than
// retry.backoff after the last one ended (Kafka's producer waits
// retry.backoff.ms between metadata refreshes while a partition has no
// leader): a partition whose leader is being elected must not make every
// drain ask the cluster for metadata again at once, a loop that floods
// the brokers with Metadata requests for as long as the election takes.
func (p *Producer) refreshMeta() {
	if !p.refreshing.CompareAndSwap(false, true) {
		return
	}
	defer p.refreshing.Store(false)
	if wait := time.Until(time.Unix(0, p.lastRefresh.Load()).Add(p.cfg.retryBackoff)); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-p.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.requestTimeout)
	defer cancel()
	err := p.cl.refresh(ctx, nil)
	p.lastRefresh.Store(time.Now().UnixNano())
	if err == nil {
		p.kick()
	}
}
