package workload

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/strand-io/strand/app/verify"
	"github.com/strand-io/strand/client"
)

// opTimeout bounds one transaction step (produce, commit, abort), so a
// worker caught in a drill gives up, records what it knows and starts over
// with a new incarnation.
const opTimeout = 45 * time.Second

// commitRetries is how often a commit whose outcome is unknown is retried
// before the transaction is recorded as Unknown.
const commitRetries = 10

// producer is transactional producer i: it writes transactions of unique
// values to random source partitions until the run stops starting them,
// and records each with its outcome.
//
// Besides committing and aborting on purpose it drives the transaction
// faults: once its epoch has reached the last one a producer may hold
// (verify.MaxProducerEpoch) with a transaction open, and at a small random
// rate at any epoch, it fences itself by starting a new incarnation of its
// transactional id, then tries to commit with the old one (which must
// fail); and a share of its deliberate aborts happen right after the
// records are handed to the client, before they are sent.
func (r *run) producer(ctx context.Context, i int) {
	name := fmt.Sprintf("verify-%s-p%d", r.cfg.RunID, i)
	rng := r.rng(1, i)
	var p txnProducer
	defer func() {
		if p != nil {
			p.Close(context.WithoutCancel(ctx))
		}
	}()
	seq, n := int64(0), 0
	for {
		select {
		case <-r.stopTx:
			return
		case <-ctx.Done():
			return
		default:
		}
		if r.cfg.TxnPause > 0 && n > 0 {
			// Uniform in [0, 2×TxnPause): a steady rate with jitter.
			sleep(ctx, time.Duration(rng.Int64N(int64(2*r.cfg.TxnPause))))
		}
		if p == nil {
			var err error
			p, err = r.newTxnProducer(ctx, name, "", nil)
			if err != nil {
				if r.denied(name+": init", err) || ctx.Err() != nil {
					return
				}
				r.logf("%s: init: %v (retrying)", name, err)
				sleep(ctx, time.Second)
				continue
			}
		}
		n++
		t := verify.Txn{ID: fmt.Sprintf("%s#%d", name, n), Producer: name, Begin: time.Now()}
		if err := p.BeginTransaction(); err != nil {
			r.logf("%s: begin: %v (new incarnation)", name, err)
			p.Close(context.WithoutCancel(ctx))
			p = nil
			continue
		}
		k := 1 + rng.IntN(r.cfg.TxnMaxRecords)
		recs := make([]*client.Record, k)
		parts := r.choosePartitions(i, k, rng)
		for j := range recs {
			part := parts[j]
			v := fmt.Sprintf("%s-%d", name, seq)
			recs[j] = &client.Record{Topic: r.src, Partition: part, Value: []byte(v)}
			t.Writes = append(t.Writes, verify.Write{TP: verify.TP{Topic: r.src, Partition: part}, Value: v, Offset: -1, ProducerSeq: seq})
			seq++
		}
		deliberate := rng.Float64() < r.cfg.AbortRate
		octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
		if deliberate && rng.Float64() < r.cfg.EarlyAbortShare {
			healthy := r.earlyAbort(octx, p, &t, recs, time.Duration(rng.IntN(4000))*time.Microsecond)
			cancel()
			r.record(t)
			r.txnDone(i)
			if !healthy {
				p.Close(context.WithoutCancel(ctx))
				p = nil
			}
			continue
		}
		res := p.ProduceSync(octx, recs...)
		if err := res.FirstErr(); err != nil && r.denied(name+": produce", err) {
			cancel()
			return
		}
		for j, pr := range res {
			if pr.Err == nil && pr.Record != nil {
				t.Writes[j].Offset = pr.Record.Offset
			}
		}
		pid, epoch := p.ProducerID()
		t.PID = &verify.PID{ID: pid, Epoch: epoch}
		fence := ""
		if res.FirstErr() == nil {
			switch {
			case epoch >= verify.MaxProducerEpoch:
				fence = verify.FenceEpochEnd
			case rng.Float64() < r.cfg.ZombieFenceRate:
				fence = verify.FenceZombie
			}
		}
		if fence != "" {
			if next, ok := r.fence(octx, p, &t, name, fence); ok {
				cancel()
				t.End = time.Now()
				r.record(t)
				r.txnDone(i)
				p.Close(context.WithoutCancel(ctx))
				p = next
				continue
			}
			// The new incarnation did not start: nothing was fenced for
			// sure, so the transaction goes on as any other.
		}
		abort := res.FirstErr() != nil || deliberate
		var healthy bool
		if abort {
			t.Outcome, healthy = r.abort(octx, p, &t)
		} else {
			t.CommitRequested = time.Now()
			t.Outcome, healthy = r.commit(octx, p, &t)
		}
		cancel()
		t.End = time.Now()
		r.record(t)
		r.txnDone(i)
		if !healthy {
			p.Close(context.WithoutCancel(ctx))
			p = nil
		}
	}
}

