package main

// Real node on real time: runs the built strand binary as a real OS process,
// which dials (or serves) real TCP sockets.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strand-io/strand/testkit/testutil"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "strand-cli")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "strand")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		panic(string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func run(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("strand %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

func mustContain(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Fatalf("output lacks %q:\n%s", w, out)
		}
	}
}

// TestCLI drives the binary against a one-node server: the foundation
// issue's walk-through, transactions, and the inspection tools.
func TestCLI(t *testing.T) {
	dir := t.TempDir()
	n := testutil.StartDev(t, dir)
	b := "--bootstrap=" + n.Addr()

	mustContain(t, run(t, "", "topics", "create", "orders", "--partitions", "3", b), "Created topic orders.")
	mustContain(t, run(t, "", "topics", "list", b), "orders")
	mustContain(t, run(t, "", "topics", "describe", "orders", b), "PartitionCount: 3", "Partition: 2", "Leader: 1", "LeaderEpoch: 0", "Isr: 1")

	var in strings.Builder
	for i := 1; i <= 1000; i++ {
		in.WriteString(strings.Repeat("x", i%7) + "\n")
	}
	run(t, in.String(), "produce", "orders", b)
	out := run(t, "", "consume", "orders", "--from-beginning", "--max-records", "1000", "--timeout", "10s", b)
	if lines := strings.Count(out, "\n"); lines != 1000 {
		t.Fatalf("consume printed %d lines, want 1000", lines)
	}
	// Keys and offsets.
	run(t, "k1:v1\nk2:v2\n", "produce", "orders", "--key-separator", ":", "--partition", "0", b)
	out = run(t, "", "consume", "orders", "--partition", "0", "--from-beginning", "--print-key", "--print-offsets", "--timeout", "2s", b)
	mustContain(t, out, "\tk1\tv1\n", "\tk2\tv2\n")

	// dump-log of a segment on disk.
	seg := filepath.Join(dir, "orders-0", "00000000000000000000.log")
	dump := run(t, "", "dump-log", seg)
	mustContain(t, dump, "Dumping "+seg, "Log starting offset: 0", "baseOffset: 0 lastOffset: ", "isTransactional: false isControl: false", "isvalid: true")
	deep := run(t, "", "dump-log", "--print-data-log", seg)
	mustContain(t, deep, "| offset: 0 CreateTime: ", "key: k1 payload: v1")

	// A transaction committed and one aborted, seen by read_committed.
	run(t, "", "topics", "create", "pay", "--partitions", "1", b)
	run(t, "c1\nc2\n", "produce", "pay", "--transactional-id", "cli-writer", b)
	run(t, "a1\n", "produce", "pay", "--transactional-id", "cli-writer", "--abort", b)
	out = run(t, "", "consume", "pay", "--from-beginning", "--isolation-level", "read_committed", "--timeout", "3s", b)
	if out != "c1\nc2\n" {
		t.Fatalf("read_committed consume: %q", out)
	}
	out = run(t, "", "consume", "pay", "--from-beginning", "--timeout", "3s", b)
	if out != "c1\nc2\na1\n" {
		t.Fatalf("read_uncommitted consume: %q", out)
	}
	mustContain(t, run(t, "", "dump-log", filepath.Join(dir, "pay-0", "00000000000000000000.log")), "isTransactional: true isControl: true")
	mustContain(t, run(t, "", "dump-log", "--print-data-log", filepath.Join(dir, "pay-0", "00000000000000000000.log")), "endTxnMarker: COMMIT coordinatorEpoch: ", "endTxnMarker: ABORT coordinatorEpoch: ")

	tx := run(t, "", "transactions", "list", b)
	mustContain(t, tx, "TransactionalId", "Coordinator", "ProducerId", "TransactionState", "cli-writer", "CompleteAbort")
	for _, line := range strings.Split(strings.TrimRight(tx, "\n"), "\n") {
		if !strings.HasSuffix(line, "\t") {
			t.Fatalf("kafka-transactions tables end every line with a tab: %q", line)
		}
	}
	mustContain(t, run(t, "", "transactions", "describe", "--transactional-id", "cli-writer", b),
		"CoordinatorId", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "cli-writer", "CompleteAbort")
	mustContain(t, run(t, "", "transactions", "describe-producers", "--topic", "pay", "--partition", "0", b),
		"ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp", "CurrentTransactionStartOffset", "None")
	mustContain(t, run(t, "", "transactions", "blocking", "--topic", "pay", "--partition", "0", b), "HighWatermark", "LastStableOffset", "\t5 ", "None")
	mustContain(t, run(t, "", "transactions", "list", "--format", "json", b), `"TransactionalId": "cli-writer"`)
	mustContain(t, run(t, "", "transactions", "find-hanging", "--topic", "pay", b), "Topic", "Duration(min)")

	// The transaction log decoder.
	logs, _ := filepath.Glob(filepath.Join(dir, "__transaction_state-*", "00000000000000000000.log"))
	found := false
	for _, l := range logs {
		if strings.Contains(run(t, "", "dump-log", "--transaction-log-decoder", l), `"transactionalId":"cli-writer"`) {
			found = true
		}
	}
	if !found {
		t.Fatal("no __transaction_state segment decodes to cli-writer's records")
	}

	mustContain(t, run(t, "", "features", "describe", b), "Feature: transaction.version", "FinalizedVersionLevel: 2",
		"Feature: strand.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1")
	// kafka-features' upgrade, downgrade and disable, in its words.
	mustContain(t, run(t, "", "features", "downgrade", "--feature", "transaction.version=1", "--dry-run", b), "transaction.version can be downgraded to 1.")
	mustContain(t, run(t, "", "features", "describe", b), "Feature: transaction.version", "FinalizedVersionLevel: 2")
	if out, _, err := runErr(t, "", "features", "upgrade", "--feature", "transaction.version=9", b); err == nil {
		t.Fatalf("an upgrade beyond the supported levels succeeded: %s", out)
	} else {
		mustContain(t, out, "Could not upgrade transaction.version to 9.", "supports levels 0 to 2")
	}
	mustContain(t, run(t, "", "features", "downgrade", "--feature", "transaction.version=1", b), "transaction.version was downgraded to 1.")
	mustContain(t, run(t, "", "features", "describe", b), "Feature: transaction.version", "FinalizedVersionLevel: 1")
	mustContain(t, run(t, "", "features", "upgrade", "--feature", "transaction.version=2", b), "transaction.version was upgraded to 2.")
	mustContain(t, run(t, "", "features", "disable", "--feature", "strand.version", b), "strand.version was disabled.")
	mustContain(t, run(t, "", "features", "upgrade", "--feature", "strand.version=1", b), "strand.version was upgraded to 1.")
	mustContain(t, run(t, "", "cluster", "describe", b), "ActiveController: 1", "voter (active)")
	run(t, "", "health", "--addr", n.Addr())
	mustContain(t, run(t, "", "topics", "delete", "orders", b), "Deleted topic orders.")
}

