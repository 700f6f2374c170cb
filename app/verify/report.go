package verify

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

// MaxExamples caps the example descriptions kept per anomaly.
const MaxExamples = 5

// Finding is the result of one check: how many anomalies it found and a
// few of them described.
type Finding struct {
	Count    int      `json:"count"`
	Examples []string `json:"examples,omitempty"`
}

func (f *Finding) add(format string, args ...any) {
	f.Count++
	if len(f.Examples) < MaxExamples {
		f.Examples = append(f.Examples, fmt.Sprintf(format, args...))
	}
}

// Totals describe the size of the history.
type Totals struct {
	CommittedTxns int `json:"committed_txns"`
	AbortedTxns   int `json:"aborted_txns"`
	UnknownTxns   int `json:"unknown_txns"`
	// UnknownVisible counts the Unknown transactions a read_committed
	// read proved committed (they are included in UnknownTxns).
	UnknownVisible int `json:"unknown_visible"`
	// StageTxns counts consume-transform-produce transactions (of any
	// outcome; they are included in the counts above).
	StageTxns int `json:"stage_txns"`
	// Records are writes, by the outcome of their transaction.
	CommittedRecords int `json:"committed_records"`
	AbortedRecords   int `json:"aborted_records"`
	UnknownRecords   int `json:"unknown_records"`
	// Reads counts observations: live reads, stage inputs and final reads.
	Reads      int `json:"reads"`
	FinalReads int `json:"final_reads"`

	// The faults the run drove its producers into and injected, so that
	// a report shows they happened. EpochEndFences and ZombieFences count
	// the producers fenced on purpose (Txn.Fence); Rotations the times a
	// transactional id's producer id changed (at the end of its epochs);
	// MaxEpoch is the largest epoch a producer held.
	EpochEndFences int   `json:"epoch_end_fences"`
	ZombieFences   int   `json:"zombie_fences"`
	Rotations      int   `json:"producer_id_rotations"`
	MaxEpoch       int16 `json:"max_epoch"`
	// EarlyAborts counts transactions aborted right after their records
	// were handed to the client; EmptyAborts those of them none of whose
	// records was sent (the abort reached the coordinator with no
	// partition); UnsentWrites the records the client never sent.
	EarlyAborts  int `json:"early_aborts"`
	EmptyAborts  int `json:"empty_aborts"`
	UnsentWrites int `json:"unsent_writes"`
	// MarkerFailovers and MarkerLeaderLosses count the marker drills that
	// ran.
	MarkerFailovers    int `json:"marker_failover_drills"`
	MarkerLeaderLosses int `json:"marker_leader_loss_drills"`
	// Spans counts the transactions the protocol-level read_committed
	// reader followed (History.Spans), SpansDelivered those it delivered
	// records of and then read the marker of.
	Spans          int `json:"reader_spans"`
	SpansDelivered int `json:"reader_spans_delivered"`
}

// Report is the verdict of Check. Each anomaly has its own Finding; see
// Check for what each one counts and in which unit.
type Report struct {
	Totals Totals `json:"totals"`

	LostWrites          Finding `json:"lost_writes"`
	Duplicates          Finding `json:"duplicates"`
	AbortedVisible      Finding `json:"aborted_visible"`
	VisibleBeforeCommit Finding `json:"visible_before_commit"`
	OutOfOrder          Finding `json:"out_of_order"`
	InconsistentOffsets Finding `json:"inconsistent_offsets"`
	TornTxns            Finding `json:"torn_txns"`
	OffsetMismatch      Finding `json:"offset_mismatch"`
	// Unwritten counts values read that no write of the history produced
	// (in that partition): corruption, or a record landing in the wrong
	// partition.
	Unwritten Finding `json:"unwritten"`
	// HangingTxns counts partitions still holding an open transaction at
	// the end of the run (History.OpenAtEnd), and transactions the
	// protocol reader saw ended by another transaction's marker
	// (TxnSpan.Orphaned): a transaction its coordinator considers ended
	// but a partition does not.
	HangingTxns Finding `json:"hanging_txns"`
	// ReadCommittedBeforeReplicated counts transactions whose records a
	// read_committed Fetch delivered while their marker was not below the
	// high watermark (TxnSpan: Marker >= DeliveredHW): a leader change
	// could still lose the marker.
	ReadCommittedBeforeReplicated Finding `json:"read_committed_before_replicated"`
	// EpochAnomalies counts producer epochs outside [0, MaxProducerEpoch],
	// fenced transactions whose commit succeeded, and fences at the end
	// of the epochs that did not move to a new producer id.
	EpochAnomalies Finding `json:"epoch_anomalies"`
	// AbortFailed counts AbortTransaction calls that failed other than
	// by fencing.
	AbortFailed Finding `json:"abort_failed"`
	// Malformed counts violations of the history model itself (a bad
	// outcome, a reused value, a wrong transform rule...). They are a bug
	// in the workload, not in Strand, but other counts may be unreliable
	// while there are any.
	Malformed Finding `json:"malformed"`
}

