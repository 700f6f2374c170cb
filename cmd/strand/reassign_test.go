package main

// Real node on real time: the strand CLI under test dials its --bootstrap address
// over real TCP; it has no in-memory dialer that could reach MemNet.

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/testkit/testcluster"
)

// parsePlan reads one line of reassignment JSON and checks its shape:
// version 1, log_dirs "any" once per replica.
func parsePlan(t *testing.T, line string) map[string][]int32 {
	t.Helper()
	var plan struct {
		Version    int `json:"version"`
		Partitions []struct {
			Topic     string   `json:"topic"`
			Partition int32    `json:"partition"`
			Replicas  []int32  `json:"replicas"`
			LogDirs   []string `json:"log_dirs"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(line), &plan); err != nil || plan.Version != 1 {
		t.Fatalf("not reassignment JSON (version 1): %q: %v", line, err)
	}
	out := map[string][]int32{}
	for _, p := range plan.Partitions {
		if len(p.LogDirs) != len(p.Replicas) {
			t.Fatalf("log_dirs %v for replicas %v", p.LogDirs, p.Replicas)
		}
		for _, d := range p.LogDirs {
			if d != "any" {
				t.Fatalf("log_dirs %v", p.LogDirs)
			}
		}
		out[fmt.Sprintf("%s-%d", p.Topic, p.Partition)] = p.Replicas
	}
	return out
}

func lines(out string) []string { return strings.Split(strings.TrimRight(out, "\n"), "\n") }

// TestReassignPartitionsCommand: `strand reassign-partitions` on a
// three-node cluster with Kafka's output: --generate prints the current
// and proposed assignments, --execute the rollback JSON and the started
// partitions, --verify each partition's state, --list the moves in
// progress, --cancel the cancelled ones.
func TestReassignPartitionsCommand(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	b := "--bootstrap=" + strings.Join(c.Bootstrap(), ",")
	c.CreateTopic("mv", 2, 2, nil)

	// --generate
	topics := writeFile(t, "topics.json", `{"topics":[{"topic":"mv"}],"version":1}`)
	out := lines(run(t, "", "reassign-partitions", "--generate", "--topics-to-move-json-file", topics, "--broker-list", "1,2,3", b))
	if len(out) != 5 || out[0] != "Current partition replica assignment" || out[2] != "" || out[3] != "Proposed partition reassignment configuration" {
		t.Fatalf("--generate output:\n%s", strings.Join(out, "\n"))
	}
	cur := parsePlan(t, out[1])
	for p := int32(0); p < 2; p++ {
		if got, want := fmt.Sprint(cur[fmt.Sprintf("mv-%d", p)]), fmt.Sprint(c.Partition("mv", p).Replicas); got != want {
			t.Fatalf("current assignment of mv-%d: %s, want %s", p, got, want)
		}
	}
	proposed := parsePlan(t, out[4])
	if len(proposed) != 2 || len(proposed["mv-0"]) != 2 || len(proposed["mv-1"]) != 2 {
		t.Fatalf("proposal %v", proposed)
	}

	// --execute mv-0 onto the broker it lacks, in place of its leader.
	p0 := c.Partition("mv", 0)
	var spare0 int32
	for id := int32(1); id <= 3; id++ {
		if !p0.IsReplica(id) {
			spare0 = id
		}
	}
	target0 := []int32{spare0, p0.Replicas[0]}
	if p0.Replicas[0] == p0.Leader {
		target0 = []int32{spare0, p0.Replicas[1]}
	}
	plan0 := writeFile(t, "plan0.json", fmt.Sprintf(`{"version":1,"partitions":[{"topic":"mv","partition":0,"replicas":[%d,%d],"log_dirs":["any","any"]}]}`, target0[0], target0[1]))
	// With --throttle: the rates on every broker of the move and the
	// throttled-replica lists on the topic, until --verify clears them.
	out = lines(run(t, "", "reassign-partitions", "--execute", "--reassignment-json-file", plan0, "--throttle", "10485760", b))
	if len(out) != 8 || out[0] != "Current partition replica assignment" || out[1] != "" || out[3] != "" ||
		out[4] != "Save this to use as the --reassignment-json-file option during rollback" ||
		out[5] != "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is removed." ||
		out[6] != "The inter-broker throttle limit was set to 10485760 B/s" ||
		out[7] != "Successfully started partition reassignment for mv-0" {
		t.Fatalf("--execute --throttle output:\n%s", strings.Join(out, "\n"))
	}
	adm, err := client.NewAdmin(c.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	throttleOf := func(id int32) (leader, follower string) {
		t.Helper()
		entries, err := adm.DescribeBrokerConfigs(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			switch {
			case e.Name == cfgLeaderThrottleRate && e.Source == "dynamic_broker":
				leader = e.Value
			case e.Name == cfgFollowerThrottleRate && e.Source == "dynamic_broker":
				follower = e.Value
			}
		}
		return leader, follower
	}
	topicThrottles := func() (leader, follower string) {
		t.Helper()
		entries, err := adm.DescribeTopicConfigs(ctx, "mv")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			switch {
			case e.Name == cfgLeaderThrottledReplicas && e.Source == "topic":
				leader = e.Value
			case e.Name == cfgFollowerThrottledReplicas && e.Source == "topic":
				follower = e.Value
			}
		}
		return leader, follower
	}
	for _, id := range append(append([]int32(nil), p0.Replicas...), spare0) {
		if l, f := throttleOf(id); l != "10485760" || f != "10485760" {
			t.Fatalf("broker %d throttle rates after --execute --throttle: leader %q follower %q", id, l, f)
		}
	}
	wantLeader := fmt.Sprintf("0:%d,0:%d", min(p0.Replicas[0], p0.Replicas[1]), max(p0.Replicas[0], p0.Replicas[1]))
	if l, f := topicThrottles(); l != wantLeader || f != fmt.Sprintf("0:%d", spare0) {
		t.Fatalf("mv's throttled replicas after --execute --throttle: leader %q (want %q) follower %q (want 0:%d)", l, wantLeader, f, spare0)
	}
	if rollback := parsePlan(t, out[2]); fmt.Sprint(rollback["mv-0"]) != fmt.Sprint(p0.Replicas) || len(rollback) != 1 {
		t.Fatalf("rollback JSON %v, want mv-0 on %v", rollback, p0.Replicas)
	}
	var verify string
	c.Eventually(60*time.Second, "--verify reports mv-0 completed", func() bool {
		verify = run(t, "", "reassign-partitions", "--verify", "--reassignment-json-file", plan0, b)
		if !regexp.MustCompile(`^Status of partition reassignment:\nReassignment of partition mv-0 is (completed|still in progress)\.\n(Clearing broker-level throttles on brokers 1,2,3\nClearing topic-level throttles on topic mv\n)?$`).MatchString(verify) {
			t.Fatalf("--verify output:\n%s", verify)
		}
		return strings.Contains(verify, "is completed.")
	})
	if !strings.Contains(verify, "Clearing broker-level throttles") || !strings.Contains(verify, "Clearing topic-level throttles on topic mv") {
		t.Fatalf("--verify after a throttled move does not clear the throttles:\n%s", verify)
	}
	for _, id := range []int32{1, 2, 3} {
		if l, f := throttleOf(id); l != "" || f != "" {
			t.Fatalf("broker %d throttle rates after --verify: leader %q follower %q", id, l, f)
		}
	}
	// (A broker answers a describe from its own metadata, which may trail
	// the alter by a moment.)
	c.Eventually(10*time.Second, "mv's throttled replicas cleared after --verify", func() bool {
		l, f := topicThrottles()
		return l == "" && f == ""
	})
	if got := c.Partition("mv", 0).Replicas; fmt.Sprint(got) != fmt.Sprint(target0) {
		t.Fatalf("mv-0 replicas %v after completion, want %v", got, target0)
	}
	mustContain(t, run(t, "", "reassign-partitions", "--list", b), "No partition reassignments found.")

	// mv-1 onto a stopped broker: it stays in progress until cancelled.
	p1 := c.Partition("mv", 1)
	var spare1 int32
	for id := int32(1); id <= 3; id++ {
		if !p1.IsReplica(id) {
			spare1 = id
		}
	}
	c.Stop(spare1)
	var live []string
	for _, m := range c.Running() {
		live = append(live, m.Cfg.Listen)
	}
	b = "--bootstrap=" + strings.Join(live, ",")
	plan1 := writeFile(t, "plan1.json", fmt.Sprintf(`{"version":1,"partitions":[{"topic":"mv","partition":1,"replicas":[%d,%d]}]}`, p1.Replicas[0], spare1))
	out = lines(run(t, "", "reassign-partitions", "--execute", "--reassignment-json-file", plan1, b))
	if out[len(out)-1] != "Successfully started partition reassignment for mv-1" {
		t.Fatalf("--execute output:\n%s", strings.Join(out, "\n"))
	}
	mustContain(t, run(t, "", "reassign-partitions", "--verify", "--reassignment-json-file", plan1, b),
		"Status of partition reassignment:\nReassignment of partition mv-1 is still in progress.\n")
	mustContain(t, run(t, "", "reassign-partitions", "--list", b),
		fmt.Sprintf("Current partition reassignments:\nmv-1: replicas: %d,%d,%d. adding: %d. removing: %d.\n", p1.Replicas[0], spare1, p1.Replicas[1], spare1, p1.Replicas[1]))
	// Another --execute is refused while one is in progress.
	if _, stderr, err := runErr(t, "", "reassign-partitions", "--execute", "--reassignment-json-file", plan0, b); err == nil || !strings.Contains(stderr, "Cannot execute because there is an existing partition assignment.") {
		t.Fatalf("--execute with a reassignment in progress: %v\n%s", err, stderr)
	}
	if got := run(t, "", "reassign-partitions", "--cancel", "--reassignment-json-file", plan1, b); got != "Successfully cancelled partition reassignment for: mv-1\n" {
		t.Fatalf("--cancel output:\n%s", got)
	}
	if got := run(t, "", "reassign-partitions", "--cancel", "--reassignment-json-file", plan1, b); got != "None of the specified partition reassignments are active.\n" {
		t.Fatalf("second --cancel output:\n%s", got)
	}
	verify = run(t, "", "reassign-partitions", "--verify", "--reassignment-json-file", plan1, b)
	if !regexp.MustCompile(`^Status of partition reassignment:\nThere is no active reassignment of partition mv-1, but replica set is \d,\d rather than \d,\d\.\n$`).MatchString(verify) {
		t.Fatalf("--verify after the cancel:\n%s", verify)
	}

	// cluster remove-broker --wait: every replica leaves the broker.
	c.Start(spare1)
	c.WaitReady(30 * time.Second)
	b = "--bootstrap=" + strings.Join(c.Bootstrap(), ",")
	victim := c.Partition("mv", 0).Replicas[0]
	out = lines(run(t, "", "cluster", "remove-broker", fmt.Sprint(victim), "--wait", b))
	if len(out) != 4 || out[0] != "Proposed partition reassignment configuration" ||
		!strings.HasPrefix(out[2], "Successfully started partition reassignment") || out[3] != fmt.Sprintf("Every replica of broker %d has moved.", victim) {
		t.Fatalf("cluster remove-broker output:\n%s", strings.Join(out, "\n"))
	}
	for tp, reps := range parsePlan(t, out[1]) {
		for _, r := range reps {
			if r == victim {
				t.Fatalf("plan keeps %s on broker %d: %v", tp, victim, reps)
			}
		}
	}
	for p := int32(0); p < 2; p++ {
		if part := c.Partition("mv", p); part.IsReplica(victim) || part.Reassigning() {
			t.Fatalf("mv-%d after remove-broker %d: replicas %v adding %v", p, victim, part.Replicas, part.AddingReplicas)
		}
	}
}

// TestThrottleConfigs: --throttle's configs, as Kafka computes them: the
// leader list names each moving partition's current replicas, the follower
// list its new ones, and every broker on either side gets the rates.
// (On this branch a broker resource "<id>" and the topic throttle configs
// are refused, so the writes themselves are not exercised end to end.)
func TestThrottleConfigs(t *testing.T) {
	topics, brokers := throttleConfigs(map[client.TopicPartition]partitionMove{
		{Topic: "foo", Partition: 0}:  {sources: []int32{1, 2, 3}, destinations: []int32{4}},
		{Topic: "foo", Partition: 10}: {sources: []int32{2, 3}, destinations: []int32{5, 1}},
		{Topic: "bar", Partition: 1}:  {sources: []int32{3}},
	})
	want := map[string]map[string]string{
		"foo": {cfgLeaderThrottledReplicas: "0:1,0:2,0:3,10:2,10:3", cfgFollowerThrottledReplicas: "0:4,10:1,10:5"},
		"bar": {cfgLeaderThrottledReplicas: "1:3", cfgFollowerThrottledReplicas: ""},
	}
	if fmt.Sprint(topics) != fmt.Sprint(want) {
		t.Fatalf("topic throttles %v, want %v", topics, want)
	}
	if fmt.Sprint(brokers) != "[1 2 3 4 5]" {
		t.Fatalf("throttled brokers %v, want [1 2 3 4 5]", brokers)
	}
}
