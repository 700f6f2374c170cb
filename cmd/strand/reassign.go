package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/controller"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// kafka-reassign-partitions.sh: --generate, --execute, --verify, --cancel
// and --list, with Kafka's JSON files and output.

func init() { extraCommands = append(extraCommands, reassignCmd) }

// The throttle configs (Kafka's names).
const (
	cfgLeaderThrottleRate        = "leader.replication.throttled.rate"
	cfgFollowerThrottleRate      = "follower.replication.throttled.rate"
	cfgLeaderThrottledReplicas   = "leader.replication.throttled.replicas"
	cfgFollowerThrottledReplicas = "follower.replication.throttled.replicas"
)

const (
	msgCannotExecuteExisting = "Cannot execute because there is an existing partition assignment.  Use --additional to override this and " +
		"create a new partition assignment in addition to the existing one. The --additional flag can also be used to change the throttle by resubmitting the current reassignment."
	msgMustVerify = "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is removed."
)

// reassignmentJSON is the --reassignment-json-file format (and what
// --generate prints).
type reassignmentJSON struct {
	Version    int                     `json:"version"`
	Partitions []reassignmentPartition `json:"partitions"`
}

type reassignmentPartition struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Replicas  []int32  `json:"replicas"`
	LogDirs   []string `json:"log_dirs,omitempty"`
}

// topicsToMoveJSON is the --topics-to-move-json-file format.
type topicsToMoveJSON struct {
	Version int `json:"version"`
	Topics  []struct {
		Topic string `json:"topic"`
	} `json:"topics"`
}

func reassignCmd() *cobra.Command {
	var generate, execute, verify, cancel, list, additional bool
	var topicsFile, planFile, brokerList string
	var throttle int64
	cmd := &cobra.Command{
		Use:   "reassign-partitions",
		Short: "Move partition replicas between brokers (kafka-reassign-partitions): --generate a plan, --execute it, --verify or --cancel it, --list the moves in progress",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			n := 0
			for _, b := range []bool{generate, execute, verify, cancel, list} {
				if b {
					n++
				}
			}
			if n != 1 {
				return fmt.Errorf("give exactly one of --generate, --execute, --verify, --cancel, --list")
			}
			if (execute || verify || cancel) && planFile == "" {
				return fmt.Errorf("--reassignment-json-file is required")
			}
			return withAdmin(cmd, 2*time.Minute, func(ctx context.Context, adm *client.Admin) error {
				switch {
				case generate:
					if topicsFile == "" || brokerList == "" {
						return fmt.Errorf("--generate needs --topics-to-move-json-file and --broker-list")
					}
					return reassignGenerate(ctx, adm, topicsFile, brokerList)
				case execute:
					return reassignExecute(ctx, adm, planFile, throttle, additional)
				case verify:
					return reassignVerify(ctx, adm, planFile)
				case cancel:
					return reassignCancel(ctx, adm, planFile)
				default:
					return reassignList(ctx, adm)
				}
			})
		},
	}
	f := cmd.Flags()
	f.BoolVar(&generate, "generate", false, "print the current assignment of --topics-to-move-json-file's topics and a proposal over --broker-list")
	f.BoolVar(&execute, "execute", false, "start the reassignment in --reassignment-json-file")
	f.BoolVar(&verify, "verify", false, "report whether the reassignment in --reassignment-json-file is done; once none is in progress, remove the throttles")
	f.BoolVar(&cancel, "cancel", false, "cancel the reassignments of --reassignment-json-file still in progress (the partitions go back to their original replicas)")
	f.BoolVar(&list, "list", false, "list every reassignment in progress")
	f.BoolVar(&additional, "additional", false, "with --execute: start even though other reassignments are in progress")
	f.StringVar(&topicsFile, "topics-to-move-json-file", "", `{"topics":[{"topic":"foo"}],"version":1}`)
	f.StringVar(&planFile, "reassignment-json-file", "", `{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2,3]}]}`)
	f.StringVar(&brokerList, "broker-list", "", "with --generate: the brokers to place replicas on, e.g. 1,2,4")
	f.Int64Var(&throttle, "throttle", -1, "with --execute: the replication throttle in bytes/sec on the moving replicas' brokers")
	return cmd
}

