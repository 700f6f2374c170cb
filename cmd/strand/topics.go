package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

func topicsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "topics", Short: "Create, list, describe and delete topics"}
	var partitions, rf int32
	var configs []string
	create := &cobra.Command{
		Use:   "create TOPIC",
		Short: "Create a topic",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withAdmin(cmd, 60*time.Second, func(ctx context.Context, adm *client.Admin) error {
				cfg := map[string]string{}
				for _, kv := range configs {
					k, v, ok := strings.Cut(kv, "=")
					if !ok {
						return fmt.Errorf("--config %q: want key=value", kv)
					}
					cfg[k] = v
				}
				if err := adm.CreateTopic(ctx, client.TopicSpec{Name: args[0], Partitions: partitions, ReplicationFactor: rf, Configs: cfg}); err != nil {
					return err
				}
				fmt.Printf("Created topic %s.\n", args[0])
				waitTopicEverywhere(ctx, adm, args[0], topicPropagationWait)
				return nil
			})
		},
	}
	create.Flags().Int32Var(&partitions, "partitions", -1, "number of partitions (default: the broker's num.partitions)")
	create.Flags().Int32Var(&rf, "replication-factor", -1, "replicas per partition (default: default.replication.factor)")
	create.Flags().StringArrayVar(&configs, "config", nil, "topic config key=value (repeatable)")

	list := &cobra.Command{
		Use:   "list",
		Short: "List topics",
		RunE: func(cmd *cobra.Command, args []string) error {
			return withAdmin(cmd, 30*time.Second, func(ctx context.Context, adm *client.Admin) error {
				internal, _ := cmd.Flags().GetBool("include-internal")
				md, err := adm.Metadata(ctx, internal)
				if err != nil {
					return err
				}
				var names []string
				for _, t := range md.Topics {
					names = append(names, t.Name)
				}
				sort.Strings(names)
				for _, n := range names {
					fmt.Println(n)
				}
				return nil
			})
		},
	}
	list.Flags().Bool("include-internal", false, "also list __transaction_state and __consumer_offsets")

	describe := &cobra.Command{
		Use:   "describe [TOPIC…]",
		Short: "Describe topics: partitions with leader, leader epoch, replicas and ISR",
		RunE: func(cmd *cobra.Command, args []string) error {
			return withAdmin(cmd, 30*time.Second, func(ctx context.Context, adm *client.Admin) error {
				md, err := adm.Metadata(ctx, true, args...)
				if err != nil {
					return err
				}
				underRep, _ := cmd.Flags().GetBool("under-replicated-partitions")
				unavailable, _ := cmd.Flags().GetBool("unavailable-partitions")
				sort.Slice(md.Topics, func(i, j int) bool { return md.Topics[i].Name < md.Topics[j].Name })
				for _, t := range md.Topics {
					if t.ErrorCode != pb.ErrorCode_NONE {
						return fmt.Errorf("%s: %s", t.Name, t.ErrorMessage)
					}
					printTopic(t, underRep, unavailable)
				}
				return nil
			})
		},
	}
	describe.Flags().Bool("under-replicated-partitions", false, "only partitions whose ISR is smaller than the replica set")
	describe.Flags().Bool("unavailable-partitions", false, "only partitions without a leader")

	del := &cobra.Command{
		Use:   "delete TOPIC",
		Short: "Delete a topic",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withAdmin(cmd, 30*time.Second, func(ctx context.Context, adm *client.Admin) error {
				if err := adm.DeleteTopic(ctx, args[0]); err != nil {
					return err
				}
				fmt.Printf("Deleted topic %s.\n", args[0])
				return nil
			})
		},
	}
	cmd.AddCommand(create, list, describe, del, topicsAlterCmd())
	return cmd
}

func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}

// printTopic prints kafka-topics --describe's shape, plus LeaderEpoch.
func printTopic(t *pb.TopicMetadata, underRep, unavailable bool) {
	rf := 0
	if len(t.Partitions) > 0 {
		rf = len(t.Partitions[0].Replicas)
	}
	var cfg []string
	for k, v := range t.Configs {
		cfg = append(cfg, k+"="+v)
	}
	sort.Strings(cfg)
	w := os.Stdout
	if !underRep && !unavailable {
		fmt.Fprintf(w, "Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n", t.Name, t.TopicId, len(t.Partitions), rf, strings.Join(cfg, ","))
	}
	for _, p := range t.Partitions {
		if underRep && len(p.Isr) >= len(p.Replicas) {
			continue
		}
		if unavailable && p.LeaderId >= 0 {
			continue
		}
		leader := fmt.Sprint(p.LeaderId)
		if p.LeaderId < 0 {
			leader = "none"
		}
		fmt.Fprintf(w, "\tTopic: %s\tPartition: %d\tLeader: %s\tLeaderEpoch: %d\tReplicas: %s\tIsr: %s\tElr: N/A\tLastKnownElr: N/A\n",
			t.Name, p.Partition, leader, p.LeaderEpoch, joinIDs(p.Replicas), joinIDs(p.Isr))
	}
}