// TestPerfWarmup: --warmup-records adds a steady-state line (perf produce)
// and leaves the warm-up out of the latencies (perf e2e), while every
// record is still sent and received.
func TestPerfWarmup(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	b := "--bootstrap=" + n.Addr()
	run(t, "", "topics", "create", "pw", "--partitions", "1", b)
	out := run(t, "", "perf", "produce", "--topic", "pw", "--num-records", "3000", "--record-size", "100",
		"--throughput", "3000", "--warmup-records", "1000", b)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 {
		t.Fatalf("perf produce printed:\n%s", out)
	}
	whole, steady := lines[len(lines)-2], lines[len(lines)-1]
	if !strings.HasPrefix(whole, "3000 records sent, ") || !strings.Contains(whole, " ms 99.9th.") {
		t.Fatalf("whole-run line: %q", whole)
	}
	if !strings.HasPrefix(steady, "2000 steady state records sent, ") || !strings.Contains(steady, " ms 99th, ") {
		t.Fatalf("steady-state line: %q", steady)
	}
	out = run(t, "", "perf", "e2e", "--topic", "pw", "--throughput", "2000", "--duration", "1s", "--warmup-records", "500", b)
	mustContain(t, out, "Percentiles: 50th = ", "(latencies leave out the first 500 records, the warm-up)")
	var sent, recv int
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "(") && strings.Contains(l, "offered") {
			if _, err := fmt.Sscanf(l, "(%d records at", &sent); err != nil {
				t.Fatal(err)
			}
			i := strings.LastIndex(l, ", ")
			if _, err := fmt.Sscanf(l[i+2:], "%d received)", &recv); err != nil {
				t.Fatal(err)
			}
		}
	}
	if sent < 1000 || recv != sent {
		t.Fatalf("perf e2e sent %d, received %d:\n%s", sent, recv, out)
	}
	// The flag is checked.
	cmd := exec.Command(binary, "perf", "produce", "--topic", "pw", "--num-records", "10", "--record-size", "10", "--warmup-records", "10", b)
	if o, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(o), "--warmup-records") {
		t.Fatalf("--warmup-records 10 of 10 records: err %v, output %s", err, o)
	}
}

// TestPerfMissingTopic: Strand creates no topic on first use, so the perf
// tools refuse a missing topic at once instead of retrying for minutes.
func TestPerfMissingTopic(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	b := "--bootstrap=" + n.Addr()
	for _, args := range [][]string{
		{"perf", "produce", "--topic", "nope", "--num-records", "10", "--record-size", "10", b},
		{"perf", "consume", "--topic", "nope", "--messages", "10", b},
		{"perf", "e2e", "--topic", "nope", "--duration", "1s", b},
	} {
		o, err := exec.Command(binary, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(o), "topic nope does not exist") {
			t.Fatalf("strand %s: err %v, output %s", strings.Join(args, " "), err, o)
		}
	}
}