func tpName(tp client.TopicPartition) string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

func sortTopicPartitions(tps []client.TopicPartition) {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
}

func joinTopicPartitions(tps []client.TopicPartition) string {
	s := make([]string, len(tps))
	for i, tp := range tps {
		s[i] = tpName(tp)
	}
	return strings.Join(s, ",")
}

func reassignPlural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// formatReassignment is Kafka's reassignment JSON of an assignment, by
// topic and partition.
func formatReassignment(assign map[client.TopicPartition][]int32) string {
	tps := make([]client.TopicPartition, 0, len(assign))
	for tp := range assign {
		tps = append(tps, tp)
	}
	sortTopicPartitions(tps)
	out := reassignmentJSON{Version: 1, Partitions: []reassignmentPartition{}}
	for _, tp := range tps {
		reps := assign[tp]
		dirs := make([]string, len(reps))
		for i := range dirs {
			dirs[i] = "any"
		}
		out.Partitions = append(out.Partitions, reassignmentPartition{Topic: tp.Topic, Partition: tp.Partition, Replicas: reps, LogDirs: dirs})
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// readPlan parses a reassignment JSON file.
func readReassignmentPlan(path string) (map[client.TopicPartition][]int32, []client.TopicPartition, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var plan reassignmentJSON
	if err := json.Unmarshal(b, &plan); err != nil {
		return nil, nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(plan.Partitions) == 0 {
		return nil, nil, fmt.Errorf("Partition reassignment list cannot be empty")
	}
	out := map[client.TopicPartition][]int32{}
	var order []client.TopicPartition
	for _, p := range plan.Partitions {
		tp := client.TopicPartition{Topic: p.Topic, Partition: p.Partition}
		if _, dup := out[tp]; dup {
			return nil, nil, fmt.Errorf("Partition reassignment contains duplicate topic partitions: %s", tpName(tp))
		}
		if len(p.Replicas) == 0 {
			return nil, nil, fmt.Errorf("Partition replica list cannot be empty")
		}
		seen := map[int32]bool{}
		for _, r := range p.Replicas {
			if seen[r] {
				return nil, nil, fmt.Errorf("Partition replica lists may not contain duplicate entries: %s contains %v", tpName(tp), p.Replicas)
			}
			seen[r] = true
		}
		for _, d := range p.LogDirs {
			if d != "any" {
				return nil, nil, fmt.Errorf("log_dirs other than \"any\" are not supported (%s: %q)", tpName(tp), d)
			}
		}
		out[tp] = p.Replicas
		order = append(order, tp)
	}
	sortTopicPartitions(order)
	return out, order, nil
}

// currentAssignment reads the replicas of the given topics' partitions (all
// of a topic's when parts is nil) from metadata.
func currentReplicaAssignment(ctx context.Context, adm *client.Admin, topics []string, parts []client.TopicPartition) (map[client.TopicPartition][]int32, *pb.MetadataResponse, error) {
	md, err := adm.Metadata(ctx, true, topics...)
	if err != nil {
		return nil, nil, err
	}
	out := map[client.TopicPartition][]int32{}
	for _, t := range md.Topics {
		if t.ErrorCode != pb.ErrorCode_NONE {
			return nil, nil, fmt.Errorf("Topic %s not found.", t.Name)
		}
		for _, p := range t.Partitions {
			out[client.TopicPartition{Topic: t.Name, Partition: p.Partition}] = p.Replicas
		}
	}
	if parts != nil {
		sel := map[client.TopicPartition][]int32{}
		var missing []string
		for _, tp := range parts {
			r, ok := out[tp]
			if !ok {
				missing = append(missing, tpName(tp))
				continue
			}
			sel[tp] = r
		}
		if len(missing) > 0 {
			return nil, nil, fmt.Errorf("Unable to find partition: %s", strings.Join(missing, ", "))
		}
		out = sel
	}
	return out, md, nil
}

func topicsOfPartitions(tps []client.TopicPartition) []string {
	seen := map[string]bool{}
	var out []string
	for _, tp := range tps {
		if !seen[tp.Topic] {
			seen[tp.Topic] = true
			out = append(out, tp.Topic)
		}
	}
	sort.Strings(out)
	return out
}

func reassignGenerate(ctx context.Context, adm *client.Admin, topicsFile, brokerList string) error {
	var brokers []int32
	seen := map[int32]bool{}
	for _, s := range strings.Split(brokerList, ",") {
		id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		if err != nil {
			return fmt.Errorf("--broker-list %q: %v", brokerList, err)
		}
		if seen[int32(id)] {
			return fmt.Errorf("Broker list contains duplicate entries: %d", id)
		}
		seen[int32(id)] = true
		brokers = append(brokers, int32(id))
	}
	b, err := os.ReadFile(topicsFile)
	if err != nil {
		return err
	}
	var tm topicsToMoveJSON
	if err := json.Unmarshal(b, &tm); err != nil {
		return fmt.Errorf("%s: %v", topicsFile, err)
	}
	var topics []string
	dup := map[string]bool{}
	for _, t := range tm.Topics {
		if dup[t.Topic] {
			return fmt.Errorf("List of topics to reassign contains duplicate entries: %s", t.Topic)
		}
		dup[t.Topic] = true
		topics = append(topics, t.Topic)
	}
	if len(topics) == 0 {
		return fmt.Errorf("%s names no topics", topicsFile)
	}
	cur, md, err := currentReplicaAssignment(ctx, adm, topics, nil)
	if err != nil {
		return err
	}
	// Only the registered brokers of the list take replicas, as Kafka.
	known := map[int32]bool{}
	for _, br := range md.Brokers {
		known[br.NodeId] = true
	}
	var usable []int32
	for _, id := range brokers {
		if known[id] {
			usable = append(usable, id)
		}
	}
	proposed := map[client.TopicPartition][]int32{}
	for _, t := range md.Topics {
		if len(t.Partitions) == 0 {
			continue
		}
		rf := len(t.Partitions[0].Replicas)
		if rf > len(usable) {
			return fmt.Errorf("Replication factor: %d larger than available brokers: %d.", rf, len(usable))
		}
		// A start that differs per topic spreads the leaders (Kafka picks it at random).
		h := fnv.New32a()
		h.Write([]byte(t.Name))
		start := int(h.Sum32() % uint32(len(usable)))
		for p, reps := range controller.Assign(usable, len(t.Partitions), rf, start, start) {
			proposed[client.TopicPartition{Topic: t.Name, Partition: int32(p)}] = reps
		}
	}
	fmt.Printf("Current partition replica assignment\n%s\n\n", formatReassignment(cur))
	fmt.Printf("Proposed partition reassignment configuration\n%s\n", formatReassignment(proposed))
	return nil
}

// partitionMove is one partition's sources (its replicas before any
// reassignment) and destinations (the replicas it gains).
type partitionMove struct {
	sources, destinations []int32
}

func reassignExecute(ctx context.Context, adm *client.Admin, planFile string, throttle int64, additional bool) error {
	plan, order, err := readReassignmentPlan(planFile)
	if err != nil {
		return err
	}
	ongoing, err := adm.ListPartitionReassignments(ctx)
	if err != nil {
		return err
	}
	if !additional && len(ongoing) > 0 {
		return errors.New(msgCannotExecuteExisting)
	}
	cur, md, err := currentReplicaAssignment(ctx, adm, topicsOfPartitions(order), order)
	if err != nil {
		return err
	}
	known := map[int32]bool{}
	for _, b := range md.Brokers {
		known[b.NodeId] = true
	}
	for _, tp := range order {
		for _, r := range plan[tp] {
			if !known[r] {
				return fmt.Errorf("Unknown broker id %d", r)
			}
		}
	}
	fmt.Printf("Current partition replica assignment\n\n%s\n\nSave this to use as the --reassignment-json-file option during rollback\n", formatReassignment(cur))
	if throttle >= 0 {
		fmt.Println(msgMustVerify)
		moves := map[client.TopicPartition]partitionMove{}
		for _, r := range ongoing {
			moves[r.TopicPartition] = partitionMove{sources: idsWithout(r.Replicas, r.Adding), destinations: r.Adding}
		}
		for _, tp := range order {
			src := cur[tp]
			if m, ok := moves[tp]; ok {
				src = m.sources
			}
			moves[tp] = partitionMove{sources: src, destinations: idsWithout(plan[tp], src)}
		}
		if err := setThrottles(ctx, adm, moves, throttle); err != nil {
			return err
		}
		fmt.Printf("The inter-broker throttle limit was set to %d B/s\n", throttle)
	}
	results, err := adm.AlterPartitionReassignments(ctx, plan)
	if err != nil {
		return err
	}
	if msg := partitionErrors(order, results); msg != "" {
		return fmt.Errorf("Error reassigning partition(s):\n%s", msg)
	}
	fmt.Printf("Successfully started partition reassignment%s for %s\n", reassignPlural(len(order), "", "s"), joinTopicPartitions(order))
	return nil
}

func partitionErrors(order []client.TopicPartition, results map[client.TopicPartition]error) string {
	var lines []string
	for _, tp := range order {
		if err := results[tp]; err != nil {
			lines = append(lines, fmt.Sprintf("%s: %v", tpName(tp), err))
		}
	}
	return strings.Join(lines, "\n")
}

// throttleConfigs are Kafka's throttle configs for the moves: per moving
// topic leader.replication.throttled.replicas (its sources, "p:b") and
// follower.replication.throttled.replicas (its destinations), each list in
// Kafka's order (sorted as strings), and the brokers involved, which get
// the leader and follower rates.
func throttleConfigs(moves map[client.TopicPartition]partitionMove) (map[string]map[string]string, []int32) {
	leader, follower := map[string]map[string]bool{}, map[string]map[string]bool{}
	brokers := map[int32]bool{}
	for tp, m := range moves {
		if leader[tp.Topic] == nil {
			leader[tp.Topic], follower[tp.Topic] = map[string]bool{}, map[string]bool{}
		}
		for _, b := range m.sources {
			leader[tp.Topic][fmt.Sprintf("%d:%d", tp.Partition, b)] = true
			brokers[b] = true
		}
		for _, b := range m.destinations {
			follower[tp.Topic][fmt.Sprintf("%d:%d", tp.Partition, b)] = true
			brokers[b] = true
		}
	}
	topics := map[string]map[string]string{}
	for t := range leader {
		topics[t] = map[string]string{cfgLeaderThrottledReplicas: throttleList(leader[t]), cfgFollowerThrottledReplicas: throttleList(follower[t])}
	}
	return topics, sortedBrokerIDs(brokers)
}

// setThrottles writes throttleConfigs: the topics' throttled replicas,
// then each broker's rates (IncrementalAlterConfigs on broker "<id>").
func setThrottles(ctx context.Context, adm *client.Admin, moves map[client.TopicPartition]partitionMove, rate int64) error {
	topicCfgs, brokers := throttleConfigs(moves)
	topics := make([]string, 0, len(topicCfgs))
	for t := range topicCfgs {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		if err := adm.AlterTopicConfigs(ctx, t, topicCfgs[t]); err != nil {
			return fmt.Errorf("setting the replication throttle of topic %s: %w", t, err)
		}
	}
	v := strconv.FormatInt(rate, 10)
	for _, id := range brokers {
		if err := adm.AlterBrokerConfigs(ctx, id, map[string]string{cfgLeaderThrottleRate: v, cfgFollowerThrottleRate: v}, nil); err != nil {
			return fmt.Errorf("setting the replication throttle of broker %d: %w", id, err)
		}
	}
	return nil
}

func throttleList(m map[string]bool) string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out) // Kafka's TreeSet order
	return strings.Join(out, ",")
}

func sortedBrokerIDs(m map[int32]bool) []int32 {
	out := make([]int32, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func idsWithout(a, b []int32) []int32 {
	var out []int32
	for _, x := range a {
		found := false
		for _, y := range b {
			found = found || x == y
		}
		if !found {
			out = append(out, x)
		}
	}
	return out
}

func reassignVerify(ctx context.Context, adm *client.Admin, planFile string) error {
	plan, order, err := readReassignmentPlan(planFile)
	if err != nil {
		return err
	}
	ongoing, err := adm.ListPartitionReassignments(ctx)
	if err != nil {
		return err
	}
	inProgress := map[client.TopicPartition]bool{}
	for _, r := range ongoing {
		inProgress[r.TopicPartition] = true
	}
	// The list comes from the active controller; the replica sets from a
	// broker's metadata, which may trail it by a moment. A finished move the
	// broker does not show yet is looked at again for up to 2 s before it
	// is reported as a different replica set.
	var md *pb.MetadataResponse
	cur := map[client.TopicPartition][]int32{}
	for tries := 0; ; tries++ {
		if md, err = adm.Metadata(ctx, true, topicsOfPartitions(order)...); err != nil {
			return err
		}
		for _, t := range md.Topics {
			for _, p := range t.Partitions {
				cur[client.TopicPartition{Topic: t.Name, Partition: p.Partition}] = p.Replicas
			}
		}
		settled := true
		for _, tp := range order {
			if !inProgress[tp] && joinIDs(cur[tp]) != joinIDs(plan[tp]) {
				settled = false
			}
		}
		if settled || tries == 20 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	fmt.Println("Status of partition reassignment:")
	for _, tp := range order {
		switch {
		case inProgress[tp]:
			fmt.Printf("Reassignment of partition %s is still in progress.\n", tpName(tp))
		case joinIDs(cur[tp]) == joinIDs(plan[tp]):
			fmt.Printf("Reassignment of partition %s is completed.\n", tpName(tp))
		default:
			fmt.Printf("There is no active reassignment of partition %s, but replica set is %s rather than %s.\n", tpName(tp), joinIDs(cur[tp]), joinIDs(plan[tp]))
		}
	}
	if len(ongoing) > 0 {
		return nil
	}
	return clearThrottles(ctx, adm, md, plan, order)
}

// clearThrottles removes the throttles once no reassignment is in
// progress, as Kafka's --verify and --cancel do: the rates on every broker
// and the throttled-replica lists on the plan's topics. It does so only
// when one of the plan's topics has a throttle set (an --execute
// --throttle set them).
func clearThrottles(ctx context.Context, adm *client.Admin, md *pb.MetadataResponse, plan map[client.TopicPartition][]int32, order []client.TopicPartition) error {
	topics := topicsOfPartitions(order)
	throttled := false
	for _, t := range topics {
		entries, err := adm.DescribeTopicConfigs(ctx, t)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if (e.Name == cfgLeaderThrottledReplicas || e.Name == cfgFollowerThrottledReplicas) && e.Source == "topic" && e.Value != "" {
				throttled = true
			}
		}
	}
	if !throttled {
		return nil
	}
	brokers := map[int32]bool{}
	for _, b := range md.Brokers {
		brokers[b.NodeId] = true
	}
	for _, reps := range plan {
		for _, r := range reps {
			brokers[r] = true
		}
	}
	ids := sortedBrokerIDs(brokers)
	fmt.Printf("Clearing broker-level throttles on broker%s %s\n", reassignPlural(len(ids), "", "s"), joinIDs(ids))
	for _, id := range ids {
		if err := adm.AlterBrokerConfigs(ctx, id, nil, []string{cfgLeaderThrottleRate, cfgFollowerThrottleRate}); err != nil {
			return fmt.Errorf("clearing the replication throttle of broker %d: %w", id, err)
		}
	}
	fmt.Printf("Clearing topic-level throttles on topic%s %s\n", reassignPlural(len(topics), "", "s"), strings.Join(topics, ","))
	for _, t := range topics {
		if err := adm.AlterTopicConfigsSetDelete(ctx, t, nil, []string{cfgLeaderThrottledReplicas, cfgFollowerThrottledReplicas}); err != nil {
			return fmt.Errorf("clearing the replication throttle of topic %s: %w", t, err)
		}
	}
	return nil
}

func reassignCancel(ctx context.Context, adm *client.Admin, planFile string) error {
	plan, order, err := readReassignmentPlan(planFile)
	if err != nil {
		return err
	}
	ongoing, err := adm.ListPartitionReassignments(ctx, order...)
	if err != nil {
		return err
	}
	cancel := map[client.TopicPartition][]int32{}
	var cancelled []client.TopicPartition
	for _, r := range ongoing {
		cancel[r.TopicPartition] = nil
		cancelled = append(cancelled, r.TopicPartition)
	}
	sortTopicPartitions(cancelled)
	if len(cancelled) > 0 {
		results, err := adm.AlterPartitionReassignments(ctx, cancel)
		if err != nil {
			return err
		}
		if msg := partitionErrors(cancelled, results); msg != "" {
			return fmt.Errorf("Error cancelling partition reassignment%s for:\n%s", reassignPlural(strings.Count(msg, "\n")+1, "", "s"), msg)
		}
		fmt.Printf("Successfully cancelled partition reassignment%s for: %s\n", reassignPlural(len(cancelled), "", "s"), joinTopicPartitions(cancelled))
	} else {
		fmt.Println("None of the specified partition reassignments are active.")
	}
	all, err := adm.ListPartitionReassignments(ctx)
	if err != nil || len(all) > 0 {
		return err
	}
	md, err := adm.Metadata(ctx, true, topicsOfPartitions(order)...)
	if err != nil {
		return err
	}
	return clearThrottles(ctx, adm, md, plan, order)
}

func reassignList(ctx context.Context, adm *client.Admin) error {
	ongoing, err := adm.ListPartitionReassignments(ctx)
	if err != nil {
		return err
	}
	if len(ongoing) == 0 {
		fmt.Println("No partition reassignments found.")
		return nil
	}
	sort.Slice(ongoing, func(i, j int) bool {
		a, b := ongoing[i].TopicPartition, ongoing[j].TopicPartition
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	fmt.Println("Current partition reassignments:")
	for _, r := range ongoing {
		line := fmt.Sprintf("%s: replicas: %s.", tpName(r.TopicPartition), joinIDs(r.Replicas))
		if len(r.Adding) > 0 {
			line += fmt.Sprintf(" adding: %s.", joinIDs(r.Adding))
		}
		if len(r.Removing) > 0 {
			line += fmt.Sprintf(" removing: %s.", joinIDs(r.Removing))
		}
		fmt.Println(line)
	}
	return nil
}

// removeBrokerCmd is `strand cluster remove-broker N`: move every replica
// of broker N to the least-loaded other live broker that does not hold
// the partition yet (client.PlanRemoveBroker), and with --wait, wait until
// the moves complete. Unregistering the broker is a separate step.
func removeBrokerCmd() *cobra.Command {
	var waitDone bool
	cmd := &cobra.Command{
		Use:   "remove-broker ID",
		Short: "Move every partition replica off broker ID (to the least-loaded other live brokers); --wait for the moves to complete",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 32)
			if err != nil {
				return fmt.Errorf("broker id %q: %v", args[0], err)
			}
			d := 2 * time.Minute
			if waitDone {
				d = 24 * time.Hour // bounded by --timeout when given
			}
			return withAdmin(cmd, d, func(ctx context.Context, adm *client.Admin) error {
				plan, res, err := adm.MoveReplicasOff(ctx, int32(id))
				if err != nil {
					return err
				}
				if len(plan) == 0 {
					fmt.Printf("Broker %d holds no partition replica that can move.\n", id)
					return nil
				}
				order := make([]client.TopicPartition, 0, len(plan))
				for tp := range plan {
					order = append(order, tp)
				}
				sortTopicPartitions(order)
				fmt.Printf("Proposed partition reassignment configuration\n%s\n", formatReassignment(plan))
				if msg := partitionErrors(order, res); msg != "" {
					return fmt.Errorf("Error reassigning partition(s):\n%s", msg)
				}
				fmt.Printf("Successfully started partition reassignment%s for %s\n", reassignPlural(len(order), "", "s"), joinTopicPartitions(order))
				if !waitDone {
					return nil
				}
				if err := adm.WaitReassignments(ctx, order...); err != nil {
					return err
				}
				fmt.Printf("Every replica of broker %d has moved.\n", id)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&waitDone, "wait", false, "wait until every move has completed")
	return cmd
}
