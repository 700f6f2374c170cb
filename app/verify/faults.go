package verify

import (
	"fmt"
	"sort"
	"time"
)

// The checks of the transaction faults the workload drives: transactions
// left hanging on a partition, read_committed records handed out before
// their marker was replicated, producer epochs across the end of their
// range, and aborts before anything was sent.
//
//   - HangingTxns (per partition, and per orphaned transaction): a
//     partition in History.OpenAtEnd; and a TxnSpan with Orphaned >= 0,
//     a transaction whose partition never got its marker and that the
//     producer's next transaction there absorbed (the LSO was pinned
//     until then, and its records took that transaction's outcome).
//   - ReadCommittedBeforeReplicated (per span): a TxnSpan with records
//     delivered (Delivered >= 0) and a marker read (Marker >= 0) at or
//     above the HW of the response that delivered them (DeliveredHW) and
//     above every HW the delivering leader reported afterwards
//     (LeaderHW). A read_committed reader may be handed a transaction's
//     records only once the HW has passed its marker: below the HW the
//     marker survives any leader change at the same offset, so Marker <
//     DeliveredHW. LeaderHW allows for a leader that releases a
//     transaction as it computes the HW that passes its marker and reports
//     that HW a moment later (Strand's partition does: the release and the
//     HW are not one atomic step), so a response can hand out records
//     with a HW one step behind. A marker the delivering leader never
//     reported replicated, read later from another leader (or at an
//     offset it never passed), is the anomaly: that is what a leader
//     change turns into records visible without their marker.
//   - EpochAnomalies (per occurrence): an epoch outside [0,
//     MaxProducerEpoch] in an Incarnation or a Txn's PID (once per
//     producer and producer id: the epochs after the first bad one are
//     its consequences); a Txn fenced on purpose (Fence) whose
//     commit succeeded (Outcome Committed); an Incarnation that fenced a
//     producer at the end of its epochs (FenceEpochEnd) and kept its
//     producer id.
//   - AbortFailed (per transaction): a Txn with AbortErr.
func (c *checker) faultChecks() {
	h, r := c.h, c.r
	for _, o := range h.OpenAtEnd {
		r.HangingTxns.add("%s: LSO %d < HW %d %.0fs after everything stopped; blocking: %s", o.TP, o.LastStableOffset, o.HighWatermark, o.Waited, o.Blocking)
	}
	for _, s := range h.Spans {
		if s.Orphaned >= 0 {
			r.HangingTxns.add("%s: the transaction of producerId=%d epoch %d from offset %d got no marker; the producer's data at offset %d (a newer epoch) came first, so a later transaction's marker ended it",
				s.TP, s.ProducerID, s.Epoch, s.FirstOffset, s.Orphaned)
		}
		if s.Delivered >= 0 && s.Marker >= 0 && s.Marker >= s.DeliveredHW && s.Marker >= s.LeaderHW {
			r.ReadCommittedBeforeReplicated.add("%s: %s was handed the records of producerId=%d epoch %d from offset %d with HW %d, but their %s marker is at %d (the leader that handed them out reported HW %d at most)",
				s.TP, s.Reader, s.ProducerID, s.Epoch, s.Delivered, s.DeliveredHW, markerName(s.Commit), s.Marker, s.LeaderHW)
		}
	}
	type seen struct {
		producer string
		pid      int64
	}
	bad := map[seen]bool{}
	badEpoch := func(producer string, pid PID, where string) {
		if pid.Epoch >= 0 && pid.Epoch <= MaxProducerEpoch {
			return
		}
		k := seen{producer, pid.ID}
		if bad[k] {
			return
		}
		bad[k] = true
		r.EpochAnomalies.add("producer %s was handed producerId=%d epoch %d (%s), outside [0, %d]", producer, pid.ID, pid.Epoch, where, MaxProducerEpoch)
	}
	for _, in := range h.Incarnations {
		badEpoch(in.Producer, in.PID, "by InitTransactions")
		if in.Fence == FenceEpochEnd && in.Fenced != nil && in.PID.ID == in.Fenced.ID {
			r.EpochAnomalies.add("producer %s: the fence of producerId=%d at epoch %d, the end of its epochs, answered the same producer id (epoch %d)",
				in.Producer, in.Fenced.ID, in.Fenced.Epoch, in.PID.Epoch)
		}
	}
	for i := range h.Txns {
		t := &h.Txns[i]
		if t.PID != nil {
			badEpoch(t.Producer, *t.PID, "txn "+t.ID)
		}
		if t.Fence != "" && t.Outcome == Committed {
			r.EpochAnomalies.add("txn %s: its producer was fenced (%s) while it was open, but its commit succeeded", t.ID, t.Fence)
		}
		if t.AbortErr != "" {
			r.AbortFailed.add("txn %s (%s): AbortTransaction failed: %s", t.ID, earlyDesc(t), t.AbortErr)
		}
	}
}

func markerName(commit bool) string {
	if commit {
		return "COMMIT"
	}
	return "ABORT"
}

func earlyDesc(t *Txn) string {
	unsent := 0
	for _, w := range t.Writes {
		if w.Unsent {
			unsent++
		}
	}
	if !t.EarlyAbort {
		return fmt.Sprintf("%d records", len(t.Writes))
	}
	return fmt.Sprintf("early abort, %d of %d records unsent", unsent, len(t.Writes))
}

// faultTotals fills the totals of the faults that ran.
func (c *checker) faultTotals() {
	h, t := c.h, &c.r.Totals
	type event struct {
		at  time.Time
		pid int64
	}
	byProducer := map[string][]event{}
	var producers []string
	note := func(producer string, at time.Time, pid PID) {
		if _, ok := byProducer[producer]; !ok {
			producers = append(producers, producer)
		}
		byProducer[producer] = append(byProducer[producer], event{at, pid.ID})
		if pid.Epoch > t.MaxEpoch {
			t.MaxEpoch = pid.Epoch
		}
	}
	for _, in := range h.Incarnations {
		note(in.Producer, in.Time, in.PID)
	}
	for i := range h.Txns {
		tx := &h.Txns[i]
		if tx.PID != nil {
			note(tx.Producer, tx.Begin, *tx.PID)
		}
		switch tx.Fence {
		case FenceEpochEnd:
			t.EpochEndFences++
		case FenceZombie:
			t.ZombieFences++
		}
		if tx.EarlyAbort {
			t.EarlyAborts++
			unsent := 0
			for _, w := range tx.Writes {
				if w.Unsent {
					unsent++
				}
			}
			if unsent == len(tx.Writes) {
				t.EmptyAborts++
			}
		}
		for _, w := range tx.Writes {
			if w.Unsent {
				t.UnsentWrites++
			}
		}
	}
	for _, p := range producers {
		ev := byProducer[p]
		sort.SliceStable(ev, func(i, j int) bool { return ev[i].at.Before(ev[j].at) })
		for i := 1; i < len(ev); i++ {
			if ev[i].pid != ev[i-1].pid {
				t.Rotations++
			}
		}
	}
	for _, d := range h.Drills {
		switch d {
		case "marker-failover":
			t.MarkerFailovers++
		case "marker-leader-loss":
			t.MarkerLeaderLosses++
		}
	}
	t.Spans = len(h.Spans)
	for _, s := range h.Spans {
		if s.Delivered >= 0 && s.Marker >= 0 {
			t.SpansDelivered++
		}
	}
}
