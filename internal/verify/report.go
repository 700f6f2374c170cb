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
