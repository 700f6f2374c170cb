package main

// Real node on real time: the strand CLI under test dials its --bootstrap address
// over real TCP; it has no in-memory dialer that could reach MemNet.

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/testutil"
)

// TestLeaderElectionCommand: `strand leader-election` prints
// kafka-leader-election's lines: "Valid replica already elected" while the
// preferred replica leads, "Error completing leader election" (and exit
// 1) while it is down or the partition does not exist, and "Successfully
// completed leader election (PREFERRED)" once it is back in the ISR, after
// which it leads again.
func TestLeaderElectionCommand(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Mutate: func(_ int32, cfg *node.Config) { cfg.ControllerConfig.AutoLeaderRebalance = false }})
	b := "--bootstrap=" + strings.Join(c.Bootstrap(), ",")
	adm, err := client.NewAdmin(c.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := adm.CreateTopic(ctx, client.TopicSpec{Name: "le", Partitions: 3, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	c.Eventually(10*time.Second, "le's preferred leaders with full ISRs", func() bool {
		for p := int32(0); p < 3; p++ {
			if pp := c.Partition("le", p); pp == nil || pp.Leader != pp.Replicas[0] || len(pp.ISR) != 3 {
				return false
			}
		}
		return true
	})
	ctl := c.ActiveController()
	part, pref := int32(-1), int32(-1)
	for p := int32(0); p < 3; p++ {
		if r := c.Partition("le", p).Replicas[0]; r != ctl {
			part, pref = p, r
			break
		}
	}
	tp := fmt.Sprintf("le-%d", part)

	if out := run(t, "", "leader-election", "--election-type", "preferred", "--all-topic-partitions", b); out != "" {
		t.Fatalf("electing all balanced partitions printed %q, want nothing", out)
	}
	if out := run(t, "", "leader-election", "--election-type", "preferred", "--topic", "le", "--partition", fmt.Sprint(part), b); out != "Valid replica already elected for partitions "+tp+"\n" {
		t.Fatalf("preferred election of a balanced partition: %q", out)
	}
	if out := run(t, "", "leader-election", "--election-type", "UNCLEAN", "--topic", "le", "--partition", fmt.Sprint(part), b); out != "Valid replica already elected for partitions "+tp+"\n" {
		t.Fatalf("unclean election of a partition with a leader: %q", out)
	}
	js := writeFile(t, "elect.json", fmt.Sprintf(`{"partitions":[{"topic":"le","partition":9},{"topic":"le","partition":%d}]}`, part))
	out, _, err := runErr(t, "", "leader-election", "--election-type", "preferred", "--path-to-json-file", js, b)
	if err == nil || !regexp.MustCompile(`^Valid replica already elected for partitions `+tp+`\n`+
		`Error completing leader election \(PREFERRED\) for partition: le-9: org\.apache\.kafka\.common\.errors\.UnknownTopicOrPartitionException: .+\n$`).MatchString(out) {
		t.Fatalf("election with an unknown partition (err %v):\n%s", err, out)
	}
	if _, stderr, err := runErr(t, "", "leader-election", "--election-type", "preferred", b); err == nil || !strings.Contains(stderr, "exactly one of") {
		t.Fatalf("no partitions chosen: %v %s", err, stderr)
	}

	c.Kill(pref)
	c.Eventually(20*time.Second, "leadership to move off the killed node", func() bool {
		p := c.Partition("le", part)
		return p.Leader >= 0 && p.Leader != pref
	})
	out, stderr, err := runErr(t, "", "leader-election", "--election-type", "preferred", "--topic", "le", "--partition", fmt.Sprint(part), b)
	if err == nil || !regexp.MustCompile(`^Error completing leader election \(PREFERRED\) for partition: `+tp+`: org\.apache\.kafka\.common\.errors\.PreferredLeaderNotAvailableException: .+\n$`).MatchString(out) ||
		!strings.Contains(stderr, "1 replica(s) could not be elected") {
		t.Fatalf("preferred election with the preferred replica down (err %v):\n%s%s", err, out, stderr)
	}
	c.Start(pref)
	c.Eventually(30*time.Second, "the restarted node back in the ISR", func() bool { return c.Partition("le", part).InISR(pref) })
	if out := run(t, "", "leader-election", "--election-type", "preferred", "--all-topic-partitions", b); out != "Successfully completed leader election (PREFERRED) for partitions "+tp+"\n" {
		t.Fatalf("electing all after the restart: %q", out)
	}
	c.Eventually(10*time.Second, "the preferred replica to lead again", func() bool { return c.Partition("le", part).Leader == pref })
}

// TestOffsetToolsCommands: `strand get-offsets` prints topic:partition:offset
// lines (latest, earliest, max timestamp; --topic a regex, --partitions a
// list), `strand topics alter --partitions` raises a partition count
// (INVALID_PARTITIONS otherwise), and `strand delete-records` prints
// kafka-delete-records' lines and moves the earliest offset.
func TestOffsetToolsCommands(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	b := "--bootstrap=" + n.Addr()
	run(t, "", "topics", "create", "go1", "--partitions", "2", b)
	run(t, "", "topics", "create", "go2", "--partitions", "1", b)
	run(t, "a\nb\nc\nd\ne\n", "produce", "go1", "--partition", "0", b)
	run(t, "x\n", "produce", "go2", b)

	if out := run(t, "", "get-offsets", "--topic", "go1", b); out != "go1:0:5\ngo1:1:0\n" {
		t.Fatalf("get-offsets latest:\n%s", out)
	}
	if out := run(t, "", "get-offsets", "--topic", "go.*", "--time", "-2", b); out != "go1:0:0\ngo1:1:0\ngo2:0:0\n" {
		t.Fatalf("get-offsets earliest of go.*:\n%s", out)
	}
	if out, stderr, err := runErr(t, "", "get-offsets", "--topic", "go", b); err == nil || out != "" || !strings.Contains(stderr, "could not match any topic-partitions") {
		t.Fatalf("--topic go must match no topic (the regex matches whole names): %v\n%s%s", err, out, stderr)
	}
	if out := run(t, "", "get-offsets", "--topic", "go1", "--partitions", "0", "--time", "-3", b); !regexp.MustCompile(`^go1:0:[0-4]\n$`).MatchString(out) {
		t.Fatalf("get-offsets max-timestamp:\n%s", out)
	}
	if out := run(t, "", "get-offsets", "--topic", "go1", "--partitions", "1", "--time", "-3", b); out != "" {
		t.Fatalf("get-offsets max-timestamp of an empty partition: %q, want no line (as Kafka drops UNKNOWN_OFFSET)", out)
	}
	if out := run(t, "", "get-offsets", "--topic", "go2,go1", "--partitions", "0", "--time", "latest", b); out != "go1:0:5\ngo2:0:1\n" {
		t.Fatalf("get-offsets with a comma list of topics: %q", out)
	}
	if _, stderr, err := runErr(t, "", "get-offsets", "--time", "soon", b); err == nil || !strings.Contains(stderr, "Malformed time argument soon.") {
		t.Fatalf("get-offsets --time soon: %v %s", err, stderr)
	}
	if out := run(t, "", "get-offsets", "--exclude-internal-topics", b); regexp.MustCompile(`(?m)^__`).MatchString(out) || !strings.Contains(out, "go2:0:1\n") {
		t.Fatalf("get-offsets --exclude-internal-topics:\n%s", out)
	}

	if out := run(t, "", "topics", "alter", "--topic", "go1", "--partitions", "3", b); out != "" {
		t.Fatalf("topics alter printed %q", out)
	}
	if out := run(t, "", "get-offsets", "--topic", "go1", b); out != "go1:0:5\ngo1:1:0\ngo1:2:0\n" {
		t.Fatalf("get-offsets after alter:\n%s", out)
	}
	if _, stderr, err := runErr(t, "", "topics", "alter", "--topic", "go1", "--partitions", "2", b); err == nil || !strings.Contains(stderr, "InvalidPartitionsException") {
		t.Fatalf("topics alter to fewer partitions: %v %s", err, stderr)
	}

	js := writeFile(t, "offsets.json", `{"partitions":[{"topic":"go1","partition":0,"offset":3}],"version":1}`)
	if out := run(t, "", "delete-records", "--offset-json-file", js, b); out != "Executing records delete operation\nRecords delete operation completed:\npartition: go1-0\tlow_watermark: 3\n" {
		t.Fatalf("delete-records:\n%q", out)
	}
	if out := run(t, "", "get-offsets", "--topic", "go1", "--partitions", "0", "--time", "earliest", b); out != "go1:0:3\n" {
		t.Fatalf("earliest after delete-records: %q", out)
	}
	js = writeFile(t, "bad.json", `{"partitions":[{"topic":"go1","partition":0,"offset":99}],"version":1}`)
	out, _, err := runErr(t, "", "delete-records", "--offset-json-file", js, b)
	if err == nil || !regexp.MustCompile(`^Executing records delete operation\nRecords delete operation completed:\npartition: go1-0\terror: org\.apache\.kafka\.common\.errors\.OffsetOutOfRangeException: .+\n$`).MatchString(out) {
		t.Fatalf("delete-records past the high watermark (err %v):\n%s", err, out)
	}
	js = writeFile(t, "dup.json", `{"partitions":[{"topic":"go1","partition":0,"offset":1},{"topic":"go1","partition":0,"offset":2}],"version":1}`)
	if _, stderr, err := runErr(t, "", "delete-records", "--offset-json-file", js, b); err == nil || !strings.Contains(stderr, "duplicate topic partitions: go1-0") {
		t.Fatalf("delete-records with a duplicate: %v %s", err, stderr)
	}
}

// leader.imbalance.per.broker.percentage has Kafka's name, default (10)
// and range (0-100), and reaches the controller's config.
func TestLeaderImbalancePercentageSetting(t *testing.T) {
	lg := slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))
	cfg := node.DefaultConfig(1, t.TempDir())
	if got := cfg.ControllerConfig.LeaderImbalancePercentage; got != 10 {
		t.Fatalf("default %d, want Kafka's 10", got)
	}
	if err := applyConfigFile(&cfg, configFile(t, "leader.imbalance.per.broker.percentage: 25\n"), lg); err != nil {
		t.Fatal(err)
	}
	if got := cfg.ControllerConfig.LeaderImbalancePercentage; got != 25 {
		t.Fatalf("leader.imbalance.per.broker.percentage: 25 gave %d", got)
	}
	for _, v := range []string{"-1", "101", "ten"} {
		c := node.DefaultConfig(1, t.TempDir())
		if err := applyConfigFile(&c, configFile(t, "leader.imbalance.per.broker.percentage: "+v+"\n"), lg); err == nil {
			t.Errorf("leader.imbalance.per.broker.percentage: %s accepted", v)
		}
	}
}
