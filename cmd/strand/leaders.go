package main

// Commands leader-election, get-offsets, delete-records and
// topics alter, with the output of Kafka's kafka-leader-election,
// GetOffsetShell, kafka-delete-records and kafka-topics --alter.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

func init() {
	extraCommands = append(extraCommands, leaderElectionCmd, getOffsetsCmd, deleteRecordsCmd)
}

// javaException names an error the way Kafka's tools print it:
// org.apache.kafka.common.errors.<Code>Exception: message.
func javaException(err error) string {
	code, msg := errs.Split(err)
	var b strings.Builder
	for _, w := range strings.Split(strings.ToLower(code.String()), "_") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	name := strings.TrimSuffix(b.String(), "Exception")
	return fmt.Sprintf("org.apache.kafka.common.errors.%sException: %s", name, msg)
}

func tpString(tp client.TopicPartition) string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

func sortTPs(tps []client.TopicPartition) {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
}

func joinTPs(tps []client.TopicPartition) string {
	sortTPs(tps)
	s := make([]string, len(tps))
	for i, tp := range tps {
		s[i] = tpString(tp)
	}
	return strings.Join(s, ", ")
}

// leaderElectionCmd is kafka-leader-election.
func leaderElectionCmd() *cobra.Command {
	var typ, topic, jsonFile string
	var partition int32
	var all bool
	cmd := &cobra.Command{
		Use:   "leader-election",
		Short: "Run preferred or unclean leader elections (kafka-leader-election)",
		Long: `Runs leader elections through the active controller.
  --election-type preferred: the first replica of each partition leads again
    if it is live and in the ISR ("Valid replica already elected" when it leads).
  --election-type unclean: a partition without a leader gets a live replica,
    outside the ISR if no ISR member is live (may lose committed records).
Choose the partitions with exactly one of --all-topic-partitions, --topic with
--partition, or --path-to-json-file (JSON {"partitions":[{"topic":"t","partition":0}]}).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var et client.ElectionType
			switch strings.ToLower(typ) {
			case "preferred":
				et = client.ElectPreferred
			case "unclean":
				et = client.ElectUnclean
			default:
				return fmt.Errorf("--election-type must be preferred or unclean, got %q", typ)
			}
			chosen := 0
			for _, set := range []bool{all, cmd.Flags().Changed("topic"), jsonFile != ""} {
				if set {
					chosen++
				}
			}
			if chosen != 1 {
				return fmt.Errorf("exactly one of --all-topic-partitions, --topic or --path-to-json-file must be given")
			}
			if cmd.Flags().Changed("partition") && !cmd.Flags().Changed("topic") {
				return fmt.Errorf("--partition needs --topic")
			}
			var tps []client.TopicPartition
			switch {
			case cmd.Flags().Changed("topic"):
				if !cmd.Flags().Changed("partition") {
					return fmt.Errorf("--topic needs --partition")
				}
				tps = []client.TopicPartition{{Topic: topic, Partition: partition}}
			case jsonFile != "":
				var err error
				if tps, err = readElectionJSON(jsonFile); err != nil {
					return err
				}
			}
			return withAdmin(cmd, 60*time.Second, func(ctx context.Context, adm *client.Admin) error {
				res, err := adm.ElectLeaders(ctx, et, tps)
				if err != nil {
					return err
				}
				return printElection(et, res)
			})
		},
	}
	cmd.Flags().StringVar(&typ, "election-type", "", "preferred or unclean (required)")
	cmd.Flags().BoolVar(&all, "all-topic-partitions", false, "elect leaders for every partition")
	cmd.Flags().StringVar(&topic, "topic", "", "the topic of the one partition to elect (with --partition)")
	cmd.Flags().Int32Var(&partition, "partition", 0, "the partition to elect (with --topic)")
	cmd.Flags().StringVar(&jsonFile, "path-to-json-file", "", `JSON file listing the partitions: {"partitions":[{"topic":"t","partition":0}]}`)
	_ = cmd.MarkFlagRequired("election-type")
	return cmd
}

func readElectionJSON(path string) ([]client.TopicPartition, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Partitions []struct {
			Topic     string `json:"topic"`
			Partition *int32 `json:"partition"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	seen := map[client.TopicPartition]bool{}
	var out, dups []client.TopicPartition
	for _, p := range doc.Partitions {
		if p.Topic == "" || p.Partition == nil {
			return nil, fmt.Errorf("%s: every partition needs a topic and a partition", path)
		}
		tp := client.TopicPartition{Topic: p.Topic, Partition: *p.Partition}
		if seen[tp] {
			dups = append(dups, tp)
		}
		seen[tp] = true
		out = append(out, tp)
	}
	if len(dups) > 0 {
		return nil, fmt.Errorf("replica election data contains duplicate partitions: %s", joinTPs(dups))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s lists no partitions", path)
	}
	return out, nil
}

// printElection prints kafka-leader-election's three kinds of lines and
// fails (exit 1) when some partitions could not be elected.
func printElection(et client.ElectionType, res map[client.TopicPartition]error) error {
	var ok, noop, failed []client.TopicPartition
	for tp, err := range res {
		switch {
		case err == nil:
			ok = append(ok, tp)
		case errs.CodeOf(err) == pb.ErrorCode_ELECTION_NOT_NEEDED:
			noop = append(noop, tp)
		default:
			failed = append(failed, tp)
		}
	}
	if len(ok) > 0 {
		fmt.Printf("Successfully completed leader election (%s) for partitions %s\n", et, joinTPs(ok))
	}
	if len(noop) > 0 {
		fmt.Printf("Valid replica already elected for partitions %s\n", joinTPs(noop))
	}
	if len(failed) > 0 {
		sortTPs(failed)
		for _, tp := range failed {
			fmt.Printf("Error completing leader election (%s) for partition: %s: %s\n", et, tpString(tp), javaException(res[tp]))
		}
		return fmt.Errorf("%d replica(s) could not be elected", len(failed))
	}
	return nil
}

// getOffsetsCmd is Kafka's GetOffsetShell (kafka-get-offsets).
func getOffsetsCmd() *cobra.Command {
	var topic, partitions, timeArg string
	var excludeInternal bool
	cmd := &cobra.Command{
		Use:   "get-offsets",
		Short: "Print partitions' offsets as topic:partition:offset (kafka-get-offsets)",
		Long: `Prints one line topic:partition:offset per partition, sorted.
--time: -1 or latest (the high watermark), -2 or earliest (the log start
offset), -3 or max-timestamp (the record with the largest timestamp), or a
Unix time in ms (the first offset whose timestamp is at least it). A
partition without such an offset (no record at or after the time) prints no
line; one whose offset could not be read is reported on stderr. Lines are
ordered as Kafka's tool orders them (by "topic-partition" as text).
--topic is a regular expression matching whole topic names (commas separate
alternatives; all topics when not given); internal topics are included
unless --exclude-internal-topics.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ts, err := parseOffsetTime(timeArg)
			if err != nil {
				return err
			}
			var re *regexp.Regexp
			if topic != "" {
				// Kafka's IncludeList: commas are alternatives, spaces go.
				expr := strings.ReplaceAll(strings.ReplaceAll(strings.TrimSpace(topic), ",", "|"), " ", "")
				if re, err = regexp.Compile("^(?:" + expr + ")$"); err != nil {
					return fmt.Errorf("--topic %q: %w", topic, err)
				}
			}
			var only map[int32]bool
			if partitions != "" {
				only = map[int32]bool{}
				for _, f := range strings.Split(partitions, ",") {
					n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
					if err != nil || n < 0 {
						return fmt.Errorf("--partitions expects a comma separated list of numeric partition ids, but received: %s", partitions)
					}
					only[int32(n)] = true
				}
			}
			return withAdmin(cmd, 60*time.Second, func(ctx context.Context, adm *client.Admin) error {
				md, err := adm.Metadata(ctx, !excludeInternal)
				if err != nil {
					return err
				}
				var tps []client.TopicPartition
				for _, t := range md.Topics {
					if re != nil && !re.MatchString(t.Name) || excludeInternal && t.IsInternal {
						continue
					}
					for _, p := range t.Partitions {
						if only == nil || only[p.Partition] {
							tps = append(tps, client.TopicPartition{Topic: t.Name, Partition: p.Partition})
						}
					}
				}
				if len(tps) == 0 {
					return fmt.Errorf("could not match any topic-partitions with the specified filters")
				}
				offs, err := adm.ListOffsets(ctx, tps, ts, client.ReadUncommitted)
				if err != nil {
					return err
				}
				// Kafka's tool orders by TopicPartition.toString ("t-10"
				// before "t-2").
				sort.Slice(tps, func(i, j int) bool { return tpString(tps[i]) < tpString(tps[j]) })
				for _, tp := range tps {
					o, ok := offs[tp]
					if !ok {
						continue
					}
					if o.Err != nil {
						fmt.Fprintf(os.Stderr, "Skip getting offsets for topic-partition %s due to error: %s\n", tpString(tp), javaException(o.Err))
						continue
					}
					if o.Offset < 0 {
						continue // no such offset (Kafka's UNKNOWN_OFFSET): no line
					}
					fmt.Printf("%s:%d:%d\n", tp.Topic, tp.Partition, o.Offset)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&topic, "topic", "", "regular expression of the topics to ask (default: all)")
	cmd.Flags().StringVar(&partitions, "partitions", "", "comma-separated partition ids (default: all)")
	cmd.Flags().StringVar(&timeArg, "time", "-1", "-1/latest, -2/earliest, -3/max-timestamp, or a timestamp in ms")
	cmd.Flags().BoolVar(&excludeInternal, "exclude-internal-topics", false, "leave out internal topics")
	return cmd
}

func parseOffsetTime(s string) (int64, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "latest":
		return -1, nil
	case "earliest":
		return -2, nil
	case "max-timestamp":
		return -3, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < -3 {
		return 0, fmt.Errorf("Malformed time argument %s. Please use -1 or latest / -2 or earliest / -3 or max-timestamp, or a specified long format timestamp", s)
	}
	return n, nil
}

// deleteRecordsCmd is kafka-delete-records.
func deleteRecordsCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "delete-records",
		Short: "Delete records below given offsets (kafka-delete-records)",
		Long: `Moves each listed partition's log start offset up to the offset given
(-1: the high watermark); records below it can no longer be read.
--offset-json-file: {"partitions":[{"topic":"t","partition":0,"offset":3}],"version":1}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			offsets, order, err := readDeleteRecordsJSON(file)
			if err != nil {
				return err
			}
			return withAdmin(cmd, 60*time.Second, func(ctx context.Context, adm *client.Admin) error {
				fmt.Println("Executing records delete operation")
				res, err := adm.DeleteRecords(ctx, offsets)
				if err != nil {
					return err
				}
				fmt.Println("Records delete operation completed:")
				failed := 0
				for _, tp := range order {
					r := res[tp]
					if r.Err != nil {
						failed++
						fmt.Printf("partition: %s\terror: %s\n", tpString(tp), javaException(r.Err))
						continue
					}
					fmt.Printf("partition: %s\tlow_watermark: %d\n", tpString(tp), r.LowWatermark)
				}
				if failed > 0 {
					return fmt.Errorf("records of %d partition(s) could not be deleted", failed)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&file, "offset-json-file", "", `JSON file: {"partitions":[{"topic":"t","partition":0,"offset":3}],"version":1} (required)`)
	_ = cmd.MarkFlagRequired("offset-json-file")
	return cmd
}

func readDeleteRecordsJSON(path string) (map[client.TopicPartition]int64, []client.TopicPartition, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var doc struct {
		Version    *int `json:"version"`
		Partitions []struct {
			Topic     string `json:"topic"`
			Partition *int32 `json:"partition"`
			Offset    *int64 `json:"offset"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if doc.Version != nil && *doc.Version != 1 {
		return nil, nil, fmt.Errorf("%s: not supported version field value %d", path, *doc.Version)
	}
	out := map[client.TopicPartition]int64{}
	var order, dups []client.TopicPartition
	for _, p := range doc.Partitions {
		if p.Topic == "" || p.Partition == nil || p.Offset == nil {
			return nil, nil, fmt.Errorf("%s: every partition needs topic, partition and offset", path)
		}
		tp := client.TopicPartition{Topic: p.Topic, Partition: *p.Partition}
		if _, dup := out[tp]; dup {
			dups = append(dups, tp)
			continue
		}
		out[tp] = *p.Offset
		order = append(order, tp)
	}
	if len(dups) > 0 {
		return nil, nil, fmt.Errorf("Offset json file contains duplicate topic partitions: %s", strings.ReplaceAll(joinTPs(dups), ", ", ","))
	}
	if len(order) == 0 {
		return nil, nil, fmt.Errorf("%s lists no partitions", path)
	}
	return out, order, nil
}

// topicsAlterCmd is kafka-topics --alter --partitions: a partition count
// only ever grows (INVALID_PARTITIONS otherwise). Like Kafka's tool it
// prints nothing when it succeeds.
func topicsAlterCmd() *cobra.Command {
	var topic string
	var partitions int32
	cmd := &cobra.Command{
		Use:   "alter [TOPIC] --partitions N",
		Short: "Raise a topic's partition count",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if topic != "" && topic != args[0] {
					return fmt.Errorf("topic given twice: %q and --topic %q", args[0], topic)
				}
				topic = args[0]
			}
			if topic == "" {
				return fmt.Errorf("--topic is required")
			}
			if !cmd.Flags().Changed("partitions") {
				return fmt.Errorf("--partitions is required (the only alteration topics alter makes)")
			}
			return withAdmin(cmd, 60*time.Second, func(ctx context.Context, adm *client.Admin) error {
				if err := adm.CreatePartitions(ctx, topic, partitions); err != nil {
					return fmt.Errorf("%s", javaException(err))
				}
				waitTopicEverywhere(ctx, adm, topic, topicPropagationWait)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&topic, "topic", "", "the topic to alter")
	cmd.Flags().Int32Var(&partitions, "partitions", 0, "the new partition count (more than the current one)")
	return cmd
}
