package main

// Real node on real time: runs the built strand binary as a real OS process,
// which dials (or serves) real TCP sockets.

import (
	"bytes"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/testkit/testutil"
)

// runErr runs the binary and returns stdout, stderr and its error, for
// commands expected to fail (or whose failure the test reports itself).
func runErr(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

func sortedLines(s string) []string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) == 1 && l[0] == "" {
		return nil
	}
	sort.Strings(l)
	return l
}

// A group member used to commit only the partitions it
// printed from. A partition it was assigned but read nothing from had no
// committed offset, so the next run started it at the log end and never
// showed what was written there in between.
func TestConsumeGroupCommitsEveryAssignedPartition(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	b := "--bootstrap=" + n.Addr()
	run(t, "", "topics", "create", "gc", "--partitions", "2", b)
	run(t, "a\n", "produce", "gc", "--partition", "0", b)
	out := run(t, "", "consume", "gc", "--group", "gcg", "--from-beginning", "--max-records", "1", "--timeout", "30s", b)
	if out != "a\n" {
		t.Fatalf("first run printed %q", out)
	}
	// Written while no member runs: one record to the partition the first
	// run read nothing from, one to the other.
	run(t, "b\n", "produce", "gc", "--partition", "1", b)
	run(t, "c\n", "produce", "gc", "--partition", "0", b)
	out, errOut, err := runErr(t, "", "consume", "gc", "--group", "gcg", "--max-records", "2", "--timeout", "15s", b)
	if got := sortedLines(out); err != nil || len(got) != 2 || got[0] != "b" || got[1] != "c" {
		t.Fatalf("second run (no --from-beginning) printed %q, want b and c: %v %s", out, err, errOut)
	}
	// Everything is committed: a third run has nothing to print.
	if out := run(t, "", "consume", "gc", "--group", "gcg", "--timeout", "1s", b); out != "" {
		t.Fatalf("third run printed %q", out)
	}
	// The committed offsets are the log ends of both partitions.
	c, err := client.NewConsumer(client.Bootstrap(n.Addr()), client.GroupID("gcg"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(t.Context())
	got, err := c.Committed(t.Context(), []client.TopicPartition{{Topic: "gc", Partition: 0}, {Topic: "gc", Partition: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if got[client.TopicPartition{Topic: "gc", Partition: 0}] != 2 || got[client.TopicPartition{Topic: "gc", Partition: 1}] != 1 {
		t.Fatalf("committed %v, want gc-0 at 2 and gc-1 at 1", got)
	}
}

// Records Poll returned past --max-records are not printed, so they are
// not committed either: the next member of the group prints them.
func TestConsumeGroupMaxRecordsCommitsOnlyWhatItPrinted(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	b := "--bootstrap=" + n.Addr()
	run(t, "", "topics", "create", "gm", "--partitions", "1", b)
	run(t, "x1\nx2\nx3\n", "produce", "gm", b)
	if out := run(t, "", "consume", "gm", "--group", "gmg", "--from-beginning", "--max-records", "1", "--timeout", "30s", b); out != "x1\n" {
		t.Fatalf("first run printed %q", out)
	}
	if out := run(t, "", "consume", "gm", "--group", "gmg", "--max-records", "2", "--timeout", "30s", b); out != "x2\nx3\n" {
		t.Fatalf("second run printed %q, want x2 and x3", out)
	}
}

// With --group, --timeout used to count from the start, so
// a timeout shorter than the join (group.initial.rebalance.delay.ms is 3 s)
// printed nothing. It counts from the assignment now.
func TestConsumeGroupTimeoutStartsAtAssignment(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	b := "--bootstrap=" + n.Addr()
	run(t, "", "topics", "create", "gt", "--partitions", "1", b)
	run(t, "t1\nt2\n", "produce", "gt", b)
	if out := run(t, "", "consume", "gt", "--group", "gtg", "--from-beginning", "--timeout", "1s", b); out != "t1\nt2\n" {
		t.Fatalf("--group --timeout 1s printed %q, want both records", out)
	}
}

// The consumer's flags: --partition and --offset do not mix with --group
// (they were silently ignored), --offset needs --partition, and --offset
// takes kafka-console-consumer's values: a non-negative offset, earliest
// (-2) or latest (-1); -2 used to mean latest.
func TestConsumeOffsetFlags(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	b := "--bootstrap=" + n.Addr()
	run(t, "", "topics", "create", "of", "--partitions", "2", b)
	run(t, "o0\no1\no2\no3\no4\n", "produce", "of", "--partition", "0", b)

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--group", "g", "--partition", "0"}, "--group cannot be used with --partition or --offset"},
		{[]string{"--group", "g", "--offset", "3"}, "--group cannot be used with --partition or --offset"},
		{[]string{"--group", "g", "--from-timestamp", "0"}, "--group cannot be used with --from-timestamp"},
		{[]string{"--offset", "3"}, "--offset needs --partition"},
		{[]string{"--partition", "0", "--offset", "-3"}, "want a non-negative offset, earliest (-2) or latest (-1)"},
		{[]string{"--partition", "0", "--offset", "first"}, "want a non-negative offset, earliest (-2) or latest (-1)"},
		{[]string{"--partition", "0", "--offset", "1", "--from-beginning"}, "--from-beginning and --offset cannot be used together"},
	} {
		args := append([]string{"consume", "of", "--timeout", "1s", b}, c.args...)
		out, errOut, err := runErr(t, "", args...)
		if err == nil || !strings.Contains(errOut, c.want) {
			t.Errorf("strand %s: err %v, stdout %q, stderr %q; want a refusal saying %q", strings.Join(c.args, " "), err, out, errOut, c.want)
		}
	}
	for _, c := range []struct {
		offset, want string
	}{
		{"-2", "o0\no1\no2\no3\no4\n"},
		{"earliest", "o0\no1\no2\no3\no4\n"},
		{"3", "o3\no4\n"},
		{"0", "o0\no1\no2\no3\no4\n"},
		{"-1", ""},
		{"latest", ""},
	} {
		out, errOut, err := runErr(t, "", "consume", "of", "--partition", "0", "--offset", c.offset, "--timeout", "1s", b)
		if err != nil || out != c.want {
			t.Errorf("--offset %s printed %q (err %v %s), want %q", c.offset, out, err, errOut, c.want)
		}
	}
}