// newTxnProducer starts an incarnation of transactional id id and records
// it; fence and fenced say it was started to fence the incarnation that
// held fenced.
func (r *run) newTxnProducer(ctx context.Context, id, fence string, fenced *verify.PID) (txnProducer, error) {
	ictx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	p, err := r.newProducer(ictx, id)
	if err != nil {
		return nil, err
	}
	pid, epoch := p.ProducerID()
	r.incarnation(verify.Incarnation{Producer: id, PID: verify.PID{ID: pid, Epoch: epoch}, Time: time.Now(), Fence: fence, Fenced: fenced})
	return p, nil
}

// fence starts a new incarnation of p's transactional id while p's
// transaction t is open with its records produced, then asks p to commit:
// the commit must fail (the new incarnation's InitTransactions aborted the
// transaction), so t is Aborted; a commit that succeeds is recorded
// Committed, which the checker reports. It returns the new incarnation,
// or false when it could not be started (then nothing is known to be
// fenced and t is left open).
func (r *run) fence(ctx context.Context, p txnProducer, t *verify.Txn, name, kind string) (txnProducer, bool) {
	next, err := r.newTxnProducer(ctx, name, kind, t.PID)
	if err != nil {
		r.logf("%s: fence (%s) at epoch %d: new incarnation: %v (committing instead)", name, kind, t.PID.Epoch, err)
		return nil, false
	}
	r.fences.Add(1)
	t.Fence = kind
	t.CommitRequested = time.Now()
	if err := p.CommitTransaction(ctx); err != nil {
		t.Outcome = verify.Aborted
	} else {
		t.Outcome = verify.Committed
		r.logf("%s: the commit of fenced txn %s (epoch %d) succeeded", name, t.ID, t.PID.Epoch)
	}
	return next, true
}

// earlyAbort hands t's records to p without waiting (after wait, a few
// milliseconds at most: some records are on their way then, most are
// still buffered) and aborts at once. The SDK fails what it had not sent
// with client.ErrAborted: such writes are Unsent. (franz-go cannot tell
// what it never sent from what it sent and got a retriable answer for, so
// through the Kafka door no write is Unsent: see errAbortedMaybeSent.) When nothing was
// sent, the abort reaches the coordinator with no partition in the
// transaction, which it must accept like any other.
func (r *run) earlyAbort(ctx context.Context, p txnProducer, t *verify.Txn, recs []*client.Record, wait time.Duration) bool {
	t.EarlyAbort = true
	var mu sync.Mutex
	var wg sync.WaitGroup
	for j, rec := range recs {
		wg.Add(1)
		p.Produce(ctx, rec, func(got *client.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && got != nil:
				t.Writes[j].Offset = got.Offset
			case errors.Is(err, client.ErrAborted):
				t.Writes[j].Unsent = true
			}
		})
	}
	if wait > 0 {
		sleep(ctx, wait)
	}
	var healthy bool
	t.Outcome, healthy = r.abort(ctx, p, t)
	waitGroup(&wg, opTimeout)
	pid, epoch := p.ProducerID()
	mu.Lock()
	t.Writes = append([]verify.Write(nil), t.Writes...) // a late promise must not touch the recorded copy
	mu.Unlock()
	if t.PID == nil {
		t.PID = &verify.PID{ID: pid, Epoch: epoch}
	}
	t.End = time.Now()
	return healthy
}

// abort aborts the open transaction. It is Aborted either way: commit was
// never requested, so the coordinator can only abort it (now, when a new
// incarnation fences this one, or on its timeout). An abort that fails
// other than by fencing is recorded in t.AbortErr (an anomaly: an abort
// must always be possible).
func (r *run) abort(ctx context.Context, p txnProducer, t *verify.Txn) (verify.Outcome, bool) {
	if t.PID == nil {
		pid, epoch := p.ProducerID()
		t.PID = &verify.PID{ID: pid, Epoch: epoch}
	}
	if err := p.AbortTransaction(ctx); err != nil {
		r.abortFailed(ctx, t, err)
		return verify.Aborted, false
	}
	return verify.Aborted, true
}

// abortFailed records a failed abort in t, unless the producer was fenced
// or the workload's own deadline for the step ran out. Fenced is
// PRODUCER_FENCED or INVALID_PRODUCER_EPOCH (Kafka's producer takes either
// from a transaction coordinator as a fence): a coordinator cut off from
// the cluster answers the latter from its stale state until it learns it
// lost its partitions, and the new incarnation the workload then starts
// aborts the transaction for sure.
func (r *run) abortFailed(ctx context.Context, t *verify.Txn, err error) {
	if errors.Is(err, client.ErrProducerFenced) || errors.Is(err, client.ErrInvalidProducerEpoch) || ctx.Err() != nil {
		return
	}
	t.AbortErr = err.Error()
	r.logf("%s: abort of txn %s failed: %v", t.Producer, t.ID, err)
}

