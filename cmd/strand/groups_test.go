package main

// Real node on real time: the strand CLI under test dials its --bootstrap address
// over real TCP; it has no in-memory dialer that could reach MemNet.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// cgTable finds the table of a consumer-groups answer: the header line
// whose fields are headers, and the rows after it, split on whitespace.
func cgTable(t *testing.T, out string, headers ...string) [][]string {
	t.Helper()
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.Join(strings.Fields(l), " ") != strings.Join(headers, " ") {
			continue
		}
		var rows [][]string
		for _, r := range lines[i+1:] {
			if strings.TrimSpace(r) == "" {
				break
			}
			rows = append(rows, strings.Fields(r))
		}
		return rows
	}
	t.Fatalf("no header %q in:\n%s", strings.Join(headers, " "), out)
	return nil
}

// cgRow is the row whose first cells are prefix.
func cgRow(t *testing.T, rows [][]string, prefix ...string) []string {
	t.Helper()
	for _, r := range rows {
		if len(r) >= len(prefix) && strings.Join(r[:len(prefix)], " ") == strings.Join(prefix, " ") {
			return r
		}
	}
	t.Fatalf("no row %q in %q", prefix, rows)
	return nil
}

var (
	offsetHeaders = []string{"GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"}
	resetHeaders  = []string{"GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"}
)

