package workload

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/strand-io/strand/app/drill"
	"github.com/strand-io/strand/app/verify"
	"github.com/strand-io/strand/client"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// witnessTxn is a marker drill's own transaction (drill.Env.Witness): one
// record written to the drilled partition by a transactional id of its
// own, recorded in the history like the producers' transactions.
type witnessTxn struct {
	r    *run
	p    txnProducer
	name string
	t    verify.Txn
}

// witness opens a witness transaction on tp whose transactional id node
// coordinator coordinates (ids verify-<run>-w<k>, tried in turn).
func (r *run) witness(ctx context.Context, tp client.TopicPartition, coordinator int32) (drill.WitnessTxn, error) {
	name := ""
	for tries := 0; name == "" && tries < 200; tries++ {
		id := fmt.Sprintf("verify-%s-w%d", r.cfg.RunID, r.witnesses.Add(1)-1)
		co, err := r.admin.FindCoordinator(ctx, pb.CoordinatorType_TRANSACTION, id)
		if err != nil {
			return nil, fmt.Errorf("coordinator of %q: %w", id, err)
		}
		if co.NodeId == coordinator {
			name = id
		}
	}
	if name == "" {
		return nil, fmt.Errorf("no transactional id of node %d found", coordinator)
	}
	p, err := r.newTxnProducer(ctx, name, "", nil)
	if err != nil {
		return nil, err
	}
	w := &witnessTxn{r: r, p: p, name: name, t: verify.Txn{ID: name + "#1", Producer: name, Begin: time.Now()}}
	if err := p.BeginTransaction(); err != nil {
		p.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	v := name + "-0"
	w.t.Writes = []verify.Write{{TP: verify.TP{Topic: tp.Topic, Partition: tp.Partition}, Value: v, Offset: -1}}
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	res := p.ProduceSync(octx, &client.Record{Topic: tp.Topic, Partition: tp.Partition, Value: []byte(v)})
	pid, epoch := p.ProducerID()
	w.t.PID = &verify.PID{ID: pid, Epoch: epoch}
	if err := res.FirstErr(); err != nil {
		w.t.Outcome, _ = r.abort(octx, p, &w.t)
		w.finish()
		return nil, fmt.Errorf("witness record: %w", err)
	}
	w.t.Writes[0].Offset = res[0].Record.Offset
	return w, nil
}

func (w *witnessTxn) TransactionalID() string { return w.name }

func (w *witnessTxn) Commit(ctx context.Context) error {
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	w.t.CommitRequested = time.Now()
	w.t.Outcome, _ = w.r.commit(octx, w.p, &w.t)
	defer w.finish()
	if w.t.Outcome != verify.Committed {
		return fmt.Errorf("%s", w.t.Outcome)
	}
	return nil
}

func (w *witnessTxn) Abort(ctx context.Context) error {
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	w.t.Outcome, _ = w.r.abort(octx, w.p, &w.t)
	w.finish()
	if w.t.AbortErr != "" {
		return fmt.Errorf("%s", w.t.AbortErr)
	}
	return nil
}

func (w *witnessTxn) finish() {
	w.t.End = time.Now()
	w.r.record(w.t)
	w.p.Close(context.Background())
}

// blocking describes the open transaction at lso in tp (the one holding
// the last stable offset), from its leader's producer state and the
// transaction coordinators, as `strand transactions blocking` does.
func (r *run) blocking(ctx context.Context, tp client.TopicPartition, lso int64) string {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pp, err := r.admin.DescribeProducers(cctx, tp, -1)
	if err != nil {
		return "describe producers: " + err.Error()
	}
	var out []string
	for _, ps := range pp.ActiveProducers {
		if ps.CurrentTxnStartOffset < 0 || ps.CurrentTxnStartOffset > lso {
			continue
		}
		d := fmt.Sprintf("producerId=%d epoch %d open since offset %d (last write %s ago)", ps.ProducerId, ps.ProducerEpoch, ps.CurrentTxnStartOffset,
			time.Since(time.UnixMilli(ps.LastTimestamp)).Round(time.Second))
		if l, err := r.admin.ListTransactions(cctx, client.ListTransactionsFilter{ProducerIDs: []int64{ps.ProducerId}}); err == nil && len(l) > 0 {
			d += fmt.Sprintf(", transactional id %q is %s at its coordinator (node %d)", l[0].TransactionalID, l[0].State, l[0].Coordinator)
		} else {
			d += ", no coordinator knows the producer id"
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return "no open transaction in the leader's producer state"
	}
	return strings.Join(out, "; ")
}

// keepOff keeps the producers off source partition tp (drill.Env.KeepOff):
// from now on they choose other partitions, and it waits (up to 5 s) until
// no open transaction of theirs has written to tp.
func (r *run) keepOff(ctx context.Context, tp client.TopicPartition) (resume func()) {
	if tp.Topic != r.src || r.cfg.Partitions < 2 || tp.Partition >= 64 {
		return func() {}
	}
	r.keepMu.Lock()
	r.avoid = tp.Partition
	r.keepMu.Unlock()
	resume = func() {
		r.keepMu.Lock()
		r.avoid = -1
		r.keepMu.Unlock()
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		busy := false
		r.keepMu.Lock()
		for _, m := range r.txnParts {
			busy = busy || m&(1<<tp.Partition) != 0
		}
		r.keepMu.Unlock()
		if !busy || sleep(ctx, 10*time.Millisecond) != nil {
			break
		}
	}
	return resume
}

// choosePartitions picks the partitions of producer i's next transaction
// of k records (uniformly, avoiding a partition kept off) and notes them
// as its open transaction's.
func (r *run) choosePartitions(i, k int, rng interface{ Int32N(int32) int32 }) []int32 {
	r.keepMu.Lock()
	defer r.keepMu.Unlock()
	parts := make([]int32, k)
	var mask uint64
	for j := range parts {
		p := rng.Int32N(r.cfg.Partitions)
		if p == r.avoid {
			p = (p + 1) % r.cfg.Partitions
		}
		parts[j] = p
		if p < 64 {
			mask |= 1 << p
		}
	}
	r.txnParts[i] = mask
	return parts
}

// txnDone notes that producer i has no open transaction.
func (r *run) txnDone(i int) {
	r.keepMu.Lock()
	r.txnParts[i] = 0
	r.keepMu.Unlock()
}
