package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/strand-io/strand/client"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// configsCmd is kafka-configs.sh's topic half: describe a topic's
// effective configs with their sources, and alter them.
func configsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "configs", Short: "Describe and alter topic and broker configs (Kafka's names); also kafka-configs' shape: --describe/--alter --entity-type topics|brokers (--entity-name X | --entity-default)"}
	var brokerCfg bool
	describe := &cobra.Command{
		Use:   "describe TOPIC | --broker",
		Short: "Every effective config of a topic (its value, and whether the topic sets it or the broker's default applies), or with --broker the log and cleaner settings of the broker reached",
		RunE: func(cmd *cobra.Command, args []string) error {
			if brokerCfg != (len(args) == 0) || len(args) > 1 {
				return fmt.Errorf("give one topic, or --broker alone")
			}
			return withAdmin(cmd, 30*time.Second, func(ctx context.Context, adm *client.Admin) error {
				var entries []*pb.ConfigEntry
				var err error
				if brokerCfg {
					var id int32
					if id, err = reachedBroker(ctx, adm); err == nil {
						entries, err = adm.DescribeBrokerConfigs(ctx, id)
					}
				} else {
					entries, err = adm.DescribeTopicConfigs(ctx, args[0])
				}
				if err != nil {
					return err
				}
				w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "NAME\tVALUE\tSOURCE")
				for _, e := range entries {
					fmt.Fprintf(w, "%s\t%s\t%s\n", e.Name, e.Value, e.Source)
				}
				return w.Flush()
			})
		},
	}
	describe.Flags().BoolVar(&brokerCfg, "broker", false, "describe the broker reached (bootstrap with its address) instead of a topic")
	var set, del []string
	alter := &cobra.Command{
		Use:   "alter TOPIC",
		Short: "Set (--set k=v) and remove (--delete k) topic configs; a removed config takes the broker's default",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			changes := map[string]string{}
			for _, kv := range set {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" || v == "" {
					return fmt.Errorf("--set %q: want key=value", kv)
				}
				changes[k] = v
			}
			for _, k := range del {
				changes[k] = "" // AlterTopicConfigs deletes a config given empty
			}
			if len(changes) == 0 {
				return fmt.Errorf("nothing to alter: give --set key=value or --delete key")
			}
			return withAdmin(cmd, 60*time.Second, func(ctx context.Context, adm *client.Admin) error {
				if err := adm.AlterTopicConfigs(ctx, args[0], changes); err != nil {
					return err
				}
				fmt.Printf("Altered configs of topic %s.\n", args[0])
				return nil
			})
		},
	}
	alter.Flags().StringArrayVar(&set, "set", nil, "config key=value to set (repeatable)")
	alter.Flags().StringArrayVar(&del, "delete", nil, "config key to remove (repeatable)")
	cmd.AddCommand(describe, alter)
	kafkaConfigsShape(cmd) // configs_kafka.go: kafka-configs' --describe/--alter
	return cmd
}