// commit commits, retrying while the outcome is unknown. A commit that
// failed is Aborted only if the abort that follows succeeds (the
// coordinator then says the transaction did not commit); otherwise the
// outcome is Unknown and the producer is replaced.
func (r *run) commit(ctx context.Context, p txnProducer, t *verify.Txn) (verify.Outcome, bool) {
	name := t.Producer
	var err error
	for attempt := 0; attempt < commitRetries; attempt++ {
		err = p.CommitTransaction(ctx)
		if err == nil {
			return verify.Committed, true
		}
		if !errors.Is(err, client.ErrCommitOutcomeUnknown) || ctx.Err() != nil {
			break
		}
		sleep(ctx, time.Duration(attempt+1)*200*time.Millisecond)
	}
	if errors.Is(err, client.ErrCommitOutcomeUnknown) {
		r.logf("%s: commit outcome unknown after %d attempts: %v", name, commitRetries, err)
		return verify.Unknown, false
	}
	aerr := p.AbortTransaction(ctx)
	if aerr == nil {
		return verify.Aborted, true
	}
	if !errors.Is(err, client.ErrProducerFenced) && !errors.Is(err, client.ErrInvalidProducerEpoch) {
		// A fenced producer cannot abort either; any other failed commit
		// must leave the abort possible.
		r.abortFailed(ctx, t, aerr)
	}
	return verify.Unknown, false
}

// stageWorker is consume-transform-produce worker i: a TransactSession in
// the stage group that copies each source record to the same partition of
// the sink as OutputFor(value), committing its input offsets with the
// output.
func (r *run) stageWorker(ctx context.Context, i int, stop <-chan struct{}) {
	name := fmt.Sprintf("verify-%s-s%d", r.cfg.RunID, i)
	var s stageSession
	defer func() {
		if s != nil {
			s.Close(context.WithoutCancel(ctx))
		}
	}()
	seq, n := int64(0), 0
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		if s == nil {
			ictx, cancel := context.WithTimeout(ctx, opTimeout)
			var err error
			s, err = r.newStageSession(ictx, name)
			cancel()
			if err != nil {
				if r.denied(name+": start", err) || ctx.Err() != nil {
					return
				}
				r.logf("%s: start: %v (retrying)", name, err)
				s = nil
				sleep(ctx, time.Second)
				continue
			}
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		recs, err := s.Poll(pctx)
		cancel()
		if len(recs) == 0 {
			if err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
				if r.denied(name+": poll", err) {
					return
				}
				r.logf("%s: poll: %v", name, err)
				sleep(ctx, 200*time.Millisecond)
			}
			continue
		}
		n++
		t := verify.Txn{ID: fmt.Sprintf("%s#%d", name, n), Producer: name, Begin: time.Now()}
		if err := s.Begin(); err != nil {
			r.logf("%s: begin: %v (new incarnation)", name, err)
			s.Close(context.WithoutCancel(ctx))
			s = nil
			continue
		}
		octx, ocancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, rec := range recs {
			in := verify.Read{Reader: name, ReadCommitted: true, Time: t.Begin,
				TP: verify.TP{Topic: rec.Topic, Partition: rec.Partition}, Offset: rec.Offset, Value: string(rec.Value)}
			t.Inputs = append(t.Inputs, in)
			out := verify.OutputFor(in.Value)
			wi := len(t.Writes)
			t.Writes = append(t.Writes, verify.Write{TP: verify.TP{Topic: r.dst, Partition: rec.Partition}, Value: out, Offset: -1, ProducerSeq: seq})
			seq++
			wg.Add(1)
			s.Produce(octx, &client.Record{Topic: r.dst, Partition: rec.Partition, Value: []byte(out)}, func(got *client.Record, err error) {
				defer wg.Done()
				if err == nil && got != nil {
					mu.Lock()
					t.Writes[wi].Offset = got.Offset
					mu.Unlock()
				}
			})
		}
		if pid, epoch := s.ProducerID(); pid >= 0 {
			t.PID = &verify.PID{ID: pid, Epoch: epoch}
		}
		// The offsets End will send: the position of every assigned
		// partition (End reads the same positions; nothing polls between).
		pos := s.Positions()
		for _, tp := range sortedTPs(pos) {
			t.Offsets = append(t.Offsets, verify.TPOffset{TP: verify.TP{Topic: tp.Topic, Partition: tp.Partition}, Offset: pos[tp]})
		}
		t.CommitRequested = time.Now()
		committed, err := s.End(octx, client.TryCommit)
		for attempt := 0; errors.Is(err, client.ErrCommitOutcomeUnknown) && attempt < commitRetries && octx.Err() == nil; attempt++ {
			sleep(octx, time.Duration(attempt+1)*200*time.Millisecond)
			committed, err = s.End(octx, client.TryCommit)
		}
		waitGroup(&wg, opTimeout)
		ocancel()
		switch {
		case committed:
			t.Outcome = verify.Committed
		case err == nil:
			t.Outcome = verify.Aborted
		default:
			// Neither a commit nor an abort was confirmed.
			t.Outcome = verify.Unknown
			r.logf("%s: end: %v (new incarnation)", name, err)
			s.Close(context.WithoutCancel(ctx))
			s = nil
		}
		t.End = time.Now()
		mu.Lock()
		t.Writes = append([]verify.Write(nil), t.Writes...) // a late promise must not touch the recorded copy
		mu.Unlock()
		r.record(t)
	}
}

// waitGroup waits for wg at most d (a promise the client never completes
// must not hang the worker; the write then stays unacknowledged).
func waitGroup(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