// topicPropagationWait bounds how long topics create waits for every
// broker to know a new topic.
const topicPropagationWait = 15 * time.Second

// waitTopicEverywhere waits until every unfenced broker's metadata has the
// topic with all its partitions. The broker that answered CreateTopics
// already does, but brokers apply the metadata log each at its own pace,
// and the next command (topics describe, perf consume, …) may ask
// another one. A broker that has not caught up by wait gets a note on
// stderr; the topic exists either way.
func waitTopicEverywhere(ctx context.Context, adm *client.Admin, topic string, wait time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	pause := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
			return true
		}
	}
	// The broker this answer comes from may be one that lags, too.
	var md *pb.MetadataResponse
	for {
		var err error
		md, err = adm.Metadata(ctx, false, topic)
		if err == nil && len(md.Topics) == 1 && md.Topics[0].ErrorCode == pb.ErrorCode_NONE {
			break
		}
		if !pause() {
			fmt.Fprintf(os.Stderr, "note: the brokers do not list topic %s yet (they may be catching up with the metadata log)\n", topic)
			return
		}
	}
	want := len(md.Topics[0].Partitions)
	for _, b := range md.Brokers {
		if b.Fenced {
			continue
		}
		for !brokerKnowsTopic(ctx, adm, b.NodeId, topic, want) {
			if !pause() {
				fmt.Fprintf(os.Stderr, "note: broker %d does not list topic %s yet (it may be catching up with the metadata log)\n", b.NodeId, topic)
				return
			}
		}
	}
}

func brokerKnowsTopic(ctx context.Context, adm *client.Admin, id int32, topic string, partitions int) bool {
	cc, err := adm.BrokerConn(id)
	if err != nil {
		return false
	}
	md, err := pb.NewMetadataClient(cc).Metadata(ctx, &pb.MetadataRequest{Topics: []string{topic}})
	return err == nil && len(md.Topics) == 1 && md.Topics[0].ErrorCode == pb.ErrorCode_NONE && len(md.Topics[0].Partitions) == partitions
}

func clusterCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Cluster state"}
	cmd.AddCommand(removeBrokerCmd()) // reassign.go
	describe := &cobra.Command{
		Use:   "describe",
		Short: "Nodes, the active controller, fenced brokers",
		RunE: func(cmd *cobra.Command, args []string) error {
			return withAdmin(cmd, 30*time.Second, func(ctx context.Context, adm *client.Admin) error {
				d, err := adm.DescribeCluster(ctx)
				if err != nil {
					return err
				}
				fmt.Printf("ClusterId: %s\nActiveController: %d\nMetadataOffset: %d\n", d.ClusterId, d.ControllerId, d.MetadataOffset)
				if d.ErrorCode != pb.ErrorCode_NONE {
					fmt.Printf("Quorum: %s\n", d.ErrorMessage)
				}
				type row struct {
					addr, broker, fenced, epoch, ctrl string
				}
				rows := map[int32]*row{}
				get := func(id int32) *row {
					if rows[id] == nil {
						rows[id] = &row{addr: "-", broker: "no", fenced: "-", epoch: "-", ctrl: "-"}
					}
					return rows[id]
				}
				for _, b := range d.Brokers {
					r := get(b.NodeId)
					r.addr, r.broker, r.epoch = b.Address, "yes", fmt.Sprint(b.BrokerEpoch)
					r.fenced = map[bool]string{true: "FENCED", false: "no"}[b.Fenced]
				}
				for _, c := range d.Controllers {
					r := get(c.NodeId)
					r.ctrl = "voter"
					if c.Active {
						r.ctrl = "voter (active)"
					}
					if r.addr == "-" {
						r.addr = "raft " + c.RaftAddress
					}
				}
				ids := make([]int32, 0, len(rows))
				for id := range rows {
					ids = append(ids, id)
				}
				sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
				w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(w, "NodeId\tAddress\tBroker\tFenced\tBrokerEpoch\tController")
				for _, id := range ids {
					r := rows[id]
					fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", id, r.addr, r.broker, r.fenced, r.epoch, r.ctrl)
				}
				return w.Flush()
			})
		},
	}
	cmd.AddCommand(describe)
	addMembersCommands(cmd, describe)
	return cmd
}

func featuresCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "features", Short: "Feature levels"}
	cmd.AddCommand(&cobra.Command{
		Use:   "describe",
		Short: "Print finalized feature levels (like kafka-features describe)",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := timeoutContext(cmd, 30*time.Second)
			defer cancel()
			fs, err := describeFeatures(ctx, bootstrap(cmd))
			if err != nil {
				return err
			}
			for _, f := range fs {
				fmt.Printf("Feature: %s\tSupportedMinVersion: %d\tSupportedMaxVersion: %d\tFinalizedVersionLevel: %d\tEpoch: %d\n",
					f.Name, f.SupportedMinVersion, f.SupportedMaxVersion, f.FinalizedVersionLevel, f.Epoch)
			}
			return nil
		},
	})
	cmd.AddCommand(featureUpdateCmd("upgrade", "Raise finalized feature levels (like kafka-features upgrade --feature name=level)"),
		featureUpdateCmd("downgrade", "Lower finalized feature levels (like kafka-features downgrade --feature name=level)"),
		featureUpdateCmd("disable", "Take features back to level 0 (like kafka-features disable --feature name)"))
	return cmd
}

// featureUpdateCmd is kafka-features' upgrade, downgrade or disable: one
// UpdateFeatures request for every --feature, answered with one line per
// feature in kafka-features' words ("x was upgraded to 2.", "Could not
// upgrade x to 2. <why>"); a refusal exits 1 and changes nothing.
func featureUpdateCmd(op, short string) *cobra.Command {
	var (
		features []string
		dryRun   bool
		unsafe   bool
	)
	cmd := &cobra.Command{
		Use:   op,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(features) == 0 {
				return fmt.Errorf("name at least one --feature")
			}
			req := &pb.UpdateFeaturesRequest{ValidateOnly: dryRun}
			levels := map[string]int32{}
			for _, f := range features {
				name, lvl := f, int64(0)
				if op != "disable" {
					n, v, ok := strings.Cut(f, "=")
					var err error
					if lvl, err = strconv.ParseInt(v, 10, 16); !ok || err != nil || n == "" {
						return fmt.Errorf("--feature %q: want name=level", f)
					}
					name = n
				} else if strings.Contains(f, "=") {
					return fmt.Errorf("--feature %q: disable takes a feature name only", f)
				}
				typ := int32(1) // Kafka's FeatureUpdate upgrade types: 1 upgrade, 2 safe and 3 unsafe downgrade
				if op != "upgrade" {
					typ = 2
					if unsafe {
						typ = 3
					}
				}
				levels[name] = int32(lvl)
				req.Updates = append(req.Updates, &pb.FeatureUpdate{Feature: name, MaxVersionLevel: int32(lvl), UpgradeType: typ})
			}
			ctx, cancel := timeoutContext(cmd, 30*time.Second)
			defer cancel()
			err := updateFeatures(ctx, bootstrap(cmd), req)
			past, can := map[string]string{"upgrade": "upgraded to", "downgrade": "downgraded to", "disable": "disabled"}[op], "can be"
			for _, u := range req.Updates {
				to := past
				if op != "disable" {
					to = fmt.Sprintf("%s %d", past, levels[u.Feature])
				}
				switch {
				case err != nil:
					verb := op
					if op != "disable" {
						verb = fmt.Sprintf("%s %s to %d", op, u.Feature, levels[u.Feature])
					} else {
						verb = fmt.Sprintf("disable %s", u.Feature)
					}
					_, msg := errs.Split(err)
					fmt.Printf("Could not %s. %s\n", verb, msg)
				case dryRun:
					fmt.Printf("%s %s %s.\n", u.Feature, can, to)
				default:
					fmt.Printf("%s was %s.\n", u.Feature, to)
				}
			}
			if err != nil {
				return fmt.Errorf("%d update(s) failed", len(req.Updates))
			}
			return nil
		},
	}
	f := cmd.Flags()
	help := "feature and level to finalize, name=level (repeatable)"
	if op == "disable" {
		help = "feature to disable (repeatable)"
	}
	f.StringArrayVar(&features, "feature", nil, help)
	f.BoolVar(&dryRun, "dry-run", false, "check the update with the controller without making it")
	if op != "upgrade" {
		f.BoolVar(&unsafe, "unsafe", false, "an unsafe downgrade (metadata may be lost; Strand's features tell the two apart no further)")
	}
	return cmd
}