// TestConsumerGroupsCommand drives `strand consumer-groups` against a
// one-node server with a group of one SDK member (read_committed), while a
// transactional producer holds a transaction open on partition 0: HW 13,
// LSO 10. Every answer is checked against the same operation through
// franz-go's kadm on the Kafka listener.
func TestConsumerGroupsCommand(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) { cfg.KafkaListen = "127.0.0.1:0" })
	b := "--bootstrap=" + n.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run(t, "", "topics", "create", "cg", "--partitions", "2", b)

	p, err := client.NewProducer(client.Bootstrap(n.Addr()), client.WithPartitioner(client.ManualPartitioner{}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	var recs []*client.Record
	for i := range 10 {
		recs = append(recs, &client.Record{Topic: "cg", Partition: 0, Value: fmt.Appendf(nil, "a%d", i)})
	}
	for i := range 6 {
		recs = append(recs, &client.Record{Topic: "cg", Partition: 1, Value: fmt.Appendf(nil, "b%d", i)})
	}
	if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A transaction left open on partition 0: 3 records the HW covers and
	// the LSO (10) does not.
	tp, err := client.NewProducer(client.Bootstrap(n.Addr()), client.TransactionalID("cg-open"), client.WithPartitioner(client.ManualPartitioner{}))
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close(ctx)
	if err := tp.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var open []*client.Record
	for i := range 3 {
		open = append(open, &client.Record{Topic: "cg", Partition: 0, Value: fmt.Appendf(nil, "t%d", i)})
	}
	if err := tp.ProduceSync(ctx, open...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// The group: one read_committed SDK member holding both partitions.
	member, err := client.NewConsumer(client.Bootstrap(n.Addr()), client.GroupID("cgg"), client.Topics("cg"), client.ClientID("cg-client"),
		client.Isolation(client.ReadCommitted), client.AutoCommit(0), client.AutoOffsetReset(client.ResetEarliest))
	if err != nil {
		t.Fatal(err)
	}
	memberOpen := true
	defer func() {
		if memberOpen {
			member.Close(ctx)
		}
	}()
	wait.Eventually(t, 30*time.Second, "the member owns both partitions", func() bool {
		if _, err := member.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		return len(member.Assignment()) == 2
	})
	if err := member.CommitOffsets(ctx, map[client.TopicPartition]int64{{Topic: "cg", Partition: 0}: 4, {Topic: "cg", Partition: 1}: 6}); err != nil {
		t.Fatal(err)
	}

	kcl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer kcl.Close()
	adm := kadm.NewClient(kcl)

	// --list, --list --state.
	out := run(t, "", "consumer-groups", "--list", b)
	if strings.TrimSpace(out) != "cgg" {
		t.Fatalf("--list: %q", out)
	}
	cgRow(t, cgTable(t, run(t, "", "consumer-groups", "--list", "--state", b), "GROUP", "STATE"), "cgg", "Stable")
	if rows := cgTable(t, run(t, "", "consumer-groups", "--list", "--state", "Empty", b), "GROUP", "STATE"); len(rows) != 0 {
		t.Fatalf("--list --state Empty lists %q", rows)
	}
	if rows := cgTable(t, run(t, "", "consumer-groups", "--list", "--state=empty,stable", b), "GROUP", "STATE"); len(rows) != 1 {
		t.Fatalf("--list --state=empty,stable lists %q", rows)
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil || len(listed) != 1 || listed["cgg"].State != "Stable" || listed["cgg"].ProtocolType != "consumer" {
		t.Fatalf("kadm ListGroups: %v %v", listed, err)
	}

	// --describe --state and --members against kadm's DescribeGroups.
	described, err := adm.DescribeGroups(ctx, "cgg")
	if err != nil {
		t.Fatal(err)
	}
	kd := described["cgg"]
	if kd.Err != nil || kd.State != "Stable" || len(kd.Members) != 1 {
		t.Fatalf("kadm DescribeGroups: %+v", kd)
	}
	km := kd.Members[0]
	if km.ClientHost != "/127.0.0.1" {
		t.Fatalf("the SDK member's host is %q, want /127.0.0.1 (the gRPC peer)", km.ClientHost)
	}
	st := cgRow(t, cgTable(t, run(t, "", "consumer-groups", "--describe", "--group", "cgg", "--state", b),
		"GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"), "cgg")
	if want := []string{"cgg", n.Addr(), "(1)", kd.Protocol, "Stable", "1"}; strings.Join(st, " ") != strings.Join(want, " ") {
		t.Fatalf("--describe --state row %q, want %q", st, want)
	}
	if kd.Protocol != "cooperative-sticky" || kd.Coordinator.NodeID != 1 {
		t.Fatalf("kadm: protocol %q coordinator %d", kd.Protocol, kd.Coordinator.NodeID)
	}
	mr := cgRow(t, cgTable(t, run(t, "", "consumer-groups", "--describe", "--group", "cgg", "--members", b),
		"GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"), "cgg")
	if want := []string{"cgg", km.MemberID, km.ClientHost, "cg-client", "2"}; strings.Join(mr, " ") != strings.Join(want, " ") || km.ClientID != "cg-client" {
		t.Fatalf("--members row %q, want %q (kadm client id %q)", mr, want, km.ClientID)
	}
	vr := cgRow(t, cgTable(t, run(t, "", "consumer-groups", "--describe", "--group", "cgg", "--members", "--verbose", b),
		"GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"), "cgg")
	if vr[len(vr)-1] != "cg(0,1)" {
		t.Fatalf("--members --verbose row %q", vr)
	}
	if ka, ok := km.Assigned.AsConsumer(); !ok || len(ka.Topics) != 1 || len(ka.Topics[0].Partitions) != 2 {
		t.Fatalf("kadm reads the assignment as %+v", km.Assigned)
	}

	// LAG: the member advertises read_committed, so by default it is
	// measured at the LSO (10), and with --isolation-level
	// read_uncommitted at the HW (13).
	out, stderr, err := runErr(t, "", "consumer-groups", "--describe", "--group", "cgg", b)
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	mustContain(t, stderr, "LAG of group 'cgg' is measured against the last stable offset (read_committed, advertised by the group's members).")
	rows := cgTable(t, out, offsetHeaders...)
	if got, want := strings.Join(cgRow(t, rows, "cgg", "cg", "0"), " "), fmt.Sprintf("cgg cg 0 4 10 6 %s %s cg-client", km.MemberID, km.ClientHost); got != want {
		t.Fatalf("read_committed row %q, want %q", got, want)
	}
	if got := strings.Join(cgRow(t, rows, "cgg", "cg", "1")[:6], " "); got != "cgg cg 1 6 6 0" {
		t.Fatalf("read_committed row p1 %q", got)
	}
	if out2 := run(t, "", "consumer-groups", "--describe", "--group", "cgg", "--offsets", b); out2 != out {
		t.Fatalf("--offsets differs from the default view:\n%s\n%s", out2, out)
	}
	if out2 := run(t, "", "consumer-groups", "--describe", "--all-groups", b); out2 != out {
		t.Fatalf("--all-groups differs from --group cgg (the only group):\n%s\n%s", out2, out)
	}
	out, stderr, err = runErr(t, "", "consumer-groups", "--describe", "--group", "cgg", "--isolation-level", "read_uncommitted", b)
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	mustContain(t, stderr, "measured against the high watermark (read_uncommitted, --isolation-level)")
	ru := cgRow(t, cgTable(t, out, offsetHeaders...), "cgg", "cg", "0")
	if got := strings.Join(ru[:6], " "); got != "cgg cg 0 4 13 9" {
		t.Fatalf("read_uncommitted row %q, want LOG-END-OFFSET 13 and LAG 9", got)
	}
	// kadm's Lag measures at the HW, like the read_uncommitted view; its
	// committed end offsets (ListCommittedOffsets) are the LSO.
	lags, err := adm.Lag(ctx, "cgg")
	if err != nil {
		t.Fatal(err)
	}
	gl := lags["cgg"]
	if l, ok := gl.Lag.Lookup("cg", 0); !ok || l.Err != nil || l.Lag != 9 || l.End.Offset != 13 || l.Commit.At != 4 || l.Member == nil || l.Member.MemberID != km.MemberID {
		t.Fatalf("kadm Lag p0: %+v", l)
	}
	if l, ok := gl.Lag.Lookup("cg", 1); !ok || l.Lag != 0 {
		t.Fatalf("kadm Lag p1: %+v", l)
	}
	lso, err := adm.ListCommittedOffsets(ctx, "cg")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := lso.Lookup("cg", 0); o.Offset != 10 {
		t.Fatalf("kadm's LSO of cg-0 is %d, the CLI's read_committed LOG-END-OFFSET 10", o.Offset)
	}

	// An active group's offsets cannot be reset, by the CLI or by kadm.
	_, stderr, err = runErr(t, "", "consumer-groups", "--reset-offsets", "--group", "cgg", "--topic", "cg", "--to-earliest", "--execute", b)
	if err == nil || !strings.Contains(stderr, "Assignments can only be reset if the group 'cgg' is inactive, but the current state is Stable.") {
		t.Fatalf("reset of an active group: %v\n%s", err, stderr)
	}
	if r, err := adm.CommitOffsets(ctx, "cgg", offsetsOf("cg", map[int32]int64{0: 0})); err == nil && r.Error() == nil {
		t.Fatal("kadm committed to an active group from outside it")
	}
	// Nor deleted.
	out, _, err = runErr(t, "", "consumer-groups", "--delete", "--group", "cgg", b)
	if err == nil || !strings.Contains(out, "* Group 'cgg' could not be deleted due to: NON_EMPTY_GROUP") {
		t.Fatalf("delete of an active group: %v\n%s", err, out)
	}
	if dr, err := adm.DeleteGroup(ctx, "cgg"); !errors.Is(err, kerr.NonEmptyGroup) || !errors.Is(dr.Err, kerr.NonEmptyGroup) {
		t.Fatalf("kadm DeleteGroup of an active group: %+v %v", dr, err)
	}

	// The member leaves: the group is Empty, its offsets stay.
	if err := member.Close(ctx); err != nil {
		t.Fatal(err)
	}
	memberOpen = false
	out, stderr, err = runErr(t, "", "consumer-groups", "--describe", "--group", "cgg", b)
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	mustContain(t, stderr, "Consumer group 'cgg' has no active members.", "high watermark (read_uncommitted, --isolation-level default: the group has no active members)")
	if got := strings.Join(cgRow(t, cgTable(t, out, offsetHeaders...), "cgg", "cg", "0"), " "); got != "cgg cg 0 4 13 9 - - -" {
		t.Fatalf("empty group row %q", got)
	}
	_, stderr, _ = runErr(t, "", "consumer-groups", "--describe", "--group", "cgg", "--members", b)
	mustContain(t, stderr, "Consumer group 'cgg' has no active members.")

	// Reset: a dry run shows the new offsets and commits nothing; --execute
	// commits them.
	committed := func() map[client.TopicPartition]int64 {
		t.Helper()
		a, err := client.NewAdmin(client.Bootstrap(n.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		m, err := a.GroupOffsets(ctx, "cgg", nil)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	p0, p1 := client.TopicPartition{Topic: "cg", Partition: 0}, client.TopicPartition{Topic: "cg", Partition: 1}
	rows = cgTable(t, run(t, "", "consumer-groups", "--reset-offsets", "--group", "cgg", "--topic", "cg", "--to-earliest", "--dry-run", b), resetHeaders...)
	if len(rows) != 2 || strings.Join(rows[0], " ") != "cgg cg 0 0" || strings.Join(rows[1], " ") != "cgg cg 1 0" {
		t.Fatalf("dry run rows %q", rows)
	}
	if c := committed(); c[p0] != 4 || c[p1] != 6 {
		t.Fatalf("a dry run changed the offsets: %v", c)
	}
	run(t, "", "consumer-groups", "--reset-offsets", "--group", "cgg", "--topic", "cg", "--to-earliest", "--execute", b)
	if c := committed(); c[p0] != 0 || c[p1] != 0 {
		t.Fatalf("after --execute: %v", c)
	}
	fetched, err := adm.FetchOffsets(ctx, "cgg")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := fetched.Lookup("cg", 0); o.At != 0 {
		t.Fatalf("kadm FetchOffsets after the reset: %+v", o)
	}
	rows = cgTable(t, run(t, "", "consumer-groups", "--reset-offsets", "--group", "cgg", "--topic", "cg:0", "--shift-by", "3", "--execute", b), resetHeaders...)
	if len(rows) != 1 || strings.Join(rows[0], " ") != "cgg cg 0 3" || committed()[p0] != 3 {
		t.Fatalf("--shift-by 3: %q %v", rows, committed())
	}
	// Offsets clamp to [log start, log end]; the end is the LSO with
	// --isolation-level read_committed.
	out, stderr, _ = runErr(t, "", "consumer-groups", "--reset-offsets", "--group", "cgg", "--topic", "cg:0", "--to-offset", "100", "--dry-run", b)
	if rows = cgTable(t, out, resetHeaders...); strings.Join(rows[0], " ") != "cgg cg 0 13" || !strings.Contains(stderr, "Value will be set to 13") {
		t.Fatalf("--to-offset 100: %q %s", rows, stderr)
	}
	rows = cgTable(t, run(t, "", "consumer-groups", "--reset-offsets", "--group", "cgg", "--topic", "cg:0", "--to-latest", "--isolation-level", "read_committed", "--dry-run", b), resetHeaders...)
	if strings.Join(rows[0], " ") != "cgg cg 0 10" {
		t.Fatalf("--to-latest read_committed: %q", rows)
	}
	rows = cgTable(t, run(t, "", "consumer-groups", "--reset-offsets", "--group", "cgg", "--topic", "cg:1", "--shift-by", "-5", "--dry-run", b), resetHeaders...)
	if strings.Join(rows[0], " ") != "cgg cg 1 0" {
		t.Fatalf("--shift-by -5 below the log start: %q", rows)
	}
	// --shift-by saturates instead of wrapping, then clamps: the largest
	// shift is the log end, the smallest the log start.
	out, stderr, _ = runErr(t, "", "consumer-groups", "--reset-offsets", "--group", "cgg", "--topic", "cg:0", "--shift-by", strconv.FormatInt(math.MaxInt64, 10), "--dry-run", b)
	if rows = cgTable(t, out, resetHeaders...); len(rows) != 1 || strings.Join(rows[0], " ") != "cgg cg 0 13" || !strings.Contains(stderr, "is higher than latest offset") {
		t.Fatalf("--shift-by MaxInt64: %q %s", rows, stderr)
	}
	out, stderr, _ = runErr(t, "", "consumer-groups", "--reset-offsets", "--group", "cgg", "--topic", "cg:0", "--shift-by", strconv.FormatInt(math.MinInt64, 10), "--dry-run", b)
	if rows = cgTable(t, out, resetHeaders...); len(rows) != 1 || strings.Join(rows[0], " ") != "cgg cg 0 0" || !strings.Contains(stderr, "is lower than earliest offset") {
		t.Fatalf("--shift-by MinInt64: %q %s", rows, stderr)
	}
	// --to-datetime: before every record, the log start; after all of
	// them, the log end.
	rows = cgTable(t, run(t, "", "consumer-groups", "--reset-offsets", "--group", "cgg", "--all-topics", "--to-datetime", "2000-01-01T00:00:00.000", "--dry-run", b), resetHeaders...)
	if len(rows) != 2 || strings.Join(rows[0], " ") != "cgg cg 0 0" || strings.Join(rows[1], " ") != "cgg cg 1 0" {
		t.Fatalf("--to-datetime in the past: %q", rows)
	}
	future := time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05.000Z")
	rows = cgTable(t, run(t, "", "consumer-groups", "--reset-offsets", "--group", "cgg", "--all-topics", "--to-datetime", future, "--dry-run", b), resetHeaders...)
	if strings.Join(rows[0], " ") != "cgg cg 0 13" || strings.Join(rows[1], " ") != "cgg cg 1 6" {
		t.Fatalf("--to-datetime in the future: %q", rows)
	}
	// kadm's reset (CommitOffsets from outside the group) is what the CLI
	// then reads.
	if r, err := adm.CommitOffsets(ctx, "cgg", offsetsOf("cg", map[int32]int64{0: 5, 1: 2})); err != nil || r.Error() != nil {
		t.Fatalf("kadm CommitOffsets: %v %v", err, r.Error())
	}
	rows = cgTable(t, run(t, "", "consumer-groups", "--describe", "--group", "cgg", b), offsetHeaders...)
	if got := strings.Join(cgRow(t, rows, "cgg", "cg", "0")[:6], " "); got != "cgg cg 0 5 13 8" {
		t.Fatalf("after kadm's commit: %q", got)
	}
	if got := strings.Join(cgRow(t, rows, "cgg", "cg", "1")[:6], " "); got != "cgg cg 1 2 6 4" {
		t.Fatalf("after kadm's commit: %q", got)
	}
	lags, err = adm.Lag(ctx, "cgg")
	if err != nil {
		t.Fatal(err)
	}
	if l, _ := lags["cgg"].Lag.Lookup("cg", 0); l.Lag != 8 || !l.IsEmpty() {
		t.Fatalf("kadm Lag of the empty group: %+v", l)
	}

	// --delete-offsets, then kadm's DeleteOffsets: each sees the other's.
	out = run(t, "", "consumer-groups", "--delete-offsets", "--group", "cgg", "--topic", "cg:1", b)
	if rows = cgTable(t, out, "TOPIC", "PARTITION", "STATUS"); len(rows) != 1 || strings.Join(rows[0], " ") != "cg 1 Successful" {
		t.Fatalf("--delete-offsets: %s", out)
	}
	if _, ok := committed()[p1]; ok {
		t.Fatal("cg-1's offset survived --delete-offsets")
	}
	fetched, err = adm.FetchOffsets(ctx, "cgg")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fetched.Lookup("cg", 1); ok {
		t.Fatalf("kadm still fetches cg-1 after --delete-offsets: %+v", fetched)
	}
	dor, err := adm.DeleteOffsets(ctx, "cgg", kadm.TopicsSet{"cg": {0: {}}})
	if err != nil || dor.Error() != nil {
		t.Fatalf("kadm DeleteOffsets: %v %v", err, dor.Error())
	}
	if c := committed(); len(c) != 0 {
		t.Fatalf("offsets left after both deletes: %v", c)
	}

	// --delete, and kadm's DeleteGroups; then the groups do not exist.
	if _, err := adm.CommitOffsets(ctx, "other", offsetsOf("cg", map[int32]int64{0: 1})); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 10*time.Second, "both groups listed", func() bool {
		return strings.Join(strings.Fields(run(t, "", "consumer-groups", "--list", b)), " ") == "cgg other"
	})
	mustContain(t, run(t, "", "consumer-groups", "--delete", "--group", "cgg", b), "Deletion of requested consumer groups ('cgg') was successful.")
	dg, err := adm.DeleteGroups(ctx, "other")
	if err != nil || dg.Error() != nil {
		t.Fatalf("kadm DeleteGroups: %v %v", err, dg.Error())
	}
	if out := run(t, "", "consumer-groups", "--list", b); strings.TrimSpace(out) != "" {
		t.Fatalf("--list after deleting both: %q", out)
	}
	for _, g := range []string{"cgg", "never"} {
		out, stderr, err = runErr(t, "", "consumer-groups", "--describe", "--group", g, b)
		if err != nil || !strings.Contains(stderr, "Error: Consumer group '"+g+"' does not exist.") || strings.TrimSpace(out) != "" {
			t.Fatalf("describe of group %s: %v %q %s", g, err, out, stderr)
		}
	}
	if dg, err := adm.DescribeGroups(ctx, "cgg"); err != nil || dg["cgg"].State != "Dead" {
		t.Fatalf("kadm DescribeGroups of the deleted group: %+v %v", dg, err)
	}
	if err := tp.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestConsumerGroupsFranzGoMembers: a group of franz-go consumers joined
// through the Kafka listener advertises no isolation level (Kafka's
// consumer protocol has none), so LAG falls back to --isolation-level and
// the tool says so; kadm and the CLI agree on its members.
func TestConsumerGroupsFranzGoMembers(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) { cfg.KafkaListen = "127.0.0.1:0" })
	b := "--bootstrap=" + n.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run(t, "", "topics", "create", "fz", "--partitions", "1", b)
	run(t, "a\nb\nc\n", "produce", "fz", b)
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.ConsumerGroup("fzg"), kgo.ConsumeTopics("fz"), kgo.ClientID("franz"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := 0
	for got < 3 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runErr(t, "", "consumer-groups", "--describe", "--group", "fzg", b)
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	mustContain(t, stderr, "high watermark (read_uncommitted, --isolation-level default: the members do not advertise theirs)")
	row := cgRow(t, cgTable(t, out, offsetHeaders...), "fzg", "fz", "0")
	if !regexp.MustCompile(`^fzg fz 0 3 3 0 \S+ \S+ franz$`).MatchString(strings.Join(row, " ")) {
		t.Fatalf("franz-go group row %q", row)
	}
	dg, err := kadm.NewClient(cl).DescribeGroups(ctx, "fzg")
	if err != nil || len(dg["fzg"].Members) != 1 || dg["fzg"].Members[0].MemberID != row[6] {
		t.Fatalf("kadm DescribeGroups: %+v %v (CLI member %s)", dg, err, row[6])
	}
}

// TestConsumerGroupsConsumerProtocol: a group of the consumer protocol
// (KIP-848) is listed and described by the CLI as any other group: its
// member, partition, committed offset and lag.
func TestConsumerGroupsConsumerProtocol(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) {
		cfg.KafkaListen = "127.0.0.1:0"
		cfg.GroupConfig.ConsumerProtocol = true
	})
	b := "--bootstrap=" + n.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run(t, "", "topics", "create", "kz", "--partitions", "1", b)
	run(t, "a\nb\nc\n", "produce", "kz", b)
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.ConsumerGroup("kzg"), kgo.ConsumeTopics("kz"), kgo.ClientID("franz848"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.ServerSideBalancer())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := 0
	for got < 3 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	mustContain(t, run(t, "", "consumer-groups", "--list", b), "kzg")
	out, stderr, err := runErr(t, "", "consumer-groups", "--describe", "--group", "kzg", b)
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	row := cgRow(t, cgTable(t, out, offsetHeaders...), "kzg", "kz", "0")
	if !regexp.MustCompile(`^kzg kz 0 3 3 0 \S+ \S+ franz848$`).MatchString(strings.Join(row, " ")) {
		t.Fatalf("consumer-protocol group row %q", row)
	}
}

// offsetsOf builds kadm offsets for one topic.
func offsetsOf(topic string, at map[int32]int64) kadm.Offsets {
	os := kadm.Offsets{}
	for p, o := range at {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	return os
}

// groupIsolation: the level every member advertises, unless
// --isolation-level is given; members that disagree or advertise nothing
// (and an empty group) get the flag's default.
func TestConsumerGroupsIsolationChoice(t *testing.T) {
	rc := client.GroupMemberDescription{Isolation: client.ReadCommitted, IsolationKnown: true}
	ru := client.GroupMemberDescription{Isolation: client.ReadUncommitted, IsolationKnown: true}
	kafka := client.GroupMemberDescription{}
	for _, c := range []struct {
		args    []string
		members []client.GroupMemberDescription
		want    client.IsolationLevel
		why     string
	}{
		{nil, []client.GroupMemberDescription{rc, rc}, client.ReadCommitted, "advertised by the group's members"},
		{nil, []client.GroupMemberDescription{ru}, client.ReadUncommitted, "advertised by the group's members"},
		{nil, []client.GroupMemberDescription{rc, ru}, client.ReadUncommitted, "the members advertise different levels"},
		{nil, []client.GroupMemberDescription{rc, kafka}, client.ReadUncommitted, "the members do not advertise theirs"},
		{nil, nil, client.ReadUncommitted, "the group has no active members"},
		{[]string{"--isolation-level", "read_uncommitted"}, []client.GroupMemberDescription{rc}, client.ReadUncommitted, "--isolation-level"},
		{[]string{"--isolation-level", "read_committed"}, []client.GroupMemberDescription{ru}, client.ReadCommitted, "--isolation-level"},
		{[]string{"--isolation-level", "read_committed"}, nil, client.ReadCommitted, "--isolation-level"},
	} {
		cmd := consumerGroupsCmd()
		if err := cmd.ParseFlags(c.args); err != nil {
			t.Fatal(err)
		}
		isolation, _ := cmd.Flags().GetString("isolation-level")
		o := &cgOpts{cmd: cmd, isolation: isolation}
		got, why := o.groupIsolation(&client.GroupDescription{Members: c.members})
		if got != c.want || !strings.Contains(why, c.why) {
			t.Errorf("%v with %d members: %v (%s), want %v (%s)", c.args, len(c.members), got, why, c.want, c.why)
		}
	}
}

// TestShiftOffset: --shift-by's addition saturates at the int64 bounds
// instead of wrapping around.
func TestShiftOffset(t *testing.T) {
	for _, c := range []struct{ c, by, want int64 }{
		{5, 3, 8},
		{5, -7, -2},
		{5, math.MaxInt64, math.MaxInt64},
		{0, math.MaxInt64, math.MaxInt64},
		{5, math.MinInt64, 5 + math.MinInt64},
		{-5, math.MinInt64, math.MinInt64},
		{math.MaxInt64, 1, math.MaxInt64},
	} {
		if got := shiftOffset(c.c, c.by); got != c.want {
			t.Errorf("shiftOffset(%d, %d) = %d, want %d", c.c, c.by, got, c.want)
		}
	}
}