// NamedFinding is a Finding with the name of its check.
type NamedFinding struct {
	Name        string
	Description string
	Finding
}

// Checks lists every check's finding, in a fixed order.
func (r Report) Checks() []NamedFinding {
	return []NamedFinding{
		{"lost-writes", "committed write missing from the final read_committed read", r.LostWrites},
		{"duplicates", "value at more than one offset in the final reads / stage output repeated", r.Duplicates},
		{"aborted-visible", "aborted write seen by a read_committed read (G1a)", r.AbortedVisible},
		{"visible-before-commit", "read_committed read before the commit was requested", r.VisibleBeforeCommit},
		{"out-of-order", "producer's records in a partition not in send order", r.OutOfOrder},
		{"inconsistent-offsets", "one offset holding two values", r.InconsistentOffsets},
		{"torn-txns", "transaction partly visible to the final read_committed read", r.TornTxns},
		{"offset-mismatch", "stage offsets disagree with inputs processed", r.OffsetMismatch},
		{"unwritten", "value read that nobody wrote there", r.Unwritten},
		{"hanging-txns", "open transaction nobody will end (LSO pinned at the end, or ended by a later txn's marker)", r.HangingTxns},
		{"read-committed-before-replicated", "read_committed records delivered before their txn's marker was below the HW", r.ReadCommittedBeforeReplicated},
		{"epoch-anomalies", "epoch outside [0, 32766], fenced commit succeeded, or no new producer id at the epoch end", r.EpochAnomalies},
		{"abort-failed", "AbortTransaction failed (other than by fencing)", r.AbortFailed},
		{"malformed-history", "history breaks the model's rules", r.Malformed},
	}
}

// OK reports whether every check found nothing.
func (r Report) OK() bool {
	for _, c := range r.Checks() {
		if c.Count != 0 {
			return false
		}
	}
	return true
}

// Table renders the report for humans: one row per check with its count,
// the totals, and the examples of every failed check.
func (r Report) Table() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tCOUNT\tRESULT\tWHAT")
	for _, c := range r.Checks() {
		res := "ok"
		if c.Count != 0 {
			res = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", c.Name, c.Count, res, c.Description)
	}
	tw.Flush()
	t := r.Totals
	fmt.Fprintf(&b, "\ntxns: %d committed, %d aborted, %d unknown (%d proven visible); %d stage txns\n",
		t.CommittedTxns, t.AbortedTxns, t.UnknownTxns, t.UnknownVisible, t.StageTxns)
	fmt.Fprintf(&b, "records: %d committed, %d aborted, %d unknown; reads: %d (%d final)\n",
		t.CommittedRecords, t.AbortedRecords, t.UnknownRecords, t.Reads, t.FinalReads)
	fmt.Fprintf(&b, "faults: %d fences at the epoch end, %d zombie fences, %d producer-id rotations (epochs up to %d); %d early aborts (%d with nothing sent, %d records unsent); drills: %d marker-failover, %d marker-leader-loss\n",
		t.EpochEndFences, t.ZombieFences, t.Rotations, t.MaxEpoch, t.EarlyAborts, t.EmptyAborts, t.UnsentWrites, t.MarkerFailovers, t.MarkerLeaderLosses)
	fmt.Fprintf(&b, "protocol reader: %d transactions followed, %d delivered and their marker read\n", t.Spans, t.SpansDelivered)
	for _, c := range r.Checks() {
		if c.Count == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s (%d):\n", c.Name, c.Count)
		for _, e := range c.Examples {
			fmt.Fprintf(&b, "  - %s\n", e)
		}
		if more := c.Count - len(c.Examples); more > 0 {
			fmt.Fprintf(&b, "  ... and %d more\n", more)
		}
	}
	if r.OK() {
		b.WriteString("\nverdict: OK\n")
	} else {
		b.WriteString("\nverdict: FAIL\n")
	}
	return b.String()
}
